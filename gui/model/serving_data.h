// What the Serving tab shows, UI-free: the prefix cache's hit rate against capacity on a request trace
// (`k3perf cache --curve`), the break-even of the hybrid against all-MLA (`k3perf breakeven`), a capacity
// plan's Pareto front (`k3perf plan`) and the published claims (`k3perf verify`), each from the same
// library calls as its verb. The document's what-if edits apply, as `--set`, to the break-even deployment
// (whose model and precision the cache curve uses) and to the plan's scenario. Each part runs in a worker
// thread, so nothing here blocks the window: plan and verify take seconds.
#pragma once

#include "core/data_paths.h"
#include "sim/cache/cache_metrics.h"
#include "sim/claims/claim.h"
#include "sim/plan/breakeven.h"
#include "sim/plan/plan.h"

#include <QAbstractTableModel>
#include <QObject>
#include <QString>

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

class QThread;

namespace k3::gui {

// The inputs the tab reads besides the data folder.
struct ServingFiles {
  std::string trace;      // a Mooncake .jsonl request trace
  std::string breakeven;  // a break-even YAML (docs/breakeven.md)
  std::string plan;       // a serving scenario with a plan: section (docs/plan.md)
  // data/traces/conversation_trace.jsonl of the repository the data folder is in, and its
  // scenarios/breakeven/k3-h200x16-chat.yaml and scenarios/serving/k3-h200x16-chat.yaml.
  static ServingFiles defaults(const DataPaths& data);
};

struct CacheCurve {
  std::string source;  // the trace's file name
  std::string tier;    // the capacity that varies ("hbm")
  std::string model;
  std::vector<cache::CurvePoint> points;
};

// `k3perf cache --trace <trace> --scenario <the break-even deployment after sets> --curve`.
CacheCurve compute_cache_curve(const ServingFiles& files, const DataPaths& data, const std::vector<std::string>& sets);
// `k3perf breakeven <breakeven> --set ...`.
BreakevenResult compute_breakeven(const ServingFiles& files, const DataPaths& data,
                                  const std::vector<std::string>& sets);
// `k3perf plan <plan> --set ...` with the data folder's prices; `progress(done, total)` after each candidate.
plan::PlanResult compute_plan(const ServingFiles& files, const DataPaths& data, const std::vector<std::string>& sets,
                              const std::function<void(std::size_t, std::size_t)>& progress = {});
// `k3perf verify`: every claim of the data folder, checked; `keep_going()` is asked between claims.
std::vector<ClaimResult> compute_claims(const DataPaths& data, const std::function<bool()>& keep_going = {});

// The claims as a table: id, verdict, each reported figure against its prediction, the claim.
class ClaimsTableModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { id, verdict, predicted_vs_reported, claim, column_count };
  using QAbstractTableModel::QAbstractTableModel;

  void set_results(std::vector<ClaimResult> results);
  const std::vector<ClaimResult>& results() const { return results_; }
  // The claim's breakdown as verify prints it: how the prediction is made, then what explains a miss.
  QString breakdown(int row) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::vector<ClaimResult> results_;
};

enum class ServingPart { cache_curve, breakeven, plan, claims };
inline constexpr std::array<ServingPart, 4> kServingParts = {ServingPart::cache_curve, ServingPart::breakeven,
                                                             ServingPart::plan, ServingPart::claims};

// The four parts, each computed in its own worker thread; results arrive on the object's thread.
class ServingData : public QObject {
  Q_OBJECT

 public:
  ServingData(DataPaths data, ServingFiles files, QObject* parent = nullptr);
  ~ServingData() override;  // stops the plan and verify between steps, then waits for the workers

  // The what-if edits as `--set key=value`. When they change: the break-even again, the cache curve
  // when the model or precision changed; the plan waits for compute(ServingPart::plan).
  void set_edits(const std::vector<std::string>& sets);
  // Computes `part` in a worker; asked while it runs, it runs once more when done.
  void compute(ServingPart part);
  bool busy() const;
  bool running(ServingPart part) const;

  const std::optional<CacheCurve>& cache_curve() const { return cache_curve_; }
  const std::optional<BreakevenResult>& breakeven() const { return breakeven_; }
  const std::optional<plan::PlanResult>& plan() const { return plan_; }
  ClaimsTableModel* claims() { return &claims_; }
  // Why the part's last computation failed; empty when it succeeded.
  const std::string& error(ServingPart part) const { return errors_[std::size_t(part)]; }

 signals:
  void changed(k3::gui::ServingPart part);  // its result or its error
  void plan_progress(int done, int total);
  void idle();  // no worker runs any more

 private:
  struct Outcome;
  struct Job {
    QThread* thread = nullptr;
    bool again = false;
  };
  void finish(ServingPart part, const Outcome& outcome);
  std::string cache_key(const std::vector<std::string>& sets) const;

  DataPaths data_;
  ServingFiles files_;
  std::vector<std::string> sets_;
  std::string cache_key_;
  std::array<Job, 4> jobs_;
  std::array<std::string, 4> errors_;
  std::shared_ptr<std::atomic<bool>> stop_ = std::make_shared<std::atomic<bool>>(false);
  std::optional<CacheCurve> cache_curve_;
  std::optional<BreakevenResult> breakeven_;
  std::optional<plan::PlanResult> plan_;
  ClaimsTableModel claims_;
};

}  // namespace k3::gui
