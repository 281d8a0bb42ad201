#include "core/version.h"

namespace k3 {

const char* k3perf_version() { return K3PERF_VERSION; }

}  // namespace k3
