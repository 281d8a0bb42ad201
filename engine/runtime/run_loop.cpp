#include "engine/runtime/run_loop.h"

#include "engine/parallel/emulated_communicator.h"
#include "engine/parallel/rank_shape.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "engine/runtime/cuda_check.h"
#include "engine/runtime/device_weights.h"
#include "engine/runtime/gpu_cache.h"
#include "engine/runtime/gpu_model.h"
#include "engine/weights/checkpoint.h"
#include "engine/weights/synthetic_checkpoint.h"
#include "kernels/random_fill.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>

namespace k3::runtime {

namespace {

struct WeightsSource {
  bool random = false;
  uint64_t seed = 1;
  std::string dir;
};

WeightsSource parse_weights(const std::string& text) {
  WeightsSource w;
  if (text == "random" || text.rfind("random:", 0) == 0) {
    w.random = true;
    if (text.size() > 7) {
      const std::string seed = text.substr(7);
      if (seed.empty() || seed.find_first_not_of("0123456789") != std::string::npos) {
        throw InputError(fmt::format("--weights {}: the seed after 'random:' must be a non-negative integer", text));
      }
      w.seed = std::stoull(seed);
    }
  } else {
    w.dir = text;
  }
  return w;
}

ModelConfig load_config(const RunOptions& o, const WeightsSource& w) {
  std::string path = o.model_path;
  if (path.empty()) {
    if (w.random) throw InputError("--weights random needs --model <config.json>");
    path = (std::filesystem::path(w.dir) / "config.json").string();
  }
  ModelConfig c = o.layers > 0 ? parse_model_config(weights::slice_config_json(read_file(path), path, o.layers), path)
                               : load_model_config(path);
  if (o.attention == "as_published") return c;
  if (o.attention != "all_mla" && o.attention != "all_kda") {
    throw InputError(fmt::format("attention '{}': expected as_published, all_mla or all_kda", o.attention));
  }
  if (!w.random) {
    throw InputError(fmt::format("attention {}: a counterfactual model has no checkpoint; run it with --weights random",
                                 o.attention));
  }
  return with_all_attention(c, o.attention == "all_mla" ? AttentionKind::mla : AttentionKind::kda);
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[size_t(std::min<double>(double(v.size() - 1), p * double(v.size() - 1) + 0.5))];
}

class EventTimer {
 public:
  explicit EventTimer(cudaStream_t stream) : stream_(stream) {
    CUDA_CHECK(cudaEventCreate(&start_));
    CUDA_CHECK(cudaEventCreate(&stop_));
    CUDA_CHECK(cudaEventRecord(start_, stream_));
  }
  ~EventTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  double stop_ms() {
    CUDA_CHECK(cudaEventRecord(stop_, stream_));
    CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return ms;
  }

 private:
  cudaStream_t stream_;
  cudaEvent_t start_, stop_;
};

void say(const RunOptions& o, const std::string& line) {
  if (o.progress) o.progress(line);
}

}  // namespace

RunSummary run_engine(const RunOptions& o) {
  if (o.batch < 1 || o.prompt_tokens < 1 || o.decode_tokens < 2 || o.chunk_tokens < 1 || o.page_tokens < 1 ||
      o.context_tokens < 0) {
    throw InputError(
        fmt::format("run: batch {}, prompt tokens {}, decode tokens {} (at least 2), chunk {} and page {} "
                    "must be positive and the context non-negative",
                    o.batch, o.prompt_tokens, o.decode_tokens, o.chunk_tokens, o.page_tokens));
  }
  const WeightsSource source = parse_weights(o.weights);
  const ModelConfig config = load_config(o, source);
  DeviceWeights::check_supported(config);
  // The rank this GPU runs (the whole model on one GPU) and its groups, emulated: each collective is recorded as the
  // rank would issue it (engine/parallel/emulated_communicator.h).
  const parallel::RankShape rank =
      parallel::rank_shape(config, parallel::rank_layout(o.parallelism, o.rank, config.num_layers));
  const parallel::UniformRouting routing{config.moe ? int(config.moe->num_experts) : 0,
                                         config.moe ? config.moe->top_k : 0, o.prompt_seed};
  std::unique_ptr<parallel::Communicator> tp_group, ep_group;
  if (rank.tp() > 1)
    tp_group = std::make_unique<parallel::EmulatedCommunicator>("tp", rank.layout.tp_rank, rank.tp(), routing);
  if (rank.ep() > 1)
    ep_group = std::make_unique<parallel::EmulatedCommunicator>("ep", rank.layout.ep_rank, rank.ep(), routing);
  const RankComms comms{tp_group.get(), ep_group.get(), routing};
  const ModelConfig& local = rank.local;
  if (o.use_cuda_graph && !GpuModel::decode_capturable(config)) {
    throw InputError(
        fmt::format("{}: the decode step of a model with {} routed experts synchronises with the host once "
                    "per MoE layer (per-expert GEMMs sized on the host), so it cannot be captured as a "
                    "CUDA graph; run it with --eager",
                    config.name, to_string(config.routed_expert_format)));
  }
  const int64_t decode_start = std::max(o.context_tokens, o.prompt_tokens);
  RunSummary summary;
  summary.options = o;
  summary.model = config.name;
  summary.config = config;
  summary.layers = config.num_layers;
  summary.rank = rank.single_gpu() ? "" : rank.layout.describe();
  if (rank.ep() > 1) {
    summary.decode_routed_tokens = rank.routed_count(o.batch);
    summary.decode_routed_tokens_max = (o.batch + rank.tp() - 1) / rank.tp();
  }

  CacheShape cache_shape;
  cache_shape.max_sequences = o.batch;
  cache_shape.max_context_tokens = decode_start + o.decode_tokens;
  cache_shape.page_tokens = o.page_tokens;
  ModelRunShape run_shape;
  run_shape.max_batch = o.batch;
  run_shape.max_chunk_tokens = int(std::min<int64_t>(o.chunk_tokens, o.prompt_tokens));
  run_shape.max_prefill_context = o.prompt_tokens;
  run_shape.page_tokens = o.page_tokens;
  run_shape.max_context_tokens = cache_shape.max_context_tokens;

  // 1. The plan, before any allocation.
  int devices = 0;
  if (const cudaError_t status = cudaGetDeviceCount(&devices); status != cudaSuccess || devices == 0) {
    cudaGetLastError();
    throw InputError(fmt::format("k3perf run needs an NVIDIA GPU: {}",
                                 status != cudaSuccess ? cudaGetErrorString(status) : "no CUDA device found"));
  }
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  summary.gpu = prop.name;
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  summary.free_bytes_before = free_bytes;
  summary.memory.items = {
      {rank.single_gpu() ? "weights (device layout, MXFP4 experts packed)"
                         : fmt::format("weights of rank {} (its shards, device layout)", o.rank),
       DeviceWeights::device_bytes(config, rank)},
      {fmt::format("MLA pages and KDA state slots ({} sequences x {} tokens)", o.batch, cache_shape.max_context_tokens),
       GpuCache::device_bytes(local, cache_shape)},
      {fmt::format("activation workspace ({}-token chunks, batch {})", run_shape.max_chunk_tokens, o.batch),
       GpuModel::workspace_bytes(local, rank, run_shape)},
  };
  require_fits(summary.memory, free_bytes, prop.name);
  say(o, fmt::format("memory plan on {}:\n{}", prop.name, summary.memory.describe()));

  // 2. Weights.
  const auto t0 = std::chrono::steady_clock::now();
  DeviceWeights weights(config, rank);
  if (source.random) {
    say(o, fmt::format("generating random weights (seed {}) on the GPU", source.seed));
    weights.fill_random(source.seed);
  } else {
    say(o, fmt::format("loading {}", source.dir));
    weights.load(weights::Checkpoint::open(source.dir), o.progress);
  }
  if (o.tile_experts) {
    summary.tiled_expert_layers = weights.tile_experts();
    if (summary.tiled_expert_layers > 0) {
      say(o, fmt::format("MXFP4 experts of {} MoE layers in the tiled layout", summary.tiled_expert_layers));
    }
  }
  summary.weights_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  say(o, fmt::format("weights: {:.2f} GiB in {:.1f} s", weights.bytes() / 1073741824.0, summary.weights_seconds));

  GpuCache cache(local, cache_shape);
  GpuModel model(weights, cache, run_shape, comms);
  // One call's collectives, as the rank issued them (none on one GPU).
  auto clear_collectives = [&] {
    for (parallel::Communicator* g : {tp_group.get(), ep_group.get()}) {
      if (g) g->clear_records();
    }
  };
  auto take_collectives = [&] {
    std::vector<parallel::CollectiveRecord> all;
    for (parallel::Communicator* g : {tp_group.get(), ep_group.get()}) {
      if (g) all.insert(all.end(), g->records().begin(), g->records().end());
    }
    clear_collectives();
    return all;
  };

  // 3. Prefill each sequence's prompt, after one untimed prefill of the first prompt (it builds the GEMM
  //    plans of every prefill shape and loads the kernels; its state is then dropped).
  auto prompt_of = [&](int s) {
    std::vector<int32_t> prompt(o.prompt_tokens);
    for (int64_t i = 0; i < o.prompt_tokens; ++i) {
      prompt[i] = int32_t(kernels::random_bits(o.prompt_seed, uint64_t(s) * o.prompt_tokens + i) % config.vocab_size);
    }
    return prompt;
  };
  if (o.warmup_tokens != 0) {
    std::vector<int32_t> warmup = prompt_of(0);
    if (o.warmup_tokens > 0 && o.warmup_tokens < int64_t(warmup.size())) warmup.resize(o.warmup_tokens);
    cache.admit(0, cache_shape.max_context_tokens);
    EventTimer timer(model.stream());
    model.prefill(0, warmup, 0);
    summary.warmup_prefill_ms = timer.stop_ms();
    cache.release(0);
    say(o, fmt::format("warm-up prefill: {} tokens in {:.2f} ms (untimed below)", warmup.size(),
                       summary.warmup_prefill_ms));
  }
  double prefill_total_ms = 0;
  if (o.before_prefill) o.before_prefill();
  clear_collectives();
  for (int s = 0; s < o.batch; ++s) {
    cache.admit(s, cache_shape.max_context_tokens);
    const std::vector<int32_t> prompt = prompt_of(s);
    EventTimer timer(model.stream());
    model.prefill(s, prompt, 0);
    summary.prefill_ms.push_back(timer.stop_ms());
    prefill_total_ms += summary.prefill_ms.back();
    if (s == 0) summary.prefill_collectives = take_collectives();
    say(o, fmt::format("prefill sequence {}/{}: {} tokens in {:.2f} ms", s + 1, o.batch, o.prompt_tokens,
                       summary.prefill_ms.back()));
  }
  if (o.after_prefill) o.after_prefill();
  summary.prefill_tokens_per_s = double(o.prompt_tokens) * o.batch / (prefill_total_ms * 1e-3);

  // 4. A synthetic prefix up to the context.
  if (o.context_tokens > o.prompt_tokens) {
    const int64_t width = config.mla.cache_values_per_token(), pt = o.page_tokens;
    for (int l = 0; l < config.num_layers; ++l) {
      if (config.layer_attention[l] != AttentionKind::mla) continue;
      for (int s = 0; s < o.batch; ++s) {
        std::vector<int32_t> pages((o.context_tokens + pt - 1) / pt);
        CUDA_CHECK(
            cudaMemcpy(pages.data(), cache.page_table_row(s), pages.size() * sizeof(int32_t), cudaMemcpyDeviceToHost));
        for (int64_t i = 0; i < int64_t(pages.size()); ++i) {
          const int64_t first = std::max(i * pt, o.prompt_tokens), last = std::min((i + 1) * pt, o.context_tokens);
          if (first >= last) continue;
          __nv_bfloat16* dst = cache.mla_pages(l) + (int64_t(pages[i]) * pt + first - i * pt) * width;
          CUDA_CHECK(kernels::fill_normal_bf16(dst, (last - first) * width, 0.0f, 1.0f,
                                               kernels::random_bits(o.prompt_seed, uint64_t(l) << 32 | uint64_t(s)) + i,
                                               nullptr));
        }
      }
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    say(o, fmt::format("synthetic prefix: MLA caches extended to {} tokens", o.context_tokens));
  }

  // 5. Decode.
  model.begin_decode(std::vector<int64_t>(o.batch, decode_start));
  summary.generated.assign(o.batch, {});
  std::vector<int32_t> tokens(o.batch);
  auto collect = [&] {
    CUDA_CHECK(cudaMemcpyAsync(tokens.data(), model.next_tokens(), o.batch * sizeof(int32_t), cudaMemcpyDeviceToHost,
                               model.stream()));
    CUDA_CHECK(cudaStreamSynchronize(model.stream()));
    for (int s = 0; s < o.batch; ++s) summary.generated[s].push_back(tokens[s]);
  };
  collect();  // the prompt's greedy next token is the first decode input
  if (o.before_decode) o.before_decode();
  auto begin_step = [&](int step) {
    if (o.begin_step) o.begin_step(step);
  };
  auto end_step = [&] {
    if (o.end_step) o.end_step();
  };
  {
    clear_collectives();
    EventTimer timer(model.stream());
    begin_step(0);
    model.decode_step(o.batch);
    end_step();
    summary.first_decode_step_ms = timer.stop_ms();
    summary.decode_collectives = take_collectives();
    collect();
  }
  if (o.use_cuda_graph) model.capture_decode(o.batch);
  for (int step = 1; step < o.decode_tokens; ++step) {
    EventTimer timer(model.stream());
    begin_step(step);
    if (o.use_cuda_graph) {
      model.launch_decode();
    } else {
      model.decode_step(o.batch);
    }
    end_step();
    summary.decode_step_ms.push_back(timer.stop_ms());
    collect();
    if (step % 16 == 0 || step + 1 == o.decode_tokens) {
      say(o, fmt::format("decode step {}/{}: {:.3f} ms", step + 1, o.decode_tokens, summary.decode_step_ms.back()));
    }
  }
  if (o.after_decode) o.after_decode();
  summary.median_step_ms = percentile(summary.decode_step_ms, 0.5);
  summary.p10_step_ms = percentile(summary.decode_step_ms, 0.1);
  summary.p90_step_ms = percentile(summary.decode_step_ms, 0.9);
  summary.median_prefill_ms = percentile(summary.prefill_ms, 0.5);
  summary.decode_tokens_per_s = o.batch / (summary.median_step_ms * 1e-3);
  return summary;
}

}  // namespace k3::runtime
