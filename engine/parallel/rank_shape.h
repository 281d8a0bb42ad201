// The shapes rank r of a deployment computes, derived once from the model and its layout (sharding.h's rules) for
// the memory plan, the device weights, the cache and the layers. `local` is the model as the rank runs it: its KDA
// and MLA heads (heads / tp), its columns of the dense MLP and the shared experts (/ tp) and of each routed expert
// (/ moe_tp). The vocabulary and the router's experts stay whole in `local` (the router scores every expert; the
// embedding looks up any token id): the rank holds `vocab_rows` rows of the embedding and lm_head and `experts` of
// the routed experts, given here. At one GPU, `local` is the model.
#pragma once

#include "core/model_config.h"
#include "engine/parallel/layout.h"
#include "engine/parallel/sharding.h"

#include <cstdint>

namespace k3::parallel {

struct RankShape {
  RankLayout layout;
  ModelConfig local;
  int64_t first_vocab_row = 0, vocab_rows = 0;  // embedding and lm_head rows held
  int64_t first_expert = 0, experts = 0;        // routed experts held, of every MoE layer
  int64_t weight_bytes = 0;                     // the checkpoint shards held (RankShards::bytes)

  bool single_gpu() const { return layout.parallelism.gpus() == 1; }
  int tp() const { return layout.parallelism.tp; }
  int ep() const { return layout.parallelism.ep; }
  bool holds_expert(int64_t expert) const { return expert >= first_expert && expert < first_expert + experts; }
  // Tokens [first, first + count) of a call's T that this rank routes to the experts under expert parallelism
  // (the op graph's T / tp share; the whole call otherwise).
  int64_t routed_first(int64_t tokens) const;
  int64_t routed_count(int64_t tokens) const;
};

// Throws k3::InputError as shard_checkpoint does for a layout the model cannot take.
RankShape rank_shape(const ModelConfig& model, const RankLayout& layout);

}  // namespace k3::parallel
