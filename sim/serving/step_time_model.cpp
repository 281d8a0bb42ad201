#include "sim/serving/step_time_model.h"

#include "core/error.h"
#include "core/op_graph.h"
#include "sim/roofline.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>

namespace k3::serving {

void BatchShape::add_decode(double context_tokens) {
  decode_sequences += 1;
  decode_context_tokens += context_tokens;
}

void BatchShape::add_prefill(double n, double p) {
  prefill_sequences += 1;
  prefill_tokens += n;
  prefill_cached_tokens += p;
  prefill_attention_pairs += n * p + n * (n + 1) / 2;
  prefill_kda_chunks += std::ceil(n / 64.0);  // the chunk length of core/op_graph.cpp's kda.chunk
  prefill_serial_steps = std::max(prefill_serial_steps, std::ceil(n / 64.0));
}

namespace {

constexpr int kD = StepTimeModel::kDecodeFeatures;
constexpr int kP = StepTimeModel::kPrefillFeatures;

// Solves A x = b (n x n, row-major) by Gaussian elimination with partial pivoting.
std::vector<double> solve(std::vector<double> a, std::vector<double> b) {
  const int n = static_cast<int>(b.size());
  for (int c = 0; c < n; ++c) {
    int pivot = c;
    for (int r = c + 1; r < n; ++r) {
      if (std::abs(a[r * n + c]) > std::abs(a[pivot * n + c])) pivot = r;
    }
    K3_CHECK(std::abs(a[pivot * n + c]) > 0, "probe shapes do not determine feature {}", c);
    for (int k = 0; k < n; ++k) std::swap(a[c * n + k], a[pivot * n + k]);
    std::swap(b[c], b[pivot]);
    for (int r = c + 1; r < n; ++r) {
      const double f = a[r * n + c] / a[c * n + c];
      for (int k = c; k < n; ++k) a[r * n + k] -= f * a[c * n + k];
      b[r] -= f * b[c];
    }
  }
  std::vector<double> x(n);
  for (int r = n - 1; r >= 0; --r) {
    double s = b[r];
    for (int k = r + 1; k < n; ++k) s -= a[r * n + k] * x[k];
    x[r] = s / a[r * n + r];
  }
  return x;
}

// Where an op sits, whatever the phase calls it: attention cores of both phases share one key so
// that the MLA output gate, which runs beside either, finds its partner.
std::string row_key(const Op& op) {
  const std::string name =
      op.kind == OpKind::mla_attention ? fmt::format("L{:03d}.mla.attention", op.layer + 1) : op.name();
  return fmt::format("{}#{}", name, op.stage);
}

struct Probe {
  OpGraph graph;
  std::vector<double> features;
};

double weights_of(const Op& op) { return op.read.weights + op.written.weights; }
double other_bytes_of(const Op& op) { return op.bytes() - weights_of(op); }

double dot(const std::vector<double>& c, const double* f) {
  double s = 0;
  for (std::size_t i = 0; i < c.size(); ++i) s += c[i] * f[i];
  return s;
}

}  // namespace

StepTimeModel::StepTimeModel(const Scenario& s) : hardware_(s.hardware), runtime_(s.runtime) {
  const Parallelism& par = s.parallelism;
  attention_dp_ = par.attention_dp;
  ep_ = par.ep;
  if (s.model.moe) {
    experts_ = s.model.moe->num_experts;
    top_k_ = s.model.moe->top_k;
  }
  const long long dp = par.attention_dp;
  // Probe shapes per attention group (the graph gets dp times as many sequences). Decode features:
  // 1, k, k·c. Prefill features: 1, b, b·n, b·p, b·(n·p + n(n+1)/2), b·ceil(n/64); one chunk each.
  std::vector<Probe> decode_probes, prefill_probes;
  for (auto [k, c] : {std::pair<long long, long long>{1, 0}, {2, 0}, {1, 1024}}) {
    decode_probes.push_back(
        {build_op_graph(s.model, Phase::decode(k * dp, c), par, s.precision), {1.0, double(k), double(k * c)}});
  }
  const long long shapes[kP][3] = {{1, 64, 0}, {2, 64, 0}, {1, 128, 0}, {1, 64, 64}, {1, 32, 0}, {1, 96, 0}};
  for (const auto& sh : shapes) {
    const double b = sh[0], n = sh[1], p = sh[2];
    prefill_probes.push_back(
        {build_op_graph(s.model, Phase::prefill(sh[0] * dp, sh[1], sh[2], sh[1]), par, s.precision),
         {1.0, b, b * n, b * p, b * (n * p + n * (n + 1) / 2), b * std::ceil(n / 64.0)}});
  }

  std::vector<Row> rows;
  std::map<std::string, std::size_t> index;
  std::map<std::string, std::string> partner_of;  // row key -> key of the row it runs beside
  auto fit = [](const std::vector<Probe>& probes, std::size_t op, auto quantity) {
    const std::size_t n = probes.size();
    std::vector<double> a(n * n), b(n);
    for (std::size_t r = 0; r < n; ++r) {
      for (std::size_t c = 0; c < n; ++c) a[r * n + c] = probes[r].features[c];
      b[r] = quantity(probes[r].graph.ops[op]);
    }
    return solve(a, b);
  };
  auto add_part = [&](const std::vector<Probe>& probes, bool is_decode) {
    const OpGraph& g0 = probes[0].graph;
    for (const Probe& p : probes) {
      K3_CHECK(p.graph.ops.size() == g0.ops.size(), "probe graphs differ in shape ({} vs {} ops)", p.graph.ops.size(),
               g0.ops.size());
    }
    for (std::size_t i = 0; i < g0.ops.size(); ++i) {
      const Op& op = g0.ops[i];
      const std::string key = row_key(op);
      auto [it, inserted] = index.emplace(key, rows.size());
      if (inserted) {
        Row r;
        r.collective = op.collective.has_value();
        r.routed_experts = op.kind == OpKind::moe_experts;
        if (r.collective) {
          Op probe = op;
          probe.collective->calls = 1;
          probe.collective->bytes = 0;
          r.latency_us = time_op(probe, s.hardware, s.runtime).communication_us;
          probe.collective->bytes = 1e9;
          r.us_per_collective_byte = (time_op(probe, s.hardware, s.runtime).communication_us - r.latency_us) / 1e9;
          // A measured busbw curve is not affine in the size: such collectives are timed exactly per step.
          for (double size : {1e3, 1e5, 1e7, 3e8}) {
            probe.collective->bytes = size;
            const double t = time_op(probe, s.hardware, s.runtime).communication_us;
            const double affine = r.latency_us + size * r.us_per_collective_byte;
            if (std::abs(t - affine) > 1e-9 * std::max(1.0, t)) r.affine_collective = false;
          }
          r.collective_op = op;
        } else {
          Op probe = op;
          probe.read = probe.written = ByteCounts{};
          probe.flops = 1e12;
          probe.kernels = 1;
          const OpTime t = time_op(probe, s.hardware, s.runtime);
          r.us_per_flop = t.compute_us / 1e12;
          r.us_per_kernel = t.overhead_us;
          probe.flops = 0;
          probe.read.activations = 1e12;
          r.us_per_byte = time_op(probe, s.hardware, s.runtime).memory_us / 1e12;
          probe.read = ByteCounts{};
          probe.serial_steps = 1;
          r.us_per_serial_step = time_op(probe, s.hardware, s.runtime).serial_us;
        }
        rows.push_back(r);
      } else if (rows[it->second].decode.present && !is_decode && op.kind == OpKind::mla_attention) {
        rows[it->second].separate_kernels = true;  // decode and prefill attention: two kernels
      }
      Row& r = rows[it->second];
      Part& part = is_decode ? r.decode : r.prefill;
      part.present = true;
      part.kernels = op.kernels;
      // A chain's length is the longest chunk's, not a sum over the batch: not affine in the features. The probe
      // graphs hold one chunk per sequence, so the chain is ceil(n / 64) of the prefill feature set.
      part.chained = op.serial_steps > 0;
      K3_CHECK(!(part.chained && is_decode), "decode op {} has a serial chain the serving model has no feature for",
               op.name());
      part.calls = op.collective ? op.collective->calls : 0;
      part.flops = fit(probes, i, [](const Op& o) { return o.flops; });
      part.bytes = fit(probes, i, other_bytes_of);
      if (r.routed_experts) {
        // Weights follow the distinct experts touched, which is not affine in the tokens.
        part.weights.assign(probes.size(), 0.0);
        const double distinct = g0.distinct_experts_per_gpu;
        K3_CHECK(distinct > 0, "routed experts op {} touches no expert", op.name());
        r.weight_bytes_per_expert = weights_of(op) / distinct;
      } else {
        part.weights = fit(probes, i, weights_of);
      }
      part.collective_bytes = fit(probes, i, [](const Op& o) { return o.collective ? o.collective->bytes : 0.0; });
      if (op.concurrent_with >= 0) partner_of[key] = row_key(g0.ops[op.concurrent_with]);
    }
  };
  add_part(decode_probes, true);
  add_part(prefill_probes, false);

  // Group rows into units (a main row and the rows beside it), then merge identical units.
  std::vector<std::vector<std::size_t>> beside(rows.size());
  std::vector<bool> is_side(rows.size(), false);
  for (const auto& [side, main] : partner_of) {
    const std::size_t si = index.at(side), mi = index.at(main);
    beside[mi].push_back(si);
    is_side[si] = true;
  }
  auto append = [](std::vector<double>& key, const Row& r) {
    key.insert(key.end(), {double(r.collective), double(r.routed_experts), double(r.separate_kernels), r.us_per_flop,
                           r.us_per_byte, r.us_per_kernel, r.latency_us, r.us_per_collective_byte,
                           double(r.affine_collective), r.weight_bytes_per_expert, r.us_per_serial_step});
    if (r.collective) {
      const Collective& c = *r.collective_op.collective;
      key.insert(key.end(), {double(c.kind), double(c.group_size)});
    }
    for (const Part* p : {&r.decode, &r.prefill}) {
      key.insert(key.end(), {double(p->present), double(p->chained), p->kernels, p->calls});
      for (const auto* v : {&p->flops, &p->bytes, &p->weights, &p->collective_bytes}) {
        key.insert(key.end(), v->begin(), v->end());
      }
    }
  };
  std::map<std::vector<double>, std::size_t> merged;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (is_side[i]) continue;
    std::vector<double> key;
    append(key, rows[i]);
    for (std::size_t j : beside[i]) append(key, rows[j]);
    auto [it, inserted] = merged.emplace(std::move(key), units_.size());
    if (!inserted) {
      units_[it->second].count += 1;
      continue;
    }
    Unit u;
    u.main = rows[i];
    for (std::size_t j : beside[i]) u.beside.push_back(rows[j]);
    units_.push_back(std::move(u));
  }
  // A unit is context-free when no row of it has a decode coefficient on Σ context (feature 2):
  // then 0 · context adds exactly nothing to any of its sums.
  for (Unit& u : units_) {
    auto free_of_context = [](const Row& r) {
      for (const auto* v : {&r.decode.flops, &r.decode.bytes, &r.decode.weights, &r.decode.collective_bytes}) {
        if (v->size() == kD && (*v)[2] != 0.0) return false;
      }
      return true;
    };
    u.context_free = free_of_context(u.main);
    for (const Row& r : u.beside) u.context_free = u.context_free && free_of_context(r);
  }
}

std::size_t StepTimeModel::context_free_unit_count() const {
  return static_cast<std::size_t>(
      std::count_if(units_.begin(), units_.end(), [](const Unit& u) { return u.context_free; }));
}

StepTimeModel::OpCost StepTimeModel::cost(const Row& r, const Features& f) const {
  const double* fd = r.routed_experts ? f.decode_routed : f.decode;
  const double* fp = r.routed_experts ? f.prefill_routed : f.prefill;
  const bool d = f.has_decode && r.decode.present, p = f.has_prefill && r.prefill.present;
  // Constant terms (weights, fixed reads) are paid once; per-sequence and per-token terms add.
  auto combine = [&](const std::vector<double>& cd, const std::vector<double>& cp) {
    double fixed = 0, variable = 0;
    if (d) {
      fixed = std::max(fixed, cd[0]);
      variable += dot(cd, fd) - cd[0];
    }
    if (p) {
      fixed = std::max(fixed, cp[0]);
      variable += dot(cp, fp) - cp[0];
    }
    return fixed + variable;
  };
  OpCost c;
  if (r.collective) {
    const double calls = std::max(d ? r.decode.calls : 0.0, p ? r.prefill.calls : 0.0);
    const double bytes = combine(r.decode.collective_bytes, r.prefill.collective_bytes);
    if (r.affine_collective) {
      c.time_us = calls * r.latency_us + bytes * r.us_per_collective_byte;
    } else {
      Op op = r.collective_op;
      op.collective->bytes = bytes;
      op.collective->calls = static_cast<int>(calls);
      c.time_us = time_op(op, hardware_, runtime_).communication_us;
    }
    return c;
  }
  const double flops = combine(r.decode.flops, r.prefill.flops);
  double bytes = combine(r.decode.bytes, r.prefill.bytes) + combine(r.decode.weights, r.prefill.weights);
  if (r.routed_experts) {
    bytes += expected_distinct_experts(experts_, top_k_, f.routed_tokens) / ep_ * r.weight_bytes_per_expert;
  }
  const double kd = d ? r.decode.kernels : 0.0, kp = p ? r.prefill.kernels : 0.0;
  c.compute_us = flops * r.us_per_flop;
  c.memory_us = bytes * r.us_per_byte;
  c.overhead_us = (r.separate_kernels ? kd + kp : std::max(kd, kp)) * r.us_per_kernel;
  c.serial_us = p && r.prefill.chained ? f.serial_steps * r.us_per_serial_step : 0.0;
  c.time_us = ridge_max(c.compute_us, c.memory_us, hardware_.ridge_smooth_max_exponent) + c.serial_us + c.overhead_us;
  return c;
}

double StepTimeModel::step_us(const BatchShape& b) const {
  if (b.empty()) return 0.0;
  const double dp = attention_dp_;
  Features f{};
  f.has_decode = b.decode_sequences > 0;
  f.has_prefill = b.prefill_sequences > 0;
  if (f.has_decode) {
    // The busiest attention group holds ceil(D / dp) of the decoding sequences, at their mean context.
    const double k = std::ceil(b.decode_sequences / dp);
    const double share = k / double(b.decode_sequences);
    const double d[kD] = {1.0, k, b.decode_context_tokens * share};
    const double r[kD] = {1.0, b.decode_sequences / dp, b.decode_context_tokens / dp};
    std::copy(d, d + kD, f.decode);
    std::copy(r, r + kD, f.decode_routed);
  }
  if (f.has_prefill) {
    const double k = std::ceil(b.prefill_sequences / dp);
    const double share = k / double(b.prefill_sequences);
    const double totals[kP] = {1.0,
                               double(b.prefill_sequences),
                               b.prefill_tokens,
                               b.prefill_cached_tokens,
                               b.prefill_attention_pairs,
                               b.prefill_kda_chunks};
    for (int i = 0; i < kP; ++i) {
      f.prefill[i] = i == 0 ? 1.0 : totals[i] * share;
      f.prefill_routed[i] = i == 0 ? 1.0 : totals[i] / dp;
    }
  }
  f.routed_tokens = b.tokens();
  f.serial_steps = b.prefill_serial_steps;
  double total = 0;
  if (!f.has_prefill) {
    // Decode only: context-free units from the memo, in the same order, so the sum is the same.
    const std::size_t n = units_.size();
    const std::size_t row = static_cast<std::size_t>(b.decode_sequences) * n;
    if (memo_on_ && decode_memo_.size() < row + n) {
      decode_memo_.resize(row + n, std::numeric_limits<double>::quiet_NaN());
    }
    for (std::size_t i = 0; i < n; ++i) {
      const Unit& u = units_[i];
      double t;
      if (!u.context_free || !memo_on_) {
        t = unit_us(u, f);
      } else {
        double& memo = decode_memo_[row + i];
        if (std::isnan(memo)) memo = unit_us(u, f);
        t = memo;
      }
      total += u.count * t;
    }
    return total;
  }
  for (const Unit& u : units_) total += u.count * unit_us(u, f);
  return total;
}

double StepTimeModel::unit_us(const Unit& u, const Features& f) const {
  const OpCost main = cost(u.main, f);
  double t = main.time_us;
  for (const Row& side_row : u.beside) {
    // As sim/roofline's time_step: the pair takes ridge_max(Σ compute, Σ memory) + the larger overhead.
    const OpCost side = cost(side_row, f);
    const double pair = ridge_max(side.compute_us + main.compute_us, side.memory_us + main.memory_us,
                                  hardware_.ridge_smooth_max_exponent) +
                        std::max(side.overhead_us, main.overhead_us);
    t += std::max(0.0, pair - main.time_us);
  }
  return t;
}

}  // namespace k3::serving
