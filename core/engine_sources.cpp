#include "core/engine_sources.h"

#include "core/hardware.h"

#include <fmt/format.h>

namespace k3 {

std::optional<std::string> calibration_staleness(const Hardware& hw, const std::string& built) {
  if (hw.calibrated_engine_sources.empty() || hw.calibrated_engine_sources == built) return std::nullopt;
  return fmt::format(
      "{} was calibrated on the engine at {} (sources {}); this build's engine sources are {}: its fitted "
      "efficiencies and kernel latencies may no longer describe the kernels (refit it with `k3perf calibrate` on new "
      "traces: docs/profile.md)",
      hw.source_file, hw.calibrated_commit.empty() ? "an unrecorded commit" : hw.calibrated_commit,
      hw.calibrated_engine_sources, built);
}

}  // namespace k3
