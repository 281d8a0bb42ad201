// One collective as a rank issued it (engine/parallel/communicator.h records them): CUDA-free, so that run summaries
// carry them in builds without CUDA.
#pragma once

#include "core/op_graph.h"

#include <cstdint>
#include <string>

namespace k3::parallel {

struct CollectiveRecord {
  std::string name;  // the op's name: "L017.moe.dispatch"
  CollectiveKind kind = CollectiveKind::all_reduce;
  int64_t bytes = 0;
  std::string group;  // the group's label: "tp", "ep", ...
  int group_size = 1;
};

}  // namespace k3::parallel
