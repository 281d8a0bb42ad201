// device_probe: the facts of one GPU that the hardware files cite, measured directly.
//   - cudaGetDeviceProperties: SM count, L2 size, global memory;
//   - per-kernel launch cost of an empty kernel, launched eagerly and replayed from a CUDA graph
//     (median of repeated batches of 1,000 launches).
// Prints one JSON object. Build: nvcc -O2 -arch=sm_90 -o device_probe device_probe.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CUDA_CHECK(call)                                                                                     \
  do {                                                                                                       \
    cudaError_t err_ = (call);                                                                               \
    if (err_ != cudaSuccess) {                                                                               \
      std::fprintf(stderr, "%s failed at %s:%d: %s\n", #call, __FILE__, __LINE__, cudaGetErrorString(err_)); \
      std::exit(1);                                                                                          \
    }                                                                                                        \
  } while (0)

__global__ void empty_kernel() {}

namespace {

constexpr int kLaunches = 1000;
constexpr int kRepeats = 21;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median over kRepeats samples of the microseconds per kernel when `launch` issues kLaunches kernels.
template <typename Launch>
double us_per_kernel(cudaStream_t stream, Launch launch) {
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> samples;
  for (int r = 0; r < kRepeats; ++r) {
    CUDA_CHECK(cudaEventRecord(start, stream));
    launch();
    CUDA_CHECK(cudaEventRecord(stop, stream));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    samples.push_back(ms * 1000.0 / kLaunches);
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  return median(samples);
}

double eager_us(cudaStream_t stream) {
  return us_per_kernel(stream, [&] {
    for (int i = 0; i < kLaunches; ++i) empty_kernel<<<1, 1, 0, stream>>>();
  });
}

// The same kernels captured once into a graph and replayed.
double graph_us(cudaStream_t stream) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < kLaunches; ++i) empty_kernel<<<1, 1, 0, stream>>>();
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_CHECK(cudaGraphLaunch(exec, stream));  // warm-up
  CUDA_CHECK(cudaStreamSynchronize(stream));
  const double us = us_per_kernel(stream, [&] { CUDA_CHECK(cudaGraphLaunch(exec, stream)); });
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  return us;
}

}  // namespace

int main() {
  int device = 0;
  CUDA_CHECK(cudaSetDevice(device));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  int driver = 0, runtime = 0;
  CUDA_CHECK(cudaDriverGetVersion(&driver));
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreate(&stream));
  empty_kernel<<<1, 1, 0, stream>>>();
  CUDA_CHECK(cudaStreamSynchronize(stream));
  const double eager = eager_us(stream);
  const double graph = graph_us(stream);
  std::printf(
      "{\n  \"name\": \"%s\",\n  \"compute_capability\": \"%d.%d\",\n  \"sm_count\": %d,\n"
      "  \"l2_cache_bytes\": %d,\n  \"global_memory_bytes\": %zu,\n  \"cuda_driver_version\": %d,\n"
      "  \"cuda_runtime_version\": %d,\n  \"eager_kernel_launch_us\": %.3f,\n  \"graph_kernel_node_us\": %.3f,\n"
      "  \"launches_per_sample\": %d,\n  \"samples\": %d\n}\n",
      prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.l2CacheSize, prop.totalGlobalMem, driver,
      runtime, eager, graph, kLaunches, kRepeats);
  CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}
