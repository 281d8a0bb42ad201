// Where one GPU sits in a deployment described by k3::Parallelism (core/scenario.h), with the simulator's meaning:
// pp pipeline stages of tp * attention_dp GPUs each; within a stage, attention_dp groups of tp GPUs split the
// attention (heads) and hold their own sequences; the routed experts are split over ep GPUs and, within an
// expert, over moe_tp = tp * attention_dp / ep GPUs.
//
// Global rank = stage * stage_gpus + stage_rank, stage_rank = attention_dp_rank * tp + tp_rank (an attention group
// is contiguous), and for the experts stage_rank = ep_rank * moe_tp + moe_tp_rank. Layers split over the stages as
// the op graph splits them: ceil(layers / pp) per stage.
#pragma once

#include "core/scenario.h"

#include <string>
#include <vector>

namespace k3::parallel {

struct RankLayout {
  Parallelism parallelism;
  int rank = 0;  // global, [0, gpus)
  // Coordinates.
  int stage = 0;              // pipeline stage
  int stage_rank = 0;         // within the stage
  int attention_dp_rank = 0;  // attention group within the stage
  int tp_rank = 0;            // within the attention group
  int ep_rank = 0;            // which 1/ep of the routed experts
  int moe_tp_rank = 0;        // which 1/moe_tp of each of those experts
  // Groups, as global ranks in group order (this rank is at its own coordinate).
  std::vector<int> tp_group;      // the attention group: attention, dense MLP, shared expert, embedding and
                                  // lm_head all-reduces and gathers
  std::vector<int> ep_group;      // same moe_tp_rank, every ep_rank: the dispatch / combine all-to-all
  std::vector<int> moe_tp_group;  // same ep_rank: the experts' partial-sum all-reduce
  std::vector<int> stage_group;   // every GPU of the stage
  std::vector<int> pp_group;      // same stage_rank in every stage: the activations' send / receive
  // Layers [first_layer, last_layer) run here (0-based).
  int first_layer = 0;
  int last_layer = 0;

  bool first_stage() const { return stage == 0; }
  bool last_stage() const { return stage == parallelism.pp - 1; }
  bool holds_layer(int layer) const { return layer >= first_layer && layer < last_layer; }
  std::string describe() const;  // "rank 5 of 16: stage 0, attention group 0, tp 5/16, ep 5/16, moe_tp 0/1"
};

// Throws k3::InputError naming the parallelism key and value when a size is below 1, ep does not divide
// tp * attention_dp, a stage would hold no layer, or `rank` is outside [0, gpus).
RankLayout rank_layout(const Parallelism& parallelism, int rank, int num_layers);

}  // namespace k3::parallel
