// The simulated schedule of `k3perf serve` as a Chrome trace (`serve --trace F`), as Vidur writes its own: one
// process per replica ("replica 0", or "prefill replica 0" / "decode replica 2" when disaggregated), in the
// simulation's order; on each
//   "iterations"        every iteration of the replica's running batch ("iteration", args: decode sequences,
//                       prefill sequences and tokens);
//   "requests 1", ...   each request that ran there as a span "request <id>" (args: tokens, TTFT, TPOT) holding its
//                       phases: "queue" (arrival to admission), "prefill" (admission to the first token), then
//                       "decode" to the last token; disaggregated, the prefill replica's span ends with "transfer"
//                       (the first token to the KV and state's arrival) and the decode replica's starts with
//                       "decode queue" (arrival to admission). Requests are packed first-fit onto as many
//                       "requests" tracks as were in flight at once, so no span overlaps another on its track.
// Times in ns from the simulation's zero (the trace's first arrival time as read). Rejected requests are counted in
// the metadata, not drawn.
#pragma once

#include "sim/serving/simulator.h"

#include <string>

namespace k3::profiler {

// `result` must come from a simulation with ServingOptions::record_schedule. `title` names the run (metadata).
std::string serving_trace_json(const serving::ServingResult& result, const std::string& title);

}  // namespace k3::profiler
