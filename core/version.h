// The k3perf version (CMake's project version), for `--version` and the outputs that record what wrote them.
#pragma once

namespace k3 {

const char* k3perf_version();  // "0.1.0"

}  // namespace k3
