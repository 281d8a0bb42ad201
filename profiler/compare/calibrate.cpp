#include "profiler/compare/calibrate.h"

#include "core/error.h"
#include "core/hardware_writer.h"
#include "core/output_header.h"
#include "profiler/compare/nnls.h"
#include "profiler/trace/chrome_json.h"
#include "sim/roofline.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>
#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

namespace k3::profiler {

namespace {

constexpr int kMaxIterations = 50;
constexpr int kClasses = static_cast<int>(std::size(kAllEfficiencyClasses));
constexpr int kKinds = static_cast<int>(OpKind::collective);  // every kind but collective

struct Sample {
  const PredictedOp* op = nullptr;
  const OpComparison* measured = nullptr;
  int cls = 0;
  int kind = 0;
  double memory_us_at_peak = 0;   // bytes / HBM bandwidth
  double compute_us_at_peak = 0;  // flops / peak
  double serial_us = 0;           // serial steps · the base file's step time (not fitted)
  double measured_us = 0;
  bool cuda_graphs = true;  // the run's launch mode
  double overhead_us = 0;   // per kernel, the base file's for that launch mode
  double weight = 1;        // of its row in the fit: every run weighs 1 (run_weights)
};

struct RunSamples {
  std::string name;
  std::string phase;
  Comparison comparison;  // the samples point into it and into the run's prediction
  std::vector<Sample> samples;
};

std::string describe(const CalibrationRun& r) {
  const auto get = [&](const char* key) {
    const auto it = r.trace.metadata.find(key);
    return it == r.trace.metadata.end() ? std::string("unknown") : it->second;
  };
  return fmt::format("{} + {} (commit {}, date {})", std::filesystem::path(r.prediction_path).filename().string(),
                     std::filesystem::path(r.trace_path).filename().string(), get("commit"), get("date"));
}

// The rows of one run weigh 1 together, whatever its op count (a 93-layer rank has 20 times a slice's ops): half
// spread evenly over its ops (the per-op error the fit is judged on), half by each op's share of the measured step
// (the step error: a 137 ms expert GEMM counts for more than a 2 us norm).
void run_weights(std::vector<Sample>& samples) {
  double total_us = 0;
  for (const Sample& s : samples) total_us += s.measured_us;
  for (Sample& s : samples) s.weight = 0.5 / static_cast<double>(samples.size()) + 0.5 * s.measured_us / total_us;
}

RunSamples samples_of(const CalibrationRun& r, const Hardware& hw) {
  RunSamples out;
  out.name = describe(r);
  out.phase = r.prediction.phase;
  out.comparison = compare(r.prediction, r.trace, hw);
  for (const OpComparison& o : out.comparison.ops) {
    const PredictedOp& p = *o.predicted;
    if (p.collective() || o.measured_us <= 0) continue;
    Sample s;
    s.op = &p;
    s.measured = &o;
    s.cls = static_cast<int>(efficiency_class(p.kind));
    s.kind = static_cast<int>(p.kind);
    s.memory_us_at_peak = p.bytes / hw.hbm_bandwidth_bytes_per_s * 1e6;
    s.compute_us_at_peak = p.flops > 0 ? p.flops / hw.peak(p.compute) * 1e6 : 0.0;
    s.serial_us = p.serial_steps * hw.serial_step_of(p.kind);
    s.measured_us = o.measured_us;
    s.cuda_graphs = r.prediction.cuda_graphs;
    s.overhead_us = s.cuda_graphs ? hw.graph_kernel_overhead_us : hw.kernel_launch_overhead_us;
    out.samples.push_back(s);
  }
  if (out.samples.empty()) {
    throw InputError(
        fmt::format("{} + {}: no measured op to fit (are the kernels attributed?)", r.prediction_path, r.trace_path));
  }
  run_weights(out.samples);
  return out;
}

double time_with(const Sample& s, const Hardware& hw) {
  Op op;
  op.kind = s.op->kind;
  op.compute = s.op->compute;
  op.flops = s.op->flops;
  op.read.weights = s.op->bytes;
  op.kernels = s.op->kernels;
  op.serial_steps = s.op->serial_steps;
  Runtime rt;
  rt.cuda_graphs = s.cuda_graphs;
  return time_op(op, hw, rt).time_us;
}

RunCheck check_run(const RunSamples& run, const Hardware& calibrated) {
  RunCheck rc;
  rc.run = run.name;
  rc.phase = run.phase;
  std::vector<double> before, after;
  std::size_t steps = std::numeric_limits<std::size_t>::max();
  for (const Sample& s : run.samples) {
    OpCheck oc{s.op->name, s.op->kind, s.measured_us, s.op->time_us, time_with(s, calibrated)};
    before.push_back(std::fabs(error_percent(oc.before_us, oc.measured_us)));
    after.push_back(std::fabs(error_percent(oc.after_us, oc.measured_us)));
    rc.predicted_step_before_us += oc.before_us;
    rc.predicted_step_after_us += oc.after_us;
    steps = std::min(steps, s.measured->measured_us_by_instance.size());
    rc.ops.push_back(std::move(oc));
  }
  rc.op_error_before_percent = median(before);
  rc.op_error_after_percent = median(after);
  std::vector<double> step_sums(steps, 0.0);
  for (const Sample& s : run.samples) {
    for (std::size_t i = 0; i < steps; ++i) step_sums[i] += s.measured->measured_us_by_instance[i];
  }
  rc.measured_step_us = median(step_sums);
  return rc;
}

FitCheck check(const std::vector<RunSamples>& runs, const Hardware& calibrated) {
  FitCheck f;
  std::vector<double> before, after;
  for (const RunSamples& run : runs) {
    RunCheck rc = check_run(run, calibrated);
    for (const OpCheck& o : rc.ops) {
      before.push_back(std::fabs(error_percent(o.before_us, o.measured_us)));
      after.push_back(std::fabs(error_percent(o.after_us, o.measured_us)));
    }
    f.worst_step_before_percent = std::max(f.worst_step_before_percent, std::fabs(rc.step_error_before_percent()));
    f.worst_step_after_percent = std::max(f.worst_step_after_percent, std::fabs(rc.step_error_after_percent()));
    f.runs.push_back(std::move(rc));
  }
  f.ops = before.size();
  f.before_percent = median(before);
  f.after_percent = median(after);
  return f;
}

// An unknown of the linear fit: λ of a kind, or u = 1/η - 1 of a (class, bound).
struct Unknown {
  bool latency = false;
  int index = 0;  // kind, or class
  bool compute = false;
  std::string describe() const {
    return latency ? fmt::format("{} latency", to_string(static_cast<OpKind>(index)))
                   : fmt::format("{} {}", to_string(kAllEfficiencyClasses[index]), compute ? "compute" : "memory");
  }
};

// The column of `u` for row `s`: the coefficient of the unknown in the relative residual. `ridge` is the row's
// factor ridge_max(c, m) / max(c, m) at the current efficiencies (sim/roofline.h), held fixed within one solve.
double coefficient(const Unknown& u, const Sample& s, bool compute_bound, double ridge) {
  if (u.latency) return s.kind == u.index ? s.op->kernels / s.measured_us : 0.0;
  if (s.cls != u.index || compute_bound != u.compute) return 0.0;
  return ridge * (compute_bound ? s.compute_us_at_peak : s.memory_us_at_peak) / s.measured_us;
}

// Rank of the columns after scaling each to unit length: columns equal up to rounding (an efficiency
// whose ops all have one bytes-per-kernel ratio, like its kind's latency) count once.
Eigen::Index scaled_rank(Eigen::MatrixXd m) {
  for (Eigen::Index j = 0; j < m.cols(); ++j) {
    const double norm = m.col(j).norm();
    if (norm > 0) m.col(j) /= norm;
  }
  Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(m);
  qr.setThreshold(1e-10);
  return qr.rank();
}

// x >= 0 minimising Σ |(A x - b)_i|: the fit the goal (a median |error|) asks for, and one that ops
// the model cannot describe (a kernel far off its class) do not drag. Iteratively reweighted least
// squares from the least-squares start: weights 1 / |residual|, floored at 1e-6 so that a row fitted
// exactly stays finite; until x moves by less than 1e-12.
Eigen::VectorXd least_absolute_deviations(const Eigen::MatrixXd& a, const Eigen::VectorXd& b) {
  constexpr int kMaxSteps = 5000;  // the H200 fit (1,687 ops, 20 unknowns) settles in 160-1,100 per solve
  Eigen::VectorXd x = nnls(a, b);
  for (int step = 0; step < kMaxSteps; ++step) {
    const Eigen::VectorXd w = (a * x - b).cwiseAbs().cwiseMax(1e-6).cwiseInverse().cwiseSqrt();
    const Eigen::VectorXd next = nnls(w.asDiagonal() * a, w.asDiagonal() * b);
    const double moved = (next - x).norm();
    x = next;
    if (moved < 1e-12 * std::max(1.0, x.norm())) break;
  }
  return x;
}

}  // namespace

CalibrationRun load_calibration_run(const std::string& prediction_path, const std::string& trace_path) {
  return {prediction_path, trace_path, load_prediction(prediction_path), read_trace(trace_path)};
}

Calibration calibrate(const std::vector<CalibrationRun>& training, const std::vector<CalibrationRun>& held_out,
                      const Hardware& base) {
  if (training.empty()) throw InputError("calibrate: no training runs given");
  Calibration cal;
  std::vector<RunSamples> train_runs, test_runs;  // reserved: the samples point into them
  train_runs.reserve(training.size());
  test_runs.reserve(held_out.size());
  for (const CalibrationRun& r : training) train_runs.push_back(samples_of(r, base));
  for (const CalibrationRun& r : held_out) test_runs.push_back(samples_of(r, base));
  std::vector<Sample> train;
  for (const RunSamples& r : train_runs) {
    train.insert(train.end(), r.samples.begin(), r.samples.end());
    cal.training_runs.push_back(r.name);
  }
  for (const RunSamples& r : test_runs) cal.held_out_runs.push_back(r.name);
  const auto meta = [](const CalibrationRun& r, const char* key) {
    const auto it = r.trace.metadata.find(key);
    return it == r.trace.metadata.end() ? std::string() : it->second;
  };
  cal.engine_sources = meta(training.front(), "engine_sources");
  cal.commit = meta(training.front(), "commit");
  for (const CalibrationRun& r : training) {
    if (meta(r, "engine_sources") != cal.engine_sources) cal.engine_sources.clear();
    if (meta(r, "commit") != cal.commit) cal.commit.clear();
  }
  if (cal.engine_sources.empty()) cal.commit.clear();

  // u = 1/η - 1 per class and bound, λ per kind; bounds from the current η.
  std::vector<double> base_u_memory(kClasses), base_u_compute(kClasses), latency(kKinds, 0.0);
  for (EfficiencyClass c : kAllEfficiencyClasses) {
    base_u_memory[static_cast<int>(c)] = 1 / base.efficiency_of(c).memory - 1;
    base_u_compute[static_cast<int>(c)] = 1 / base.efficiency_of(c).compute - 1;
  }
  std::vector<double> u_memory = base_u_memory, u_compute = base_u_compute;
  const auto is_compute_bound = [&](const Sample& s) {
    return s.compute_us_at_peak * (1 + u_compute[s.cls]) > s.memory_us_at_peak * (1 + u_memory[s.cls]);
  };
  // The ridge term makes the roofline non-linear in u: like the bounds, its factor per row is taken at the current
  // efficiencies and the fit repeated until both settle.
  const auto ridge_of = [&](const Sample& s) {
    const double c = s.compute_us_at_peak * (1 + u_compute[s.cls]), m = s.memory_us_at_peak * (1 + u_memory[s.cls]);
    const double hi = std::max(c, m);
    return hi > 0 ? ridge_max(c, m, base.ridge_smooth_max_exponent) / hi : 1.0;
  };
  std::vector<bool> compute_bound(train.size());
  std::vector<double> ridge(train.size());
  for (std::size_t i = 0; i < train.size(); ++i) {
    compute_bound[i] = is_compute_bound(train[i]);
    ridge[i] = ridge_of(train[i]);
  }

  std::vector<Unknown> fitted;
  const auto rows = static_cast<Eigen::Index>(train.size());
  for (cal.iterations = 1; cal.iterations <= kMaxIterations; ++cal.iterations) {
    // Candidates: every kind's latency, then each (class, bound) with samples. An efficiency is
    // fitted only where it adds to the rank; otherwise it keeps the base value.
    std::vector<Unknown> candidates;
    for (int k = 0; k < kKinds; ++k) candidates.push_back({true, k, false});
    for (int c = 0; c < kClasses; ++c) {
      candidates.push_back({false, c, false});
      candidates.push_back({false, c, true});
    }
    fitted.clear();
    Eigen::MatrixXd a(rows, 0);
    for (const Unknown& u : candidates) {
      Eigen::VectorXd col(rows);
      for (Eigen::Index i = 0; i < rows; ++i)
        col(i) = coefficient(u, train[static_cast<std::size_t>(i)], compute_bound[static_cast<std::size_t>(i)],
                             ridge[static_cast<std::size_t>(i)]);
      if (col.isZero(0)) continue;  // no samples
      Eigen::MatrixXd grown(rows, a.cols() + 1);
      grown << a, col;
      if (scaled_rank(grown) <= a.cols()) continue;
      a = std::move(grown);
      fitted.push_back(u);
    }
    const auto n = static_cast<Eigen::Index>(fitted.size());
    // Relative residual: (roofline at peak · (1 + u) + kernels · (o + λ) - measured) / measured.
    Eigen::VectorXd b(rows);
    for (Eigen::Index i = 0; i < rows; ++i) {
      const Sample& s = train[static_cast<std::size_t>(i)];
      const bool cb = compute_bound[static_cast<std::size_t>(i)];
      double roof = cb ? s.compute_us_at_peak : s.memory_us_at_peak;
      const bool u_fitted = std::any_of(fitted.begin(), fitted.end(), [&](const Unknown& u) {
        return !u.latency && u.index == s.cls && u.compute == cb;
      });
      if (!u_fitted) roof *= 1 + (cb ? u_compute : u_memory)[s.cls];  // held at the base value
      b(i) = (s.measured_us - (u_fitted ? 1.0 : ridge[static_cast<std::size_t>(i)]) * roof - s.serial_us -
              s.op->kernels * s.overhead_us) /
             s.measured_us;
    }
    Eigen::VectorXd w(rows);
    for (Eigen::Index i = 0; i < rows; ++i) w(i) = train[static_cast<std::size_t>(i)].weight;
    const Eigen::VectorXd x = least_absolute_deviations(w.asDiagonal() * a, w.asDiagonal() * b);
    u_memory = base_u_memory;
    u_compute = base_u_compute;
    for (Eigen::Index j = 0; j < n; ++j) {
      const Unknown& u = fitted[static_cast<std::size_t>(j)];
      if (u.latency) {
        latency[u.index] = x(j);
      } else {
        (u.compute ? u_compute : u_memory)[u.index] = x(j);
      }
    }
    bool changed = false;
    for (std::size_t i = 0; i < train.size(); ++i) {
      const bool cb = is_compute_bound(train[i]);
      const double r = ridge_of(train[i]);
      changed |= cb != compute_bound[i] || std::fabs(r - ridge[i]) > 1e-9 * ridge[i];
      compute_bound[i] = cb;
      ridge[i] = r;
    }
    if (!changed) break;
  }
  K3_CHECK(cal.iterations <= kMaxIterations, "calibration bounds did not settle in {} iterations", kMaxIterations);

  const auto was_fitted = [&](bool is_latency, int index, bool compute) {
    return std::any_of(fitted.begin(), fitted.end(), [&](const Unknown& u) {
      return u.latency == is_latency && u.index == index && (is_latency || u.compute == compute);
    });
  };
  for (int c = 0; c < kClasses; ++c) {
    ClassFit f;
    f.cls = kAllEfficiencyClasses[c];
    for (std::size_t i = 0; i < train.size(); ++i) {
      if (train[i].cls == c) ++(compute_bound[i] ? f.compute_samples : f.memory_samples);
    }
    if (f.compute_samples + f.memory_samples == 0) continue;
    for (const bool compute : {false, true}) {
      if ((compute ? f.compute_samples : f.memory_samples) == 0) continue;
      if (!was_fitted(false, c, compute)) {
        cal.undetermined.push_back(fmt::format("{} {}", to_string(f.cls), compute ? "compute" : "memory"));
        continue;
      }
      const double u = (compute ? u_compute : u_memory)[c];
      (compute ? f.compute : f.memory) = 1 / (1 + u);
      (compute ? f.compute_at_peak : f.memory_at_peak) = u == 0;
    }
    cal.classes.push_back(f);
  }
  for (int k = 0; k < kKinds; ++k) {
    LatencyFit f;
    f.kind = static_cast<OpKind>(k);
    for (const Sample& s : train) f.samples += s.kind == k;
    if (f.samples == 0 || !was_fitted(true, k, false)) continue;
    f.latency_us_per_kernel = latency[k];
    cal.latencies.push_back(f);
  }
  const Hardware hw = calibrated_hardware(base, cal);
  cal.training = check(train_runs, hw);
  cal.held_out = check(test_runs, hw);
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
  for (const LatencyFit& l : c.latencies) hw.kernel_latency_us[l.kind] = l.latency_us_per_kernel;
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
  const YAML::Node root = read_hardware_tree(base.source_file);
  const Hardware hw = calibrated_hardware(base, c);
  const YAML::Node base_block = root["efficiency"];
  const std::string base_name = std::filesystem::path(base.source_file).filename().string();
  std::vector<std::string> fitted, carried, kept;
  YAML::Node block;
  block["source"] = source_id;
  for (EfficiencyClass cls : kAllEfficiencyClasses) {
    const auto fit = std::find_if(c.classes.begin(), c.classes.end(), [&](const ClassFit& f) { return f.cls == cls; });
    const Efficiency e = hw.efficiency_of(cls);
    if (fit != c.classes.end() && (fit->memory || fit->compute)) {
      fitted.push_back(fmt::format("{} {}", to_string(cls),
                                   fit->memory && fit->compute ? "memory and compute"
                                   : fit->memory               ? "memory"
                                                               : "compute"));
      kept.push_back(fmt::format("{} {}", to_string(cls), fit->memory ? "compute" : "memory"));
      if (fit->memory && fit->compute) kept.pop_back();
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
  YAML::Node latency;
  latency["source"] = source_id;
  std::vector<std::string> latency_carried;
  for (const auto& [kind, us] : hw.kernel_latency_us) {
    const OpKind k = kind;  // Clang 14 does not capture structured bindings in lambdas
    const bool was_fitted =
        std::any_of(c.latencies.begin(), c.latencies.end(), [&](const LatencyFit& l) { return l.kind == k; });
    if (!was_fitted) latency_carried.push_back(to_string(kind));
    latency[to_string(kind)] = number(us);
  }
  const auto step_errors = [](const FitCheck& f) {
    std::vector<std::string> out;
    for (const RunCheck& r : f.runs) {
      out.push_back(fmt::format("{:+.1f}% -> {:+.1f}%", r.step_error_before_percent(), r.step_error_after_percent()));
    }
    return join(out, ", ");
  };
  std::string citation = fmt::format(
      "k3perf calibrate (docs/profile.md): least-absolute-deviations fit (relative, non-negative) of per-class "
      "efficiencies and per-op-kind "
      "kernel latencies (t = ridge_max(FLOPs / (peak * eta_compute), bytes / (HBM bw * eta_memory)) + serial steps * "
      "step[kind] + kernels * (overhead + latency[kind]), step[kind] kept from the base file) to the per-op medians "
      "over steps of the runs {}, each run weighing 1 (half evenly "
      "over its ops, half by their shares of its measured step). Held out: {}. Median |error| per "
      "op: training {:.2f}% before, {:.2f}% after ({} ops); held out {:.2f}% before, {:.2f}% after ({} ops). Step "
      "error per run (sum of the ops, before -> after): training {}; held out {}. Fitted: {}.",
      join(c.training_runs, ", "), c.held_out_runs.empty() ? "none" : join(c.held_out_runs, ", "),
      c.training.before_percent, c.training.after_percent, c.training.ops, c.held_out.before_percent,
      c.held_out.after_percent, c.held_out.ops, step_errors(c.training),
      c.held_out_runs.empty() ? "none" : step_errors(c.held_out), join(fitted, ", "));
  if (!kept.empty()) {
    citation += fmt::format(" Not fitted, kept from {} (its value or the documented default): {}.", base_name,
                            join(kept, ", "));
  }
  if (!c.undetermined.empty()) {
    citation +=
        fmt::format(" Kept at {}'s value because their ops do not separate them from their kinds' latencies: {}.",
                    base_name, join(c.undetermined, ", "));
  }
  if (!carried.empty()) citation += fmt::format(" Carried over unchanged from {}: {}.", base_name, join(carried, ", "));
  if (!latency_carried.empty()) {
    citation += fmt::format(" Kernel latencies carried over from {}: {}.", base_name, join(latency_carried, ", "));
  }
  std::vector<std::pair<std::string, YAML::Node>> blocks = {{"efficiency", block}, {"kernel_latency_us", latency}};
  if (!c.engine_sources.empty()) {
    YAML::Node on;
    on["engine_sources"] = c.engine_sources;
    on["commit"] = c.commit;
    blocks.insert(blocks.begin(), {"calibrated_on", on});
  }
  return derived_hardware_yaml(
      base.source_file, {name, source_id, citation, blocks, "k3perf calibrate", "measured runs", "docs/profile.md"});
}

nlohmann::ordered_json to_json(const Calibration& c) {
  using json = nlohmann::ordered_json;
  json classes = json::array();
  for (const ClassFit& f : c.classes) {
    classes.push_back({{"class", to_string(f.cls)},
                       {"memory", f.memory ? json(*f.memory) : nullptr},
                       {"compute", f.compute ? json(*f.compute) : nullptr},
                       {"memory_bound_ops", f.memory_samples},
                       {"compute_bound_ops", f.compute_samples},
                       {"memory_at_peak", f.memory_at_peak},
                       {"compute_at_peak", f.compute_at_peak}});
  }
  json latencies = json::array();
  for (const LatencyFit& l : c.latencies) {
    latencies.push_back(
        {{"kind", to_string(l.kind)}, {"ops", l.samples}, {"latency_us_per_kernel", l.latency_us_per_kernel}});
  }
  auto fit_check = [](const FitCheck& f) {
    json runs = json::array();
    for (const RunCheck& r : f.runs) {
      json ops = json::array();
      for (const OpCheck& o : r.ops) {
        ops.push_back({{"name", o.name},
                       {"kind", to_string(o.kind)},
                       {"measured_us", o.measured_us},
                       {"before_us", o.before_us},
                       {"after_us", o.after_us}});
      }
      runs.push_back({{"run", r.run},
                      {"phase", r.phase},
                      {"median_abs_error_percent_before", r.op_error_before_percent},
                      {"median_abs_error_percent_after", r.op_error_after_percent},
                      {"measured_step_us", r.measured_step_us},
                      {"predicted_step_us_before", r.predicted_step_before_us},
                      {"predicted_step_us_after", r.predicted_step_after_us},
                      {"step_error_percent_before", r.step_error_before_percent()},
                      {"step_error_percent_after", r.step_error_after_percent()},
                      {"ops", ops}});
    }
    return json{{"ops", f.ops},
                {"median_abs_error_percent_before", f.before_percent},
                {"median_abs_error_percent_after", f.after_percent},
                {"worst_abs_step_error_percent_before", f.worst_step_before_percent},
                {"worst_abs_step_error_percent_after", f.worst_step_after_percent},
                {"runs", runs}};
  };
  json j = output_header("k3perf-calibration", 1);
  j["iterations"] = c.iterations;
  j["classes"] = classes;
  j["kernel_latencies"] = latencies;
  j["kept_at_base"] = c.undetermined;
  j["training"] = fit_check(c.training);
  j["held_out"] = fit_check(c.held_out);
  j["training_runs"] = c.training_runs;
  j["held_out_runs"] = c.held_out_runs;
  return j;
}

std::string to_text(const Calibration& c) {
  std::string out =
      fmt::format("{:<14} {:>8} {:>8} {:>11} {:>12}\n", "class", "memory", "compute", "memory ops", "compute ops");
  for (const ClassFit& f : c.classes) {
    const auto eta = [](const std::optional<double>& e) { return e ? number(*e) : std::string("-"); };
    out += fmt::format("{:<14} {:>8} {:>8} {:>11} {:>12}{}\n", to_string(f.cls), eta(f.memory), eta(f.compute),
                       f.memory_samples, f.compute_samples,
                       f.memory_at_peak || f.compute_at_peak ? "  (at the peak: eta = 1)" : "");
  }
  out += fmt::format("{:<16} {:>16} {:>6}\n", "kind", "latency us/kern", "ops");
  for (const LatencyFit& l : c.latencies) {
    out += fmt::format("{:<16} {:>16} {:>6}\n", to_string(l.kind), number(l.latency_us_per_kernel), l.samples);
  }
  if (!c.undetermined.empty()) {
    out += fmt::format("kept at the base value (its ops do not separate it from their kinds' latencies): {}\n",
                       join(c.undetermined, ", "));
  }
  out += fmt::format("{} iterations\n", c.iterations);
  const auto check = [&out](const char* label, const FitCheck& f) {
    out += fmt::format(
        "{}: {} ops, median |error| per op {:.2f}% before, {:.2f}% after; largest |step error| "
        "{:.2f}% before, {:.2f}% after\n",
        label, f.ops, f.before_percent, f.after_percent, f.worst_step_before_percent, f.worst_step_after_percent);
    for (const RunCheck& r : f.runs) {
      out += fmt::format(
          "  {}\n    {} ops: median |error| {:.2f}% -> {:.2f}%; step {:.1f} us measured, {:.1f} -> "
          "{:.1f} us predicted ({:+.2f}% -> {:+.2f}%)\n",
          r.run, r.ops.size(), r.op_error_before_percent, r.op_error_after_percent, r.measured_step_us,
          r.predicted_step_before_us, r.predicted_step_after_us, r.step_error_before_percent(),
          r.step_error_after_percent());
    }
  };
  check("training", c.training);
  if (c.held_out.runs.empty()) {
    out += "held out: none given (the fit is unchecked)\n";
  } else {
    check("held out", c.held_out);
  }
  return out;
}

}  // namespace k3::profiler
