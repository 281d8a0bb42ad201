// One rank of a TP/EP layout on one GPU (engine/parallel, rank emulation), on the wide K3 twin at TP2/EP2:
//   - every attention sublayer's and the dense MLP's output on the two ranks, fed the one-GPU model's inputs, sums to
//     the one-GPU output (the ranks' heads and columns are the whole model's, split as the published layout splits
//     them, and their partial sums are what the all-reduce adds), with random shards generated on the GPU and with
//     each rank's slices loaded from a make-checkpoint checkpoint;
//   - the collectives a rank issues in a decode step are the op graph's, in its order, with its kinds and bytes;
//   - the rank's decode step is captured as a CUDA graph and replays to the eager step's tokens.
#include "core/op_graph.h"
#include "engine/parallel/emulated_communicator.h"
#include "engine/parallel/rank_shape.h"
#include "engine/runtime/device_weights.h"
#include "engine/runtime/gpu_cache.h"
#include "engine/runtime/gpu_model.h"
#include "engine/weights/checkpoint.h"
#include "engine_test_support.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace k3::gpu_test {
namespace {

using runtime::bf16;

const std::string kTwin = std::string(K3PERF_SOURCE_DIR) + "/scenarios/models/k3-twin-wide.json";
constexpr uint64_t kSeed = 11;

std::vector<float> download(const bf16* device, int64_t count) {
  std::vector<bf16> host(static_cast<std::size_t>(count));
  CUDA_CHECK(cudaMemcpy(host.data(), device, count * sizeof(bf16), cudaMemcpyDeviceToHost));
  std::vector<float> out(host.size());
  for (std::size_t i = 0; i < host.size(); ++i) out[i] = __bfloat162float(host[i]);
  return out;
}

std::vector<int32_t> prompt(int64_t n, int vocab) {
  std::vector<int32_t> p(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[i] = int32_t((i * 37 + 5) % vocab);
  return p;
}

// One GPU model (the whole twin, or one rank of it) with its weights, cache and emulated groups.
struct Engine {
  parallel::RankShape rank;
  std::unique_ptr<parallel::Communicator> tp, ep;
  std::unique_ptr<runtime::DeviceWeights> weights;
  std::unique_ptr<runtime::GpuCache> cache;
  std::unique_ptr<runtime::GpuModel> model;

  // `checkpoint`: load the rank's slices from it; null: random shards of kSeed.
  Engine(const ModelConfig& m, const Parallelism& par, int r, int max_batch, int64_t context,
         const weights::Checkpoint* checkpoint = nullptr) {
    rank = parallel::rank_shape(m, parallel::rank_layout(par, r, m.num_layers));
    const parallel::UniformRouting routing{int(m.moe->num_experts), m.moe->top_k, 3};
    if (rank.tp() > 1) tp = std::make_unique<parallel::EmulatedCommunicator>("tp", rank.layout.tp_rank, rank.tp());
    if (rank.ep() > 1) {
      ep = std::make_unique<parallel::EmulatedCommunicator>("ep", rank.layout.ep_rank, rank.ep(), routing);
    }
    weights = std::make_unique<runtime::DeviceWeights>(m, rank);
    if (checkpoint != nullptr) {
      weights->load(*checkpoint);
    } else {
      weights->fill_random(kSeed);
    }
    runtime::CacheShape cs;
    cs.max_sequences = max_batch;
    cs.max_context_tokens = context;
    runtime::ModelRunShape rs;
    rs.max_batch = max_batch;
    rs.max_chunk_tokens = 64;
    rs.max_prefill_context = context;
    rs.max_context_tokens = context;
    cache = std::make_unique<runtime::GpuCache>(rank.local, cs);
    model = std::make_unique<runtime::GpuModel>(*weights, *cache, rs, runtime::RankComms{tp.get(), ep.get(), routing});
  }
};

double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm += double(want[i]) * want[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

void expect_partial_sums_are_the_one_gpu_sublayers(const weights::Checkpoint* checkpoint) {
  K3_REQUIRE_GPU();
  const ModelConfig m = load_model_config(kTwin);
  const int64_t n = 40, h = m.hidden_size;
  const std::vector<int32_t> tokens = prompt(n, m.vocab_size);
  // The one-GPU model's sublayer inputs and outputs.
  std::map<std::string, std::vector<float>> one;
  {
    Engine e(m, Parallelism{}, 0, 1, 64, checkpoint);
    e.model->set_tap([&](const std::string& what, int layer, const bf16* d, int64_t rows, int64_t cols) {
      one[fmt::format("{}.{}", what, layer)] = download(d, rows * cols);
    });
    e.cache->admit(0, 64);
    e.model->prefill(0, tokens, 0);
  }
  Parallelism par;
  par.tp = 2;
  par.ep = 2;
  std::map<std::string, std::vector<float>> sum;
  for (int r = 0; r < 2; ++r) {
    Engine e(m, par, r, 1, 64, checkpoint);
    EXPECT_EQ(e.rank.local.mla.num_heads, m.mla.num_heads / 2);
    EXPECT_EQ(e.rank.experts, m.moe->num_experts / 2);
    // Each sublayer reads the one-GPU model's input (the rank's own residual stream holds only its shares).
    e.model->set_tap([&](const std::string& what, int layer, const bf16* d, int64_t rows, int64_t cols) {
      const std::string k = fmt::format("{}.{}", what, layer);
      if (what == "attention_in" || what == "mlp_in") {
        const std::vector<float>& in = one.at(k);
        std::vector<bf16> host(in.size());
        for (std::size_t i = 0; i < in.size(); ++i) host[i] = __float2bfloat16(in[i]);
        CUDA_CHECK(cudaMemcpy(const_cast<bf16*>(d), host.data(), host.size() * sizeof(bf16), cudaMemcpyHostToDevice));
      } else if (what == "attention_out" || what == "mlp_out") {
        const std::vector<float> out = download(d, rows * cols);
        std::vector<float>& s = sum[k];
        s.resize(out.size(), 0.0f);
        for (std::size_t i = 0; i < out.size(); ++i) s[i] += out[i];
      }
    });
    e.cache->admit(0, 64);
    e.model->prefill(0, tokens, 0);
  }
  int checked = 0;
  for (int l = 0; l < m.num_layers; ++l) {
    // A MoE layer's routed rows follow the uniform router under expert parallelism: its sum is not the model's.
    std::vector<std::string> sublayers{"attention_out"};
    if (m.layer_mlp[l] == MlpKind::dense) sublayers.push_back("mlp_out");
    for (const std::string& what : sublayers) {
      const std::string k = fmt::format("{}.{}", what, l);
      ASSERT_EQ(sum.at(k).size(), std::size_t(n * h)) << k;
      EXPECT_LT(relative_error(sum.at(k), one.at(k)), 2e-2) << k;
      ++checked;
    }
  }
  EXPECT_EQ(checked, m.num_layers + m.count_layers(MlpKind::dense));
}

TEST(EngineRank, TwoRanksPartialSumsAreTheOneGpuSublayers) { expect_partial_sums_are_the_one_gpu_sublayers(nullptr); }

// The same with every rank's slices read from a checkpoint in the published layout (DeviceWeights::load).
TEST(EngineRank, RankSlicesOfACheckpointAreTheWholeModelsPieces) {
  K3_REQUIRE_GPU();
  const std::string dir = write_test_checkpoint(kTwin, "rank-slices", 5);
  const weights::Checkpoint checkpoint = weights::Checkpoint::open(dir);
  expect_partial_sums_are_the_one_gpu_sublayers(&checkpoint);
  std::filesystem::remove_all(dir);
}

// The names, kinds and bytes of a rank's collectives in one decode step of batch 2 at TP2/EP2, against the op graph
// of the same step: all-reduces and the gather exactly; the dispatch exactly (each rank routes one token: top_k rows);
// the combine returns the rows that arrived (the uniform router's count, the graph's mean).
TEST(EngineRank, DecodeCollectivesAreTheOpGraphs) {
  K3_REQUIRE_GPU();
  const ModelConfig m = load_model_config(kTwin);
  Parallelism par;
  par.tp = 2;
  par.ep = 2;
  const int batch = 2;
  const int64_t context = 48;
  for (int r = 0; r < 2; ++r) {
    Engine e(m, par, r, batch, 64);
    for (int s = 0; s < batch; ++s) {
      e.cache->admit(s, 64);
      e.model->prefill(s, prompt(context, m.vocab_size), 0);
    }
    e.model->begin_decode(std::vector<int64_t>(batch, context));
    e.tp->clear_records();
    e.ep->clear_records();
    e.model->decode_step(batch);
    CUDA_CHECK(cudaStreamSynchronize(e.model->stream()));
    std::vector<parallel::CollectiveRecord> got = e.tp->records();
    for (const parallel::CollectiveRecord& c : e.ep->records()) got.push_back(c);
    const OpGraph g = build_op_graph(m, Phase::decode(batch, context), par, Precision{});
    std::map<std::string, const Op*> graph;
    for (const Op& op : g.ops) {
      if (op.collective) graph[op.name()] = &op;
    }
    ASSERT_EQ(got.size(), graph.size()) << "rank " << r;
    for (const parallel::CollectiveRecord& c : got) {
      ASSERT_TRUE(graph.count(c.name)) << c.name;
      const Collective& want = *graph.at(c.name)->collective;
      EXPECT_EQ(c.kind, want.kind) << c.name;
      EXPECT_EQ(c.group_size, want.group_size) << c.name;
      if (c.name.find("moe.combine") == std::string::npos) {
        EXPECT_DOUBLE_EQ(double(c.bytes), want.bytes) << c.name << " on rank " << r;
      } else {
        EXPECT_LE(double(c.bytes), want.bytes * m.moe->top_k) << c.name;  // at most every choice of both tokens
      }
    }
  }
}

// Both ranks of TP2/EP2 at batch 2: two eager runs agree (no read of memory a step did not write), and the captured
// step replays to their tokens.
TEST(EngineRank, CapturedDecodeReplaysTheEagerStep) {
  K3_REQUIRE_GPU();
  const ModelConfig m = load_model_config(kTwin);
  Parallelism par;
  par.tp = 2;
  par.ep = 2;
  const int batch = 2;
  auto run = [&](int r, bool graph) {
    Engine e(m, par, r, batch, 64);
    for (int s = 0; s < batch; ++s) {
      e.cache->admit(s, 64);
      e.model->prefill(s, prompt(20 + s, m.vocab_size), 0);
    }
    e.model->begin_decode({20, 21});
    std::vector<int32_t> out;
    e.model->decode_step(batch);  // the first step is eager either way (it makes the exchanges)
    if (graph) e.model->capture_decode(batch);
    for (int step = 0; step < 4; ++step) {
      if (graph) {
        e.model->launch_decode();
      } else {
        e.model->decode_step(batch);
      }
      // On the model's stream: it does not synchronise with the legacy default stream (cudaStreamNonBlocking), so a
      // plain cudaMemcpy could read the tokens before a replay has written them.
      std::vector<int32_t> t(batch);
      CUDA_CHECK(cudaMemcpyAsync(t.data(), e.model->next_tokens(), batch * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                 e.model->stream()));
      CUDA_CHECK(cudaStreamSynchronize(e.model->stream()));
      out.insert(out.end(), t.begin(), t.end());
    }
    std::vector<float> logits(std::size_t(batch) * m.vocab_size);
    CUDA_CHECK(cudaMemcpyAsync(logits.data(), e.model->logits(), logits.size() * sizeof(float), cudaMemcpyDeviceToHost,
                               e.model->stream()));
    CUDA_CHECK(cudaStreamSynchronize(e.model->stream()));
    for (float v : logits) EXPECT_TRUE(std::isfinite(v));
    return out;
  };
  for (int r = 0; r < 2; ++r) {
    const std::vector<int32_t> eager = run(r, false);
    EXPECT_EQ(run(r, false), eager) << "rank " << r << ": two eager runs differ";
    EXPECT_EQ(run(r, true), eager) << "rank " << r << ": the captured step's replays differ from the eager steps";
  }
}

}  // namespace
}  // namespace k3::gpu_test
