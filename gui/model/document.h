// What the window shows, as one UI-free object every view observes (hotspot's shared model): the
// scenario being edited and its prediction, a pinned baseline, the trace and its comparison, and the op
// selected anywhere. Every change goes through here and is announced by a signal; the views hold no state
// of their own but their layout. Predictions come from the same library calls as `k3perf predict`
// (parse_scenario with `--set` edits, predict, to_json), comparisons from `k3perf compare`'s.
#pragma once

#include "core/data_paths.h"
#include "core/hardware.h"
#include "gui/model/prediction_data.h"
#include "profiler/compare/prediction_file.h"
#include "profiler/trace/trace.h"

#include <QObject>
#include <QString>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace k3 {
struct Prediction;
}

namespace k3::gui {

// What a file holds, from its name and first bytes.
enum class FileKind { scenario, prediction, trace, comparison, folder, unknown };
FileKind detect_file_kind(const std::string& path);
std::string to_string(FileKind kind);

class Document : public QObject {
  Q_OBJECT

 public:
  explicit Document(DataPaths data, QObject* parent = nullptr);

  const DataPaths& data() const { return data_; }

  // --- The scenario and its what-if edits ------------------------------------------------------------
  // A scenario YAML's text; clears the edits and re-predicts.
  void set_scenario(const std::string& yaml_text, const std::string& origin);
  // One `--set` edit (key path "workload.batch", value "64"); an empty value removes it. Re-predicts.
  void set_edit(const std::string& key, const std::string& value);
  void clear_edits();
  const std::map<std::string, std::string>& edits() const { return edits_; }
  // The edit's value, else the scenario YAML's value at that key path, else "".
  std::string value_of(const std::string& key) const;
  bool has_scenario() const { return !scenario_yaml_.empty(); }
  const std::string& scenario_origin() const { return scenario_origin_; }

  // The last prediction that succeeded (nullopt before the first); after a failing edit it stays, and
  // error() says why the current edits do not predict, error_key() which edit was made last.
  const std::optional<PredictionData>& prediction() const { return prediction_; }
  const std::string& error() const { return error_; }
  const std::string& error_key() const { return error_key_; }
  // The hardware of the prediction (the scenario's, or for an opened prediction file the hardware file
  // whose name matches); nullptr when unknown.
  const Hardware* hardware() const { return hardware_ ? &*hardware_ : nullptr; }
  double last_predict_ms() const { return last_predict_ms_; }

  // --- Baseline ----------------------------------------------------------------------------------------
  void pin_baseline();  // the current prediction becomes the baseline
  void clear_baseline();
  const std::optional<PredictionData>& baseline() const { return baseline_; }

  // --- Measurements ------------------------------------------------------------------------------------
  void set_trace(std::shared_ptr<const profiler::Trace> trace, const std::string& origin);
  const profiler::Trace* trace() const { return trace_.get(); }
  std::shared_ptr<const profiler::Trace> trace_ptr() const { return trace_; }
  const std::string& trace_origin() const { return trace_origin_; }
  // `k3perf compare`'s JSON: computed from the trace and the prediction when both are there, or opened.
  const std::optional<nlohmann::ordered_json>& comparison() const { return comparison_; }
  const std::string& comparison_origin() const { return comparison_origin_; }

  // --- Files ---------------------------------------------------------------------------------------------
  // Opens a scenario YAML, a prediction JSON, a trace (.json, .json.gz), a compare JSON, or a folder of
  // them (the first trace and the prediction and comparison of the same name suffix). InputError naming
  // the file otherwise. Returns what was opened, for the status line.
  std::vector<std::string> open(const std::string& path);

  // --- Selection -----------------------------------------------------------------------------------------
  void select_op(const std::string& name);  // an op name as the prediction writes it; "" clears
  const std::string& selected_op() const { return selected_op_; }

 signals:
  void prediction_changed();  // prediction(), error() or both
  void baseline_changed();
  void trace_changed();
  void comparison_changed();
  void selection_changed();

 private:
  void repredict();
  // `file`: an opened prediction as compare reads it; nullopt for a live one (built from live_ when compared).
  void set_prediction(PredictionData p, std::optional<profiler::PredictionFile> file, std::optional<Hardware> hw);
  void recompare();
  void open_prediction_file(const std::string& path);
  void open_comparison_file(const std::string& path);
  void open_trace_file(const std::string& path);
  std::vector<std::string> open_folder(const std::string& path);

  DataPaths data_;
  std::string scenario_yaml_, scenario_origin_;
  std::map<std::string, std::string> edits_;
  std::optional<PredictionData> prediction_, baseline_;
  std::shared_ptr<const Prediction> live_;                   // the live prediction behind prediction_, if any
  std::optional<profiler::PredictionFile> prediction_file_;  // an opened prediction file, as compare reads it
  std::optional<Hardware> hardware_;
  std::string error_, error_key_;
  double last_predict_ms_ = 0;
  std::shared_ptr<const profiler::Trace> trace_;
  std::string trace_origin_;
  std::optional<nlohmann::ordered_json> comparison_;
  std::string comparison_origin_;
  bool comparison_opened_ = false;  // opened from a file: not recomputed when the prediction changes
  std::string selected_op_;
};

}  // namespace k3::gui
