// KDA chunked prefill beside its op cases (tests/kernels/op_cases/kda_chunk_cases.cpp: every shape against
// ref::kda_recurrent): one prompt split over two calls, a call captured in a CUDA graph, the two launches run one at
// a time (the bench's per-phase entry), inputs that are not 16-byte aligned, and the workspace sizes and argument
// checks.
#include "gpu_harness.h"
#include "kernels/kda_chunk_prefill.h"
#include "tests/kernels/op_cases/kda_chunk_data.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace k3::gpu_test {
namespace {

using Eigen::Index;
using namespace kda_chunk;

TEST(GpuKdaChunk, TwoCallsContinueOneSequence) {
  // T1 + T2 tokens in two calls (the first ending mid-chunk) equal one pass over all of them.
  struct Split {
    int first, second;
  };
  const int heads = 3;
  std::mt19937 rng(20261204);
  for (const Split split : {Split{100, 77}, Split{64, 1}, Split{1, 130}}) {
    const Inputs in = random_inputs(split.first + split.second, heads, Gate::bounded_sigmoid, rng);
    const Reference want = recurrent_reference(in, heads);
    if (!gpu_available()) continue;
    DeviceBuffer<float> state(flatten(in.state));
    DeviceCall first(slice(in, 0, split.first, in.state), heads);
    DeviceCall second(slice(in, split.first, split.second, in.state), heads);
    CUDA_CHECK(first.run(state, kGateLowerBound));
    CUDA_CHECK(second.run(state, kGateLowerBound));
    const std::string label = std::to_string(split.first) + " + " + std::to_string(split.second);
    EXPECT_LE(normalized_error(first.output(), want.out.topRows(split.first)), kTf32Tolerance) << label;
    EXPECT_LE(normalized_error(second.output(), want.out.bottomRows(split.second)), kTf32Tolerance) << label;
    EXPECT_LE(state_error(state, want, heads), kTf32Tolerance) << label;
  }
  K3_REQUIRE_GPU();
}

TEST(GpuKdaChunk, RunsInsideACudaGraph) {
  const int tokens = 130, heads = 3;
  std::mt19937 rng(20261205);
  const Inputs in = random_inputs(tokens, heads, Gate::bounded_sigmoid, rng);
  const Reference want = recurrent_reference(in, heads);
  K3_REQUIRE_GPU();
  DeviceCall call(in, heads);
  DeviceBuffer<float> state(flatten(in.state));
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreate(&stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  const cudaError_t captured = call.run(state, kGateLowerBound, stream);
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  CUDA_CHECK(captured);
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_CHECK(cudaGraphLaunch(exec, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  EXPECT_LE(normalized_error(call.output(), want.out), kTf32Tolerance);
  EXPECT_LE(state_error(state, want, heads), kTf32Tolerance);
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST(GpuKdaChunk, PhasesOneAtATimeEqualOneCall) {
  // The bench's per-launch entry: the chunk-parallel launch, then the state pass on its workspace, give the
  // reference's output and state; the state pass alone first (on a poisoned workspace) must not pass.
  const int tokens = 300, heads = 3;
  std::mt19937 rng(20261206);
  const Inputs in = random_inputs(tokens, heads, Gate::bounded_sigmoid, rng);
  const Reference want = recurrent_reference(in, heads);
  K3_REQUIRE_GPU();
  DeviceCall call(in, heads);
  call.poison();
  DeviceBuffer<float> state(flatten(in.state));
  CUDA_CHECK(call.run_phase(kernels::KdaChunkPhase::state_pass, state, kGateLowerBound));
  EXPECT_FALSE(normalized_error(call.output(), want.out) <= kTf32Tolerance) << "state pass on poison";

  DeviceBuffer<float> fresh(flatten(in.state));
  call.poison();
  CUDA_CHECK(call.run_phase(kernels::KdaChunkPhase::intra_chunk, fresh, kGateLowerBound));
  CUDA_CHECK(call.run_phase(kernels::KdaChunkPhase::state_pass, fresh, kGateLowerBound));
  EXPECT_LE(normalized_error(call.output(), want.out), kTf32Tolerance);
  EXPECT_LE(state_error(fresh, want, heads), kTf32Tolerance);
}

TEST(GpuKdaChunk, InputsNotSixteenByteAligned) {
  // q, k, v, g one float past a 16-byte boundary (as column slices of a wider buffer can be): the kernel still gives
  // the reference's output and state.
  const int tokens = 150, heads = 3;
  std::mt19937 rng(20261207);
  const Inputs in = random_inputs(tokens, heads, Gate::bounded_sigmoid, rng);
  const Reference want = recurrent_reference(in, heads);
  K3_REQUIRE_GPU();
  const auto shifted = [](const ref::Matrix& m) {  // one leading pad float, then the matrix
    std::vector<float> host = to_f32(m);
    host.insert(host.begin(), 0.0f);
    return host;
  };
  DeviceBuffer<float> q(shifted(in.q)), k(shifted(in.k)), v(shifted(in.v)), g(shifted(in.g)), beta(to_f32(in.beta));
  DeviceBuffer<float> out(size_t(in.q.size()));
  DeviceBuffer<float> workspace(kernels::kda_chunk_prefill_workspace_bytes(tokens, heads, kD) / sizeof(float));
  DeviceBuffer<float> state(flatten(in.state));
  CUDA_CHECK(kernels::kda_chunk_prefill_f32state(q.get() + 1, k.get() + 1, v.get() + 1, g.get() + 1, beta.get(),
                                                 state.get(), out.get(), tokens, heads, kD, kGateLowerBound,
                                                 workspace.get(), workspace.size() * sizeof(float), nullptr));
  EXPECT_LE(normalized_error(from_f32(out.download(), tokens, Index(heads) * kD), want.out), kTf32Tolerance);
  EXPECT_LE(state_error(state, want, heads), kTf32Tolerance);
}

TEST(GpuKdaChunk, WorkspaceSizeAndArgumentChecks) {
  // Per head and 64-token chunk: W, U, Qg, Kd [64, 128] + A_qk [64, 64] + e^{G_last} [128] fp32 = 36992 floats.
  constexpr size_t kBlockBytes = (4 * 64 * 128 + 64 * 64 + 128) * sizeof(float);
  EXPECT_EQ(kernels::kda_chunk_prefill_workspace_bytes(1, 1, 128), kBlockBytes);
  EXPECT_EQ(kernels::kda_chunk_prefill_workspace_bytes(64, 3, 128), 3 * kBlockBytes);
  EXPECT_EQ(kernels::kda_chunk_prefill_workspace_bytes(65, 96, 128), 2 * 96 * kBlockBytes);
  EXPECT_EQ(kernels::kda_chunk_prefill_workspace_bytes(8192, 96, 128), size_t(128) * 96 * kBlockBytes);
  EXPECT_EQ(kernels::kda_chunk_prefill_workspace_bytes(0, 96, 128), 0u);
  EXPECT_EQ(kernels::kda_chunk_prefill_workspace_bytes(64, 0, 128), 0u);
  EXPECT_EQ(kernels::kda_chunk_prefill_workspace_bytes(64, 96, 64), 0u);
  // U and e^{G_last} fp32, W, Qg, Kd and A_qk fp16.
  const size_t f16_block = (64 * 128 + 128) * 4 + (3 * 64 * 128 + 64 * 64) * 2;
  EXPECT_EQ(kernels::kda_chunk_prefill_workspace_traffic_bytes(65, 96, 128), 2 * 96 * f16_block);
  EXPECT_EQ(kernels::kda_chunk_prefill_workspace_traffic_bytes(0, 96, 128), 0u);

  // Argument checks come before any launch, so they hold (and run) without a device; the pointers are never read.
  float dummy[1] = {0.0f};
  float* p = dummy;
  void* aligned = reinterpret_cast<void*>(uintptr_t{1} << 20);
  void* misaligned = reinterpret_cast<void*>((uintptr_t{1} << 20) + 16);
  const auto call = [&](int tokens, int heads, int d, float lb, void* ws, size_t ws_bytes) {
    return kernels::kda_chunk_prefill_f32state(p, p, p, p, p, p, p, tokens, heads, d, lb, ws, ws_bytes, nullptr);
  };
  const size_t enough = kernels::kda_chunk_prefill_workspace_bytes(100, 4, 128);
  for (int d : {0, 64, 127, 256})
    EXPECT_EQ(call(100, 4, d, -5.0f, aligned, enough), cudaErrorInvalidValue) << "d " << d;
  EXPECT_EQ(call(0, 4, 128, -5.0f, aligned, enough), cudaErrorInvalidValue);
  EXPECT_EQ(call(-3, 4, 128, -5.0f, aligned, enough), cudaErrorInvalidValue);
  EXPECT_EQ(call(100, 0, 128, -5.0f, aligned, enough), cudaErrorInvalidValue);
  EXPECT_EQ(call(100, 4, 128, 0.5f, aligned, enough), cudaErrorInvalidValue);  // a lower bound above 0
  EXPECT_EQ(call(100, 4, 128, NAN, aligned, enough), cudaErrorInvalidValue);
  EXPECT_EQ(call(100, 4, 128, -5.0f, aligned, enough - 4), cudaErrorInvalidValue);  // workspace too small
  EXPECT_EQ(call(100, 4, 128, -5.0f, nullptr, enough), cudaErrorInvalidValue);
  EXPECT_EQ(call(100, 4, 128, -5.0f, misaligned, enough), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::kda_chunk_prefill_phase_for_bench(static_cast<kernels::KdaChunkPhase>(5), p, p, p, p, p, p, p, 100,
                                                       4, 128, -5.0f, aligned, enough, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::kda_chunk_prefill_phase_for_bench(kernels::KdaChunkPhase::state_pass, p, p, p, p, p, p, p, 100, 4,
                                                       128, -5.0f, aligned, enough - 4, nullptr),
            cudaErrorInvalidValue);
  float* null_q = nullptr;
  EXPECT_EQ(kernels::kda_chunk_prefill_f32state(null_q, p, p, p, p, p, p, 100, 4, 128, -5.0f, aligned, enough, nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace k3::gpu_test
