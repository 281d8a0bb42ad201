// Greedy sampling, every SampleGreedyAlgorithm, against a CPU argmax with planted ties (across the cluster's parts
// too), NaN and −∞, at K3's vocabulary and odd ones.
#include "kernels/sampling.h"
#include "tests/kernels/op_cases/cases.h"
#include "tests/kernels/op_cases/sampling_data.h"

#include <algorithm>
#include <cmath>

namespace k3::gpu_test {
namespace {

using kernels::SampleGreedyAlgorithm;
using sampling::kK3Vocab;

using sampling::cpu_argmax;

OpCase sample_greedy_case() {
  OpCase c{"sample_greedy", OpKind::elementwise};  // head.sample: the engine measures it beside the graph's ops
  const int dims[][2] = {{6, kK3Vocab}, {3, 1},          {4, 1000},     {64, 37}, {5, kK3Vocab + 1},
                         {4, 9},        {70, 8192 + 12}, {1, kK3Vocab}, {4, 8},   {300, 4099}};
  for (const auto& d : dims) c.shapes.push_back(shape({{"batch", d[0]}, {"vocab", d[1]}}));
  c.variants = {variant(SampleGreedyAlgorithm::automatic, "automatic"),
                variant(SampleGreedyAlgorithm::block_per_row, "block_per_row"),
                variant(SampleGreedyAlgorithm::cluster_per_row, "cluster_per_row")};
  c.test = [](const Shape& s, std::mt19937& rng, Checks& cpu) -> GpuRun {
    const int batch = int(s["batch"]), vocab = int(s["vocab"]);
    std::vector<float> logits = to_f32(random_matrix(batch, vocab, rng, -10.0f, 10.0f));
    const auto row = [&](int b) { return logits.data() + size_t(b) * vocab; };
    const bool planted = vocab > 3 && batch >= 3;  // rows 0-2 get planted maxima, ties and NaN
    if (planted) {
      row(0)[vocab - 1] = 20.0f;                                  // the maximum at the last id
      row(1)[vocab / 2] = row(1)[1] = row(1)[vocab - 2] = 30.0f;  // a three-way tie: id 1 wins
      row(2)[0] = NAN;                                            // NaN never wins
      row(2)[3] = 25.0f;
      if (batch > 3) {
        std::fill(row(3), row(3) + vocab, -INFINITY);  // all −∞: id 0
        row(3)[2] = NAN;
      }
    }
    if (vocab > 3 && batch > 4) {
      // The same maximum at the last id of each of the cluster's parts but the first (16-byte units when the
      // vocabulary allows): the lowest of them wins.
      const int64_t units = vocab % 4 == 0 ? vocab / 4 : vocab, unit = vocab % 4 == 0 ? 4 : 1;
      const int64_t per_part = (units + kernels::kSampleGreedyClusterBlocks - 1) / kernels::kSampleGreedyClusterBlocks;
      for (int part = 2; part <= kernels::kSampleGreedyClusterBlocks; ++part) {
        const int64_t last = std::min<int64_t>(part * per_part, units) * unit - 1;
        if (last >= 0) row(4)[last] = 40.0f;
      }
    }
    std::vector<int32_t> expected(static_cast<size_t>(batch));
    for (int b = 0; b < batch; ++b) expected[size_t(b)] = cpu_argmax(row(b), vocab);
    if (planted) {
      cpu.equal("the tie's lowest id wins", expected[1], 1);
      cpu.equal("NaN never wins", expected[2], 3);
    }
    return [logits, expected, batch, vocab](const Variant& v, Checks& gpu) {
      DeviceBuffer<float> dlogits(logits);
      DeviceBuffer<int32_t> out(static_cast<size_t>(batch));
      CUDA_CHECK(kernels::sample_greedy(dlogits.get(), batch, vocab, out.get(), nullptr,
                                        algorithm_of<SampleGreedyAlgorithm>(v)));
      const std::vector<int32_t> got = out.download();
      int64_t bad = 0;
      for (size_t b = 0; b < got.size(); ++b) bad += got[b] == expected[b] ? 0 : 1;
      gpu.none("tokens equal the CPU argmax", bad);
    };
  };
  // K3's vocabulary, batch 1, 8, 64: latency-bound (the logits are the L2-resident output of the LM head).
  for (const int batch : {1, 8, 64}) c.perf_shapes.push_back(shape({{"batch", batch}, {"vocab", kK3Vocab}}));
  c.perf_variants = {variant(SampleGreedyAlgorithm::block_per_row, "block_per_row"),
                     variant(SampleGreedyAlgorithm::cluster_per_row, "cluster_per_row")};
  c.perf_name = [](const Shape& s, const Variant& v) {
    return fmt::format("sample_greedy_{} batch {} vocab {}", v.name, s["batch"], s["vocab"]);
  };
  // The logits read once, one token written per row; one comparison per logit.
  c.cost = [](const Shape& s) {
    Cost cost;
    cost.bytes = s["batch"] * s["vocab"] * 4.0 + s["batch"] * 4.0;
    cost.flops = double(s["batch"]) * s["vocab"];
    cost.timing = Timing::latency;
    return cost;
  };
  c.perf = [](const Shape& s, const Variant& v, int) -> Launch {
    const int batch = int(s["batch"]), vocab = int(s["vocab"]);
    auto logits = device_bytes<float>(size_t(batch) * vocab, 0x3F);
    auto tokens = device_bytes<int32_t>(size_t(batch), 0);
    const auto algorithm = algorithm_of<SampleGreedyAlgorithm>(v);
    return [=](int, cudaStream_t stream) {
      CUDA_CHECK(kernels::sample_greedy(logits->get(), batch, vocab, tokens->get(), stream, algorithm));
    };
  };
  return c;
}

}  // namespace

std::vector<OpCase> sampling_cases() { return {sample_greedy_case()}; }

}  // namespace k3::gpu_test
