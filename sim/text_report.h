// Human-readable terminal reports of predictions and claim checks (the CLI prints these).
#pragma once

#include "sim/predict.h"

#include <string>

namespace k3 {

// Summary: scenario, step metrics, memory, per-layer-kind and per-module totals, bound mix, and the `top_ops` op
// names with the largest exposed time summed over their layers (by_layer: the `top_ops` single ops instead).
std::string format_prediction(const Prediction& p, int top_ops, bool by_layer = false);

// "1.23 GB", "456 MB" (decimal), "27.22 GiB" (binary) helpers.
std::string format_bytes(double bytes);
std::string format_gib(double bytes);

}  // namespace k3
