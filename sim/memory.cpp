#include "sim/memory.h"

#include "core/parameters.h"

#include <algorithm>
#include <cmath>

namespace k3 {

namespace {
double cache_bytes_per_layer(const ModelConfig& m, const Precision& p) {
  return m.mla.cache_values_per_token() * p.kv_bytes_per_value() + p.kv_scale_bytes_per_token();
}

// Layers [lo, hi) of the busiest stage.
int stage_layers(const ModelConfig& m, const Parallelism& par, AttentionKind kind) {
  const int per_stage = (m.num_layers + par.pp - 1) / par.pp;
  int best = 0;
  for (int stage = 0; stage < par.pp; ++stage) {
    int n = 0;
    for (int l = stage * per_stage; l < std::min(m.num_layers, (stage + 1) * per_stage); ++l) {
      n += m.layer_attention[l] == kind;
    }
    best = std::max(best, n);
  }
  return best;
}
}  // namespace

double kv_bytes_per_token(const ModelConfig& m, const Precision& p) {
  return m.count_layers(AttentionKind::mla) * cache_bytes_per_layer(m, p);
}

double kda_recurrent_state_bytes(const ModelConfig& m, const Precision& p) {
  if (!m.kda) return 0;
  const double d = m.kda->head_dim;
  return m.count_layers(AttentionKind::kda) * m.kda->num_heads * d * d * bytes_per_element(p.kda_state);
}

double kda_conv_state_bytes(const ModelConfig& m, const Precision& p) {
  if (!m.kda) return 0;
  return m.count_layers(AttentionKind::kda) * 3.0 * m.kda->projection_dim() * (m.kda->conv_kernel - 1) *
         bytes_per_element(p.kda_conv_state);
}

double weight_bytes(const ModelConfig& m, const Precision& p) {
  const ParameterCounts c = count_parameters(m);
  const double wb = bytes_per_element(p.weights), bf16 = 2.0;
  double linear = 0, other = 0;
  auto add = [&](const BlockParams& b, double count) {
    linear += b.linear * count;
    other += b.other * count;
  };
  add(kda_layer_params(m), m.count_layers(AttentionKind::kda));
  add(mla_layer_params(m), m.count_layers(AttentionKind::mla));
  add(dense_mlp_params(m), m.count_layers(MlpKind::dense));
  const double moe_layers = m.count_layers(MlpKind::moe);
  add(moe_shared_params(m), moe_layers);
  add(moe_latent_params(m), moe_layers);
  add(moe_router_params(m), moe_layers);
  // Norms, biases, conv weights and A_log are counted at bf16 (fp32 ones are a rounding error here).
  return linear * wb + other * bf16 + c.moe_routed * bytes_per_element(p.routed_experts) +
         (c.embedding + c.lm_head + c.norms) * bf16;
}

MemoryBreakdown estimate_memory(const Scenario& s, const OpGraph& graph) {
  const ModelConfig& m = s.model;
  const Parallelism& par = s.parallelism;
  MemoryBreakdown mem;
  std::vector<double> stage_weights(par.pp, 0.0);
  double act_peak = 0;
  for (const Op& op : graph.ops) {
    stage_weights[op.stage] += op.resident_weight_bytes;
    act_peak = std::max(act_peak, op.read.activations + op.written.activations);
  }
  mem.weights_bytes = *std::max_element(stage_weights.begin(), stage_weights.end());
  // A prefill's ops sum its chunks; one chunk is live at a time.
  const Phase& ph = graph.phase;
  const double chunks =
      ph.kind == PhaseKind::prefill ? std::ceil(double(ph.new_tokens) / std::max(1LL, ph.prefill_chunk_tokens)) : 1.0;
  mem.activation_bytes = 2.0 * act_peak / chunks;  // input and output of the largest op, double-buffered
  mem.sequences = graph.sequences_per_gpu;
  // The MLA latent is shared by all heads, so every TP rank of a group holds the group's whole cache.
  mem.kv_bytes_per_token = stage_layers(m, par, AttentionKind::mla) * cache_bytes_per_layer(m, s.precision);
  mem.kv_bytes = mem.kv_bytes_per_token * double(ph.context_tokens + ph.new_tokens) * mem.sequences;
  if (m.kda) {
    const double heads = double(m.kda->num_heads) / par.tp, d = m.kda->head_dim;
    const double per_layer = heads * d * d * bytes_per_element(s.precision.kda_state) +
                             3.0 * heads * d * (m.kda->conv_kernel - 1) * bytes_per_element(s.precision.kda_conv_state);
    mem.state_bytes_per_sequence = stage_layers(m, par, AttentionKind::kda) * per_layer;
    mem.kda_state_bytes = mem.state_bytes_per_sequence * mem.sequences;
  }
  mem.reserved_bytes = s.runtime.reserved_bytes;
  mem.total_bytes = mem.weights_bytes + mem.kv_bytes + mem.kda_state_bytes + mem.activation_bytes + mem.reserved_bytes;
  mem.usable_bytes = s.hardware.hbm_capacity_bytes * s.runtime.memory_utilization;
  return mem;
}

long long max_batch(const Scenario& s, long long context_tokens) {
  auto fits = [&](long long batch) {
    Phase ph = s.phase;
    ph.batch = batch;
    ph.context_tokens = context_tokens;
    return estimate_memory(s, build_op_graph(s.model, ph, s.parallelism, s.precision)).fits();
  };
  const long long dp = s.parallelism.attention_dp;
  if (!fits(dp)) return 0;
  long long lo = dp;
  while (lo < (1LL << 30) && fits(lo * 2)) lo *= 2;
  long long hi = lo * 2;  // fits(lo) holds, fits(hi) does not
  while (hi - lo > 1) {
    const long long mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace k3
