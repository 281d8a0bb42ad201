// What the Breakdown view's bars show: the step's exposed time split four ways (layer kind, module, op
// kind, bound) and the memory of one GPU against its usable capacity. UI-free.
#pragma once

#include "gui/model/prediction_data.h"

#include <string>
#include <vector>

namespace k3::gui {

struct BarSegment {
  std::string name;          // "moe", "memory", "KV cache", ...
  double value = 0;          // µs for step bars, bytes for the memory bar
  double share_percent = 0;  // of the bar's total
};

struct Bar {
  std::string title;                 // "Module"
  std::vector<BarSegment> segments;  // largest first; no empty segments
  double total = 0;                  // the sum of the segments
};

// Exposed step time by layer kind, module, op kind and bound (µs); each bar adds up to the step.
std::vector<Bar> step_time_bars(const PredictionData& p);

// The segment of each step_time_bars() bar that holds ops[op]: its layer kind, module, kind and bound.
std::vector<std::string> segments_of_op(const PredictionData& p, int op);

struct MemoryBar {
  Bar bar;  // weights, KV cache, KDA state, activations, reserve (bytes, in that order)
  double usable_bytes = 0;
  bool fits = true;
  long long max_batch = 0;  // the largest batch that fits at this context
};
MemoryBar memory_bar(const PredictionData& p);

}  // namespace k3::gui
