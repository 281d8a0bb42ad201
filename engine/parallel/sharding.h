// What one rank holds of every tensor of the published checkpoint layout (engine/weights/tensor_layout.h), as the
// public serving ports shard K3 and Kimi Linear (docs/parallel.md lists what they do, with sources):
//   split over the attention group (tp), by head: KDA q/k/v/g projections, their short convs, f_b/g_b, b_proj,
//     dt_bias and A_log (K3's 32 pad values are dropped), MLA q_b (or q), kv_b and g; o_proj by its input columns;
//   split over the attention group by row: the embedding and lm_head (vocabulary rows); the dense MLP and the
//     shared experts by intermediate column (gate/up by row, down by column), unless sequence parallel, where the
//     ports replicate them and run them on the rank's token share;
//   split over the experts: a routed expert lives on one ep rank, and within it its intermediate dimension is split
//     over moe_tp ranks (w1/w3 by row, w2 by column; MXFP4 packed and scale tensors alike);
//   replicated on every GPU of the stage: norms (incl. KDA o_norm, MLA q_a/kv_a norms, the latent MoE norm), the
//     AttnRes queries, KDA f_a/g_a, MLA q_a and kv_a, the router and its bias, the latent MoE down/up projections.
// Layers live on their pipeline stage; the embedding on the first, the final norms and lm_head on the last.
#pragma once

#include "core/model_config.h"
#include "engine/parallel/layout.h"
#include "engine/weights/tensor_layout.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace k3::parallel {

enum class Placement {
  replicated,       // whole on every GPU of the stage
  tensor_parallel,  // split over the attention group; each attention group holds a full copy
  expert_parallel,  // one routed expert: on its ep rank, split over the moe_tp ranks there
};
std::string to_string(Placement p);
// Full copies of a tensor placed so in one stage: tp * attention_dp, attention_dp, 1.
int copies(Placement p, const Parallelism& par);

// What the split dimension counts.
enum class ShardUnit { whole, heads, vocab_rows, intermediate };
std::string to_string(ShardUnit u);

struct TensorShard {
  std::size_t tensor = 0;  // index into CheckpointLayout::tensors
  weights::TensorRole role = weights::TensorRole::norm;
  Placement placement = Placement::replicated;
  int dim = -1;        // split dimension of the stored shape; -1: the whole tensor
  int64_t offset = 0;  // first index held along dim
  int64_t length = 0;  // indices held along dim
  int64_t extent = 0;  // indices of dim shared out: its stored size, less the pad of K3's A_log
  ShardUnit unit = ShardUnit::whole;
  int64_t unit_first = 0;  // e.g. the first head held
  int64_t unit_count = 0;
  int replica = 0;    // the full copy this piece belongs to, in [0, copies(placement))
  int64_t bytes = 0;  // bytes held
};

struct RankShards {
  RankLayout layout;
  std::vector<TensorShard> shards;  // the tensors this rank holds, in checkpoint-layout order
  // Per layer of the stage: the heads and routed experts held.
  int64_t kda_first_head = 0, kda_heads = 0;
  int64_t mla_first_head = 0, mla_heads = 0;
  int64_t first_expert = 0, experts = 0;
  int64_t bytes() const;
  std::map<weights::TensorRole, int64_t> bytes_by_role() const;
};

// Throws k3::InputError (naming the model's config file, the parallelism key and the sizes) when tp does not divide
// the heads, the vocabulary, the dense or shared intermediate sizes, ep the experts, or moe_tp the expert
// intermediate size (and, for MXFP4, its 32-value scale blocks).
RankShards shard_checkpoint(const ModelConfig& model, const weights::CheckpointLayout& layout, const RankLayout& rank);

// The sequence state this rank keeps (the simulator's memory model, sim/memory.cpp): the KDA recurrent and conv
// state of its heads, and the whole MLA latent cache of its attention group (one latent for all heads).
struct RankState {
  double kda_state_bytes_per_sequence = 0;  // recurrent d x d state per head, every KDA layer of the stage
  double kda_conv_bytes_per_sequence = 0;   // conv_kernel - 1 inputs of q, k, v per channel held
  double mla_cache_bytes_per_token = 0;     // latent + rope key (and fp8 scale), every MLA layer of the stage
};
RankState rank_state(const ModelConfig& model, const Precision& precision, const RankLayout& rank);

}  // namespace k3::parallel
