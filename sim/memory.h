// Memory per GPU (docs/predict.md#memory): resident weights, MLA latent KV, KDA recurrent and conv
// state, an activation/workspace estimate and the runtime's reserve, against HBM capacity.
#pragma once

#include "core/model_config.h"
#include "core/op_graph.h"
#include "core/scenario.h"

namespace k3 {

// Whole-model sizes, unsharded (what claims about "the model" quote).
double kv_bytes_per_token(const ModelConfig& m, const Precision& p);         // all MLA layers
double kda_recurrent_state_bytes(const ModelConfig& m, const Precision& p);  // per sequence
double kda_conv_state_bytes(const ModelConfig& m, const Precision& p);       // per sequence
double weight_bytes(const ModelConfig& m, const Precision& p);               // whole checkpoint

struct MemoryBreakdown {
  double weights_bytes = 0;
  double kv_bytes = 0;
  double kda_state_bytes = 0;
  double activation_bytes = 0;
  double reserved_bytes = 0;
  double total_bytes = 0;
  double usable_bytes = 0;              // HBM capacity x memory_utilization
  double kv_bytes_per_token = 0;        // this GPU, one sequence
  double state_bytes_per_sequence = 0;  // this GPU
  long long sequences = 0;              // held by this GPU
  bool fits() const { return total_bytes <= usable_bytes; }
};

// Per GPU, for the scenario's step (the busiest pipeline stage).
MemoryBreakdown estimate_memory(const Scenario& s, const OpGraph& graph);

// Largest batch (over all attention-DP groups) that fits with `context_tokens` cached per sequence
// (plus the phase's new tokens); 0 when not even the weights fit.
long long max_batch(const Scenario& s, long long context_tokens);

}  // namespace k3
