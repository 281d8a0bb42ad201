// nccl_sweep: times NCCL collectives over the GPUs of one host, one process driving every GPU
// (ncclCommInitAll), in the units and with the size convention of nccl-tests (doc/PERFORMANCE.md):
//   all_reduce      size = the buffer (count · 4 B), in place of nothing: send and receive buffers
//   all_gather      size = the gathered output; each rank sends size / n
//   reduce_scatter  size = the input; each rank receives size / n
//   all_to_all      size = each rank's send buffer; size / n goes to every peer (grouped send/recv)
// Per size: one checked call (every value verified on the host at three positions), `warmup` calls,
// then `repeats` timings of `iters` back-to-back calls; the time of one call is the slowest GPU's
// elapsed time over `iters`, and the median over repeats is written. fp32 sum, one stream per GPU.
// Output: CSV `collective,group_size,size_bytes,time_us,algbw_gb_s,busbw_gb_s` with '#' provenance
// lines (GPUs, driver, NCCL version, settings), written atomically.
//
//   nccl_sweep --out sweep.csv [--gpus 2] [--min-bytes 4096] [--max-bytes 1073741824] [--iters 20]
//              [--warmup 5] [--repeats 5] [--collectives all_reduce,all_gather,reduce_scatter,all_to_all]
//
// NVLink multicast (NVLS) is switched off unless NCCL_NVLS_ENABLE is already set.
#include "core/atomic_file.h"
#include "core/error.h"
#include "engine/runtime/cuda_check.h"

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define NCCL_CHECK(call)                                                                                  \
  do {                                                                                                    \
    const ncclResult_t k3_nccl_status_ = (call);                                                          \
    if (k3_nccl_status_ != ncclSuccess) {                                                                 \
      ::k3::detail::check_failed(                                                                         \
          #call, __FILE__, __LINE__,                                                                      \
          ::fmt::format("NCCL error {}: {}", int(k3_nccl_status_), ncclGetErrorString(k3_nccl_status_))); \
    }                                                                                                     \
  } while (0)

namespace {

__global__ void fill_kernel(float* data, size_t count, float value) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    data[i] = value;
  }
}

void fill(float* data, size_t count, float value, cudaStream_t stream) {
  if (count == 0) return;
  const unsigned blocks = unsigned(std::min<size_t>((count + 255) / 256, 65535));
  fill_kernel<<<blocks, 256, 0, stream>>>(data, count, value);
  CUDA_CHECK(cudaGetLastError());
}

struct Options {
  std::string out;
  int gpus = 0;  // 0 = every visible GPU
  size_t min_bytes = 4096;
  size_t max_bytes = size_t(1) << 30;
  int iters = 20;
  int warmup = 5;
  int repeats = 5;
  std::vector<std::string> collectives = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"};
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "nccl_sweep: %s\nusage: nccl_sweep --out FILE.csv [--gpus N] [--min-bytes B] [--max-bytes B] "
               "[--iters N] [--warmup N] [--repeats N] [--collectives a,b,...]\n",
               why.c_str());
  std::exit(2);
}

long long parse_positive(const char* flag, const char* text) {
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || v <= 0) usage(fmt::format("{} expects a positive integer, got '{}'", flag, text));
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage("missing value after " + a);
    const char* v = argv[++i];
    if (a == "--out")
      o.out = v;
    else if (a == "--gpus")
      o.gpus = int(parse_positive("--gpus", v));
    else if (a == "--min-bytes")
      o.min_bytes = size_t(parse_positive("--min-bytes", v));
    else if (a == "--max-bytes")
      o.max_bytes = size_t(parse_positive("--max-bytes", v));
    else if (a == "--iters")
      o.iters = int(parse_positive("--iters", v));
    else if (a == "--warmup")
      o.warmup = int(parse_positive("--warmup", v));
    else if (a == "--repeats")
      o.repeats = int(parse_positive("--repeats", v));
    else if (a == "--collectives") {
      o.collectives.clear();
      std::string list = v;
      for (size_t start = 0; start <= list.size();) {
        const size_t comma = std::min(list.find(',', start), list.size());
        const std::string name = list.substr(start, comma - start);
        if (name != "all_reduce" && name != "all_gather" && name != "reduce_scatter" && name != "all_to_all") {
          usage("unknown collective '" + name + "'");
        }
        o.collectives.push_back(name);
        start = comma + 1;
      }
    } else {
      usage("unknown option " + a);
    }
  }
  if (o.out.empty()) usage("--out is required");
  if (o.min_bytes > o.max_bytes) usage("--min-bytes is larger than --max-bytes");
  return o;
}

struct Device {
  int id = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  float* send = nullptr;
  float* recv = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
};

// Element counts of one call: what each rank sends and receives (fp32 values).
struct Counts {
  size_t send = 0, recv = 0;
};

Counts counts_of(const std::string& c, size_t size_bytes, int n) {
  const size_t values = size_bytes / sizeof(float);
  if (c == "all_reduce") return {values, values};
  if (c == "all_gather") return {values / n, values};
  if (c == "reduce_scatter") return {values, values / n};
  return {values, values};  // all_to_all: values / n to and from each peer
}

// One collective call on every GPU, grouped.
void launch(const std::string& c, std::vector<Device>& devs, size_t size_bytes) {
  const int n = int(devs.size());
  const Counts k = counts_of(c, size_bytes, n);
  NCCL_CHECK(ncclGroupStart());
  for (Device& d : devs) {
    if (c == "all_reduce") {
      NCCL_CHECK(ncclAllReduce(d.send, d.recv, k.send, ncclFloat, ncclSum, d.comm, d.stream));
    } else if (c == "all_gather") {
      NCCL_CHECK(ncclAllGather(d.send, d.recv, k.send, ncclFloat, d.comm, d.stream));
    } else if (c == "reduce_scatter") {
      NCCL_CHECK(ncclReduceScatter(d.send, d.recv, k.recv, ncclFloat, ncclSum, d.comm, d.stream));
    } else {
      const size_t chunk = k.send / n;
      for (int p = 0; p < n; ++p) {
        NCCL_CHECK(ncclSend(d.send + p * chunk, chunk, ncclFloat, p, d.comm, d.stream));
        NCCL_CHECK(ncclRecv(d.recv + p * chunk, chunk, ncclFloat, p, d.comm, d.stream));
      }
    }
  }
  NCCL_CHECK(ncclGroupEnd());
}

void synchronize(std::vector<Device>& devs) {
  for (Device& d : devs) {
    CUDA_CHECK(cudaSetDevice(d.id));
    CUDA_CHECK(cudaStreamSynchronize(d.stream));
  }
}

float read_value(const Device& d, size_t index) {
  float v = 0;
  CUDA_CHECK(cudaSetDevice(d.id));
  CUDA_CHECK(cudaMemcpy(&v, d.recv + index, sizeof(float), cudaMemcpyDeviceToHost));
  return v;
}

// Rank r's send buffer holds r + 1 everywhere. Checks three received positions per rank.
void check_result(const std::string& c, std::vector<Device>& devs, size_t size_bytes) {
  const int n = int(devs.size());
  const Counts k = counts_of(c, size_bytes, n);
  const float sum = float(n) * float(n + 1) / 2.0f;
  for (int r = 0; r < n; ++r) {
    for (size_t index : {size_t(0), k.recv / 2, k.recv - 1}) {
      float expected = sum;
      if (c == "all_gather") expected = float(index / (k.recv / n) + 1);  // block of rank index / per-rank
      if (c == "all_to_all") expected = float(index / (k.recv / n) + 1);  // chunk from peer index / chunk
      const float got = read_value(devs[r], index);
      K3_CHECK(got == expected, "{} of {} bytes: GPU {} received {} at element {}, expected {}", c, size_bytes,
               devs[r].id, got, index, expected);
    }
  }
}

double bus_factor(const std::string& c, int n) { return c == "all_reduce" ? 2.0 * (n - 1) / n : double(n - 1) / n; }

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (!std::getenv("NCCL_NVLS_ENABLE")) setenv("NCCL_NVLS_ENABLE", "0", 1);
  try {
    int visible = 0;
    CUDA_CHECK(cudaGetDeviceCount(&visible));
    const int n = o.gpus > 0 ? o.gpus : visible;
    K3_CHECK(n >= 2 && n <= visible, "need at least 2 GPUs and at most the {} visible, asked for {}", visible, n);
    std::vector<int> ids(n);
    for (int i = 0; i < n; ++i) ids[i] = i;
    std::vector<ncclComm_t> comms(n);
    NCCL_CHECK(ncclCommInitAll(comms.data(), n, ids.data()));
    std::vector<Device> devs(n);
    // The largest buffers any collective needs: max_bytes on both sides (all-gather receives max_bytes,
    // reduce-scatter sends max_bytes).
    const size_t max_values = o.max_bytes / sizeof(float) + 1;
    for (int i = 0; i < n; ++i) {
      Device& d = devs[i];
      d.id = ids[i];
      d.comm = comms[i];
      CUDA_CHECK(cudaSetDevice(d.id));
      CUDA_CHECK(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking));
      CUDA_CHECK(cudaMalloc(&d.send, max_values * sizeof(float)));
      CUDA_CHECK(cudaMalloc(&d.recv, max_values * sizeof(float)));
      CUDA_CHECK(cudaEventCreate(&d.start));
      CUDA_CHECK(cudaEventCreate(&d.stop));
      fill(d.send, max_values, float(i + 1), d.stream);
    }
    synchronize(devs);

    int driver = 0, nccl_version = 0;
    CUDA_CHECK(cudaDriverGetVersion(&driver));
    NCCL_CHECK(ncclGetVersion(&nccl_version));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, ids[0]));
    std::string csv = fmt::format("# nccl_sweep: {} x {}, CUDA driver {}, NCCL {}, NCCL_NVLS_ENABLE={}\n", n, prop.name,
                                  driver, nccl_version, std::getenv("NCCL_NVLS_ENABLE"));
    csv += fmt::format(
        "# fp32 sum, one process, ncclCommInitAll; per size: checked call, {} warmup, median of {} "
        "repeats of {} calls\n",
        o.warmup, o.repeats, o.iters);
    csv += "collective,group_size,size_bytes,time_us,algbw_gb_s,busbw_gb_s\n";
    for (const std::string& c : o.collectives) {
      for (size_t size = o.min_bytes; size <= o.max_bytes; size *= 2) {
        if (size % (sizeof(float) * n * n) != 0) continue;  // every per-rank and per-peer part whole
        for (Device& d : devs) {
          CUDA_CHECK(cudaSetDevice(d.id));
          CUDA_CHECK(cudaMemsetAsync(d.recv, 0, size, d.stream));
        }
        launch(c, devs, size);
        synchronize(devs);
        check_result(c, devs, size);
        for (int w = 0; w < o.warmup; ++w) launch(c, devs, size);
        synchronize(devs);
        std::vector<double> per_call_us;
        for (int rep = 0; rep < o.repeats; ++rep) {
          for (Device& d : devs) {
            CUDA_CHECK(cudaSetDevice(d.id));
            CUDA_CHECK(cudaEventRecord(d.start, d.stream));
          }
          for (int it = 0; it < o.iters; ++it) launch(c, devs, size);
          for (Device& d : devs) {
            CUDA_CHECK(cudaSetDevice(d.id));
            CUDA_CHECK(cudaEventRecord(d.stop, d.stream));
          }
          synchronize(devs);
          double slowest_ms = 0;
          for (Device& d : devs) {
            float ms = 0;
            CUDA_CHECK(cudaEventElapsedTime(&ms, d.start, d.stop));
            slowest_ms = std::max(slowest_ms, double(ms));
          }
          per_call_us.push_back(slowest_ms * 1000.0 / o.iters);
        }
        std::sort(per_call_us.begin(), per_call_us.end());
        const double t = per_call_us[per_call_us.size() / 2];
        const double algbw = double(size) / (t * 1e-6) / 1e9;
        const std::string row =
            fmt::format("{},{},{},{:.3f},{:.3f},{:.3f}\n", c, n, size, t, algbw, algbw * bus_factor(c, n));
        std::fputs(row.c_str(), stdout);
        std::fflush(stdout);
        csv += row;
      }
    }
    k3::write_file_atomically(o.out, csv);
    std::fprintf(stderr, "wrote %s\n", o.out.c_str());
    for (Device& d : devs) {
      CUDA_CHECK(cudaSetDevice(d.id));
      CUDA_CHECK(cudaEventDestroy(d.start));
      CUDA_CHECK(cudaEventDestroy(d.stop));
      CUDA_CHECK(cudaFree(d.send));
      CUDA_CHECK(cudaFree(d.recv));
      CUDA_CHECK(cudaStreamDestroy(d.stream));
      NCCL_CHECK(ncclCommDestroy(d.comm));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nccl_sweep: %s\n", e.what());
    return 1;
  }
  return 0;
}
