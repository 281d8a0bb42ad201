// kernel_bench: the decode-time elementwise and recurrent kernels of kernels/ against the
// speed of light on the GPU it runs on (method and output: bench/gpu/bench_harness.h).
//
// Usage: kernel_bench [--hardware scenarios/hardware/h200-sxm.yaml] [--repeats N]
#include "bench/gpu/bench_harness.h"
#include "kernels/kda_decode.h"
#include "kernels/rmsnorm.h"

#include <cuda_bf16.h>
#include <fmt/format.h>

#include <string>
#include <vector>

using k3::EfficiencyClass;
using k3::bench::Result;
using k3::bench::device_alloc;
using k3::bench::time_us;

int main(int argc, char** argv) {
  const k3::bench::Session session(argc, argv);
  const int repeats = session.repeats;
  std::vector<Result> results;

  // RMSNorm, bf16, 4096 tokens x 7168.
  {
    const int64_t rows = 4096, width = 7168;
    const double bytes = 2.0 * rows * width * 2 + width * 2;
    const int sets = session.rotation_for(bytes);
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
    r.roofline_us = session.roofline_us(r.flops, r.bytes, EfficiencyClass::elementwise, k3::ComputeType::fp32);
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
    const int sets = session.rotation_for(bytes);
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
    r.roofline_us = session.roofline_us(flops, bytes, EfficiencyClass::recurrent, k3::ComputeType::fp32);
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
    r.roofline_us = session.roofline_us(flops, bytes, EfficiencyClass::recurrent, k3::ComputeType::fp32);
    results.push_back(r);
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaStreamDestroy(stream));
    for (float* p : state) CUDA_CHECK(cudaFree(p));
    for (float* p : {q, k, v, g, beta, out}) CUDA_CHECK(cudaFree(p));
  }

  session.print(results);
  return 0;
}
