// NVTX range markers for hand-built ActivityRecords in the profiler's tests: a push of `name` and its pop at time t
// (ns) on `thread`.
#pragma once

#include "profiler/attribution/activity.h"

#include <cstdint>
#include <string>

namespace k3::profiler {

inline void push(ActivityRecords& r, std::int64_t t, std::int64_t thread, const std::string& name) {
  r.markers.push_back({MarkerPhase::push, t, thread, 0, name});
}
inline void pop(ActivityRecords& r, std::int64_t t, std::int64_t thread) {
  r.markers.push_back({MarkerPhase::pop, t, thread, 0, ""});
}

}  // namespace k3::profiler
