// The header every JSON output of k3perf starts with, so that a file names what it is and what wrote it:
//   {"format": "k3perf-<what>", "version": N, "k3perf": {"version": "0.1.0", "engine_sources": "<16 hex>"}, ...}
// `version` is the format's own, raised when its meaning changes; the k3perf version and the engine-sources hash
// (core/engine_sources.h) say which build wrote it.
#pragma once

#include <nlohmann/json.hpp>

#include <string_view>

namespace k3 {

// An object holding the header's three members; a writer adds its own after them.
nlohmann::ordered_json output_header(std::string_view format, int version);

}  // namespace k3
