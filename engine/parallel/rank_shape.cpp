#include "engine/parallel/rank_shape.h"

#include "engine/weights/tensor_layout.h"

namespace k3::parallel {

int64_t RankShape::routed_first(int64_t tokens) const { return ep() > 1 ? tokens * layout.tp_rank / tp() : 0; }

int64_t RankShape::routed_count(int64_t tokens) const {
  return ep() > 1 ? tokens * (layout.tp_rank + 1) / tp() - routed_first(tokens) : tokens;
}

RankShape rank_shape(const ModelConfig& model, const RankLayout& layout) {
  const RankShards shards = shard_checkpoint(model, weights::checkpoint_layout(model), layout);  // validates
  const Parallelism& par = layout.parallelism;
  RankShape s;
  s.layout = layout;
  s.local = model;
  ModelConfig& c = s.local;
  if (c.kda) c.kda->num_heads = int(shards.kda_heads);
  c.mla.num_heads = int(shards.mla_heads);
  const bool split_mlp = !(par.sequence_parallel && par.tp > 1);
  if (split_mlp) c.dense_intermediate /= par.tp;
  if (c.moe) {
    if (split_mlp) c.moe->shared_intermediate /= par.tp;
    c.moe->expert_intermediate /= par.moe_tp();
    s.first_expert = shards.first_expert;
    s.experts = shards.experts;
  }
  s.vocab_rows = model.vocab_size / par.tp;
  s.first_vocab_row = s.vocab_rows * layout.tp_rank;
  s.weight_bytes = shards.bytes();
  return s;
}

}  // namespace k3::parallel
