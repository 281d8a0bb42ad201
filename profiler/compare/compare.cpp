#include "profiler/compare/compare.h"

#include "core/error.h"
#include "core/output_header.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdio>
#include <map>

namespace k3::profiler {

double error_percent(double predicted, double measured) {
  return measured > 0 ? 100.0 * (predicted - measured) / measured : 0.0;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

namespace {

using Interval = std::pair<std::int64_t, std::int64_t>;

double union_us(std::vector<Interval> spans) {
  std::sort(spans.begin(), spans.end());
  std::int64_t total = 0, cur_start = 0, cur_end = 0;
  bool open = false;
  for (const auto& [s, e] : spans) {
    if (open && s <= cur_end) {
      cur_end = std::max(cur_end, e);
      continue;
    }
    if (open) total += cur_end - cur_start;
    cur_start = s;
    cur_end = e;
    open = true;
  }
  if (open) total += cur_end - cur_start;
  return static_cast<double>(total) / 1000.0;
}

// Each step's span on the GPU (first to last event attributed to an op of that instance) and the time some GPU
// event (attributed or not, any stream) runs inside it.
std::vector<StepWindow> step_windows(const Trace& trace) {
  std::vector<Interval> windows, busy;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const EventKind k = trace.kind[i];
    if (k == EventKind::api || k == EventKind::range) continue;
    busy.push_back({trace.start_ns[i], trace.end_ns[i]});
    if (trace.op[i] == kNone || trace.op_instance[i] < 0) continue;
    const auto s = static_cast<std::size_t>(trace.op_instance[i]);
    if (s >= windows.size()) windows.resize(s + 1, {INT64_MAX, INT64_MIN});
    windows[s] = {std::min(windows[s].first, trace.start_ns[i]), std::max(windows[s].second, trace.end_ns[i])};
  }
  // The busy intervals as a sorted disjoint union, then each window's overlap with it.
  std::sort(busy.begin(), busy.end());
  std::vector<Interval> merged;
  for (const Interval& b : busy) {
    if (!merged.empty() && b.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, b.second);
    } else {
      merged.push_back(b);
    }
  }
  std::vector<StepWindow> out;
  for (const auto& [start, end] : windows) {
    if (start > end) continue;  // an instance no event has
    StepWindow w;
    w.span_us = static_cast<double>(end - start) / 1000.0;
    auto it = std::upper_bound(merged.begin(), merged.end(), Interval{start, INT64_MAX});
    if (it != merged.begin()) --it;
    std::int64_t covered = 0;
    for (; it != merged.end() && it->first < end; ++it)
      covered += std::max<std::int64_t>(0, std::min(end, it->second) - std::max(start, it->first));
    w.busy_us = static_cast<double>(covered) / 1000.0;
    out.push_back(w);
  }
  return out;
}

// "NVIDIA H200" -> {"h200"}: the words of a name, lowercased, without the vendor.
std::vector<std::string> gpu_words(const std::string& name) {
  std::vector<std::string> out;
  std::string word;
  for (std::size_t i = 0; i <= name.size(); ++i) {
    const char ch = i < name.size() ? static_cast<char>(std::tolower(static_cast<unsigned char>(name[i]))) : ' ';
    if (std::isalnum(static_cast<unsigned char>(ch))) {
      word += ch;
    } else if (!word.empty()) {
      if (word != "nvidia") out.push_back(word);
      word.clear();
    }
  }
  return out;
}

double roofline_us(const PredictedOp& op, const Hardware& hw) {
  if (op.collective()) return 0;
  const double compute = op.flops > 0 ? op.flops / hw.peak(op.compute) : 0.0;
  return std::max(compute, op.bytes / hw.hbm_bandwidth_bytes_per_s) * 1e6;
}

// The predicted ops to join with the measured ones, in prediction order, after the fusions the prediction
// records (PredictedOp::runs_inside). Merged ops live in c->fused_predictions.
template <typename Spans>
std::vector<const PredictedOp*> fuse_into_measured(const PredictionFile& prediction, const Spans& spans,
                                                   Comparison* c) {
  std::map<std::string, std::size_t> predicted;
  for (std::size_t i = 0; i < prediction.ops.size(); ++i) predicted[prediction.ops[i].name] = i;
  // host name -> the predicted ops it carries, the host's own first (when predicted).
  std::map<std::string, std::vector<std::size_t>> carried;
  std::vector<std::string> host_of(prediction.ops.size());  // "" unless the op runs inside another's range
  for (std::size_t i = 0; i < prediction.ops.size(); ++i) {
    const std::string& name = prediction.ops[i].name;
    const std::string& host = prediction.ops[i].runs_inside;
    if (host.empty() || spans.count(name) || !spans.count(host)) continue;
    std::vector<std::size_t>& parts = carried[host];
    if (parts.empty() && predicted.count(host)) parts.push_back(predicted.at(host));
    parts.push_back(i);
    host_of[i] = host;
    c->fused.push_back(name + " -> " + host);
  }
  auto merged = std::make_shared<std::vector<PredictedOp>>();
  merged->reserve(carried.size());
  std::map<std::string, const PredictedOp*> merged_of;
  for (const auto& [host, parts] : carried) {
    PredictedOp m = prediction.ops[parts.front()];
    m.name = host;
    for (std::size_t k = 1; k < parts.size(); ++k) {
      const PredictedOp& p = prediction.ops[parts[k]];
      m.time_us += p.time_us;
      m.flops += p.flops;
      m.bytes += p.bytes;
    }
    merged->push_back(std::move(m));
    merged_of[host] = &merged->back();
  }
  std::vector<const PredictedOp*> joined;
  for (std::size_t i = 0; i < prediction.ops.size(); ++i) {
    const PredictedOp& p = prediction.ops[i];
    const std::string& host = host_of[i];
    if (!host.empty()) {  // stands for a host the prediction lacks (in its first part's place); else the host is listed
      if (!predicted.count(host) && carried.at(host)[0] == i) joined.push_back(merged_of.at(host));
      continue;
    }
    const auto m = merged_of.find(p.name);
    joined.push_back(m != merged_of.end() ? m->second : &p);
  }
  c->fused_predictions = std::move(merged);
  return joined;
}

}  // namespace

Comparison compare(const PredictionFile& prediction, const Trace& trace, const Hardware& hw) {
  Comparison c;
  c.prediction_origin = prediction.origin;
  c.records_engine = prediction.records_engine;
  c.trace_metadata = trace.metadata;

  // Per op name: intervals per instance, and kernel counts.
  std::map<std::string, std::map<std::int64_t, std::vector<Interval>>> spans;
  std::map<std::string, std::size_t> kernels_of;
  std::map<std::string, double> kernel_us_of;
  std::map<std::string, UnattributedKernel> unattributed;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const EventKind k = trace.kind[i];
    if (k == EventKind::api || k == EventKind::range) continue;
    const double us = static_cast<double>(trace.end_ns[i] - trace.start_ns[i]) / 1000.0;
    const bool kernel = k == EventKind::kernel;
    if (kernel) {
      ++c.kernels;
      c.kernel_time_us += us;
    }
    if (trace.op[i] == kNone) {
      if (kernel) {
        UnattributedKernel& u = unattributed[trace.name_of(i)];
        u.name = trace.name_of(i);
        ++u.count;
        u.total_us += us;
      }
      continue;
    }
    const std::string op = trace.op_of(i);
    K3_CHECK(trace.op_instance[i] >= 0, "event {} of op '{}' has no instance", i, op);
    spans[op][trace.op_instance[i]].push_back({trace.start_ns[i], trace.end_ns[i]});
    if (kernel) {
      ++kernels_of[op];
      kernel_us_of[op] += us;
    }
  }

  // The ops joined with the trace, after fusions: pointers into the prediction, or into the merged copies.
  std::vector<const PredictedOp*> joined = fuse_into_measured(prediction, spans, &c);
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < joined.size(); ++i) index[joined[i]->name] = i;
  for (const auto& [op, n] : kernels_of) {
    if (!index.count(op)) continue;
    c.kernels_on_predicted_ops += n;
    c.kernel_time_on_predicted_ops_us += kernel_us_of[op];
  }

  const auto collectives = trace.metadata.find("collectives");
  c.split.emulated = collectives != trace.metadata.end() && collectives->second == "emulated";
  for (const PredictedOp* joined_op : joined) {
    const PredictedOp& p = *joined_op;
    const auto it = spans.find(p.name);
    if (c.split.emulated && p.collective()) {
      std::vector<double> copies;
      if (it != spans.end()) {
        for (const auto& [instance, list] : it->second) copies.push_back(union_us(list));
      }
      c.emulated.push_back({&p, median(copies)});
      continue;
    }
    if (it == spans.end()) {
      c.not_measured.push_back(p.name);
      continue;
    }
    OpComparison o;
    o.predicted = &p;
    const std::int64_t instances = it->second.rbegin()->first + 1;
    o.measured_us_by_instance.assign(static_cast<std::size_t>(instances), 0.0);
    for (const auto& [instance, list] : it->second) o.measured_us_by_instance[instance] = union_us(list);
    o.measured_us = median(o.measured_us_by_instance);
    o.error_percent = error_percent(p.time_us, o.measured_us);
    if (o.measured_us > 0) {
      o.achieved_bytes_per_s = p.bytes / (o.measured_us * 1e-6);
      o.achieved_flops_per_s = p.flops / (o.measured_us * 1e-6);
    }
    o.roofline_us = roofline_us(p, hw);
    if (o.roofline_us > 0 && o.measured_us > 0) o.roofline_percent = 100.0 * o.roofline_us / o.measured_us;
    o.kernels = kernels_of[p.name];
    c.ops.push_back(std::move(o));
  }
  for (const auto& [name, by_instance] : spans) {
    if (index.count(name)) continue;
    std::vector<double> times;
    for (const auto& [instance, list] : by_instance) times.push_back(union_us(list));
    const bool engine_only =
        std::find(prediction.engine_only.begin(), prediction.engine_only.end(), name) != prediction.engine_only.end();
    c.not_predicted.push_back({name, times.size(), median(times), engine_only});
  }
  for (auto& [name, u] : unattributed) c.unattributed.push_back(std::move(u));
  std::stable_sort(c.unattributed.begin(), c.unattributed.end(),
                   [](const UnattributedKernel& a, const UnattributedKernel& b) { return a.total_us > b.total_us; });

  // Summaries.
  for (const OpComparison& o : c.ops) {
    if (o.predicted->collective()) {
      ++c.split.collectives;
      c.split.predicted_communication_us += o.predicted->time_us;
      c.split.measured_communication_us = c.split.measured_communication_us.value_or(0) + o.measured_us;
    } else {
      ++c.split.compute_ops;
      c.split.predicted_compute_us += o.predicted->time_us;
      c.split.measured_compute_us += o.measured_us;
    }
  }
  for (const EmulatedCollective& e : c.emulated) {
    ++c.split.collectives;
    c.split.predicted_communication_us += e.predicted->time_us;
  }
  std::vector<double> all_errors;
  std::map<std::string, std::size_t> kind_index;
  std::vector<std::vector<double>> kind_errors;
  for (const OpComparison& o : c.ops) {
    const std::string kind = to_string(o.predicted->kind);
    auto [it, inserted] = kind_index.emplace(kind, c.by_kind.size());
    if (inserted) {
      c.by_kind.push_back({kind});
      kind_errors.emplace_back();
    }
    GroupError& g = c.by_kind[it->second];
    ++g.ops;
    g.predicted_us += o.predicted->time_us;
    g.measured_us += o.measured_us;
    kind_errors[it->second].push_back(std::fabs(o.error_percent));
    all_errors.push_back(std::fabs(o.error_percent));
  }
  for (std::size_t k = 0; k < c.by_kind.size(); ++k) c.by_kind[k].median_abs_error_percent = median(kind_errors[k]);
  c.median_abs_error_percent = median(all_errors);
  std::size_t steps = 0;
  for (const OpComparison& o : c.ops) steps = std::max(steps, o.measured_us_by_instance.size());
  for (std::size_t s = 0; s < steps; ++s) {
    GroupError g{std::to_string(s)};
    std::vector<double> errors;
    for (const OpComparison& o : c.ops) {
      if (s >= o.measured_us_by_instance.size()) continue;
      const double m = o.measured_us_by_instance[s];
      ++g.ops;
      g.predicted_us += o.predicted->time_us;
      g.measured_us += m;
      errors.push_back(std::fabs(error_percent(o.predicted->time_us, m)));
    }
    g.median_abs_error_percent = median(errors);
    c.by_step.push_back(std::move(g));
  }
  c.predicted_step_us = prediction.step_time_us;
  c.steps = step_windows(trace);
  std::vector<double> spans_us, idle_us;
  for (const StepWindow& w : c.steps) {
    spans_us.push_back(w.span_us);
    idle_us.push_back(w.idle_us());
  }
  c.measured_step_us = median(spans_us);
  c.gpu_idle_in_steps_us = median(idle_us);
  return c;
}

std::vector<std::string> shape_mismatches(const PredictionFile& p, const std::map<std::string, std::string>& meta) {
  std::vector<std::string> out;
  auto differ = [&out](const std::string& what, const auto& predicted, const auto& traced) {
    if (predicted != traced)
      out.push_back(fmt::format("{}: the prediction has {}, the trace {}", what, predicted, traced));
  };
  if (const auto m = meta.find("model"); m != meta.end()) {
    // "kimi-k3 (4 layers)"
    char name[256] = {};
    int layers = 0;
    if (std::sscanf(m->second.c_str(), "%255s (%d layers)", name, &layers) == 2) {
      if (!p.model.empty()) differ("model", p.model, std::string(name));
      if (p.layers > 0) differ("layers", p.layers, layers);
    }
  }
  if (const auto sh = meta.find("shape"); sh != meta.end()) {
    long long batch = 0, tokens = 0, chunk = 0;
    if (std::sscanf(sh->second.c_str(), "prefill of %lld x %lld tokens in chunks of %lld", &batch, &tokens, &chunk) ==
        3) {
      if (!p.phase.empty()) differ("phase", p.phase, std::string("prefill"));
      if (p.phase == "prefill") {
        if (p.batch > 0) differ("batch", p.batch, batch);
        if (p.new_tokens > 0) differ("prompt tokens", p.new_tokens, tokens);
      }
    } else if (std::sscanf(sh->second.c_str(), "batch %lld, context %lld", &batch, &tokens) == 2) {
      if (!p.phase.empty() && p.phase != "decode") differ("phase", p.phase, std::string("decode"));
      if (p.batch > 0) differ("batch", p.batch, batch);
      if (p.context_tokens > 0) differ("context", p.context_tokens, tokens);
    }
  }
  if (const auto g = meta.find("gpu"); g != meta.end() && !p.hardware.empty()) {
    const std::vector<std::string> have = gpu_words(p.hardware);
    for (const std::string& w : gpu_words(g->second)) {
      if (std::find(have.begin(), have.end(), w) == have.end()) {
        out.push_back(fmt::format("hardware: the prediction is for {}, the trace ran on {}", p.hardware, g->second));
        break;
      }
    }
  }
  return out;
}

namespace {
nlohmann::ordered_json groups_json(const std::vector<GroupError>& groups) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const GroupError& g : groups) {
    out.push_back({{"group", g.group},
                   {"ops", g.ops},
                   {"predicted_us", g.predicted_us},
                   {"measured_us", g.measured_us},
                   {"median_abs_error_percent", g.median_abs_error_percent}});
  }
  return out;
}
}  // namespace

nlohmann::ordered_json to_json(const Comparison& c) {
  nlohmann::ordered_json j = output_header("k3perf-compare", 1);
  j["prediction"] = c.prediction_origin;
  j["trace_metadata"] = c.trace_metadata;
  j["summary"] = {{"measured_ops", c.ops.size()},
                  {"predicted_ops_not_measured", c.not_measured.size()},
                  {"measured_ops_not_predicted", c.not_predicted.size()},
                  {"kernels", c.kernels},
                  {"kernels_on_predicted_ops", c.kernels_on_predicted_ops},
                  {"kernel_time_us", c.kernel_time_us},
                  {"kernel_time_on_predicted_ops_us", c.kernel_time_on_predicted_ops_us},
                  {"coverage_percent", c.coverage_percent()},
                  {"median_abs_error_percent", c.median_abs_error_percent}};
  const ComputeCommunication& s = c.split;
  j["compute_and_communication"] = {
      {"collectives", s.emulated ? "emulated" : "measured"},
      {"compute_ops", s.compute_ops},
      {"collective_ops", s.collectives},
      {"predicted_compute_us", s.predicted_compute_us},
      {"measured_compute_us", s.measured_compute_us},
      {"predicted_communication_us", s.predicted_communication_us},
      {"measured_communication_us",
       s.measured_communication_us ? nlohmann::ordered_json(*s.measured_communication_us) : nullptr},
      {"predicted_step_us", s.predicted_step_us()},
      {"step_us", s.step_us()},
      {"step_is", s.emulated ? "measured compute + predicted communication" : "measured compute + communication"}};
  nlohmann::ordered_json windows = nlohmann::ordered_json::array();
  for (const StepWindow& w : c.steps) {
    windows.push_back({{"span_us", w.span_us}, {"busy_us", w.busy_us}, {"idle_us", w.idle_us()}});
  }
  j["step"] = {{"predicted_step_us", c.predicted_step_us > 0 ? nlohmann::ordered_json(c.predicted_step_us) : nullptr},
               {"measured_step_us", c.measured_step_us},
               {"error_percent", c.predicted_step_us > 0
                                     ? nlohmann::ordered_json(error_percent(c.predicted_step_us, c.measured_step_us))
                                     : nullptr},
               {"gpu_idle_in_steps_us", c.gpu_idle_in_steps_us},
               {"steps", std::move(windows)}};
  j["by_kind"] = groups_json(c.by_kind);
  j["by_step"] = groups_json(c.by_step);
  nlohmann::ordered_json ops = nlohmann::ordered_json::array();
  for (const OpComparison& o : c.ops) {
    const PredictedOp& p = *o.predicted;
    ops.push_back({{"name", p.name},
                   {"kind", to_string(p.kind)},
                   {"bound", p.bound},
                   {"predicted_us", p.time_us},
                   {"measured_us", o.measured_us},
                   {"error_percent", o.error_percent},
                   {"measured_us_by_step", o.measured_us_by_instance},
                   {"kernels", o.kernels},
                   {"flops", p.flops},
                   {"bytes", p.bytes},
                   {"achieved_bytes_per_s", o.achieved_bytes_per_s},
                   {"achieved_flops_per_s", o.achieved_flops_per_s},
                   {"roofline_us", o.roofline_us},
                   {"roofline_percent", o.roofline_percent ? nlohmann::ordered_json(*o.roofline_percent) : nullptr}});
  }
  j["ops"] = std::move(ops);
  nlohmann::ordered_json emulated = nlohmann::ordered_json::array();
  for (const EmulatedCollective& e : c.emulated) {
    emulated.push_back({{"name", e.predicted->name},
                        {"predicted_us", e.predicted->time_us},
                        {"bytes", e.predicted->bytes},
                        {"emulation_us", e.emulation_us}});
  }
  j["emulated_collectives"] = std::move(emulated);
  j["not_measured"] = c.not_measured;
  j["fused"] = c.fused;
  nlohmann::ordered_json extra = nlohmann::ordered_json::array();
  for (const MeasuredOnlyOp& m : c.not_predicted) {
    extra.push_back(
        {{"name", m.name}, {"instances", m.instances}, {"measured_us", m.measured_us}, {"engine_only", m.engine_only}});
  }
  j["not_predicted"] = std::move(extra);
  nlohmann::ordered_json un = nlohmann::ordered_json::array();
  for (const UnattributedKernel& u : c.unattributed) {
    un.push_back({{"name", u.name}, {"count", u.count}, {"total_us", u.total_us}});
  }
  j["unattributed_kernels"] = std::move(un);
  return j;
}

std::string to_csv(const Comparison& c) {
  std::string out =
      "name,kind,bound,predicted_us,measured_us,error_percent,steps,kernels,flops,bytes,achieved_bytes_per_s,"
      "achieved_flops_per_s,roofline_us,roofline_percent\n";
  for (const OpComparison& o : c.ops) {
    const PredictedOp& p = *o.predicted;
    out += fmt::format("{},{},{},{:.6g},{:.6g},{:.4g},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{}\n", p.name,
                       to_string(p.kind), p.bound, p.time_us, o.measured_us, o.error_percent,
                       o.measured_us_by_instance.size(), o.kernels, p.flops, p.bytes, o.achieved_bytes_per_s,
                       o.achieved_flops_per_s, o.roofline_us,
                       o.roofline_percent ? fmt::format("{:.4g}", *o.roofline_percent) : std::string());
  }
  return out;
}

std::string to_text(const Comparison& c, int top_ops, ErrorOrder order_by) {
  std::string out;
  auto line = [&out](const std::string& s) { out += s + "\n"; };
  line(fmt::format("{} ops measured of {} predicted; {} predicted ops not measured, {} measured ops not predicted",
                   c.ops.size(), c.ops.size() + c.not_measured.size(), c.not_measured.size(), c.not_predicted.size()));
  line(fmt::format("coverage {:.1f}% of kernel time ({} of {} kernels on predicted ops); median |error| {:.1f}%",
                   c.coverage_percent(), c.kernels_on_predicted_ops, c.kernels, c.median_abs_error_percent));
  const auto meta = c.trace_metadata.find("dropped_records");
  if (meta != c.trace_metadata.end() && meta->second != "0")
    line(fmt::format("CUPTI dropped {} records", meta->second));
  const ComputeCommunication& s = c.split;
  if (s.collectives > 0) {
    line(fmt::format("compute {:.1f} us measured vs {:.1f} predicted ({} ops); communication {} ({} collectives{})",
                     s.measured_compute_us, s.predicted_compute_us, s.compute_ops,
                     s.measured_communication_us
                         ? fmt::format("{:.1f} us measured vs {:.1f} predicted", *s.measured_communication_us,
                                       s.predicted_communication_us)
                         : fmt::format("{:.1f} us predicted", s.predicted_communication_us),
                     s.collectives, s.emulated ? ", emulated: recorded, not executed" : ""));
    line(fmt::format("step {:.1f} us ({}) vs {:.1f} us predicted ({:+.1f}%)", s.step_us(),
                     s.emulated ? "measured compute + predicted communication" : "measured", s.predicted_step_us(),
                     error_percent(s.predicted_step_us(), s.step_us())));
  }
  if (!c.steps.empty()) {
    const std::string predicted = c.predicted_step_us > 0
                                      ? fmt::format(" vs {:.1f} us predicted ({:+.1f}%)", c.predicted_step_us,
                                                    error_percent(c.predicted_step_us, c.measured_step_us))
                                      : " (the prediction has no step time)";
    line(fmt::format("step on the GPU {:.1f} us (median of {}, first to last kernel){}", c.measured_step_us,
                     c.steps.size(), predicted));
    line(fmt::format("GPU idle inside steps {:.1f} us median ({:.1f}% of the step)", c.gpu_idle_in_steps_us,
                     c.measured_step_us > 0 ? 100 * c.gpu_idle_in_steps_us / c.measured_step_us : 0.0));
  }
  line("");
  line(fmt::format("{:<18} {:>5} {:>14} {:>14} {:>12}", "by op kind", "ops", "predicted us", "measured us",
                   "median |err|"));
  for (const GroupError& g : c.by_kind) {
    line(fmt::format("{:<18} {:>5} {:>14.3f} {:>14.3f} {:>11.1f}%", g.group, g.ops, g.predicted_us, g.measured_us,
                     g.median_abs_error_percent));
  }
  line("");
  line(fmt::format("{:<18} {:>5} {:>14} {:>14} {:>12}", "by step", "ops", "predicted us", "measured us",
                   "median |err|"));
  for (const GroupError& g : c.by_step) {
    line(fmt::format("{:<18} {:>5} {:>14.3f} {:>14.3f} {:>11.1f}%", g.group, g.ops, g.predicted_us, g.measured_us,
                     g.median_abs_error_percent));
  }
  std::vector<const OpComparison*> order;
  for (const OpComparison& o : c.ops) order.push_back(&o);
  auto abs_us = [](const OpComparison* o) { return std::fabs(o->predicted->time_us - o->measured_us); };
  std::stable_sort(order.begin(), order.end(), [&](const OpComparison* a, const OpComparison* b) {
    return order_by == ErrorOrder::percent ? std::fabs(a->error_percent) > std::fabs(b->error_percent)
                                           : abs_us(a) > abs_us(b);
  });
  if (top_ops > 0 && !order.empty()) {
    line("");
    line(fmt::format("{} largest errors ({})", std::min<std::size_t>(order.size(), static_cast<std::size_t>(top_ops)),
                     order_by == ErrorOrder::percent ? "by |error %|; --by us ranks by microseconds"
                                                     : "by |predicted - measured| us; --by percent ranks by %"));
    line(fmt::format("  {:<28} {:<14} {:<13} {:>12} {:>12} {:>10} {:>8} {:>10} {:>10} {:>9}", "name", "kind", "bound",
                     "predicted us", "measured us", "error us", "error", "GB/s", "TFLOP/s", "roofline"));
    for (std::size_t i = 0; i < order.size() && i < static_cast<std::size_t>(top_ops); ++i) {
      const OpComparison& o = *order[i];
      const PredictedOp& p = *o.predicted;
      line(fmt::format("  {:<28} {:<14} {:<13} {:>12.3f} {:>12.3f} {:>+10.3f} {:>7.1f}% {:>10.1f} {:>10.3f} {:>9}",
                       p.name, to_string(p.kind), p.bound, p.time_us, o.measured_us, p.time_us - o.measured_us,
                       o.error_percent, o.achieved_bytes_per_s / 1e9, o.achieved_flops_per_s / 1e12,
                       o.roofline_percent ? fmt::format("{:.1f}%", *o.roofline_percent) : std::string("-")));
    }
  }
  if (!c.unattributed.empty()) {
    line("");
    line(fmt::format("kernels not attributed to any op ({} names)", c.unattributed.size()));
    for (std::size_t i = 0; i < c.unattributed.size() && i < 10; ++i) {
      const UnattributedKernel& u = c.unattributed[i];
      line(fmt::format("  {:<60} {:>6}x {:>12.3f} us", u.name, u.count, u.total_us));
    }
  }
  if (!c.not_predicted.empty()) {
    line("");
    line("measured ops the prediction does not have");
    for (const MeasuredOnlyOp& m : c.not_predicted) {
      // A prediction that records the engine's own ranges flags any other name: a join that broke.
      const char* flag = c.records_engine && !m.engine_only ? "  (not an engine-only op of the prediction)" : "";
      line(fmt::format("  {:<28} {:>4} instances, median {:.3f} us{}", m.name, m.instances, m.measured_us, flag));
    }
  }
  return out;
}

}  // namespace k3::profiler
