#include "profiler/cupti/cupti_source.h"

#include "core/error.h"
#include "profiler/trace/trace.h"

#include <cupti.h>
#include <cxxabi.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace k3::profiler {

namespace {

constexpr std::size_t kBufferBytes = 8u << 20;
constexpr std::size_t kBufferAlign = 8;

void check(CUptiResult status, const char* call) {
  if (status != CUPTI_SUCCESS) {
    const char* text = nullptr;
    cuptiGetResultString(status, &text);
    throw Error(fmt::format("CUPTI {} failed: {}", call, text ? text : "unknown error"));
  }
}

std::string demangled(const char* name) {
  if (!name) return "?";
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || !out) return name;
  std::string result(out);
  std::free(out);
  return result;
}

}  // namespace

struct CuptiActivitySource::State {
  std::mutex mutex;
  std::size_t max_buffers = 0;
  std::uint32_t flush_period_ms = 0;
  std::size_t buffers_given = 0;
  ActivityRecords records;
  CUpti_SubscriberHandle subscriber = nullptr;
  std::vector<std::string> errors;
};

namespace {

// CUPTI's callbacks have no user data for the buffer requests: one collector at a time.
CuptiActivitySource::State* g_state = nullptr;
// Correlation ids of the API calls in progress on this thread (a runtime call may enter the driver).
thread_local std::vector<uint32_t> t_api_stack;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = nullptr;
  *size = 0;
  *max_records = 0;
  CuptiActivitySource::State* s = g_state;
  if (!s) return;
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    if (s->buffers_given >= s->max_buffers) return;  // records beyond the cap are dropped and counted
    ++s->buffers_given;
  }
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
}

// The fields copies and sets share (CUpti_ActivityMemcpy6, CUpti_ActivityMemset4).
template <typename Record>
MemoryActivity memory_activity(const Record& m, bool is_set, const char* name) {
  MemoryActivity a;
  a.is_set = is_set;
  a.name = name;
  a.start_ns = int64_t(m.start);
  a.end_ns = int64_t(m.end);
  a.device = int32_t(m.deviceId);
  a.stream = int32_t(m.streamId);
  a.correlation = m.correlationId;
  a.graph_node = m.graphNodeId;
  a.bytes = int64_t(m.bytes);
  return a;
}

void convert(CUpti_Activity* record, ActivityRecords& out) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(record);
      out.kernels.push_back({demangled(k->name), int64_t(k->start), int64_t(k->end), int32_t(k->deviceId),
                             int32_t(k->streamId), k->correlationId, k->graphNodeId});
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<CUpti_ActivityMemcpy6*>(record);
      const char* name = m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD   ? "memcpy_htod"
                         : m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH ? "memcpy_dtoh"
                         : m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOD ? "memcpy_dtod"
                                                                          : "memcpy";
      out.memory.push_back(memory_activity(*m, false, name));
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET:
      out.memory.push_back(memory_activity(*reinterpret_cast<CUpti_ActivityMemset4*>(record), true, "memset"));
      break;
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto* a = reinterpret_cast<CUpti_ActivityAPI*>(record);
      const char* name = nullptr;
      cuptiGetCallbackName(
          record->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API,
          a->cbid, &name);
      // CUPTI names calls with their version ("cudaLaunchKernel_v7000"); traces use the API's name.
      out.api_calls.push_back({name ? unversioned_api_name(name) : fmt::format("api{}", a->cbid), int64_t(a->start),
                               int64_t(a->end), int64_t(a->threadId), a->correlationId});
      break;
    }
    case CUPTI_ACTIVITY_KIND_MARKER: {
      const auto* m = reinterpret_cast<CUpti_ActivityMarker2*>(record);
      MarkerActivity a;
      a.timestamp_ns = int64_t(m->timestamp);
      a.id = m->id;
      a.thread = m->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ? int64_t(m->objectId.pt.threadId) : 0;
      if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
        a.phase = MarkerPhase::start;
        a.name = m->name ? m->name : "";
      } else if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
        a.phase = MarkerPhase::end;
      } else {
        break;  // instantaneous markers carry no range
      }
      out.markers.push_back(a);
      break;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto* w = reinterpret_cast<CUpti_ActivitySynchronization2*>(record);
      const char* name = w->type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE    ? "sync: event"
                         : w->type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT  ? "sync: stream wait event"
                         : w->type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE ? "sync: stream"
                         : w->type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE ? "sync: context"
                                                                                              : "sync";
      out.synchronizations.push_back({name, int64_t(w->start), int64_t(w->end), w->correlationId});
      break;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto* x = reinterpret_cast<CUpti_ActivityExternalCorrelation*>(record);
      if (x->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) {
        out.external_correlations.push_back({x->correlationId, x->externalId});
      }
      break;
    }
    default: break;
  }
}

uint64_t CUPTIAPI steady_clock_ns() {
  return uint64_t(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_size) {
  CuptiActivitySource::State* s = g_state;
  if (s && valid_size > 0) {
    ActivityRecords local;
    CUpti_Activity* record = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) convert(record, local);
    std::lock_guard<std::mutex> lock(s->mutex);
    auto append = [](auto& to, auto& from) { to.insert(to.end(), from.begin(), from.end()); };
    append(s->records.kernels, local.kernels);
    append(s->records.memory, local.memory);
    append(s->records.api_calls, local.api_calls);
    append(s->records.markers, local.markers);
    append(s->records.external_correlations, local.external_correlations);
    append(s->records.synchronizations, local.synchronizations);
    --s->buffers_given;
  }
  std::free(buffer);
}

void CUPTIAPI on_callback(void* user, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
  auto* s = static_cast<CuptiActivitySource::State*>(user);
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    const auto* api = static_cast<const CUpti_CallbackData*>(data);
    if (api->callbackSite == CUPTI_API_ENTER) {
      t_api_stack.push_back(api->correlationId);
    } else if (!t_api_stack.empty()) {
      t_api_stack.pop_back();
    }
    return;
  }
  if (domain != CUPTI_CB_DOMAIN_RESOURCE) return;
  const auto* resource = static_cast<const CUpti_ResourceData*>(data);
  const auto* graph = static_cast<const CUpti_GraphData*>(resource->resourceDescriptor);
  if (!graph) return;
  if (id == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED) {
    uint64_t node = 0;
    if (cuptiGetGraphNodeId(graph->node, &node) != CUPTI_SUCCESS || t_api_stack.empty()) return;
    std::lock_guard<std::mutex> lock(s->mutex);
    s->records.graph_node_captures.push_back({node, t_api_stack.back()});
  } else if (id == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) {
    uint64_t original = 0, clone = 0;
    if (cuptiGetGraphNodeId(graph->originalNode, &original) != CUPTI_SUCCESS ||
        cuptiGetGraphNodeId(graph->node, &clone) != CUPTI_SUCCESS) {
      return;
    }
    std::lock_guard<std::mutex> lock(s->mutex);
    s->records.graph_node_clones.push_back({original, clone});
  }
}

constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                         CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET,
                                         CUPTI_ACTIVITY_KIND_RUNTIME,
                                         CUPTI_ACTIVITY_KIND_DRIVER,
                                         CUPTI_ACTIVITY_KIND_MARKER,
                                         CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                         CUPTI_ACTIVITY_KIND_SYNCHRONIZATION};

}  // namespace

CuptiActivitySource::CuptiActivitySource(std::size_t max_buffers, std::uint32_t flush_period_ms)
    : state_(std::make_unique<State>()) {
  K3_CHECK(max_buffers > 0, "the CUPTI collector needs at least one buffer");
  state_->max_buffers = max_buffers;
  state_->flush_period_ms = flush_period_ms;
}

void CuptiActivitySource::push_step(std::uint64_t step) {
  if (g_state) cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, step);
}

void CuptiActivitySource::pop_step() {
  uint64_t popped = 0;
  if (g_state) cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &popped);
}

CuptiActivitySource::~CuptiActivitySource() {
  if (running_) {
    try {
      stop();
    } catch (...) {
    }
  }
}

void CuptiActivitySource::start() {
  K3_CHECK(!running_, "the CUPTI collector is already running");
  K3_CHECK(g_state == nullptr, "another CUPTI collector is running in this process");
  state_->records = ActivityRecords{};
  g_state = state_.get();
  try {
    check(cuptiSubscribe(&state_->subscriber, on_callback, state_.get()), "cuptiSubscribe");
    check(cuptiEnableDomain(1, state_->subscriber, CUPTI_CB_DOMAIN_RUNTIME_API), "cuptiEnableDomain(runtime)");
    check(cuptiEnableDomain(1, state_->subscriber, CUPTI_CB_DOMAIN_DRIVER_API), "cuptiEnableDomain(driver)");
    check(cuptiEnableCallback(1, state_->subscriber, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED),
          "cuptiEnableCallback(GRAPHNODE_CREATED)");
    check(cuptiEnableCallback(1, state_->subscriber, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED),
          "cuptiEnableCallback(GRAPHNODE_CLONED)");
    check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
    // Before any kind is enabled (CUPTI's rule), so every record uses it.
    check(cuptiActivityRegisterTimestampCallback(steady_clock_ns), "cuptiActivityRegisterTimestampCallback");
    for (CUpti_ActivityKind kind : kKinds) check(cuptiActivityEnable(kind), "cuptiActivityEnable");
    check(cuptiActivityFlushPeriod(state_->flush_period_ms), "cuptiActivityFlushPeriod");
  } catch (...) {
    if (state_->subscriber) cuptiUnsubscribe(state_->subscriber);
    state_->subscriber = nullptr;
    g_state = nullptr;
    throw;
  }
  running_ = true;
}

ActivityRecords CuptiActivitySource::stop() {
  K3_CHECK(running_, "the CUPTI collector was not started");
  running_ = false;
  // The caller has synchronised with its work (no CUDA runtime call here: as an injection library this code
  // may share a process with another copy of the runtime, linked statically into the program).
  // Outside our mutex: buffer_completed takes it while the flush runs.
  cuptiActivityFlushPeriod(0);  // back to CUPTI's own flushing
  check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  for (CUpti_ActivityKind kind : kKinds) cuptiActivityDisable(kind);
  size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
  cuptiUnsubscribe(state_->subscriber);
  state_->subscriber = nullptr;
  g_state = nullptr;
  std::lock_guard<std::mutex> lock(state_->mutex);
  ActivityRecords out = std::move(state_->records);
  out.dropped_records += dropped;
  out.metadata["clock"] = "steady_clock ns (CUPTI timestamp callback)";
  out.metadata["flush_period_ms"] = std::to_string(state_->flush_period_ms);
  out.integer_keys.insert("flush_period_ms");
  state_->records = ActivityRecords{};
  return out;
}

std::string enable_nvtx_injection() {
  if (const char* set = std::getenv("NVTX_INJECTION64_PATH"); set && *set) return set;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cuptiSubscribe), &info) == 0 || !info.dli_fname) return "";
  setenv("NVTX_INJECTION64_PATH", info.dli_fname, 1);
  return info.dli_fname;
}

}  // namespace k3::profiler
