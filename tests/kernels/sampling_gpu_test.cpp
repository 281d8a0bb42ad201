// Greedy sampling beside its op case (tests/kernels/op_cases/sampling_cases.cpp: every algorithm against a CPU argmax
// with planted ties): the cluster version replayed in a CUDA graph with new logits between replays, and argument
// rejection. (Top-p sampling, not in the library: bench/lab/sample_top_p.cu with its own checks.)
#include "gpu_harness.h"
#include "kernels/sampling.h"
#include "tests/kernels/op_cases/sampling_data.h"

#include <cmath>

namespace k3::gpu_test {
namespace {

using sampling::kK3Vocab;

using sampling::cpu_argmax;

TEST(GpuSampling, GreedyClusterPerRowReplaysInAGraph) {
  std::mt19937 rng(20261215);
  const int batch = 8;
  std::vector<float> logits = to_f32(random_matrix(batch, kK3Vocab, rng, -10.0f, 10.0f));
  K3_REQUIRE_GPU();
  DeviceBuffer<float> dlogits(logits);
  DeviceBuffer<int32_t> out(static_cast<size_t>(batch));
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreate(&stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  CUDA_CHECK(kernels::sample_greedy(dlogits.get(), batch, kK3Vocab, out.get(), stream,
                                    kernels::SampleGreedyAlgorithm::cluster_per_row));
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 3; ++replay) {
    // New logits between replays: the maximum moves to a different part of each row every time.
    for (int b = 0; b < batch; ++b) logits[size_t(b) * kK3Vocab + size_t(replay * 50000 + b * 997)] = 50.0f + replay;
    dlogits.upload(logits);
    std::vector<int32_t> expected(static_cast<size_t>(batch));
    for (int b = 0; b < batch; ++b) expected[size_t(b)] = cpu_argmax(logits.data() + size_t(b) * kK3Vocab, kK3Vocab);
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    EXPECT_EQ(out.download(), expected) << "replay " << replay;
  }
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(stream));
}

// Argument checks come before any launch, so they hold (and run) without a device.
TEST(GpuSampling, GreedyRejectsInvalidArguments) {
  static float logits[16];
  static int32_t out[1];
  EXPECT_EQ(kernels::sample_greedy(logits, 1, 0, out, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::sample_greedy(nullptr, 1, 16, out, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::sample_greedy(logits, 1, 16, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::sample_greedy(logits, -1, 16, out, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::sample_greedy(nullptr, 0, 16, nullptr, nullptr), cudaSuccess);
}

}  // namespace
}  // namespace k3::gpu_test
