#include "gui/model/document.h"

#include "core/error.h"
#include "core/json_reader.h"
#include "core/scenario.h"
#include "core/yaml_set.h"
#include "profiler/compare/compare.h"
#include "profiler/compare/prediction_file.h"
#include "profiler/trace/chrome_json.h"
#include "sim/predict.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

namespace k3::gui {
namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open", path));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The first `n` bytes of a file.
std::string head_of(const std::string& path, std::size_t n) {
  std::ifstream in(path, std::ios::binary);
  std::string s(n, '\0');
  in.read(s.data(), static_cast<std::streamsize>(n));
  s.resize(static_cast<std::size_t>(in.gcount()));
  return s;
}

// The hardware file whose display name is `display_name` (a prediction JSON records only that).
std::optional<Hardware> hardware_named(const DataPaths& data, const std::string& display_name) {
  for (const std::string& name : list_names(data.hardware_dir, ".yaml")) {
    try {
      Hardware hw = load_hardware_by_name(name, data.hardware_dir);
      if (hw.name == display_name) return hw;
    } catch (const InputError&) {
      // A broken file in the folder is not this prediction's problem.
    }
  }
  return std::nullopt;
}

// "pred_decode_b1_ctx8192.json" -> "decode_b1_ctx8192": what the runs' files share.
std::string suffix_of(const std::string& file_name) {
  std::string stem = file_name;
  for (const char* ext : {".json.gz", ".json"}) {
    if (ends_with(stem, ext)) stem.resize(stem.size() - std::string(ext).size());
  }
  const std::size_t underscore = stem.find('_');
  return underscore == std::string::npos ? stem : stem.substr(underscore + 1);
}

}  // namespace

std::string to_string(FileKind kind) {
  switch (kind) {
    case FileKind::scenario: return "scenario";
    case FileKind::prediction: return "prediction";
    case FileKind::trace: return "trace";
    case FileKind::comparison: return "comparison";
    case FileKind::folder: return "folder";
    case FileKind::unknown: return "unknown";
  }
  return "unknown";
}

FileKind detect_file_kind(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return FileKind::folder;
  if (!fs::is_regular_file(path, ec)) return FileKind::unknown;
  if (ends_with(path, ".yaml") || ends_with(path, ".yml")) return FileKind::scenario;
  const std::string head = head_of(path, 4096);
  if (head.size() >= 2 && static_cast<unsigned char>(head[0]) == 0x1f && static_cast<unsigned char>(head[1]) == 0x8b) {
    return FileKind::trace;  // gzip: only traces are written compressed
  }
  if (!ends_with(path, ".json")) return FileKind::unknown;
  // The writers put their distinguishing key first.
  if (head.find("\"traceEvents\"") != std::string::npos || head.find("\"k3perf\"") != std::string::npos) {
    return FileKind::trace;
  }
  if (head.find("\"trace_metadata\"") != std::string::npos || head.find("\"prediction\":") != std::string::npos) {
    return FileKind::comparison;
  }
  if (head.find("\"scenario\"") != std::string::npos) return FileKind::prediction;
  return FileKind::unknown;
}

Document::Document(DataPaths data, QObject* parent) : QObject(parent), data_(std::move(data)) {}

void Document::set_scenario(const std::string& yaml_text, const std::string& origin) {
  scenario_yaml_ = yaml_text;
  scenario_origin_ = origin;
  edits_.clear();
  repredict();
}

void Document::set_edit(const std::string& key, const std::string& value) {
  if (value.empty()) {
    edits_.erase(key);
  } else {
    edits_[key] = value;
  }
  error_key_ = key;
  repredict();
}

void Document::clear_edits() {
  edits_.clear();
  repredict();
}

std::string Document::value_of(const std::string& key) const {
  if (auto it = edits_.find(key); it != edits_.end()) return it->second;
  if (scenario_yaml_.empty()) return "";
  try {
    YAML::Node node = YAML::Load(scenario_yaml_);
    std::size_t start = 0;
    while (node && start <= key.size()) {
      const std::size_t dot = key.find('.', start);
      const std::string part = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      if (!node.IsMap()) return "";
      node = node[part];
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    return node && node.IsScalar() ? node.Scalar() : "";
  } catch (const YAML::Exception&) {
    return "";
  }
}

void Document::repredict() {
  if (scenario_yaml_.empty()) return;
  std::vector<std::string> sets;
  for (const auto& [key, value] : edits_) sets.push_back(key + "=" + value);
  const auto start = std::chrono::steady_clock::now();
  try {
    Scenario s = parse_scenario(scenario_yaml_, scenario_origin_, data_, sets);
    validate(s);
    auto live = std::make_shared<const Prediction>(predict(s));
    PredictionData d = prediction_data(*live, scenario_origin_);
    last_predict_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    error_.clear();
    live_ = std::move(live);
    set_prediction(std::move(d), std::nullopt, s.hardware);
  } catch (const Error& e) {
    error_ = e.what();
    emit prediction_changed();
  }
}

void Document::set_prediction(PredictionData p, std::optional<profiler::PredictionFile> file,
                              std::optional<Hardware> hw) {
  prediction_ = std::move(p);
  prediction_file_ = std::move(file);
  hardware_ = std::move(hw);
  if (!comparison_opened_) recompare();
  emit prediction_changed();
}

void Document::pin_baseline() {
  if (!prediction_) return;
  baseline_ = prediction_;
  emit baseline_changed();
}

void Document::clear_baseline() {
  baseline_.reset();
  emit baseline_changed();
}

void Document::set_trace(std::shared_ptr<const profiler::Trace> trace, const std::string& origin) {
  trace_ = std::move(trace);
  trace_origin_ = origin;
  emit trace_changed();
  comparison_opened_ = false;
  recompare();
}

void Document::recompare() {
  if (!trace_ || !prediction_ || !hardware_) {
    if (comparison_ && !comparison_opened_) {
      comparison_.reset();
      emit comparison_changed();
    }
    return;
  }
  try {
    // An opened file as `k3perf compare` reads it; a live prediction's ops as that reading would give them.
    const profiler::PredictionFile file =
        prediction_file_ ? *prediction_file_ : prediction_file(*live_, prediction_->origin);
    comparison_ = profiler::to_json(profiler::compare(file, *trace_, *hardware_));
    comparison_origin_ = "computed from " + trace_origin_ + " and " + prediction_->origin;
  } catch (const Error& e) {
    comparison_.reset();
    error_ = e.what();
  }
  emit comparison_changed();
}

void Document::select_op(const std::string& name) {
  if (name == selected_op_) return;
  selected_op_ = name;
  emit selection_changed();
}

std::vector<std::string> Document::open(const std::string& path) {
  switch (detect_file_kind(path)) {
    case FileKind::scenario: set_scenario(read_file(path), path); return {path};
    case FileKind::prediction: open_prediction_file(path); return {path};
    case FileKind::trace: open_trace_file(path); return {path};
    case FileKind::comparison: open_comparison_file(path); return {path};
    case FileKind::folder: return open_folder(path);
    case FileKind::unknown: break;
  }
  throw InputError(
      fmt::format("{}: not a scenario (.yaml), prediction, trace (.json, .json.gz) or compare JSON "
                  "file, nor a folder of them",
                  path));
}

void Document::open_prediction_file(const std::string& path) {
  const std::string text = read_file(path);
  PredictionData p = prediction_from_json(parse_ordered_json(text, path), path);
  profiler::PredictionFile file = profiler::parse_prediction(text, path);  // what compare reads, checked now
  scenario_yaml_.clear();                                                  // a prediction file has no scenario to edit
  scenario_origin_.clear();
  edits_.clear();
  error_.clear();
  std::optional<Hardware> hw = hardware_named(data_, p.hardware);
  live_.reset();
  set_prediction(std::move(p), std::move(file), std::move(hw));
}

void Document::open_comparison_file(const std::string& path) {
  comparison_ = parse_ordered_json(read_file(path), path);
  if (!comparison_->is_object() || !comparison_->contains("ops") || !comparison_->contains("summary")) {
    comparison_.reset();
    throw InputError(fmt::format("{}: keys 'ops' and 'summary' are missing: not a `k3perf compare --json` file", path));
  }
  comparison_origin_ = path;
  comparison_opened_ = true;
  emit comparison_changed();
}

void Document::open_trace_file(const std::string& path) {
  set_trace(std::make_shared<const profiler::Trace>(profiler::read_trace(path)), path);
}

std::vector<std::string> Document::open_folder(const std::string& path) {
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(path)) {
    if (entry.is_regular_file()) files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  std::string trace, prediction, comparison, scenario;
  for (const std::string& f : files) {
    const FileKind kind = detect_file_kind(f);
    if (kind == FileKind::trace && trace.empty()) trace = f;
    if (kind == FileKind::scenario && scenario.empty()) scenario = f;
  }
  // The prediction and comparison that go with the trace share its name's suffix; else the first ones.
  const std::string suffix = trace.empty() ? "" : suffix_of(fs::path(trace).filename().string());
  for (const std::string& f : files) {
    const FileKind kind = detect_file_kind(f);
    const bool same_run = !suffix.empty() && suffix_of(fs::path(f).filename().string()) == suffix;
    if (kind == FileKind::prediction && (prediction.empty() || same_run)) prediction = f;
    if (kind == FileKind::comparison && (comparison.empty() || same_run)) comparison = f;
  }
  std::vector<std::string> opened;
  if (!prediction.empty()) {
    open_prediction_file(prediction);
    opened.push_back(prediction);
  } else if (!scenario.empty()) {
    set_scenario(read_file(scenario), scenario);
    opened.push_back(scenario);
  }
  if (!trace.empty()) {
    open_trace_file(trace);
    opened.push_back(trace);
  }
  if (!comparison.empty() && trace.empty()) {
    open_comparison_file(comparison);
    opened.push_back(comparison);
  }
  if (opened.empty()) {
    throw InputError(fmt::format("{}: holds no scenario, prediction, trace or compare JSON file", path));
  }
  return opened;
}

}  // namespace k3::gui
