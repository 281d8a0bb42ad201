// The contract of k3perf (DESIGN §1): a model, a phase and a parallel layout become an ordered
// list of operations with stable names. The simulator predicts each op, the engine wraps each in
// an NVTX range of the same name, the profiler joins measurements on it.
//
// Names come from core/op_names.h (OpId): "L<layer, 1-based, 3 digits>.<module>.<op>" (e.g.
// L004.mla.attn_decode, L001.kda.recurrent, L017.moe.experts), or "embed.<op>" / "head.<op>". Counts are
// for ONE GPU of the layout for one step (a prefill's chunks are summed into the same ops).
// docs/opgraph.md lists every op with its FLOP and byte formulas.
// The graph also records what the single-GPU engine (engine/runtime/) does differently, so that the
// profiler can join its ranges without a list of its own: the ops it runs inside another op's kernel and
// range (Op::runs_inside) and the ranges it opens that predict nothing (OpGraph::engine_only).
#pragma once

#include "core/dtype.h"
#include "core/hardware.h"
#include "core/model_config.h"
#include "core/op_names.h"
#include "core/scenario.h"

#include <optional>
#include <string>
#include <vector>

namespace k3 {

EfficiencyClass efficiency_class(OpKind k);

enum class CollectiveKind { all_reduce, all_gather, all_to_all, send_recv, reduce_scatter };
std::string to_string(CollectiveKind k);

// Bytes moved to or from HBM, by what they are.
struct ByteCounts {
  double weights = 0;
  double kv = 0;
  double state = 0;
  double activations = 0;
  double total() const { return weights + kv + state + activations; }
  ByteCounts& operator+=(const ByteCounts& o);
};

struct Collective {
  CollectiveKind kind = CollectiveKind::all_reduce;
  double bytes = 0;    // payload per GPU (the buffer size nccl-tests calls "size"), all calls together
  int group_size = 1;  // GPUs taking part
  int calls = 1;       // collectives issued (one per prefill chunk); each pays the latency
};

struct Op {
  OpId id = OpId::embed_lookup;
  int layer = -1;  // 0-based; -1 for embed.* and head.*
  OpKind kind = OpKind::gemm;
  ComputeType compute = ComputeType::bf16;
  double flops = 0;
  ByteCounts read;
  ByteCounts written;
  std::optional<Collective> collective;
  int kernels = 1;                   // kernel launches the op takes (fixed-overhead term)
  double serial_steps = 0;           // dependent steps its kernels walk one after another (Hardware::serial_step_us)
  int concurrent_with = -1;          // index of an op this one runs beside (same stream group), or -1
  int stage = 0;                     // pipeline stage
  double resident_weight_bytes = 0;  // weights this GPU holds for the op (memory model)
  // The op of the same layer (or head) whose kernel and range the engine runs this one in: with Block
  // AttnRes, the RMSNorm after each mixer (OpInfo::attnres_host). The host need not be in the graph:
  // the first layer's mixer has no candidates to mix, yet the engine runs it with its norm.
  std::optional<OpId> runs_inside;

  std::string name() const;  // "L004.mla.attn_decode"
  double bytes() const { return read.total() + written.total(); }
  double intensity_flops_per_byte() const { return bytes() > 0 ? flops / bytes() : 0.0; }
};

struct OpGraph {
  Phase phase;
  Parallelism parallelism;
  std::vector<Op> ops;
  long long tokens_per_gpu = 0;         // tokens through this GPU's attention group in the step
  long long sequences_per_gpu = 0;      // sequences held by this GPU's attention group
  long long routed_tokens = 0;          // tokens routed to experts across the stage
  double distinct_experts_per_gpu = 0;  // expected experts touched per EP rank, per MoE layer
  // The ranges the engine opens for this model and phase that no op predicts (OpInfo::engine_only), in
  // the order it runs them.
  std::vector<OpRef> engine_only;

  const Op* find(const std::string& name) const;  // linear search; for tests and tools
};

// Expected number of distinct experts touched by `tokens` tokens, each choosing top_k of
// `experts` uniformly: E * (1 - (1 - k/E)^T).
double expected_distinct_experts(double experts, double top_k, double tokens);

// The engine-only ranges of a model's forward (OpGraph::engine_only): with Block AttnRes each layer's
// attn.residual and mlp.residual (the sublayer's output added to, or copied into, the partial sum); with
// plain residuals the mlp.residual of MoE layers without latent projections (their routed sum leaves
// through a conversion, not a GEMM that could add the residual); head.sample; decode.advance per decode
// step.
std::vector<OpRef> engine_only_ops(const ModelConfig& model, PhaseKind phase);

OpGraph build_op_graph(const ModelConfig& model, const Phase& phase, const Parallelism& par,
                       const Precision& precision);

}  // namespace k3
