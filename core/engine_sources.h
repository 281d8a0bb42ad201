// Which engine a calibration belongs to: the content hash of the engine's sources (kernels/, engine/runtime/) that
// this build was made from (cmake/engine_sources_hash.cmake, scripts/engine-sources-hash.sh), and the check that a
// calibrated hardware file was fitted on the same sources.
#pragma once

#include <optional>
#include <string>

namespace k3 {

struct Hardware;

const char* engine_sources_hash();  // 16 hex digits

// A warning when `hw` was calibrated (`calibrated_on.engine_sources`) on engine sources other than `built`: its
// fitted efficiencies and latencies describe kernels this build does not have. None for uncalibrated files.
std::optional<std::string> calibration_staleness(const Hardware& hw, const std::string& built = engine_sources_hash());

}  // namespace k3
