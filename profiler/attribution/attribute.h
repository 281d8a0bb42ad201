// Attribution of GPU work to ops (DESIGN.md §1): the engine wraps every op in an NVTX range named
// exactly as the op graph names it, so
//   - an eagerly launched kernel belongs to the innermost range open on the launching thread when
//     its launch API call started (joined through the correlation id);
//   - a kernel replayed from a CUDA graph has no range around it (ranges are not re-emitted at
//     replay); it belongs to the op that was open when its graph node was captured: node -> the
//     capture-time launch's correlation id -> that launch's thread and time -> innermost range,
//     and clones of a node inherit its op.
// Every occurrence of an op gets an instance number in time order (one NVTX range, or one graph
// launch), which is the step when an op runs once per step. What cannot be attributed is counted
// by reason; CUPTI's dropped-record count is carried into the trace.
// Steps: with external correlation records (the program's step ids pushed around its launches), or else
// with NVTX ranges named "step N" (the engine's) or "ProfilerStep#N" (PyTorch's) around a step's launches,
// every step becomes a range named "step N" on the host track kStepTrackThread, from its first GPU work's
// start to its last one's end (graph replays included: their kernels share the launch's correlation).
// Step ranges are never op ranges: a kernel inside one and no op range is outside op ranges.
#pragma once

#include "profiler/attribution/activity.h"
#include "profiler/trace/trace.h"

#include <cstdint>
#include <map>
#include <string>

namespace k3::profiler {

struct AttributionReport {
  std::size_t kernels = 0;
  std::size_t attributed_through_ranges = 0;       // eager launches
  std::size_t attributed_through_graph_nodes = 0;  // graph replays
  std::size_t without_launch_record = 0;           // no API call with the kernel's correlation id (dropped)
  std::size_t outside_op_ranges = 0;               // launched with no range open on the thread
  std::size_t graph_node_not_captured = 0;         // replayed node with no op from capture
  std::size_t unmatched_markers = 0;               // a pop or end without its push or start
  std::size_t unclosed_ranges = 0;                 // a push or start never closed (ends at the trace's end)
  std::uint64_t dropped_records = 0;               // reported by the collector
  std::size_t steps = 0;                           // distinct steps with GPU work
  std::size_t kernels_in_steps = 0;                // kernels whose launch was in one

  std::size_t attributed() const { return attributed_through_ranges + attributed_through_graph_nodes; }
  std::size_t unattributed() const { return kernels - attributed(); }
};

struct Attribution {
  Trace trace;  // sorted; kernels, copies and sets carry op and op_instance; metadata holds the report
  AttributionReport report;
  std::map<std::uint64_t, std::string> graph_node_ops;  // captured and cloned node id -> op
};

Attribution attribute(const ActivityRecords& records);

// The report's counts as the trace's integer metadata ("kernels", "unattributed_kernels_...", "dropped_records", ...).
void write_report_metadata(const AttributionReport& r, Trace* trace);

}  // namespace k3::profiler
