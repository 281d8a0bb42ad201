#include "sim/whatif.h"

#include "core/error.h"
#include "core/output_header.h"
#include "sim/text_report.h"

#include <fmt/format.h>

#include <cctype>
#include <map>

namespace k3 {

namespace {

constexpr double kGiB = double(1ull << 30);

// Exposed time per op kind, in OpKind order; kinds neither prediction has are left out.
std::map<OpKind, double> time_by_kind(const Prediction& p) {
  std::map<OpKind, double> out;
  for (std::size_t i = 0; i < p.graph.ops.size(); ++i) out[p.graph.ops[i].kind] += p.step.ops[i].exposed_us;
  return out;
}

struct Quantity {
  std::string name, unit;
  double baseline, scenario;
};

// The rows both the table and the JSON print: step, throughput, time per op kind, memory per GPU.
std::vector<Quantity> quantities(const Prediction& a, const Prediction& b) {
  std::vector<Quantity> q = {
      {"step time", "ms", a.step_ms(), b.step_ms()},
      {"throughput", "tok/s", a.tokens_per_s(), b.tokens_per_s()},
      {"throughput per GPU", "tok/s", a.tokens_per_s_per_gpu(), b.tokens_per_s_per_gpu()},
  };
  const std::map<OpKind, double> ka = time_by_kind(a), kb = time_by_kind(b);
  std::map<OpKind, std::pair<double, double>> kinds;
  for (const auto& [k, us] : ka) kinds[k].first = us;
  for (const auto& [k, us] : kb) kinds[k].second = us;
  for (const auto& [k, ab] : kinds) q.push_back({"  " + to_string(k), "ms", ab.first / 1000, ab.second / 1000});
  const MemoryBreakdown &ma = a.memory, &mb = b.memory;
  q.push_back({"memory per GPU", "GiB", ma.total_bytes / kGiB, mb.total_bytes / kGiB});
  q.push_back({"  weights", "GiB", ma.weights_bytes / kGiB, mb.weights_bytes / kGiB});
  q.push_back({"  KV", "GiB", ma.kv_bytes / kGiB, mb.kv_bytes / kGiB});
  q.push_back({"  KDA state", "GiB", ma.kda_state_bytes / kGiB, mb.kda_state_bytes / kGiB});
  q.push_back({"  activations", "GiB", ma.activation_bytes / kGiB, mb.activation_bytes / kGiB});
  q.push_back({"  usable", "GiB", ma.usable_bytes / kGiB, mb.usable_bytes / kGiB});
  return q;
}

std::string percent(double baseline, double scenario) {
  if (baseline == 0) return scenario == 0 ? "" : "new";
  return fmt::format("{:+.1f}%", 100 * (scenario - baseline) / baseline);
}

std::string key_name(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (c == ' ') {
      if (!out.empty()) out += '_';
    } else {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  return out;
}

}  // namespace

std::string format_prediction_diff(const Prediction& a, const Prediction& b, const std::string& a_label,
                                   const std::string& b_label) {
  std::string out = fmt::format("baseline   {}\nscenario   {}\n", a_label, b_label);
  if (!a.memory.fits() || !b.memory.fits()) {
    out += fmt::format("  DOES NOT FIT     {}\n", !a.memory.fits() && !b.memory.fits() ? "either"
                                                  : a.memory.fits()                    ? "the scenario"
                                                                                       : "the baseline");
  }
  out += fmt::format("\n  {:<24} {:>6} {:>14} {:>14} {:>14} {:>9}\n", "", "unit", "baseline", "scenario", "delta",
                     "delta %");
  for (const Quantity& q : quantities(a, b)) {
    out += fmt::format("  {:<24} {:>6} {:>14.3f} {:>14.3f} {:>+14.3f} {:>9}\n", q.name, q.unit, q.baseline, q.scenario,
                       q.scenario - q.baseline, percent(q.baseline, q.scenario));
  }
  return out;
}

nlohmann::ordered_json prediction_diff_json(const Prediction& a, const Prediction& b, const std::string& a_label,
                                            const std::string& b_label) {
  nlohmann::ordered_json j = output_header("k3perf-prediction-diff", 1);
  j["baseline_label"] = a_label;
  j["scenario_label"] = b_label;
  j["rows"] = nlohmann::ordered_json::array();
  for (const Quantity& q : quantities(a, b)) {
    j["rows"].push_back({{"quantity", key_name(q.name)},
                         {"unit", q.unit},
                         {"baseline", q.baseline},
                         {"scenario", q.scenario},
                         {"delta", q.scenario - q.baseline}});
  }
  j["baseline"] = to_json(a);
  j["scenario"] = to_json(b);
  return j;
}

std::string prediction_diff_csv(const Prediction& a, const Prediction& b) {
  std::string out = "quantity,unit,baseline,scenario,delta\n";
  for (const Quantity& q : quantities(a, b)) {
    out += fmt::format("{},{},{:.6f},{:.6f},{:.6f}\n", key_name(q.name), q.unit, q.baseline, q.scenario,
                       q.scenario - q.baseline);
  }
  return out;
}

SweepAxis parse_sweep_axis(const std::string& text, const std::string& flag) {
  const std::size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw InputError(fmt::format("{} '{}': expected key.path=value1,value2,...", flag, text));
  }
  SweepAxis axis{text.substr(0, eq), {}};
  std::string value;
  int depth = 0;
  for (std::size_t i = eq + 1; i <= text.size(); ++i) {
    const char c = i < text.size() ? text[i] : ',';
    if (c == '[' || c == '{') depth += 1;
    if (c == ']' || c == '}') depth -= 1;
    if (c == ',' && depth <= 0) {
      if (value.empty()) throw InputError(fmt::format("{} '{}': an empty value", flag, text));
      axis.values.push_back(value);
      value.clear();
    } else {
      value += c;
    }
  }
  return axis;
}

std::vector<std::vector<std::string>> sweep_points(const std::vector<SweepAxis>& axes) {
  std::vector<std::vector<std::string>> points = {{}};
  for (const SweepAxis& axis : axes) {
    std::vector<std::vector<std::string>> next;
    for (const std::vector<std::string>& p : points) {
      for (const std::string& v : axis.values) {
        next.push_back(p);
        next.back().push_back(axis.key + "=" + v);
      }
    }
    points = std::move(next);
  }
  return points;
}

std::vector<SweepRow> run_sweep(const std::vector<SweepAxis>& axes,
                                const std::function<Scenario(const std::vector<std::string>&)>& load) {
  std::vector<SweepRow> rows;
  for (const std::vector<std::string>& point : sweep_points(axes)) {
    Scenario s;
    try {
      s = load(point);
    } catch (const InputError& e) {
      std::string at;
      for (const std::string& set : point) at += (at.empty() ? "" : " ") + set;
      throw InputError(fmt::format("sweep point {}: {}", at, e.what()));
    }
    const Prediction p = predict(s);
    SweepRow r;
    for (const std::string& set : point) r.values.push_back(set.substr(set.find('=') + 1));
    r.step_ms = p.step_ms();
    r.tokens_per_s = p.tokens_per_s();
    r.tokens_per_s_per_gpu = p.tokens_per_s_per_gpu();
    r.memory_per_gpu_bytes = p.memory.total_bytes;
    r.usable_per_gpu_bytes = p.memory.usable_bytes;
    r.fits = p.memory.fits();
    rows.push_back(r);
  }
  return rows;
}

std::string format_sweep(const std::vector<SweepAxis>& axes, const std::vector<SweepRow>& rows) {
  std::string out = fmt::format("sweep over {} points\n ", rows.size());
  std::vector<std::size_t> widths;
  for (const SweepAxis& a : axes) {
    std::size_t w = a.key.size();
    for (const std::string& v : a.values) w = std::max(w, v.size());
    widths.push_back(w);
    out += fmt::format(" {:>{}}", a.key, w);
  }
  out += fmt::format(" {:>10} {:>11} {:>11} {:>14}  {}\n", "step ms", "tok/s", "tok/s/GPU", "GiB per GPU", "fits");
  for (const SweepRow& r : rows) {
    out += " ";
    for (std::size_t i = 0; i < r.values.size(); ++i) out += fmt::format(" {:>{}}", r.values[i], widths[i]);
    out += fmt::format(" {:>10.3f} {:>11.1f} {:>11.2f} {:>14.2f}  {}\n", r.step_ms, r.tokens_per_s,
                       r.tokens_per_s_per_gpu, r.memory_per_gpu_bytes / kGiB,
                       r.fits ? "fits" : fmt::format("DOES NOT FIT ({:.2f} usable)", r.usable_per_gpu_bytes / kGiB));
  }
  return out;
}

std::string sweep_csv(const std::vector<SweepAxis>& axes, const std::vector<SweepRow>& rows) {
  std::string out;
  for (const SweepAxis& a : axes) out += a.key + ",";
  out += "step_time_ms,tokens_per_s,tokens_per_s_per_gpu,memory_per_gpu_gib,usable_per_gpu_gib,fits\n";
  for (const SweepRow& r : rows) {
    for (const std::string& v : r.values) out += (v.find(',') != std::string::npos ? "\"" + v + "\"" : v) + ",";
    out += fmt::format("{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{}\n", r.step_ms, r.tokens_per_s, r.tokens_per_s_per_gpu,
                       r.memory_per_gpu_bytes / kGiB, r.usable_per_gpu_bytes / kGiB, r.fits ? 1 : 0);
  }
  return out;
}

nlohmann::ordered_json sweep_json(const std::vector<SweepAxis>& axes, const std::vector<SweepRow>& rows) {
  nlohmann::ordered_json j = output_header("k3perf-sweep", 1);
  j["axes"] = nlohmann::ordered_json::array();
  for (const SweepAxis& a : axes) j["axes"].push_back({{"key", a.key}, {"values", a.values}});
  j["points"] = nlohmann::ordered_json::array();
  for (const SweepRow& r : rows) {
    nlohmann::ordered_json point;
    nlohmann::ordered_json at;
    for (std::size_t i = 0; i < axes.size(); ++i) at[axes[i].key] = r.values[i];
    point["at"] = at;
    point["step_time_ms"] = r.step_ms;
    point["tokens_per_s"] = r.tokens_per_s;
    point["tokens_per_s_per_gpu"] = r.tokens_per_s_per_gpu;
    point["memory_per_gpu_bytes"] = r.memory_per_gpu_bytes;
    point["usable_per_gpu_bytes"] = r.usable_per_gpu_bytes;
    point["fits"] = r.fits;
    j["points"].push_back(point);
  }
  return j;
}

}  // namespace k3
