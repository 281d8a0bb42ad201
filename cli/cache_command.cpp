// `k3perf cache`: a request trace (Mooncake JSONL, Azure CSV) or a synthetic session workload
// through the hybrid prefix cache (docs/cache.md); a table on the terminal, JSON and CSV on request.
#include "cli/commands.h"
#include "cli/verb_runs.h"
#include "core/atomic_file.h"
#include "plot/views/sim_charts.h"

#include <fmt/core.h>

namespace k3::cli {
namespace {

struct CacheOptions {
  verbs::CacheRequest request;
  std::string json_path, csv_path, curve_csv_path, plot_path;
};

void run(const CacheOptions& o, const GlobalOptions& global) {
  const verbs::CacheRun r = verbs::run_cache(o.request, DataPaths::resolve(global.data_dir));
  const workload::TraceStats& stats = r.stats;
  const cache::Prices& prices = o.request.prices;
  fmt::print("prefix cache: {} on {}\n", r.label, r.model.name);
  fmt::print(
      "  trace        {} requests over {:.1f} s, mean input {:.0f} and output {:.0f} tokens; prefix reuse "
      "in the trace {:.2f}%\n",
      stats.requests, stats.duration_ms / 1e3, stats.mean_input_tokens(), stats.mean_output_tokens(),
      100 * stats.prefix_reuse);
  if (const auto& d = r.deployment) {
    fmt::print("  prefill on   {} x{} (tp {}, ep {}) from {}\n", d->hardware.name, d->parallelism.gpus(),
               d->parallelism.tp, d->parallelism.ep, o.request.scenario);
  }
  fmt::print("  prices       {:.2f} $ (hit) / {:.2f} $ (miss) / {:.2f} $ (output) per M tokens\n", prices.hit_per_mtok,
             prices.miss_per_mtok, prices.output_per_mtok);
  fmt::print("{}", cache::format_summary(r.config, r.sizes, r.summary));
  if (o.request.curve) {
    fmt::print("\nhit rate vs {} capacity (other tiers as given)\n{}", r.config.tiers[0].name,
               cache::format_curve(r.curve));
    if (!o.curve_csv_path.empty()) {
      write_file_atomically(o.curve_csv_path, cache::curve_csv(r.curve));
      fmt::print(stderr, "wrote {}\n", o.curve_csv_path);
    }
    if (!o.plot_path.empty()) {
      plot::write_chart(plot::cache_curve_chart(r.curve, r.config.tiers[0].name, r.label, r.model.name), o.plot_path);
      fmt::print(stderr, "wrote {}\n", o.plot_path);
    }
  }
  if (!o.json_path.empty()) {
    write_file_atomically(o.json_path, verbs::cache_json(r, o.request).dump(2) + "\n");
    fmt::print(stderr, "wrote {}\n", o.json_path);
  }
  if (!o.csv_path.empty()) {
    write_file_atomically(o.csv_path, cache::outcomes_csv(r.outcomes, prices));
    fmt::print(stderr, "wrote {}\n", o.csv_path);
  }
}

}  // namespace

void add_cache_command(CLI::App& app, const GlobalOptions& global) {
  auto opts = std::make_shared<CacheOptions>();
  verbs::CacheRequest* o = &opts->request;
  CLI::App* cmd = app.add_subcommand("cache", "Run requests through the hybrid (KV + KDA state) prefix cache");
  set_help_footer(*cmd, "k3perf cache --trace data/traces/conversation_trace.jsonl --hbm-tokens 1e7 --json cache.json");
  cmd->add_option("--trace", o->trace, "a Mooncake .jsonl or Azure .csv request trace");
  cmd->add_option("--workload", o->workload, "a synthetic session workload YAML (scenarios/workloads/)");
  cmd->add_option("--seed", o->seed, "seed of the synthetic workload (default 1)");
  cmd->add_option("--scenario", o->scenario,
                  "a scenario whose model, precision and deployment also give prefill times (roofline)");
  cmd->add_option("--model", o->model, "model name or config.json when no --scenario (default kimi-k3)");
  cmd->add_option("--kda-state", o->kda_state, "KDA state storage: fp32 (default) or bf16");
  cmd->add_option("--kv-cache", o->kv_cache, "MLA KV storage: bf16 (default) or fp8");
  cmd->add_option("--hash-block", o->config.hash_block_tokens, "tokens per hash block (default 512)");
  cmd->add_option("--allocation-block", o->config.allocation_block_tokens,
                  "tokens per KV allocation block (default 512)");
  cmd->add_option("--checkpoint", o->config.checkpoint,
                  "state checkpoint placement: allocation_block, interval, marconi, prompt_end, sparse (default)");
  cmd->add_option("--checkpoint-interval", o->checkpoint_interval_tokens,
                  "tokens between checkpoints for interval and sparse (default 4096)");
  cmd->add_option("--eviction", o->config.eviction, "eviction: lru (default) or marconi");
  cmd->add_option("--marconi-alpha", o->marconi_alpha_requests,
                  "marconi eviction: requests of recency one unit of relative FLOPs per byte is worth (default 100)");
  cmd->add_option("--hbm-gib", o->hbm_gib, "GPU HBM for the cache, GiB per node (default unbounded)");
  cmd->add_option("--hbm-tokens", o->hbm_tokens, "the same in tokens of KV");
  cmd->add_option("--dram-gib", o->dram_gib, "a CPU DRAM tier, GiB per node");
  cmd->add_option("--dram-gb-per-s", o->dram_gb_per_s, "DRAM -> HBM bandwidth, GB/s (default 50)");
  cmd->add_option("--ssd-gib", o->ssd_gib, "an SSD tier, GiB per node");
  cmd->add_option("--ssd-gb-per-s", o->ssd_gb_per_s, "SSD -> HBM bandwidth, GB/s (default 5)");
  cmd->add_option("--nodes", o->config.nodes, "nodes, each with the tiers above (default 1)");
  cmd->add_flag("--pooled", o->config.pooled, "one cache pooled over the nodes instead of one per node");
  cmd->add_option("--routing", o->routing, "per-node caches: session (default) or round_robin")
      ->check(CLI::IsMember({"session", "round_robin"}));
  cmd->add_option("--price-hit", o->prices.hit_per_mtok, "USD per M cached input tokens (default 0.30)");
  cmd->add_option("--price-miss", o->prices.miss_per_mtok, "USD per M uncached input tokens (default 3.00)");
  cmd->add_option("--price-output", o->prices.output_per_mtok, "USD per M output tokens (default 0)");
  cmd->add_flag("--curve", o->curve, "also the hit rate at 1e4 ... 1e9 tokens of HBM");
  cmd->add_option("--curve-csv", opts->curve_csv_path, "write the curve as CSV (with --curve)");
  cmd->add_option("--plot", opts->plot_path, "draw the curve as SVG or PNG (by the file's extension; with --curve)");
  cmd->add_option("--json", opts->json_path, "write the summary (and curve) as JSON");
  cmd->add_option("--csv", opts->csv_path, "write one row per request as CSV");
  cmd->callback([opts, &global] { run(*opts, global); });
}

}  // namespace k3::cli
