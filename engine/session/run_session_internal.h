// Shared by the GPU and the no-GPU builds of run_session.
#pragma once

#include "engine/session/run_session.h"

namespace k3::session {

// Throws InputError for outputs that cannot go together.
void check_outputs(const RunOutputs& outputs);
// The prediction file of the traced phase, when asked for.
void write_prediction(const RunPlan& plan, const RunOutputs& outputs);

}  // namespace k3::session
