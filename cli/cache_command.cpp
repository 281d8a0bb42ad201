// `k3perf cache`: a request trace (Mooncake JSONL, Azure CSV) or a synthetic session workload
// through the hybrid prefix cache (docs/cache.md); a table on the terminal, JSON and CSV on request.
#include "cli/commands.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/scenario.h"
#include "core/yaml_reader.h"
#include "plot/views/sim_charts.h"
#include "sim/cache/cache_metrics.h"
#include "sim/cache/prefix_cache.h"
#include "sim/workload/azure_reader.h"
#include "sim/workload/mooncake_reader.h"
#include "sim/workload/synthetic.h"
#include "sim/workload/trace_stats.h"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>
#include <optional>

namespace k3::cli {
namespace {

struct CacheOptions {
  std::string trace, workload, scenario;
  uint64_t seed = 1;
  std::string model = "kimi-k3";
  std::string kda_state = "fp32", kv_cache = "bf16";
  cache::CacheConfig config;
  std::optional<int64_t> checkpoint_interval_tokens;  // policy parameters (--checkpoint-interval, --marconi-alpha)
  std::optional<double> marconi_alpha_requests;
  std::string routing = "session";
  std::optional<double> hbm_gib, hbm_tokens, dram_gib, ssd_gib;
  double dram_gb_per_s = 50, ssd_gb_per_s = 5;
  cache::Prices prices{0.30, 3.00, 0};
  bool curve = false;
  std::string json_path, csv_path, curve_csv_path, plot_path;
};

StorageFormat storage(const std::string& flag, const std::string& value, const std::vector<std::string>& allowed) {
  StorageFormat f;
  if (std::find(allowed.begin(), allowed.end(), value) == allowed.end() || !parse_storage_format(value, &f)) {
    throw InputError(fmt::format("{} '{}': expected one of {}", flag, value, fmt::join(allowed, ", ")));
  }
  return f;
}

std::vector<workload::Request> load_requests(const CacheOptions& o, std::string* label) {
  if (o.trace.empty() == o.workload.empty())
    throw InputError("cache: give exactly one of --trace FILE or --workload YAML");
  if (!o.workload.empty()) {
    *label = fmt::format("{} (seed {})", o.workload, o.seed);
    return workload::generate_sessions(workload::parse_session_workload(YamlNode::load_file(o.workload)), o.seed);
  }
  *label = o.trace;
  const auto ends_with = [&](const std::string& s) {
    return o.trace.size() >= s.size() && o.trace.compare(o.trace.size() - s.size(), s.size(), s) == 0;
  };
  if (ends_with(".jsonl")) return workload::read_mooncake_trace(o.trace);
  if (ends_with(".csv")) return workload::read_azure_trace(o.trace);
  throw InputError(fmt::format("{}: expected a Mooncake .jsonl or an Azure .csv trace", o.trace));
}

void run(CacheOptions& o, const GlobalOptions& global) {
  const DataPaths data = DataPaths::resolve(global.data_dir);
  if (o.checkpoint_interval_tokens) o.config.checkpoint_params.set("interval_tokens", *o.checkpoint_interval_tokens);
  if (o.marconi_alpha_requests) o.config.eviction_params.set("alpha_requests", *o.marconi_alpha_requests);
  std::optional<Scenario> deployment;
  ModelConfig model;
  Precision precision;
  if (!o.scenario.empty()) {
    deployment = load_scenario(o.scenario, data);
    model = deployment->model;
    precision = deployment->precision;
  } else {
    model = load_model_config_by_name(o.model, data.models_dir);
    precision.kda_state = storage("--kda-state", o.kda_state, {"fp32", "bf16"});
    precision.kv_cache = storage("--kv-cache", o.kv_cache, {"bf16", "fp8"});
  }
  const cache::CacheSizes sizes = cache::cache_sizes(model, precision);
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  const double inf = std::numeric_limits<double>::infinity();
  if (o.hbm_gib && o.hbm_tokens) throw InputError("cache: give --hbm-gib or --hbm-tokens, not both");
  const double hbm = o.hbm_gib ? *o.hbm_gib * kGiB : o.hbm_tokens ? *o.hbm_tokens * sizes.kv_bytes_per_token : inf;
  o.config.tiers = {{"hbm", hbm, 0}};
  if (o.dram_gib) o.config.tiers.push_back({"dram", *o.dram_gib * kGiB, o.dram_gb_per_s * 1e9});
  if (o.ssd_gib) o.config.tiers.push_back({"ssd", *o.ssd_gib * kGiB, o.ssd_gb_per_s * 1e9});
  o.config.routing = o.routing == "round_robin" ? cache::Routing::round_robin : cache::Routing::session;
  cache::validate(o.config);

  std::string label;
  const std::vector<workload::Request> requests = load_requests(o, &label);
  const workload::TraceStats stats = workload::trace_stats(requests);
  const std::vector<cache::RequestOutcome> outcomes = cache::simulate(requests, o.config, sizes);
  std::optional<cache::PrefillTimeModel> prefill;
  if (deployment) prefill.emplace(*deployment);
  const cache::CacheSummary summary = cache::summarize(requests, outcomes, o.prices, prefill ? &*prefill : nullptr);

  fmt::print("prefix cache: {} on {}\n", label, model.name);
  fmt::print(
      "  trace        {} requests over {:.1f} s, mean input {:.0f} and output {:.0f} tokens; prefix reuse "
      "in the trace {:.2f}%\n",
      stats.requests, stats.duration_ms / 1e3, stats.mean_input_tokens(), stats.mean_output_tokens(),
      100 * stats.prefix_reuse);
  if (deployment) {
    fmt::print("  prefill on   {} x{} (tp {}, ep {}) from {}\n", deployment->hardware.name,
               deployment->parallelism.gpus(), deployment->parallelism.tp, deployment->parallelism.ep, o.scenario);
  }
  fmt::print("  prices       {:.2f} $ (hit) / {:.2f} $ (miss) / {:.2f} $ (output) per M tokens\n",
             o.prices.hit_per_mtok, o.prices.miss_per_mtok, o.prices.output_per_mtok);
  fmt::print("{}", cache::format_summary(o.config, sizes, summary));

  nlohmann::ordered_json json = cache::to_json(o.config, sizes, summary);
  json["trace"] = {{"source", label},
                   {"requests", stats.requests},
                   {"mean_input_tokens", stats.mean_input_tokens()},
                   {"mean_output_tokens", stats.mean_output_tokens()},
                   {"prefix_reuse", stats.prefix_reuse}};
  json["model"] = model.name;
  if (o.curve) {
    const std::vector<double> capacities{1e4, 1e5, 1e6, 1e7, 1e8, 1e9};
    const auto curve = cache::hit_rate_curve(requests, o.config, sizes, capacities);
    fmt::print("\nhit rate vs {} capacity (other tiers as given)\n{}", o.config.tiers[0].name,
               cache::format_curve(curve));
    json["curve"] = cache::to_json(curve);
    if (!o.curve_csv_path.empty()) {
      write_file_atomically(o.curve_csv_path, cache::curve_csv(curve));
      fmt::print(stderr, "wrote {}\n", o.curve_csv_path);
    }
    if (!o.plot_path.empty()) {
      plot::write_chart(plot::cache_curve_chart(curve, o.config.tiers[0].name, label, model.name), o.plot_path);
      fmt::print(stderr, "wrote {}\n", o.plot_path);
    }
  }
  if (!o.json_path.empty()) {
    write_file_atomically(o.json_path, json.dump(2) + "\n");
    fmt::print(stderr, "wrote {}\n", o.json_path);
  }
  if (!o.csv_path.empty()) {
    write_file_atomically(o.csv_path, cache::outcomes_csv(outcomes, o.prices));
    fmt::print(stderr, "wrote {}\n", o.csv_path);
  }
}

}  // namespace

void add_cache_command(CLI::App& app, const GlobalOptions& global) {
  auto o = std::make_shared<CacheOptions>();
  CLI::App* cmd = app.add_subcommand("cache", "Run requests through the hybrid (KV + KDA state) prefix cache");
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
  cmd->add_option("--curve-csv", o->curve_csv_path, "write the curve as CSV (with --curve)");
  cmd->add_option("--plot", o->plot_path, "draw the curve as SVG or PNG (by the file's extension; with --curve)");
  cmd->add_option("--json", o->json_path, "write the summary (and curve) as JSON");
  cmd->add_option("--csv", o->csv_path, "write one row per request as CSV");
  cmd->callback([o, &global] { run(*o, global); });
}

}  // namespace k3::cli
