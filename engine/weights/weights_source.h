// weights_source: what `--weights` names — "random" or "random:SEED" (weights generated from a seed, the same
// formats and scaling as make-checkpoint) or a checkpoint folder. `run` checks it when it plans (engine/session),
// before any GPU work, so that a bad value is an input error on a machine without a GPU too. (engine/runtime's
// run_loop still parses the text itself; it takes this parser with the next refit of h200-validated.yaml, whose
// fit records a hash of engine/runtime.)
#pragma once

#include <cstdint>
#include <string>

namespace k3::weights {

struct WeightsSource {
  bool random = false;
  uint64_t seed = 1;
  std::string dir;  // the checkpoint folder when not random
};

// Throws InputError naming the value: a seed that is not a non-negative integer or exceeds 2^64 − 1.
WeightsSource parse_weights_source(const std::string& text);

}  // namespace k3::weights
