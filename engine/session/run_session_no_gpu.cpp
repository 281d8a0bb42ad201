// run_session in a build without CUDA: the API links, and says there is no GPU.
#include "engine/session/run_session.h"
#include "engine/session/run_session_internal.h"

#include "core/error.h"

namespace k3::session {

namespace {
const char* const kNoCuda =
    "no GPU: this k3perf was built without CUDA (configure with -DK3PERF_CUDA=ON on a machine "
    "with the CUDA toolkit)";
}

bool engine_built() { return false; }

bool gpu_available(std::string* why) {
  if (why) *why = kNoCuda;
  return false;
}

RunResult run_session(const RunPlan&, const RunOutputs& outputs, const std::function<void(const std::string&)>&) {
  check_outputs(outputs);
  throw InputError(kNoCuda);
}

}  // namespace k3::session
