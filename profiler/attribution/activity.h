// Activity records: what a collector hands to attribution, one struct per record kind, in the
// collector's own clock (integer nanoseconds). The CUPTI collector fills them from
// CUpti_ActivityKernel*, CUpti_ActivityMemcpy/Memset, CUpti_ActivityAPI, CUpti_ActivityMarker2 and
// the RESOURCE_GRAPHNODE_CREATED/CLONED callbacks; tests fill them by hand. Nothing here depends
// on CUDA.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace k3::profiler {

// A kernel execution (CONCURRENT_KERNEL). Kernels replayed from a CUDA graph carry the node id and
// the correlation id of the cudaGraphLaunch that replayed them (all kernels of one launch share it).
struct KernelActivity {
  std::string name;
  std::int64_t start_ns = 0, end_ns = 0;
  std::int32_t device = 0;
  std::int32_t stream = 0;
  std::uint64_t correlation = 0;
  std::uint64_t graph_node = 0;  // 0: launched eagerly
};

// A memory copy or set on the device (MEMCPY, MEMSET).
struct MemoryActivity {
  bool is_set = false;
  std::string name;  // "memcpy_htod", "memcpy_dtod", "memset", ...
  std::int64_t start_ns = 0, end_ns = 0;
  std::int32_t device = 0;
  std::int32_t stream = 0;
  std::uint64_t correlation = 0;
  std::uint64_t graph_node = 0;
  std::int64_t bytes = 0;
};

// A runtime or driver API call on a host thread (RUNTIME, DRIVER): the launch that a kernel's
// correlation id points back to.
struct ApiActivity {
  std::string name;  // "cudaLaunchKernel", "cudaGraphLaunch", ...
  std::int64_t start_ns = 0, end_ns = 0;
  std::int64_t thread = 0;
  std::uint64_t correlation = 0;
};

// A wait of the host for the device (SYNCHRONIZATION): a stream, event, context or stream-wait-event
// synchronisation, tied by correlation id to the API call that waited (whose thread it is drawn on).
struct SyncActivity {
  std::string name;  // "sync: stream", "sync: event", "sync: context", "sync: stream wait event"
  std::int64_t start_ns = 0, end_ns = 0;
  std::uint64_t correlation = 0;
};

// An NVTX marker (MARKER). Push/pop ranges pair per thread, last pushed first popped; start/end
// ranges pair by id (the end may come from another thread). The name is read at push and start.
enum class MarkerPhase { push, pop, start, end };
struct MarkerActivity {
  MarkerPhase phase = MarkerPhase::push;
  std::int64_t timestamp_ns = 0;
  std::int64_t thread = 0;
  std::uint64_t id = 0;  // start/end only
  std::string name;      // push/start only
};

// A graph node created while a stream was being captured: CUPTI's GRAPHNODE_CREATED callback fires
// inside the capture-time launch, whose correlation id ties the node to that launch's API call and
// through it to the op range open on its thread.
struct GraphNodeCapture {
  std::uint64_t node = 0;
  std::uint64_t correlation = 0;
};
// GRAPHNODE_CLONED: instantiating a graph copies its nodes; replayed kernels carry the clone's id.
struct GraphNodeClone {
  std::uint64_t original = 0;
  std::uint64_t clone = 0;
};

// EXTERNAL_CORRELATION: the program tagged an API call with its own id (cuptiActivityPushExternalCorrelationId;
// the engine pushes the decode step's number around each step's launches), so GPU work launched by that call
// belongs to that step.
struct ExternalCorrelation {
  std::uint64_t correlation = 0;  // the CUDA API call's correlation id
  std::uint64_t external_id = 0;  // the program's id (a decode step number)
};

struct ActivityRecords {
  std::vector<KernelActivity> kernels;
  std::vector<MemoryActivity> memory;
  std::vector<ApiActivity> api_calls;
  std::vector<SyncActivity> synchronizations;
  std::vector<MarkerActivity> markers;  // in the order they were recorded
  std::vector<GraphNodeCapture> graph_node_captures;
  std::vector<GraphNodeClone> graph_node_clones;  // in the order they were made
  std::vector<ExternalCorrelation> external_correlations;
  std::uint64_t dropped_records = 0;            // cuptiActivityGetNumDroppedRecords, summed
  std::map<std::string, std::string> metadata;  // commit, date, GPU, command: kept in the trace
  std::set<std::string> integer_keys;           // the keys of `metadata` that hold counts (Trace::integer_keys)
};

// What a collector implements. The CUPTI collector (not part of this library) subscribes in
// start() and flushes, pairs and converts its buffers in stop().
class ActivitySource {
 public:
  virtual ~ActivitySource() = default;
  virtual void start() = 0;
  virtual ActivityRecords stop() = 0;
};

// A source that hands back records it was given: for replaying saved records and for tests.
class RecordedActivitySource final : public ActivitySource {
 public:
  explicit RecordedActivitySource(ActivityRecords records) : records_(std::move(records)) {}
  void start() override { started_ = true; }
  ActivityRecords stop() override;

 private:
  ActivityRecords records_;
  bool started_ = false;
};

}  // namespace k3::profiler
