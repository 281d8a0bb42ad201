// Shared by the GPU and the no-GPU builds of run_session.
#pragma once

#include "engine/session/run_session.h"

namespace k3::session {

// Throws InputError for outputs that cannot go together.
void check_outputs(const RunOutputs& outputs);

}  // namespace k3::session
