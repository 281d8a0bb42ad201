#include "profiler/compare/calibrate.h"

#include "core/error.h"
#include "profiler/trace/chrome_json.h"
#include "sim/roofline.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>
#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

namespace k3::profiler {

namespace {

constexpr int kMaxIterations = 50;
constexpr int kClasses = static_cast<int>(std::size(kAllEfficiencyClasses));

struct Sample {
  const PredictedOp* op = nullptr;
  int cls = 0;
  double memory_us_at_peak = 0;   // bytes / HBM bandwidth
  double compute_us_at_peak = 0;  // flops / peak
  double measured_us = 0;
};

std::vector<Sample> samples_of(const Comparison& c, const Hardware& hw) {
  std::vector<Sample> out;
  for (const OpComparison& o : c.ops) {
    const PredictedOp& p = *o.predicted;
    if (p.collective() || o.measured_us <= 0) continue;
    Sample s;
    s.op = &p;
    s.cls = static_cast<int>(efficiency_class(p.kind));
    s.memory_us_at_peak = p.bytes / hw.hbm_bandwidth_bytes_per_s * 1e6;
    s.compute_us_at_peak = p.flops > 0 ? p.flops / hw.peak(p.compute) * 1e6 : 0.0;
    s.measured_us = o.measured_us;
    out.push_back(s);
  }
  return out;
}

std::string describe(const CalibrationRun& r) {
  const auto get = [&](const char* key) {
    const auto it = r.trace.metadata.find(key);
    return it == r.trace.metadata.end() ? std::string("unknown") : it->second;
  };
  return fmt::format("{} + {} (commit {}, date {})", std::filesystem::path(r.prediction_path).filename().string(),
                     std::filesystem::path(r.trace_path).filename().string(), get("commit"), get("date"));
}

double time_with(const Sample& s, const Hardware& hw, bool cuda_graphs) {
  Op op;
  op.kind = s.op->kind;
  op.compute = s.op->compute;
  op.flops = s.op->flops;
  op.read.weights = s.op->bytes;
  op.kernels = s.op->kernels;
  Runtime rt;
  rt.cuda_graphs = cuda_graphs;
  return time_op(op, hw, rt).time_us;
}

FitCheck check(const std::vector<Sample>& samples, const Hardware& calibrated, bool cuda_graphs) {
  std::vector<double> before, after;
  for (const Sample& s : samples) {
    before.push_back(100 * std::fabs(s.op->time_us - s.measured_us) / s.measured_us);
    after.push_back(100 * std::fabs(time_with(s, calibrated, cuda_graphs) - s.measured_us) / s.measured_us);
  }
  return {samples.size(), median(before), median(after)};
}

}  // namespace

CalibrationRun load_calibration_run(const std::string& prediction_path, const std::string& trace_path) {
  return {prediction_path, trace_path, load_prediction(prediction_path), read_chrome_trace(trace_path)};
}

Calibration calibrate(const std::vector<CalibrationRun>& training, const std::vector<CalibrationRun>& held_out,
                      const Hardware& base) {
  if (training.empty()) throw InputError("calibrate: no training runs given");
  Calibration cal;
  cal.cuda_graphs = training.front().prediction.cuda_graphs;
  std::vector<Sample> train, test;  // point into the runs' predictions
  auto add_run = [&](const CalibrationRun& r, std::vector<Sample>* samples, std::vector<std::string>* names) {
    if (r.prediction.cuda_graphs != cal.cuda_graphs) {
      throw InputError(fmt::format("{}: scenario.cuda_graphs is {} but {} says {}: calibrate runs of one launch mode",
                                   r.prediction_path, r.prediction.cuda_graphs, training.front().prediction_path,
                                   cal.cuda_graphs));
    }
    const std::vector<Sample> s = samples_of(compare(r.prediction, r.trace, base), base);
    if (s.empty()) {
      throw InputError(
          fmt::format("{} + {}: no measured op to fit (are the kernels attributed?)", r.prediction_path, r.trace_path));
    }
    samples->insert(samples->end(), s.begin(), s.end());
    names->push_back(describe(r));
  };
  for (const CalibrationRun& r : training) add_run(r, &train, &cal.training_runs);
  for (const CalibrationRun& r : held_out) add_run(r, &test, &cal.held_out_runs);

  // Unknowns: per class 1/η_memory and 1/η_compute, then o; bounds from the current η.
  std::vector<double> inv_memory(kClasses), inv_compute(kClasses);
  for (EfficiencyClass c : kAllEfficiencyClasses) {
    inv_memory[static_cast<int>(c)] = 1 / base.efficiency_of(c).memory;
    inv_compute[static_cast<int>(c)] = 1 / base.efficiency_of(c).compute;
  }
  double overhead = cal.cuda_graphs ? base.graph_kernel_overhead_us : base.kernel_launch_overhead_us;
  std::vector<bool> compute_bound(train.size());
  for (std::size_t i = 0; i < train.size(); ++i) {
    const Sample& s = train[i];
    compute_bound[i] = s.compute_us_at_peak * inv_compute[s.cls] > s.memory_us_at_peak * inv_memory[s.cls];
  }
  bool with_overhead = true;
  for (cal.iterations = 1; cal.iterations <= kMaxIterations; ++cal.iterations) {
    // Columns: (class, memory) and (class, compute) that have samples, then the overhead.
    std::map<std::pair<int, bool>, int> column;
    for (std::size_t i = 0; i < train.size(); ++i)
      column.emplace(std::make_pair(train[i].cls, bool(compute_bound[i])), 0);
    int n = 0;
    for (auto& [key, col] : column) col = n++;
    const int overhead_col = with_overhead ? n++ : -1;
    if (static_cast<int>(train.size()) < n) {
      throw InputError(fmt::format("calibrate: {} measured ops for {} unknowns; give more runs", train.size(), n));
    }
    Eigen::MatrixXd a = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(train.size()), n);
    Eigen::VectorXd b(static_cast<Eigen::Index>(train.size()));
    for (std::size_t i = 0; i < train.size(); ++i) {
      const Sample& s = train[i];
      const auto row = static_cast<Eigen::Index>(i);
      const double w = 1 / s.measured_us;
      a(row, column.at({s.cls, bool(compute_bound[i])})) =
          w * (compute_bound[i] ? s.compute_us_at_peak : s.memory_us_at_peak);
      if (with_overhead) a(row, overhead_col) = w * s.op->kernels;
      b(row) = 1.0;
    }
    const Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(a);
    if (qr.rank() < n) {
      throw InputError(
          fmt::format("calibrate: the measured ops do not determine the {} unknowns (rank {}); "
                      "give ops of more sizes per class",
                      n, qr.rank()));
    }
    const Eigen::VectorXd x = qr.solve(b);
    if (with_overhead && x(overhead_col) < 0) {  // a negative per-kernel cost is no cost: refit without it
      with_overhead = false;
      overhead = 0;
      --cal.iterations;
      continue;
    }
    for (const auto& [key, col] : column) {
      const auto [cls, compute] = key;
      if (x(col) <= 0) {
        throw InputError(
            fmt::format("calibrate: class {} gets a non-positive time per {} ({}); the runs contradict "
                        "the roofline model",
                        to_string(kAllEfficiencyClasses[cls]), compute ? "FLOP" : "byte", x(col)));
      }
      (compute ? inv_compute : inv_memory)[cls] = x(col);
    }
    if (with_overhead) overhead = x(overhead_col);
    bool changed = false;
    for (std::size_t i = 0; i < train.size(); ++i) {
      const Sample& s = train[i];
      const bool cb = s.compute_us_at_peak * inv_compute[s.cls] > s.memory_us_at_peak * inv_memory[s.cls];
      changed |= cb != compute_bound[i];
      compute_bound[i] = cb;
    }
    if (!changed) break;
  }
  K3_CHECK(cal.iterations <= kMaxIterations, "calibration bounds did not settle in {} iterations", kMaxIterations);

  cal.overhead_us_per_kernel = overhead;
  for (int c = 0; c < kClasses; ++c) {
    ClassFit f;
    f.cls = kAllEfficiencyClasses[c];
    for (std::size_t i = 0; i < train.size(); ++i) {
      if (train[i].cls != c) continue;
      ++(compute_bound[i] ? f.compute_samples : f.memory_samples);
    }
    if (f.compute_samples + f.memory_samples == 0) continue;
    auto eff = [&f](double inv) {
      const double e = 1 / inv;
      f.clamped |= e > 1;
      return std::min(e, 1.0);
    };
    if (f.compute_samples) f.compute = eff(inv_compute[c]);
    if (f.memory_samples) f.memory = eff(inv_memory[c]);
    cal.classes.push_back(f);
  }
  const Hardware hw = calibrated_hardware(base, cal);
  cal.training = check(train, hw, cal.cuda_graphs);
  if (!test.empty()) cal.held_out = check(test, hw, cal.cuda_graphs);
  return cal;
}

Hardware calibrated_hardware(const Hardware& base, const Calibration& c) {
  Hardware hw = base;
  for (const ClassFit& f : c.classes) {
    Efficiency e = base.efficiency_of(f.cls);
    if (f.compute) e.compute = *f.compute;
    if (f.memory) e.memory = *f.memory;
    hw.efficiency[f.cls] = e;
  }
  (c.cuda_graphs ? hw.graph_kernel_overhead_us : hw.kernel_launch_overhead_us) = c.overhead_us_per_kernel;
  return hw;
}

namespace {
std::string number(double v) { return fmt::format("{:.7g}", v); }

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}
}  // namespace

std::string calibrated_hardware_yaml(const Hardware& base, const Calibration& c, const std::string& name,
                                     const std::string& source_id) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(base.source_file);
  } catch (const YAML::Exception& e) {
    throw InputError(fmt::format("{}: cannot read the base hardware file: {}", base.source_file, e.what()));
  }
  const YAML::Node base_block = static_cast<const YAML::Node&>(root)["efficiency"];
  const std::string base_name = std::filesystem::path(base.source_file).filename().string();
  std::vector<std::string> fitted, carried;
  YAML::Node block;
  block["source"] = source_id;
  for (EfficiencyClass cls : kAllEfficiencyClasses) {
    const auto fit = std::find_if(c.classes.begin(), c.classes.end(), [&](const ClassFit& f) { return f.cls == cls; });
    const Efficiency e = calibrated_hardware(base, c).efficiency_of(cls);
    if (fit != c.classes.end()) {
      std::string what = to_string(cls) + " (" + (fit->memory ? "memory" : "") +
                         (fit->memory && fit->compute ? " and " : "") + (fit->compute ? "compute" : "") + ")";
      fitted.push_back(what);
    } else if (!(base_block && base_block[to_string(cls)])) {
      continue;  // a default in the base file: stays a default
    } else {
      carried.push_back(to_string(cls));
    }
    YAML::Node entry;
    entry.SetStyle(YAML::EmitterStyle::Flow);
    entry["compute"] = number(e.compute);
    entry["memory"] = number(e.memory);
    block[to_string(cls)] = entry;
  }
  std::string citation = fmt::format(
      "k3perf calibrate (docs/profile.md): least-squares fit of per-class efficiencies and the per-kernel {} "
      "overhead to the per-op medians over steps of the runs {}; held out: {}; median |error| on held-out ops "
      "{:.2f}% before, {:.2f}% after ({} ops). Fitted: {}.",
      c.cuda_graphs ? "graph-replay" : "eager-launch", join(c.training_runs, ", "),
      c.held_out_runs.empty() ? "none" : join(c.held_out_runs, ", "), c.held_out.before_percent,
      c.held_out.after_percent, c.held_out.ops, join(fitted, ", "));
  for (const ClassFit& f : c.classes) {
    if (!f.compute || !f.memory) {
      citation +=
          fmt::format(" {} {} carried over from {} (its value or the documented default; no {}-bound op measured).",
                      to_string(f.cls), f.compute ? "memory" : "compute", base_name, f.compute ? "memory" : "compute");
    }
  }
  if (!carried.empty()) citation += fmt::format(" Carried over unchanged from {}: {}.", base_name, join(carried, ", "));
  root["name"] = name;
  root["sources"][source_id] = citation;
  root["efficiency"] = block;
  YAML::Node overhead;
  overhead.SetStyle(YAML::EmitterStyle::Flow);
  overhead["value"] = number(c.overhead_us_per_kernel);
  overhead["source"] = source_id;
  root["overheads"][c.cuda_graphs ? "graph_kernel_overhead_us" : "kernel_launch_overhead_us"] = overhead;
  YAML::Emitter out;
  out << root;
  return fmt::format("# Generated by `k3perf calibrate` from {} and measured runs; see docs/profile.md.\n{}\n",
                     base_name, out.c_str());
}

nlohmann::ordered_json to_json(const Calibration& c) {
  nlohmann::ordered_json classes = nlohmann::ordered_json::array();
  for (const ClassFit& f : c.classes) {
    classes.push_back({{"class", to_string(f.cls)},
                       {"memory", f.memory ? nlohmann::ordered_json(*f.memory) : nullptr},
                       {"compute", f.compute ? nlohmann::ordered_json(*f.compute) : nullptr},
                       {"memory_bound_ops", f.memory_samples},
                       {"compute_bound_ops", f.compute_samples},
                       {"clamped", f.clamped}});
  }
  auto fit_check = [](const FitCheck& f) {
    return nlohmann::ordered_json{{"ops", f.ops},
                                  {"median_abs_error_percent_before", f.before_percent},
                                  {"median_abs_error_percent_after", f.after_percent}};
  };
  return {{"cuda_graphs", c.cuda_graphs},      {"overhead_us_per_kernel", c.overhead_us_per_kernel},
          {"iterations", c.iterations},        {"classes", classes},
          {"training", fit_check(c.training)}, {"held_out", fit_check(c.held_out)},
          {"training_runs", c.training_runs},  {"held_out_runs", c.held_out_runs}};
}

std::string to_text(const Calibration& c) {
  std::string out =
      fmt::format("{:<14} {:>8} {:>8} {:>11} {:>12}\n", "class", "memory", "compute", "memory ops", "compute ops");
  for (const ClassFit& f : c.classes) {
    out += fmt::format("{:<14} {:>8} {:>8} {:>11} {:>12}{}\n", to_string(f.cls), f.memory ? number(*f.memory) : "-",
                       f.compute ? number(*f.compute) : "-", f.memory_samples, f.compute_samples,
                       f.clamped ? "  (clamped to 1)" : "");
  }
  out += fmt::format("per-kernel {} overhead {} us; {} iterations\n", c.cuda_graphs ? "graph-replay" : "eager-launch",
                     number(c.overhead_us_per_kernel), c.iterations);
  out += fmt::format("training: {} ops, median |error| {:.2f}% before, {:.2f}% after\n", c.training.ops,
                     c.training.before_percent, c.training.after_percent);
  if (c.held_out.ops) {
    out += fmt::format("held out: {} ops, median |error| {:.2f}% before, {:.2f}% after\n", c.held_out.ops,
                       c.held_out.before_percent, c.held_out.after_percent);
  } else {
    out += "held out: none given (the fit is unchecked)\n";
  }
  return out;
}

}  // namespace k3::profiler
