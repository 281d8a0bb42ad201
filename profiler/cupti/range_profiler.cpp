#include "profiler/cupti/range_profiler.h"

#include "core/error.h"

#include <cuda.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_result.h>
#include <cupti_target.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <map>

namespace k3::profiler {

namespace {

// A CUPTI parameter struct, zeroed, with its size set (the headers' T_STRUCT_SIZE macros).
template <typename Params>
Params zeroed(std::size_t struct_size) {
  Params p;
  std::memset(&p, 0, sizeof p);
  p.structSize = struct_size;
  return p;
}
#define K3_CUPTI_PARAMS(Type) zeroed<Type>(Type##_STRUCT_SIZE)

std::string status_text(CUptiResult status) {
  const char* text = nullptr;
  cuptiGetResultString(status, &text);
  return text ? text : fmt::format("CUPTI status {}", static_cast<int>(status));
}

std::string hint(CUptiResult status) {
  switch (status) {
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
      return " (this user may not read the GPU's performance counters: run as root, or allow every user with "
             "the NVIDIA kernel module option NVreg_RestrictProfilingToAdminUsers=0 — e.g. the line 'options nvidia "
             "NVreg_RestrictProfilingToAdminUsers=0' in a file of /etc/modprobe.d, then reload the module or "
             "reboot; in a container, also grant CAP_SYS_ADMIN)";
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
    case CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED:
      return " (another profiler holds the device: Nsight, or CUPTI's activity tracing; collect counters in a "
             "separate run)";
    case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED: return " (counters cannot be collected on a MIG instance)";
    default: return "";
  }
}

void check(CUptiResult status, const char* call) {
  if (status != CUPTI_SUCCESS)
    throw Error(fmt::format("CUPTI {} failed: {}{}", call, status_text(status), hint(status)));
}

// The three driver calls the collector makes, looked up in the libcuda the process has loaded: linking
// libcuda would keep k3perf from starting on a machine without a GPU driver.
struct Driver {
  decltype(&cuCtxGetCurrent) ctx_get_current = nullptr;
  decltype(&cuCtxGetDevice) ctx_get_device = nullptr;
  decltype(&cuGetErrorName) get_error_name = nullptr;
};

Driver load_driver() {
  void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (!lib) lib = dlopen("libcuda.so.1", RTLD_LAZY);
  if (!lib) throw Error(fmt::format("the range profiler needs the CUDA driver (libcuda.so.1): {}", dlerror()));
  Driver d;
  d.ctx_get_current = reinterpret_cast<decltype(&cuCtxGetCurrent)>(dlsym(lib, "cuCtxGetCurrent"));
  d.ctx_get_device = reinterpret_cast<decltype(&cuCtxGetDevice)>(dlsym(lib, "cuCtxGetDevice"));
  d.get_error_name = reinterpret_cast<decltype(&cuGetErrorName)>(dlsym(lib, "cuGetErrorName"));
  if (!d.ctx_get_current || !d.ctx_get_device || !d.get_error_name) {
    throw Error("libcuda.so.1 lacks cuCtxGetCurrent, cuCtxGetDevice or cuGetErrorName");
  }
  return d;
}

void check_driver(const Driver& driver, CUresult status, const char* call) {
  if (status == CUDA_SUCCESS) return;
  const char* name = nullptr;
  driver.get_error_name(status, &name);
  throw Error(fmt::format("CUDA driver {} failed: {}", call, name ? name : fmt::format("status {}", int(status))));
}

const char* support_text(CUpti_Profiler_Support_Level level) {
  switch (level) {
    case CUPTI_PROFILER_CONFIGURATION_SUPPORTED: return "supported";
    case CUPTI_PROFILER_CONFIGURATION_DISABLED: return "disabled";
    case CUPTI_PROFILER_CONFIGURATION_UNSUPPORTED: return "unsupported";
    default: return "unknown";
  }
}

}  // namespace

struct CuptiRangeProfiler::State {
  CUcontext context = nullptr;
  std::string chip;
  std::vector<uint8_t> availability, config, counter_data;
  std::vector<const char*> metric_names;  // into options_.metrics
  bool profiler_initialized = false;      // cuptiProfilerInitialize
  CUpti_Profiler_Host_Object* host = nullptr;
  CUpti_RangeProfiler_Object* profiler = nullptr;
  bool started = false;                  // cuptiRangeProfilerStart
  std::vector<bool> open;                // per open push: whether it went to CUPTI
  std::size_t forwarded = 0;             // top-level ranges pushed to CUPTI
  std::map<std::string, int> pushes_of;  // per name: the pushes forwarded (CUPTI keeps one range per name)
  int64_t not_profiled = 0;              // top-level pushes beyond max_ranges
  std::string pop_error;                 // the first error of pop_range

  // Releases everything CUPTI holds, in reverse order; errors are ignored (this runs on error paths).
  void release() noexcept {
    if (started) {
      auto p = K3_CUPTI_PARAMS(CUpti_RangeProfiler_Stop_Params);
      p.pRangeProfilerObject = profiler;
      cuptiRangeProfilerStop(&p);
      started = false;
    }
    if (profiler) {
      auto p = K3_CUPTI_PARAMS(CUpti_RangeProfiler_Disable_Params);
      p.pRangeProfilerObject = profiler;
      cuptiRangeProfilerDisable(&p);
      profiler = nullptr;
    }
    if (host) {
      auto p = K3_CUPTI_PARAMS(CUpti_Profiler_Host_Deinitialize_Params);
      p.pHostObject = host;
      cuptiProfilerHostDeinitialize(&p);
      host = nullptr;
    }
    if (profiler_initialized) {
      auto p = K3_CUPTI_PARAMS(CUpti_Profiler_DeInitialize_Params);
      cuptiProfilerDeInitialize(&p);
      profiler_initialized = false;
    }
  }
};

CuptiRangeProfiler::CuptiRangeProfiler(RangeProfilerOptions options) : options_(std::move(options)) {
  K3_CHECK(!options_.metrics.empty(), "the range profiler needs at least one metric");
  K3_CHECK(options_.max_ranges >= 1, "the range profiler needs room for at least one range");
}

CuptiRangeProfiler::~CuptiRangeProfiler() {
  if (state_) state_->release();
}

void CuptiRangeProfiler::start() {
  K3_CHECK(!state_, "the range profiler was already started");
  auto state = std::make_unique<State>();
  State& s = *state;
  try {
    const Driver driver = load_driver();
    check_driver(driver, driver.ctx_get_current(&s.context), "cuCtxGetCurrent");
    if (!s.context) {
      throw Error(
          "the range profiler needs a current CUDA context: initialise CUDA (e.g. allocate or launch once) "
          "before start()");
    }
    CUdevice device = 0;
    check_driver(driver, driver.ctx_get_device(&device), "cuCtxGetDevice");

    auto init = K3_CUPTI_PARAMS(CUpti_Profiler_Initialize_Params);
    check(cuptiProfilerInitialize(&init), "cuptiProfilerInitialize");
    s.profiler_initialized = true;

    auto supported = K3_CUPTI_PARAMS(CUpti_Profiler_DeviceSupported_Params);
    supported.cuDevice = device;
    supported.api = CUPTI_PROFILER_RANGE_PROFILING;
    check(cuptiProfilerDeviceSupported(&supported), "cuptiProfilerDeviceSupported");
    if (supported.isSupported != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) {
      throw Error(fmt::format(
          "CUPTI: device {} does not support range profiling: architecture {}, SLI {}, vGPU {}, confidential "
          "compute {}, CMP {}, WSL {}",
          int(device), support_text(supported.architecture), support_text(supported.sli), support_text(supported.vGpu),
          support_text(supported.confidentialCompute), support_text(supported.cmp), support_text(supported.wsl)));
    }

    auto chip = K3_CUPTI_PARAMS(CUpti_Device_GetChipName_Params);
    chip.deviceIndex = static_cast<std::size_t>(device);
    check(cuptiDeviceGetChipName(&chip), "cuptiDeviceGetChipName");
    s.chip = chip.pChipName ? chip.pChipName : "";

    auto availability = K3_CUPTI_PARAMS(CUpti_Profiler_GetCounterAvailability_Params);
    availability.ctx = s.context;
    check(cuptiProfilerGetCounterAvailability(&availability), "cuptiProfilerGetCounterAvailability");
    s.availability.resize(availability.counterAvailabilityImageSize);
    availability.pCounterAvailabilityImage = s.availability.data();
    check(cuptiProfilerGetCounterAvailability(&availability), "cuptiProfilerGetCounterAvailability");

    auto host = K3_CUPTI_PARAMS(CUpti_Profiler_Host_Initialize_Params);
    host.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    host.pChipName = s.chip.c_str();
    host.pCounterAvailabilityImage = s.availability.data();
    check(cuptiProfilerHostInitialize(&host), "cuptiProfilerHostInitialize");
    s.host = host.pHostObject;

    // Each metric's base name ("dram__bytes_read" of "dram__bytes_read.sum") must be one of the chip's.
    for (const std::string& metric : options_.metrics) {
      const std::string base = metric.substr(0, metric.find('.'));
      auto props = K3_CUPTI_PARAMS(CUpti_Profiler_Host_GetMetricProperties_Params);
      props.pHostObject = s.host;
      props.pMetricName = base.c_str();
      const CUptiResult status = cuptiProfilerHostGetMetricProperties(&props);
      if (status != CUPTI_SUCCESS) {
        throw Error(fmt::format("metric '{}' is not available on chip {} (cuptiProfilerHostGetMetricProperties: {})",
                                metric, s.chip, status_text(status)));
      }
      s.metric_names.push_back(metric.c_str());
    }
    auto add = K3_CUPTI_PARAMS(CUpti_Profiler_Host_ConfigAddMetrics_Params);
    add.pHostObject = s.host;
    add.ppMetricNames = s.metric_names.data();
    add.numMetrics = s.metric_names.size();
    const CUptiResult added = cuptiProfilerHostConfigAddMetrics(&add);
    if (added != CUPTI_SUCCESS) {
      throw Error(fmt::format("CUPTI cuptiProfilerHostConfigAddMetrics failed for {{{}}} on chip {}: {}",
                              fmt::join(options_.metrics, ", "), s.chip, status_text(added)));
    }
    auto config_size = K3_CUPTI_PARAMS(CUpti_Profiler_Host_GetConfigImageSize_Params);
    config_size.pHostObject = s.host;
    check(cuptiProfilerHostGetConfigImageSize(&config_size), "cuptiProfilerHostGetConfigImageSize");
    s.config.resize(config_size.configImageSize);
    auto config = K3_CUPTI_PARAMS(CUpti_Profiler_Host_GetConfigImage_Params);
    config.pHostObject = s.host;
    config.configImageSize = s.config.size();
    config.pConfigImage = s.config.data();
    check(cuptiProfilerHostGetConfigImage(&config), "cuptiProfilerHostGetConfigImage");
    auto passes = K3_CUPTI_PARAMS(CUpti_Profiler_Host_GetNumOfPasses_Params);
    passes.configImageSize = s.config.size();
    passes.pConfigImage = s.config.data();
    check(cuptiProfilerHostGetNumOfPasses(&passes), "cuptiProfilerHostGetNumOfPasses");
    if (passes.numOfPasses != 1) {
      throw Error(
          fmt::format("the metrics {{{}}} need {} passes on chip {}; counter mode collects in one pass (the "
                      "work is not replayed): collect fewer metrics",
                      fmt::join(options_.metrics, ", "), passes.numOfPasses, s.chip));
    }

    auto enable = K3_CUPTI_PARAMS(CUpti_RangeProfiler_Enable_Params);
    enable.ctx = s.context;
    check(cuptiRangeProfilerEnable(&enable), "cuptiRangeProfilerEnable");
    s.profiler = enable.pRangeProfilerObject;

    auto data_size = K3_CUPTI_PARAMS(CUpti_RangeProfiler_GetCounterDataSize_Params);
    data_size.pRangeProfilerObject = s.profiler;
    data_size.pMetricNames = s.metric_names.data();
    data_size.numMetrics = s.metric_names.size();
    data_size.maxNumOfRanges = options_.max_ranges;
    data_size.maxNumRangeTreeNodes = static_cast<uint32_t>(options_.max_ranges);
    check(cuptiRangeProfilerGetCounterDataSize(&data_size), "cuptiRangeProfilerGetCounterDataSize");
    s.counter_data.resize(data_size.counterDataSize);
    auto data_init = K3_CUPTI_PARAMS(CUpti_RangeProfiler_CounterDataImage_Initialize_Params);
    data_init.pRangeProfilerObject = s.profiler;
    data_init.counterDataSize = s.counter_data.size();
    data_init.pCounterData = s.counter_data.data();
    check(cuptiRangeProfilerCounterDataImageInitialize(&data_init), "cuptiRangeProfilerCounterDataImageInitialize");

    auto set = K3_CUPTI_PARAMS(CUpti_RangeProfiler_SetConfig_Params);
    set.pRangeProfilerObject = s.profiler;
    set.configSize = s.config.size();
    set.pConfig = s.config.data();
    set.counterDataImageSize = s.counter_data.size();
    set.pCounterDataImage = s.counter_data.data();
    set.range = CUPTI_UserRange;
    set.replayMode = CUPTI_UserReplay;
    set.maxRangesPerPass = options_.max_ranges;
    set.numNestingLevels = 1;
    set.minNestingLevel = 1;
    set.passIndex = 0;
    set.targetNestingLevel = 1;
    check(cuptiRangeProfilerSetConfig(&set), "cuptiRangeProfilerSetConfig");

    auto begin = K3_CUPTI_PARAMS(CUpti_RangeProfiler_Start_Params);
    begin.pRangeProfilerObject = s.profiler;
    check(cuptiRangeProfilerStart(&begin), "cuptiRangeProfilerStart");
    s.started = true;
  } catch (...) {
    s.release();
    throw;
  }
  state_ = std::move(state);
}

void CuptiRangeProfiler::push_range(const std::string& name) {
  K3_CHECK(state_ && state_->started, "push_range('{}') outside start() … stop()", name);
  State& s = *state_;
  const bool top_level = s.open.empty();
  const bool profiled = top_level && s.forwarded < options_.max_ranges;
  if (top_level && !profiled) ++s.not_profiled;
  if (profiled) {
    auto p = K3_CUPTI_PARAMS(CUpti_RangeProfiler_PushRange_Params);
    p.pRangeProfilerObject = s.profiler;
    p.pRangeName = name.c_str();
    check(cuptiRangeProfilerPushRange(&p), "cuptiRangeProfilerPushRange");
    ++s.forwarded;
    ++s.pushes_of[name];
  }
  s.open.push_back(profiled);
}

void CuptiRangeProfiler::pop_range() noexcept {
  if (!state_ || !state_->started) return;
  State& s = *state_;
  if (s.open.empty()) {
    if (s.pop_error.empty()) s.pop_error = "pop_range() without an open range";
    return;
  }
  const bool profiled = s.open.back();
  s.open.pop_back();
  if (!profiled) return;
  auto p = K3_CUPTI_PARAMS(CUpti_RangeProfiler_PopRange_Params);
  p.pRangeProfilerObject = s.profiler;
  const CUptiResult status = cuptiRangeProfilerPopRange(&p);
  if (status != CUPTI_SUCCESS && s.pop_error.empty()) {
    s.pop_error = fmt::format("CUPTI cuptiRangeProfilerPopRange failed: {}", status_text(status));
  }
}

RangeCounters CuptiRangeProfiler::stop() {
  K3_CHECK(state_ && state_->started, "stop() without start()");
  std::unique_ptr<State> state = std::move(state_);
  State& s = *state;
  try {
    if (!s.pop_error.empty()) throw Error(s.pop_error);
    if (!s.open.empty()) throw Error(fmt::format("stop() with {} ranges still open", s.open.size()));
    auto end = K3_CUPTI_PARAMS(CUpti_RangeProfiler_Stop_Params);
    end.pRangeProfilerObject = s.profiler;
    check(cuptiRangeProfilerStop(&end), "cuptiRangeProfilerStop");
    s.started = false;
    if (!end.isAllPassSubmitted) throw Error("CUPTI: the range profiler needs another pass (one was configured)");

    auto decode = K3_CUPTI_PARAMS(CUpti_RangeProfiler_DecodeData_Params);  // synchronises the context
    decode.pRangeProfilerObject = s.profiler;
    check(cuptiRangeProfilerDecodeData(&decode), "cuptiRangeProfilerDecodeData");

    auto info = K3_CUPTI_PARAMS(CUpti_RangeProfiler_GetCounterDataInfo_Params);
    info.pCounterDataImage = s.counter_data.data();
    info.counterDataImageSize = s.counter_data.size();
    check(cuptiRangeProfilerGetCounterDataInfo(&info), "cuptiRangeProfilerGetCounterDataInfo");

    RangeCounters out;
    out.metrics = options_.metrics;
    std::map<std::string, int> occurrences;
    std::vector<double> values(s.metric_names.size());
    for (std::size_t i = 0; i < info.numTotalRanges; ++i) {
      auto range = K3_CUPTI_PARAMS(CUpti_RangeProfiler_CounterData_GetRangeInfo_Params);
      range.pCounterDataImage = s.counter_data.data();
      range.counterDataImageSize = s.counter_data.size();
      range.rangeIndex = i;
      range.rangeDelimiter = "/";
      check(cuptiRangeProfilerCounterDataGetRangeInfo(&range), "cuptiRangeProfilerCounterDataGetRangeInfo");
      auto evaluate = K3_CUPTI_PARAMS(CUpti_Profiler_Host_EvaluateToGpuValues_Params);
      evaluate.pHostObject = s.host;
      evaluate.pCounterDataImage = s.counter_data.data();
      evaluate.counterDataImageSize = s.counter_data.size();
      evaluate.rangeIndex = i;
      evaluate.ppMetricNames = s.metric_names.data();
      evaluate.numMetrics = s.metric_names.size();
      evaluate.pMetricValues = values.data();
      check(cuptiProfilerHostEvaluateToGpuValues(&evaluate), "cuptiProfilerHostEvaluateToGpuValues");
      CounterRange& r = out.ranges.emplace_back();
      r.name = range.rangeName ? range.rangeName : "";
      r.occurrence = occurrences[r.name]++;
      // CUPTI accumulates every push of a name into one range (seen on an H200: 4 decode steps of 71 op
      // names gave 71 ranges, each with 4 steps' bytes); the values are made per push.
      const auto pushes = s.pushes_of.find(r.name);
      const double per = pushes != s.pushes_of.end() && pushes->second > 0 ? pushes->second : 1;
      for (std::size_t m = 0; m < values.size(); ++m) r.values[options_.metrics[m]] = values[m] / per;
    }
    // Lost: pushes past the limit, plus names CUPTI dropped or did not decode (counted once).
    const std::size_t names = s.pushes_of.size();
    const std::size_t missing = names > info.numTotalRanges ? names - info.numTotalRanges : 0;
    out.lost_ranges = s.not_profiled + static_cast<int64_t>(std::max(missing, decode.numOfRangeDropped));
    out.metadata["chip"] = s.chip;
    out.metadata["ranges_pushed"] = std::to_string(s.forwarded + static_cast<std::size_t>(s.not_profiled));
    out.metadata["max_ranges_per_pass"] = std::to_string(options_.max_ranges);
    out.metadata["values"] = "per push: CUPTI sums the pushes of a name into one range, divided here by their count";
    s.release();
    return out;
  } catch (...) {
    s.release();
    throw;
  }
}

}  // namespace k3::profiler
