#include "core/op_graph.h"

#include "core/error.h"
#include "core/parameters.h"

#include <algorithm>
#include <cmath>

namespace k3 {

EfficiencyClass efficiency_class(OpKind k) {
  switch (k) {
    case OpKind::gemm:
    case OpKind::router: return EfficiencyClass::gemm;
    case OpKind::moe_experts: return EfficiencyClass::grouped_gemm;
    case OpKind::mla_attention: return EfficiencyClass::attention;
    case OpKind::kda_recurrent: return EfficiencyClass::recurrent;
    case OpKind::kda_chunk: return EfficiencyClass::chunked_scan;
    case OpKind::embedding: return EfficiencyClass::gather;
    default: return EfficiencyClass::elementwise;
  }
}

std::string to_string(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::all_reduce: return "all_reduce";
    case CollectiveKind::all_gather: return "all_gather";
    case CollectiveKind::all_to_all: return "all_to_all";
    case CollectiveKind::send_recv: return "send_recv";
    case CollectiveKind::reduce_scatter: return "reduce_scatter";
  }
  return "?";
}

ByteCounts& ByteCounts::operator+=(const ByteCounts& o) {
  weights += o.weights;
  kv += o.kv;
  state += o.state;
  activations += o.activations;
  return *this;
}

std::string Op::name() const { return op_name(id, layer); }

const Op* OpGraph::find(const std::string& name) const {
  for (const Op& op : ops) {
    if (op.name() == name) return &op;
  }
  return nullptr;
}

double expected_distinct_experts(double experts, double top_k, double tokens) {
  if (experts <= 0 || tokens <= 0) return 0.0;
  return experts * (1.0 - std::pow(1.0 - top_k / experts, tokens));
}

namespace {

// Placeholder for "runs beside this layer's attention core", resolved to an op index per layer.
constexpr int kBesideAttention = -2;

// Everything one chunk of one step needs to size its ops (per GPU).
struct Step {
  const ModelConfig& m;
  const Precision& p;
  const Parallelism& par;
  PhaseKind kind;
  double seqs;          // sequences in this GPU's attention group
  double n;             // new tokens per sequence in this chunk
  double ctx;           // cached tokens per sequence before this chunk
  double stage_tokens;  // tokens routed to experts across the pipeline stage in this chunk
  double tokens() const { return seqs * n; }
  bool sp() const { return par.sequence_parallel && par.tp > 1; }
  // Tokens of the residual stream this GPU holds: a 1/tp share under sequence parallelism.
  double residual_tokens() const { return sp() ? tokens() / par.tp : tokens(); }
  double act() const { return bytes_per_element(p.activations); }
  double wb() const { return bytes_per_element(p.weights); }
  double tp() const { return par.tp; }
};

class GraphBuilder {
 public:
  explicit GraphBuilder(std::vector<Op>* out) : out_(out) {}

  Op& add(int layer, OpId id) {
    Op op;
    op.layer = layer;
    op.id = id;
    op.kind = op_info(id).kind;
    const OpKind kind = op.kind;
    op.compute = kind == OpKind::gemm || kind == OpKind::router || kind == OpKind::moe_experts ||
                         kind == OpKind::mla_attention || kind == OpKind::kda_chunk
                     ? ComputeType::bf16
                     : ComputeType::fp32;
    out_->push_back(op);
    return out_->back();
  }

  // y[tokens, out] = x[tokens, in] · W[out, in]ᵀ, W stored at `bytes_per_param` per weight.
  Op& gemm(const Step& s, int layer, OpId id, double tokens, double in, double out, double bytes_per_param) {
    Op& op = add(layer, id);
    op.compute = s.p.gemm_compute;
    op.flops = 2.0 * tokens * in * out;
    op.read.weights = in * out * bytes_per_param;
    op.read.activations = tokens * in * s.act();
    op.written.activations = tokens * out * s.act();
    op.resident_weight_bytes = op.read.weights;
    return op;
  }

  // RMSNorm over `width` values per token: square-accumulate, scale, multiply (4 FLOP/value).
  Op& rmsnorm(const Step& s, int layer, OpId id, double tokens, double width) {
    Op& op = add(layer, id);
    op.flops = 4.0 * tokens * width;
    op.read.activations = tokens * width * s.act();
    op.read.weights = width * 2.0;
    op.written.activations = tokens * width * s.act();
    op.resident_weight_bytes = op.read.weights;
    return op;
  }

  void all_reduce(const Step& s, int layer, OpId id, double tokens, double width, int group) {
    if (group <= 1) return;
    Op& op = add(layer, id);
    op.collective = Collective{CollectiveKind::all_reduce, tokens * width * s.act(), group};
  }

  // Under sequence parallelism a TP all-reduce of a row-parallel output becomes a reduce-scatter
  // (nccl-tests size: the input), leaving each rank its 1/tp of the tokens.
  void reduce_partial_sums(const Step& s, int layer, OpId all_reduce_id, OpId reduce_scatter_id, double tokens,
                           double width) {
    if (!s.sp()) {
      all_reduce(s, layer, all_reduce_id, tokens, width, s.par.tp);
      return;
    }
    Op& op = add(layer, reduce_scatter_id);
    op.collective = Collective{CollectiveKind::reduce_scatter, tokens * width * s.act(), s.par.tp};
  }

  // Under sequence parallelism the full tokens are gathered before a tensor-parallel block
  // (nccl-tests size: the gathered output).
  void gather_sequence(const Step& s, int layer, OpId id, double tokens, double width) {
    if (!s.sp()) return;
    Op& op = add(layer, id);
    op.collective = Collective{CollectiveKind::all_gather, tokens * width * s.act(), s.par.tp};
  }

 private:
  std::vector<Op>* out_;
};

// Block AttnRes mixer over `candidates` vectors of width h: per candidate 6 FLOP/value (score:
// square-accumulate and γ·w·v dot; mix: multiply-add), reading every candidate and the two weights.
void attnres(GraphBuilder& g, const Step& s, int layer, OpId id, int candidates) {
  if (candidates <= 0) return;
  const double h = s.m.hidden_size;
  Op& op = g.add(layer, id);
  const double T = s.residual_tokens();
  op.flops = 6.0 * T * candidates * h;
  op.read.activations = T * candidates * h * s.act();
  op.read.weights = 2.0 * h * 2.0;
  op.written.activations = T * h * s.act();
  op.resident_weight_bytes = op.read.weights;
}

void kda_layer(GraphBuilder& g, const Step& s, int l) {
  const KdaSpec& k = *s.m.kda;
  const double h = s.m.hidden_size, d = k.head_dim, r = k.gate_rank;
  const double heads = k.num_heads / s.tp(), P = heads * d, T = s.tokens();
  const double state_b = bytes_per_element(s.p.kda_state);
  const double conv_b = bytes_per_element(s.p.kda_conv_state);

  g.gemm(s, l, OpId::kda_qkv_proj, T, h, 3 * P, s.wb());
  // Forget gate f = W_fb(W_fa x) (W_fa replicated, W_fb split by heads) and beta = W_b x.
  Op& gate = g.gemm(s, l, OpId::kda_gate_proj, T, h, r + heads, s.wb());
  gate.flops += 2.0 * T * r * P;
  gate.read.weights += r * P * s.wb();
  gate.written.activations += T * (P - r) * s.act();
  gate.resident_weight_bytes = gate.read.weights;
  if (k.full_rank_output_gate) {
    g.gemm(s, l, OpId::kda_out_gate_proj, T, h, P, s.wb());
  } else {
    Op& og = g.gemm(s, l, OpId::kda_out_gate_proj, T, h, r, s.wb());
    og.flops += 2.0 * T * r * P;
    og.read.weights += r * P * s.wb();
    og.written.activations += T * (P - r) * s.act();
    og.resident_weight_bytes = og.read.weights;
  }

  // Short conv (2K FLOP/value) + SiLU (4) on q,k,v; L2 norm (4) on q,k; gate transform (8/value).
  Op& pre = g.add(l, OpId::kda_preprocess);
  pre.flops = T * (3 * P * (2.0 * k.conv_kernel + 4) + 2 * P * 4 + P * 8 + heads * 4);
  pre.read.activations = T * (4 * P + heads) * s.act();
  pre.written.activations = T * (4 * P + heads) * s.act();
  pre.read.weights = 3 * P * k.conv_kernel * 4.0 + P * 4.0 + heads * 4.0;  // fp32 conv, dt_bias, A_log
  pre.resident_weight_bytes = pre.read.weights;
  const double conv_state = s.seqs * 3 * P * (k.conv_kernel - 1) * conv_b;
  pre.read.state = conv_state;
  pre.written.state = conv_state;

  const double state = s.seqs * heads * d * d * state_b;
  if (s.kind == PhaseKind::prefill) {
    // Chunked form, chunk C = 64: per token and head 10·C·d (A_kk, A_qk, W, U, A_qk·V') + 6·d²
    // (W·S, Q·S, Kᵀ·V') + (2/3)·C² (UT forward substitution). The state of every chunk boundary
    // is written and read back by the output pass (fp32).
    const double C = 64;
    Op& op = g.add(l, OpId::kda_chunk);
    op.flops = T * heads * (10 * C * d + 6 * d * d + (2.0 / 3.0) * C * C);
    op.read.activations = T * (4 * P + heads) * s.act() * 2;  // intra-chunk and inter-chunk passes
    op.written.activations = T * P * s.act() * 3;             // W, U and the output
    const double boundaries = s.seqs * std::ceil(s.n / C);
    op.read.state = state + boundaries * heads * d * d * 4.0;
    op.written.state = state + boundaries * heads * d * d * 4.0;
    op.serial_steps = std::ceil(s.n / C);  // the state pass: chunk after chunk, each sequence's heads beside
    op.kernels = 2;                        // the chunk products, then the state pass
  } else {
    // Recurrent step per token and head: decay (d²), Sᵀk (2d²), u (2d), S += k uᵀ (2d²), Sᵀq (2d²).
    // Verify runs the draft tokens in one pass: the state is read and written once.
    Op& op = g.add(l, OpId::kda_recurrent);
    op.flops = T * heads * (7 * d * d + 2 * d);
    op.read.activations = T * (4 * P + heads) * s.act();
    op.written.activations = T * P * s.act();
    op.read.state = state;
    op.written.state = state;
  }
  Op& norm = g.add(l, OpId::kda_out_norm);
  norm.flops = T * P * 8;  // RMSNorm (4) + sigmoid gate and multiply (4)
  norm.read.activations = 2 * T * P * s.act();
  norm.read.weights = d * 4.0;
  norm.written.activations = T * P * s.act();
  norm.resident_weight_bytes = norm.read.weights;
  g.gemm(s, l, OpId::kda_o_proj, T, P, h, s.wb());
}

void mla_layer(GraphBuilder& g, const Step& s, int l) {
  const MlaSpec& a = s.m.mla;
  const double h = s.m.hidden_size, heads = a.num_heads / s.tp(), T = s.tokens();
  const double cache = a.cache_values_per_token();
  const double cache_bytes = cache * s.p.kv_bytes_per_value() + s.p.kv_scale_bytes_per_token();

  // q_a and kv_a read the same input and are replicated on every TP rank: one fused GEMM.
  g.gemm(s, l, OpId::mla_qkv_a_proj, T, h, (a.q_lora_rank > 0 ? a.q_lora_rank : 0) + cache, s.wb());
  Op& ln = g.add(l, OpId::mla_latent_norm);
  const double normed = a.kv_lora_rank + (a.q_lora_rank > 0 ? a.q_lora_rank : 0);
  ln.flops = 4 * T * normed;
  ln.read.activations = T * normed * s.act();
  ln.written.activations = T * normed * s.act();
  ln.read.weights = normed * 2.0;
  ln.resident_weight_bytes = ln.read.weights;
  g.gemm(s, l, OpId::mla_q_proj, T, a.q_lora_rank > 0 ? a.q_lora_rank : h, heads * a.qk_head_dim(), s.wb());

  const double kv_b_per_head = (a.qk_nope_head_dim + a.v_head_dim) * double(a.kv_lora_rank);
  if (s.kind == PhaseKind::prefill) {
    // MHA form: expand the latent of every visible token (cached prefix + this chunk) into k_nope, v.
    const double visible = s.seqs * (s.ctx + s.n);
    Op& kvb =
        g.gemm(s, l, OpId::mla_kv_b_proj, visible, a.kv_lora_rank, heads * (a.qk_nope_head_dim + a.v_head_dim), s.wb());
    kvb.read.activations = T * cache * s.act();  // this chunk's latents
    kvb.read.kv = s.seqs * s.ctx * cache_bytes;  // the cached prefix
    // Causal attention: new token i sees ctx + i + 1 keys; QK over qk_head_dim, PV over v_head_dim.
    const double pairs = s.seqs * (s.n * s.ctx + s.n * (s.n + 1) / 2);
    Op& at = g.add(l, OpId::mla_attn_prefill);
    at.flops = 2.0 * heads * (a.qk_head_dim() + a.v_head_dim) * pairs;
    at.read.activations =
        T * heads * a.qk_head_dim() * s.act() + visible * heads * (a.qk_head_dim() + a.v_head_dim) * s.act();
    at.written.activations = T * heads * a.v_head_dim * s.act();
    at.written.kv = T * cache_bytes;
  } else {
    // Absorbed (MQA) form over the latent cache: W_kvb's key half folds into q, value half after.
    Op& qa = g.gemm(s, l, OpId::mla_q_absorb, T * heads, a.qk_nope_head_dim, a.kv_lora_rank, 0);
    qa.read.weights = heads * a.qk_nope_head_dim * double(a.kv_lora_rank) * s.wb();
    qa.resident_weight_bytes = heads * kv_b_per_head * s.wb();  // all of kv_b lives here
    // Each query token scores ctx + (its position in the step) cached tokens: 2·cache + 2·kv_lora FLOP each.
    const double pairs = s.seqs * (s.n * s.ctx + s.n * (s.n + 1) / 2);
    Op& at = g.add(l, OpId::mla_attn_decode);
    at.flops = 2.0 * heads * (cache + a.kv_lora_rank) * pairs;
    at.read.kv = s.seqs * (s.ctx + s.n) * cache_bytes;
    at.read.activations = T * heads * cache * s.act();
    at.written.activations = T * heads * a.kv_lora_rank * s.act();
    at.written.kv = T * cache_bytes;
    Op& va = g.gemm(s, l, OpId::mla_v_absorb, T * heads, a.kv_lora_rank, a.v_head_dim, 0);
    va.read.weights = heads * a.v_head_dim * double(a.kv_lora_rank) * s.wb();
    va.resident_weight_bytes = 0;
  }
  if (a.output_gate) {
    // sigmoid(W_g x) depends only on x: it runs beside the attention core (a side stream).
    Op& gate = g.gemm(s, l, OpId::mla_out_gate_proj, T, h, heads * a.v_head_dim, s.wb());
    gate.flops += 4 * T * heads * a.v_head_dim;
    gate.concurrent_with = kBesideAttention;
  }
  g.gemm(s, l, OpId::mla_o_proj, T, heads * a.v_head_dim, h, s.wb());
}

double mlp_act_flops(const ModelConfig& m) { return m.activation == Activation::situ ? 12.0 : 6.0; }

void dense_mlp(GraphBuilder& g, const Step& s, int l) {
  const double h = s.m.hidden_size, I = s.m.dense_intermediate / s.tp(), T = s.tokens();
  g.gemm(s, l, OpId::mlp_gate_up_proj, T, h, 2 * I, s.wb());
  Op& act = g.add(l, OpId::mlp_act);
  act.flops = T * I * mlp_act_flops(s.m);
  act.read.activations = 2 * T * I * s.act();
  act.written.activations = T * I * s.act();
  g.gemm(s, l, OpId::mlp_down_proj, T, I, h, s.wb());
  g.reduce_partial_sums(s, l, OpId::mlp_all_reduce, OpId::mlp_reduce_scatter, T, h);
}

void moe_mlp(GraphBuilder& g, const Step& s, int l, double* distinct_out) {
  const MoeSpec& e = *s.m.moe;
  const double h = s.m.hidden_size, T = s.tokens();
  const double z_dim = e.expert_input_dim(s.m.hidden_size);
  const int ep = s.par.ep, moe_tp = s.par.moe_tp();
  // Tokens each GPU routes: with EP, the TP ranks of a group split the group's tokens; without
  // EP every rank of the group runs all of them against its slice of every expert.
  const double routed_here = ep > 1 ? T / s.tp() : T;

  Op& router = g.add(l, OpId::moe_router);
  router.flops = 2.0 * T * h * e.num_experts + T * e.num_experts * 4;  // scores, sigmoid, top-k
  router.read.weights = e.num_experts * h * 2.0;                       // stored bf16
  router.read.activations = T * h * s.act();
  router.written.activations = T * e.top_k * 8.0;  // expert ids and weights
  router.resident_weight_bytes = router.read.weights + e.num_experts * 4.0;

  if (e.latent_dim > 0) g.gemm(s, l, OpId::moe_latent_down, routed_here, h, e.latent_dim, s.wb());
  if (ep > 1) {
    Op& d = g.add(l, OpId::moe_dispatch);
    d.collective = Collective{CollectiveKind::all_to_all, routed_here * e.top_k * z_dim * s.act(), ep};
  }

  const double experts_here = double(e.num_experts) / ep;
  const double assignments = s.stage_tokens * e.top_k / ep;
  const double distinct = expected_distinct_experts(e.num_experts, e.top_k, s.stage_tokens) / ep;
  *distinct_out = distinct;
  const double expert_params = routed_expert_params(s.m).total() / double(moe_tp);
  const double expert_b = bytes_per_element(s.p.routed_experts);
  const double I = e.expert_intermediate / double(moe_tp);
  Op& ex = g.add(l, OpId::moe_experts);
  ex.compute = s.p.gemm_compute;
  ex.kernels = 3;  // W1/W3 grouped GEMM, activation, W2 grouped GEMM
  ex.flops = 2.0 * assignments * expert_params + assignments * I * mlp_act_flops(s.m);
  ex.read.weights = distinct * expert_params * expert_b;
  ex.read.activations = assignments * (z_dim + 2 * I + I) * s.act();
  ex.written.activations = assignments * (2 * I + I + z_dim) * s.act();
  ex.resident_weight_bytes = experts_here * expert_params * expert_b;
  if (ep > 1) {
    Op& c = g.add(l, OpId::moe_combine);
    c.collective = Collective{CollectiveKind::all_to_all, routed_here * e.top_k * z_dim * s.act(), ep};
  }
  if (moe_tp > 1) {
    // The moe_tp slices of an expert give partial outputs. The weighted sum over a token's k experts is linear, so
    // each GPU sums its partials first and the group reduces one z-wide row per token, not k of them.
    Op& ar = g.add(l, OpId::moe_expert_all_reduce);
    ar.collective = Collective{CollectiveKind::all_reduce, routed_here * z_dim * s.act(), moe_tp};
  }
  // Weighted sum of the top-k outputs (+ RMSNorm on the latent in Stable LatentMoE).
  Op& sum = g.add(l, e.latent_norm ? OpId::moe_latent_norm : OpId::moe_weighted_sum);
  sum.flops = routed_here * z_dim * (2.0 * e.top_k + (e.latent_norm ? 4 : 0));
  sum.read.activations = routed_here * e.top_k * z_dim * s.act();
  sum.written.activations = routed_here * z_dim * s.act();
  sum.read.weights = e.latent_norm ? z_dim * 2.0 : 0;
  sum.resident_weight_bytes = sum.read.weights;
  if (e.latent_dim > 0) g.gemm(s, l, OpId::moe_latent_up, routed_here, e.latent_dim, h, s.wb());

  if (e.shared_intermediate > 0) {
    const double S = e.shared_intermediate / s.tp();
    Op& sh = g.gemm(s, l, OpId::moe_shared, T, h, 3 * S, s.wb());  // gate, up and down: 3·S·h weights
    sh.kernels = 3;
    sh.flops += T * S * mlp_act_flops(s.m);
    sh.written.activations = T * h * s.act() + T * 3 * S * s.act();
    sh.read.activations += T * 3 * S * s.act();
  }
  g.reduce_partial_sums(s, l, OpId::mlp_all_reduce, OpId::mlp_reduce_scatter, T, h);
}

// Appends the ops of layers [first, last) for one chunk of the step.
void build_layers(const Step& s, int first, int last, std::vector<Op>* out, double* distinct) {
  GraphBuilder g(out);
  const ModelConfig& m = s.m;
  for (int l = first; l < last; ++l) {
    const std::size_t layer_begin = out->size();
    const double T = s.tokens(), h = m.hidden_size;
    attnres(g, s, l, OpId::attnres_pre_attn, m.attnres_candidates_before_attention(l));
    g.rmsnorm(s, l, OpId::norm_attn_in, s.residual_tokens(), h);
    g.gather_sequence(s, l, OpId::attn_sequence_all_gather, T, h);
    if (m.layer_attention[l] == AttentionKind::kda) {
      kda_layer(g, s, l);
    } else {
      mla_layer(g, s, l);
    }
    g.reduce_partial_sums(s, l, OpId::attn_all_reduce, OpId::attn_reduce_scatter, T, h);
    attnres(g, s, l, OpId::attnres_pre_mlp, m.attnres_candidates_before_mlp(l));
    g.rmsnorm(s, l, OpId::norm_mlp_in, s.residual_tokens(), h);
    g.gather_sequence(s, l, OpId::mlp_sequence_all_gather, T, h);
    if (m.layer_mlp[l] == MlpKind::dense) {
      dense_mlp(g, s, l);
    } else {
      moe_mlp(g, s, l, distinct);
    }
    // Resolve "runs beside the attention core" to an index inside the graph.
    for (std::size_t i = layer_begin; i < out->size(); ++i) {
      if ((*out)[i].concurrent_with != kBesideAttention) continue;
      for (std::size_t j = layer_begin; j < out->size(); ++j) {
        if ((*out)[j].kind == OpKind::mla_attention) (*out)[i].concurrent_with = static_cast<int>(j);
      }
    }
  }
}

// Adds a later chunk's ops into the first chunk's, which start at total[begin].
void accumulate(std::vector<Op>& total, std::size_t begin, const std::vector<Op>& chunk) {
  K3_CHECK(total.size() - begin == chunk.size(), "chunk graphs differ in shape ({} vs {} ops)", total.size() - begin,
           chunk.size());
  for (std::size_t i = 0; i < chunk.size(); ++i) {
    Op& t = total[begin + i];
    const Op& c = chunk[i];
    t.flops += c.flops;
    t.read += c.read;
    t.written += c.written;
    t.kernels += c.kernels;
    t.serial_steps += c.serial_steps;  // each chunk walks its own chain
    if (t.collective) {
      t.collective->bytes += c.collective->bytes;
      t.collective->calls += c.collective->calls;
    }
  }
}

}  // namespace

std::vector<OpRef> engine_only_ops(const ModelConfig& m, PhaseKind phase) {
  std::vector<OpRef> out;
  for (int l = 0; l < m.num_layers; ++l) {
    if (m.residual == ResidualKind::block_attnres) {
      out.push_back({l, OpId::attn_residual});
      out.push_back({l, OpId::mlp_residual});
    } else if (m.layer_mlp[l] == MlpKind::moe && m.moe && m.moe->latent_dim <= 0) {
      out.push_back({l, OpId::mlp_residual});
    }
  }
  out.push_back({-1, OpId::head_sample});
  if (phase == PhaseKind::decode) out.push_back({-1, OpId::decode_advance});
  return out;
}

OpGraph build_op_graph(const ModelConfig& m, const Phase& phase, const Parallelism& par, const Precision& p) {
  K3_CHECK(m.num_layers > 0 && static_cast<int>(m.layer_attention.size()) == m.num_layers,
           "model '{}' has no layer schedule", m.name);
  K3_CHECK(phase.batch > 0 && phase.new_tokens > 0 && phase.context_tokens >= 0,
           "invalid phase: batch {}, new tokens {}, context {}", phase.batch, phase.new_tokens, phase.context_tokens);
  OpGraph graph;
  graph.phase = phase;
  graph.parallelism = par;
  const double seqs = std::ceil(double(phase.batch) / par.attention_dp);
  graph.sequences_per_gpu = static_cast<long long>(seqs);
  graph.tokens_per_gpu = static_cast<long long>(seqs) * phase.new_tokens;
  graph.routed_tokens = phase.batch * phase.new_tokens;

  const double h = m.hidden_size;
  const double act = bytes_per_element(p.activations);
  graph.ops.reserve(static_cast<std::size_t>(m.num_layers) * 26 + 16);
  GraphBuilder g(&graph.ops);

  // Embedding: vocab-parallel rows gathered per token, summed over TP ranks.
  Step first{
      m, p, par, phase.kind, seqs, double(phase.new_tokens), double(phase.context_tokens), double(graph.routed_tokens)};
  Op& emb = g.add(-1, OpId::embed_lookup);
  emb.read.weights = first.tokens() * h * 2.0 / par.tp;
  emb.written.activations = first.tokens() * h * act;
  emb.resident_weight_bytes = embedding_params(m) * 2.0 / par.tp;
  if (par.tp > 1) {
    g.reduce_partial_sums(first, -1, OpId::embed_all_reduce, OpId::embed_reduce_scatter, first.tokens(), h);
  }

  // Layers, stage by stage; a prefill's chunks accumulate into the same ops.
  const long long chunk =
      phase.kind == PhaseKind::prefill ? std::max(1LL, phase.prefill_chunk_tokens) : phase.new_tokens;
  const int per_stage = (m.num_layers + par.pp - 1) / par.pp;
  double distinct = 0;
  std::vector<Op> scratch;  // later chunks of a prefill, summed into the first chunk's ops
  for (int stage = 0; stage < par.pp; ++stage) {
    const int lo = stage * per_stage, hi = std::min(m.num_layers, lo + per_stage);
    if (lo >= hi) break;
    const std::size_t begin = graph.ops.size();
    for (long long done = 0; done < phase.new_tokens; done += chunk) {
      const double n = double(std::min(chunk, phase.new_tokens - done));
      Step s{m, p, par, phase.kind, seqs, n, double(phase.context_tokens + done), double(phase.batch) * n};
      if (done == 0) {  // the first chunk is the largest: it sets the experts-touched figure
        build_layers(s, lo, hi, &graph.ops, &distinct);
      } else {
        scratch.clear();
        double ignored = 0;
        build_layers(s, lo, hi, &scratch, &ignored);
        accumulate(graph.ops, begin, scratch);
      }
    }
    for (std::size_t i = begin; i < graph.ops.size(); ++i) graph.ops[i].stage = stage;
    if (stage + 1 < par.pp && hi < m.num_layers) {
      // The partial sum travels to the next stage, with AttnRes also every closed block its mixers read.
      const double vectors = std::max(1, m.attnres_candidates_before_attention(hi));
      Op& send = g.add(hi - 1, OpId::pp_send);
      send.stage = stage;
      send.collective = Collective{CollectiveKind::send_recv, first.residual_tokens() * vectors * h * act, 2};
    }
  }
  graph.distinct_experts_per_gpu = distinct;

  // Head: final mixer, norm, vocab-parallel lm_head. Prefill needs logits for the last token only.
  Step head = first;
  head.n = phase.kind == PhaseKind::prefill ? 1.0 : double(phase.new_tokens);
  const size_t head_begin = graph.ops.size();
  attnres(g, head, -1, OpId::head_attnres, m.attnres_candidates_final());
  g.rmsnorm(head, -1, OpId::head_norm, head.residual_tokens(), h);
  g.gather_sequence(head, -1, OpId::head_sequence_all_gather, head.tokens(), h);
  const double vocab_here = double(m.vocab_size) / par.tp;
  Op& lm = g.gemm(head, -1, OpId::head_lm_head, head.tokens(), h, vocab_here, 2.0);
  lm.written.activations = head.tokens() * vocab_here * 4.0;  // fp32 logits
  if (m.tie_word_embeddings) lm.resident_weight_bytes = 0;    // the embedding's rows, already resident
  if (par.tp > 1) {
    Op& gather = g.add(-1, OpId::head_all_gather);
    // nccl-tests size of an all-gather: the gathered output (all ranks' logits).
    gather.collective = Collective{CollectiveKind::all_gather, head.tokens() * double(m.vocab_size) * 4.0, par.tp};
  }
  for (std::size_t i = head_begin; i < graph.ops.size(); ++i) {
    graph.ops[i].stage = par.pp - 1;
  }
  if (m.residual == ResidualKind::block_attnres) {
    for (std::size_t i = 0; i < graph.ops.size(); ++i) {
      Op& op = graph.ops[i];
      op.runs_inside = op_info(op.id).attnres_host;
      // Behind its mixer the norm is part of the mixer's kernel (attnres_mix_rmsnorm_bf16): it reads the mix from
      // registers, not from HBM, and launches nothing. Without a mixer before it (the first layer's) it is a kernel.
      const bool behind_host =
          op.runs_inside && i > 0 && graph.ops[i - 1].id == *op.runs_inside && graph.ops[i - 1].layer == op.layer;
      if (behind_host) {
        op.read.activations = 0;
        op.kernels = 0;
      }
    }
  }
  graph.engine_only = engine_only_ops(m, phase.kind);
  return graph;
}

}  // namespace k3
