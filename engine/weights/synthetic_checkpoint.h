// `k3perf make-checkpoint`: a valid checkpoint in the published layout (config.json, safetensors
// shards, model.safetensors.index.json; MXFP4 routed experts where the config says so) with seeded
// random weights, optionally keeping only the first N layers of the model (a "slice").
//
// Weights are streamed tensor by tensor and row by row, so memory stays bounded by one row whatever
// the model's width. Values (docs/checkpoints.md#make-checkpoint):
//   embedding N(0, 1); matrices N(0, 1/fan_in) (variance), experts quantised to MXFP4 after that;
//   norm weights 1 + 0.1 N(0, 1); AttnRes pseudo-queries N(0, 1/h); conv N(0, 1/K);
//   A_log log U(1, 16) per head (zero pads); dt_bias U(-1, 1); router bias 0.01 N(0, 1).
// The generator is our own (SplitMix64 + Marsaglia polar normals), so the same seed gives the same bytes on
// every platform.
#pragma once

#include "core/model_config.h"

#include <cstdint>
#include <functional>
#include <string>

namespace k3::weights {

struct SyntheticCheckpointOptions {
  std::string config_path;  // a published-form config.json (kimi_linear family)
  std::string out_dir;      // created if absent, else replaced whole, in one step, when the new one is complete
  int layers = 0;           // 0 = all layers; N keeps layers [0, N)
  uint64_t seed = 1;
  uint64_t shard_bytes = 4ull << 30;                 // largest shard; a bigger tensor gets a shard of its own
  std::function<void(const std::string&)> progress;  // lines of progress (may be empty)
};

struct SyntheticCheckpointSummary {
  ModelConfig config;  // the (sliced) config written to out_dir/config.json
  int shards = 0;
  int64_t tensors = 0;
  uint64_t bytes = 0;
  int64_t parameters = 0;
};

// out_dir may hold only what a checkpoint holds (is_checkpoint_file); anything else is an InputError naming it.
SyntheticCheckpointSummary write_synthetic_checkpoint(const SyntheticCheckpointOptions& options);

// config.json, model.safetensors.index.json, model*.safetensors, and temporaries (".<name>.tmp.<pid>.<n>").
bool is_checkpoint_file(const std::string& file_name);

// The config.json text with only the first `layers` layers (num_hidden_layers and the 1-based layer
// lists of linear_attn_config cut to match). Throws InputError naming the file for a config that is
// not of the kimi_linear family or a layer count out of range.
std::string slice_config_json(const std::string& json_text, const std::string& origin, int layers);

// Round-to-nearest-even fp32 -> bf16.
uint16_t float_to_bf16(float value);

}  // namespace k3::weights
