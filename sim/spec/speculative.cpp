#include "sim/spec/speculative.h"

#include "core/error.h"
#include "core/op_graph.h"
#include "core/parameters.h"
#include "sim/predict.h"
#include "sim/roofline.h"

#include <fmt/format.h>

#include <cmath>

namespace k3 {

std::string to_string(DrafterKind k) { return k == DrafterKind::autoregressive ? "autoregressive" : "block_parallel"; }
std::string to_string(RollbackKind k) { return k == RollbackKind::replay_inputs ? "replay_inputs" : "copy_states"; }

DrafterKind parse_drafter_kind(const std::string& name) {
  if (name == "autoregressive") return DrafterKind::autoregressive;
  if (name == "block_parallel") return DrafterKind::block_parallel;
  throw InputError(fmt::format("unknown drafter '{}'; expected autoregressive or block_parallel", name));
}

RollbackKind parse_rollback_kind(const std::string& name) {
  if (name == "replay_inputs") return RollbackKind::replay_inputs;
  if (name == "copy_states") return RollbackKind::copy_states;
  throw InputError(fmt::format("unknown rollback '{}'; expected replay_inputs or copy_states", name));
}

ModelConfig make_drafter_model(const ModelConfig& target, const DrafterSpec& spec) {
  if (spec.layers < 1 || spec.mlp_intermediate < 1) {
    throw InputError(fmt::format("drafter needs at least one layer and a positive MLP width (got {} layers, {})",
                                 spec.layers, spec.mlp_intermediate));
  }
  ModelConfig d;
  d.name = fmt::format("{}-drafter-{}xMLA", target.name, spec.layers);
  d.source_file = target.source_file;
  d.model_type = "drafter";
  d.hidden_size = target.hidden_size;
  d.num_layers = spec.layers;
  d.vocab_size = target.vocab_size;
  d.tie_word_embeddings = false;
  d.rms_norm_eps = target.rms_norm_eps;
  d.max_position_embeddings = target.max_position_embeddings;
  d.activation = target.activation;
  d.situ_beta = target.situ_beta;
  d.situ_linear_beta = target.situ_linear_beta;
  d.dense_intermediate = spec.mlp_intermediate;
  d.residual = ResidualKind::plain;
  d.layer_attention.assign(spec.layers, AttentionKind::mla);
  d.layer_mlp.assign(spec.layers, MlpKind::dense);
  d.mla = target.mla;
  return d;
}

namespace {

Scenario drafter_scenario(const Scenario& target, const DrafterSpec& spec, const Phase& phase) {
  Scenario d = target;
  d.model = make_drafter_model(target.model, spec);
  d.parallelism.ep = 1;
  d.parallelism.pp = 1;
  d.precision.weights = StorageFormat::bf16;
  d.precision.routed_experts = StorageFormat::bf16;
  d.phase = phase;
  return d;
}

double step_us(const Scenario& s) {
  const OpGraph g = build_op_graph(s.model, s.phase, s.parallelism, s.precision);
  return time_step(g, s.hardware, s.runtime).step_us;
}

Phase verify_phase(const Phase& decode, long long query_tokens) {
  Phase p = decode;
  p.kind = PhaseKind::verify;
  p.new_tokens = query_tokens;
  return p;
}

// The KDA ops a rollback runs, per GPU: one kernel per KDA layer over `sequences` sequences.
double kda_state_op_us(const Scenario& s, double sequences, double state_reads, double state_writes,
                       double replayed_tokens_per_sequence) {
  const ModelConfig& m = s.model;
  if (!m.kda || sequences <= 0) return 0.0;
  const KdaSpec& k = *m.kda;
  const double heads = double(k.num_heads) / s.parallelism.tp, d = k.head_dim, P = heads * d;
  const double state = heads * d * d * bytes_per_element(s.precision.kda_state) +
                       3.0 * P * (k.conv_kernel - 1) * bytes_per_element(s.precision.kda_conv_state);
  const double act = bytes_per_element(s.precision.activations);
  Op op;
  op.id = OpId::kda_rollback;
  op.kind = OpKind::kda_recurrent;
  op.compute = ComputeType::fp32;
  const double T = sequences * replayed_tokens_per_sequence;
  op.flops = T * heads * (7 * d * d + 2 * d);
  op.read.state = sequences * state * state_reads;
  op.written.state = sequences * state * state_writes;
  op.read.activations = T * (4 * P + heads) * act;  // the cached q, k, v, gate and beta of each token
  const int layers_here = (m.count_layers(AttentionKind::kda) + s.parallelism.pp - 1) / s.parallelism.pp;
  return layers_here * time_op(op, s.hardware, s.runtime).time_us;
}

double sequences_per_gpu(const Scenario& s) { return std::ceil(double(s.phase.batch) / s.parallelism.attention_dp); }

}  // namespace

double draft_time_us(const Scenario& target, const DrafterSpec& spec, int g) {
  K3_CHECK(g >= 1, "draft length {} must be at least 1", g);
  const Phase& base = target.phase;
  if (spec.kind == DrafterKind::block_parallel) {
    return step_us(drafter_scenario(target, spec, verify_phase(base, g)));
  }
  double total = 0;  // γ sequential one-token steps, each over a context one token longer
  for (int i = 0; i < g; ++i) {
    total += step_us(drafter_scenario(target, spec, Phase::decode(base.batch, base.context_tokens + i)));
  }
  return total;
}

double rollback_time_us(const Scenario& target, RollbackKind kind, int g, long long committed) {
  K3_CHECK(committed >= 1 && committed <= g + 1, "committed tokens {} outside 1..{}", committed, g + 1);
  const double seqs = sequences_per_gpu(target);
  if (kind == RollbackKind::copy_states) return kda_state_op_us(target, seqs, 0, g, 0);
  if (committed == g + 1) return 0.0;  // everything accepted: the verify pass left the right state
  return kda_state_op_us(target, seqs, 1, 1, double(committed));
}

SpecStepCosts speculative_step_costs(const Scenario& target, const DrafterSpec& spec, int g) {
  if (g < 1) throw InputError(fmt::format("draft length {} must be at least 1", g));
  if (target.phase.kind != PhaseKind::decode) {
    throw InputError(fmt::format("{}: speculative decoding needs a decode scenario (phase is {})", target.source,
                                 to_string(target.phase.kind)));
  }
  SpecStepCosts c;
  c.draft_tokens = g;
  c.batch = target.phase.batch;
  const OpGraph decode = build_op_graph(target.model, target.phase, target.parallelism, target.precision);
  c.decode_us = time_step(decode, target.hardware, target.runtime).step_us;
  c.decode_distinct_experts = decode.distinct_experts_per_gpu;
  Scenario verify = target;
  verify.phase = Phase::verify(target.phase.batch, g, target.phase.context_tokens);
  const OpGraph vg = build_op_graph(verify.model, verify.phase, verify.parallelism, verify.precision);
  c.verify_us = time_step(vg, verify.hardware, verify.runtime).step_us;
  c.verify_distinct_experts = vg.distinct_experts_per_gpu;
  c.draft_us = draft_time_us(target, spec, g);
  c.replay_us = rollback_time_us(target, RollbackKind::replay_inputs, g, g);
  c.copy_states_us = rollback_time_us(target, RollbackKind::copy_states, g, 1);
  c.drafter_params =
      double(count_parameters(make_drafter_model(target.model, spec)).total() - embedding_params(target.model));
  return c;
}

SpecOutcome speculative_outcome(const Scenario& target, const SpecStepCosts& c, const AcceptanceModel& acc,
                                RollbackKind rollback) {
  if (acc.draft_tokens() != c.draft_tokens) {
    throw InputError(fmt::format("acceptance model has {} draft positions but the costs are for a {}-token draft",
                                 acc.draft_tokens(), c.draft_tokens));
  }
  SpecOutcome o;
  o.tokens_per_step = acc.expected_tokens_per_step();
  o.tokens_per_step_std = std::sqrt(acc.variance_tokens_per_step());
  const int g = c.draft_tokens;
  if (rollback == RollbackKind::copy_states) {
    o.rollback_us = c.copy_states_us;
  } else if (target.model.kda) {
    // A sequence replays when it rejects a draft (A < γ), over the A + 1 tokens it keeps. One kernel
    // per KDA layer serves every replaying sequence: it runs when any of them replays, and then
    // carries the expected number that do.
    const double seqs = sequences_per_gpu(target);
    const double reject = 1.0 - acc.survival().back();
    if (reject > 0) {
      double kept = 0;  // E[A + 1 | A < γ]
      for (int a = 0; a < g; ++a) kept += acc.probability_of_accepted(a) * (a + 1);
      kept /= reject;
      const double any = 1.0 - std::pow(1.0 - reject, seqs);
      o.rollback_us = any * kda_state_op_us(target, seqs * reject / any, 1, 1, kept);
    }
  }
  o.round_us = c.draft_us + c.verify_us + o.rollback_us;
  o.tokens_per_s = double(c.batch) * o.tokens_per_step / (o.round_us * 1e-6);
  o.baseline_tokens_per_s = double(c.batch) / (c.decode_us * 1e-6);
  o.speedup = o.tokens_per_s / o.baseline_tokens_per_s;
  return o;
}

RequiredAcceptance acceptance_for_speedup(const Scenario& target, const SpecStepCosts& c, RollbackKind rollback,
                                          double want) {
  if (!(want > 0)) throw InputError(fmt::format("target speedup {} must be positive", want));
  auto speedup_at = [&](double alpha) {
    return speculative_outcome(target, c, AcceptanceModel::iid(alpha, c.draft_tokens), rollback).speedup;
  };
  RequiredAcceptance r;
  if (speedup_at(1.0) < want) {
    r.alpha = 1.0;
    r.tokens_per_step = c.draft_tokens + 1.0;
    return r;
  }
  double lo = 0, hi = 1;
  for (int it = 0; it < 100; ++it) {
    const double mid = 0.5 * (lo + hi);
    (speedup_at(mid) < want ? lo : hi) = mid;
  }
  r.attainable = true;
  r.alpha = hi;
  r.tokens_per_step = iid_expected_tokens_per_step(hi, c.draft_tokens);
  return r;
}

}  // namespace k3
