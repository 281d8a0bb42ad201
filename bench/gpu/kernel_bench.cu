// kernel_bench: the kernels of kernels/ against the speed of light on the GPU it runs on.
// Method (DESIGN §6): count the fewest bytes and the FLOPs of each op first; warm up; rotate over
// input buffers larger than L2 so every timed launch reads from HBM; median of many launches timed
// with CUDA events. Each result is reported as achieved bytes/s and FLOP/s, beside
//   - the device-to-device copy bandwidth measured in the same run (read + write counted), and
//   - the roofline time that sim/ predicts for the same op on this GPU's hardware file
//     (max(FLOPs / (peak·η_compute), bytes / (bandwidth·η_memory)) of the op's efficiency class).
// Prints one JSON object.
//
// Usage: kernel_bench [--hardware scenarios/hardware/h200-sxm.yaml] [--repeats N]
#include "core/hardware.h"
#include "kernels/cuda_check.h"
#include "kernels/kda_decode.h"
#include "kernels/mxfp4_gemv.h"
#include "kernels/rmsnorm.h"

#include <cuda_bf16.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

using k3::EfficiencyClass;

struct Result {
  std::string name;
  double bytes = 0, flops = 0, median_us = 0, roofline_us = 0;
  EfficiencyClass cls = EfficiencyClass::elementwise;
};

// Median microseconds of `launch(i)` over `repeats` timed launches after `warmup` untimed ones;
// `i` selects the rotated buffer set.
double time_us(const std::function<void(int)>& launch, int repeats, int warmup = 5) {
  for (int i = 0; i < warmup; ++i) launch(i);
  CUDA_CHECK(cudaDeviceSynchronize());
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> samples;
  for (int i = 0; i < repeats; ++i) {
    CUDA_CHECK(cudaEventRecord(start));
    launch(i);
    CUDA_CHECK(cudaEventRecord(stop));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    samples.push_back(ms * 1000.0);
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

template <typename T>
T* device_alloc(size_t n, uint8_t fill) {
  T* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, n * sizeof(T)));
  CUDA_CHECK(cudaMemset(p, fill, n * sizeof(T)));
  return p;
}

// Number of copies of a `bytes`-sized working set needed to exceed twice the L2.
int rotation(double bytes, double l2_bytes) { return std::max(1, int(2.0 * l2_bytes / std::max(1.0, bytes)) + 1); }

}  // namespace

int main(int argc, char** argv) {
  std::string hardware_path = "scenarios/hardware/h200-sxm.yaml";
  int repeats = 50;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--hardware") == 0) hardware_path = argv[i + 1];
    if (std::strcmp(argv[i], "--repeats") == 0) repeats = std::atoi(argv[i + 1]);
  }
  const k3::Hardware hw = k3::load_hardware(hardware_path);
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const double l2 = prop.l2CacheSize;
  std::vector<Result> results;

  // Measured ceiling: device-to-device copy of 1 GiB (read + write counted).
  const size_t copy_bytes = size_t(1) << 30;
  uint8_t* a = device_alloc<uint8_t>(copy_bytes, 1);
  uint8_t* b = device_alloc<uint8_t>(copy_bytes, 2);
  const double copy_us = time_us([&](int) { CUDA_CHECK(cudaMemcpyAsync(b, a, copy_bytes, cudaMemcpyDeviceToDevice)); },
                                 repeats);
  const double copy_bytes_per_s = 2.0 * copy_bytes / (copy_us * 1e-6);
  CUDA_CHECK(cudaFree(a));
  CUDA_CHECK(cudaFree(b));

  auto roofline_us = [&](double flops, double bytes, EfficiencyClass cls, k3::ComputeType ct) {
    const k3::Efficiency& e = hw.efficiency_of(cls);
    return std::max(flops / (hw.peak(ct) * e.compute), bytes / (hw.hbm_bandwidth_bytes_per_s * e.memory)) * 1e6;
  };

  // RMSNorm, bf16, 4096 tokens x 7168.
  {
    const int64_t rows = 4096, width = 7168;
    const double bytes = 2.0 * rows * width * 2 + width * 2;
    const int sets = rotation(bytes, l2);
    std::vector<__nv_bfloat16*> x(sets), y(sets);
    for (int s = 0; s < sets; ++s) {
      x[s] = device_alloc<__nv_bfloat16>(rows * width, 0x3F);
      y[s] = device_alloc<__nv_bfloat16>(rows * width, 0);
    }
    __nv_bfloat16* w = device_alloc<__nv_bfloat16>(width, 0x3F);
    Result r{"rmsnorm_bf16 4096x7168", bytes, 4.0 * rows * width};
    r.median_us = time_us([&](int i) {
      CUDA_CHECK(k3::kernels::rmsnorm_bf16(x[i % sets], width, w, 1e-5f, y[i % sets], width, rows, width, nullptr));
    }, repeats);
    r.roofline_us = roofline_us(r.flops, r.bytes, EfficiencyClass::elementwise, k3::ComputeType::fp32);
    results.push_back(r);
    for (int s = 0; s < sets; ++s) {
      CUDA_CHECK(cudaFree(x[s]));
      CUDA_CHECK(cudaFree(y[s]));
    }
    CUDA_CHECK(cudaFree(w));
  }

  // KDA decode step, 96 heads x 128, fp32 state, batch 1..256.
  for (int batch : {1, 16, 64, 256}) {
    const int heads = 96, d = 128;
    const size_t state_elems = size_t(batch) * heads * d * d;
    const double bytes = 2.0 * state_elems * 4 + double(batch) * heads * d * 4 * 5 + batch * heads * 4;
    const double flops = double(batch) * heads * (7.0 * d * d + 2.0 * d);
    const int sets = rotation(bytes, l2);
    std::vector<float*> state(sets);
    for (int s = 0; s < sets; ++s) state[s] = device_alloc<float>(state_elems, 0);
    float* q = device_alloc<float>(size_t(batch) * heads * d, 0);
    float* k = device_alloc<float>(size_t(batch) * heads * d, 0);
    float* v = device_alloc<float>(size_t(batch) * heads * d, 0);
    float* g = device_alloc<float>(size_t(batch) * heads * d, 0);
    float* beta = device_alloc<float>(size_t(batch) * heads, 0);
    float* out = device_alloc<float>(size_t(batch) * heads * d, 0);
    Result r{fmt::format("kda_decode_step_f32state batch {} heads 96 d 128", batch), bytes, flops};
    r.cls = EfficiencyClass::recurrent;
    r.median_us = time_us([&](int i) {
      CUDA_CHECK(k3::kernels::kda_decode_step_f32state(q, k, v, g, beta, state[i % sets], out, batch, heads, d, nullptr));
    }, repeats);
    r.roofline_us = roofline_us(flops, bytes, EfficiencyClass::recurrent, k3::ComputeType::fp32);
    results.push_back(r);
    for (float* p : state) CUDA_CHECK(cudaFree(p));
    for (float* p : {q, k, v, g, beta, out}) CUDA_CHECK(cudaFree(p));
  }

  // KDA decode at batch 1 as it runs in the decode graph: 69 layers' steps (each its own state) captured in
  // one CUDA graph; the time per layer is the replay time / 69.
  {
    const int layers = 69, heads = 96, d = 128;
    const size_t state_elems = size_t(heads) * d * d, vec = size_t(heads) * d;
    std::vector<float*> state(layers);
    for (int l = 0; l < layers; ++l) state[l] = device_alloc<float>(state_elems, 0);
    float* q = device_alloc<float>(vec, 0);
    float* k = device_alloc<float>(vec, 0);
    float* v = device_alloc<float>(vec, 0);
    float* g = device_alloc<float>(vec, 0);
    float* beta = device_alloc<float>(heads, 0);
    float* out = device_alloc<float>(vec, 0);
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreate(&stream));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    for (int l = 0; l < layers; ++l) {
      CUDA_CHECK(k3::kernels::kda_decode_step_f32state(q, k, v, g, beta, state[l], out, 1, heads, d, stream));
    }
    CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    const double bytes = 2.0 * state_elems * 4 + vec * 4 * 5 + heads * 4;
    const double flops = double(heads) * (7.0 * d * d + 2.0 * d);
    Result r{"kda_decode_step_f32state batch 1, per layer of a 69-layer CUDA graph", bytes, flops};
    r.cls = EfficiencyClass::recurrent;
    r.median_us = time_us([&](int) { CUDA_CHECK(cudaGraphLaunch(exec, nullptr)); }, repeats) / layers;
    r.roofline_us = roofline_us(flops, bytes, EfficiencyClass::recurrent, k3::ComputeType::fp32);
    results.push_back(r);
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaStreamDestroy(stream));
    for (float* p : state) CUDA_CHECK(cudaFree(p));
    for (float* p : {q, k, v, g, beta, out}) CUDA_CHECK(cudaFree(p));
  }

  // MXFP4 expert GEMV: one K3 expert matrix w1 (3072 x 3584), 1..16 tokens.
  for (int tokens : {1, 4, 16}) {
    const int64_t out_rows = 3072, in = 3584;
    const double weight_bytes = out_rows * in / 2.0 + out_rows * in / 32.0;
    const double bytes = weight_bytes + tokens * in * 2.0 + tokens * out_rows * 4.0;
    const double flops = 2.0 * tokens * out_rows * in;
    const int sets = rotation(bytes, l2);
    std::vector<uint8_t*> packed(sets), scales(sets);
    for (int s = 0; s < sets; ++s) {
      packed[s] = device_alloc<uint8_t>(out_rows * in / 2, 0x22);
      scales[s] = device_alloc<uint8_t>(out_rows * in / 32, 120);
    }
    __nv_bfloat16* x = device_alloc<__nv_bfloat16>(tokens * in, 0x3F);
    float* y = device_alloc<float>(tokens * out_rows, 0);
    Result r{fmt::format("mxfp4_gemv 3072x3584 tokens {}", tokens), bytes, flops};
    r.cls = EfficiencyClass::grouped_gemm;
    r.median_us = time_us([&](int i) {
      CUDA_CHECK(k3::kernels::mxfp4_gemv_bf16(packed[i % sets], scales[i % sets], out_rows, in, x, in, tokens, y,
                                              out_rows, nullptr));
    }, repeats);
    r.roofline_us = roofline_us(flops, bytes, EfficiencyClass::grouped_gemm, k3::ComputeType::bf16);
    results.push_back(r);
    for (int s = 0; s < sets; ++s) {
      CUDA_CHECK(cudaFree(packed[s]));
      CUDA_CHECK(cudaFree(scales[s]));
    }
    CUDA_CHECK(cudaFree(x));
    CUDA_CHECK(cudaFree(y));
  }

  // MXFP4 experts at decode: the 16 experts one token selects (w1 shape), one launch.
  {
    const int64_t out_rows = 3072, in = 3584;
    const int experts_n = 16;
    const double matrix_bytes = out_rows * in / 2.0 + out_rows * in / 32.0;
    const double bytes = experts_n * matrix_bytes + in * 2.0 + experts_n * out_rows * 4.0;
    const double flops = 2.0 * experts_n * out_rows * in;
    const int sets = rotation(bytes, l2);
    std::vector<k3::kernels::Mxfp4GemvExperts> batches(sets);
    std::vector<uint8_t*> buffers;
    for (int s = 0; s < sets; ++s) {
      batches[s].count = experts_n;
      for (int e = 0; e < experts_n; ++e) {
        uint8_t* p = device_alloc<uint8_t>(out_rows * in / 2, 0x22);
        uint8_t* sc = device_alloc<uint8_t>(out_rows * in / 32, 120);
        buffers.push_back(p);
        buffers.push_back(sc);
        batches[s].packed[e] = p;
        batches[s].scales[e] = sc;
        batches[s].token_count[e] = 1;
        batches[s].token_index[e][0] = 0;
      }
    }
    __nv_bfloat16* x = device_alloc<__nv_bfloat16>(in, 0x3F);
    float* y = device_alloc<float>(experts_n * out_rows, 0);
    Result r{"mxfp4_gemv_experts 16 x (3072x3584), 1 token each", bytes, flops};
    r.cls = EfficiencyClass::grouped_gemm;
    r.median_us = time_us([&](int i) {
      CUDA_CHECK(k3::kernels::mxfp4_gemv_experts_bf16(batches[i % sets], out_rows, in, x, in, 1, y, out_rows, nullptr));
    }, repeats);
    r.roofline_us = roofline_us(flops, bytes, EfficiencyClass::grouped_gemm, k3::ComputeType::bf16);
    results.push_back(r);
    for (uint8_t* p : buffers) CUDA_CHECK(cudaFree(p));
    CUDA_CHECK(cudaFree(x));
    CUDA_CHECK(cudaFree(y));
  }

  fmt::print("{{\n  \"gpu\": \"{}\",\n  \"hardware_file\": \"{}\",\n  \"repeats\": {},\n", prop.name, hardware_path,
             repeats);
  fmt::print("  \"measured_copy_bytes_per_s\": {:.4g},\n  \"results\": [\n", copy_bytes_per_s);
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    const double bw = r.bytes / (r.median_us * 1e-6);
    fmt::print("    {{\"op\": \"{}\", \"median_us\": {:.3f}, \"bytes\": {:.6g}, \"flops\": {:.6g}, "
               "\"bytes_per_s\": {:.4g}, \"percent_of_measured_copy_bw\": {:.1f}, \"roofline_us\": {:.3f}, "
               "\"time_over_roofline\": {:.2f}}}{}\n",
               r.name, r.median_us, r.bytes, r.flops, bw, 100.0 * bw / copy_bytes_per_s, r.roofline_us,
               r.median_us / r.roofline_us, i + 1 < results.size() ? "," : "");
  }
  fmt::print("  ]\n}}\n");
  return 0;
}
