// `k3perf run [scenario.yaml]`: the GPU engine on this machine's first GPU, asked what `k3perf predict`
// is asked (engine/session/run_plan.h); today's shape flags are shorthands for --set assignments.
#include "cli/commands.h"
#include "core/atomic_file.h"
#include "core/engine_sources.h"
#include "core/error.h"
#include "core/scenario.h"
#include "engine/session/run_session.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <memory>

namespace k3::cli {

namespace {

struct RunFlags {
  std::string scenario;
  std::vector<std::string> sets;
  session::EngineKnobs knobs;
  session::RunOutputs outputs;
  std::string model, hardware;
  int batch = 0, layers = 0, counters_steps = 0;
  int64_t context = 0;
  bool eager = false, dry_run = false;
  std::string expert_layout = "tiled", trace_phase, json_path, trace_format = "k3perf";
};

// The shorthand flags as --set assignments, before the explicit ones (an explicit --set wins).
std::vector<std::string> shorthand_sets(const RunFlags& f, const CLI::App& cmd) {
  std::vector<std::string> sets;
  if (cmd.count("--batch")) sets.push_back(fmt::format("workload.batch={}", f.batch));
  // Without a scenario the decode follows the prompt: at the longer of --context and --prompt-tokens.
  if (f.scenario.empty() || cmd.count("--context")) {
    sets.push_back(fmt::format("workload.context_tokens={}", std::max(f.context, f.knobs.prompt_tokens)));
  }
  if (cmd.count("--chunk-tokens"))
    sets.push_back(fmt::format("workload.prefill_chunk_tokens={}", f.knobs.chunk_tokens));
  if (cmd.count("--layers") && f.layers > 0) sets.push_back(fmt::format("overrides.layers={}", f.layers));
  if (f.eager) sets.push_back("runtime.cuda_graphs=false");
  sets.insert(sets.end(), f.sets.begin(), f.sets.end());
  return sets;
}

std::string plan_text(const session::RunPlan& p, bool predict) {
  const runtime::RunOptions& o = p.options;
  std::string out = fmt::format(
      "{}: {} ({} layers), {} scenario\n  engine: batch {}, prompt {} tokens, decode at {} tokens, {} decode steps, "
      "prefill chunks of {}, {}, weights {}\n",
      p.scenario.source, p.scenario.model.name, p.scenario.model.num_layers, session::to_string(p.subject), o.batch,
      o.prompt_tokens, std::max(o.context_tokens, o.prompt_tokens), o.decode_tokens, o.chunk_tokens,
      o.use_cuda_graph ? "CUDA graph" : "eager", o.weights);
  if (predict) {
    runtime::RunSummary s;
    session::predict_beside(p, s);
    out += fmt::format("  predicted on {}: decode step {:.3f} ms, prefill {:.3f} ms per sequence\n",
                       s.predicted_hardware, s.predicted_step_ms, s.predicted_prefill_ms);
  }
  return out;
}

}  // namespace

void add_run_command(CLI::App& app, const GlobalOptions& global) {
  auto f = std::make_shared<RunFlags>();
  CLI::App* cmd = app.add_subcommand(
      "run", "Run a scenario (or a K3-family model given by flags) on the GPU and time it beside its prediction");
  set_help_footer(*cmd,
                  "k3perf run --model kimi-k3 --weights random:7 --layers 4 --batch 1 --prompt-tokens 256 "
                  "--context 8192 --decode-tokens 64 --dry-run  # without --dry-run: on the GPU",
                  {{"2",
                    "a usage error or bad input (the message names the file, key or flag, and the value), or no "
                    "GPU (without --dry-run)"}});
  cmd->add_option("scenario", f->scenario,
                  "decode or prefill scenario YAML (docs/scenarios.md#running-a-scenario-on-the-gpu); without it, "
                  "the flags below describe the run");
  cmd->add_option("--set", f->sets, "override a scenario key (repeatable; wins over the shorthand flags)")
      ->allow_extra_args(false);
  cmd->add_option("--model", f->model,
                  "config.json, or a model name in the data folder (kimi-k3); default: the scenario's, else the "
                  "checkpoint's config.json (shorthand for --set model=...)");
  cmd->add_option("--weights", f->knobs.weights, "a checkpoint directory, or random[:seed] (generated on the GPU)")
      ->required();
  cmd->add_option("--layers", f->layers, "keep only the first N layers (0: all; shorthand for overrides.layers)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--prompt-tokens", f->knobs.prompt_tokens,
                  "prompt length per sequence, prefilled for real (a decode scenario's context caps it)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--decode-tokens", f->knobs.decode_tokens, "tokens to generate per sequence (at least 2)")
      ->check(CLI::Range(2, 1 << 24));
  cmd->add_option("--batch", f->batch, "sequences decoded together (workload.batch)")->check(CLI::PositiveNumber);
  cmd->add_option("--context", f->context,
                  "decode at this context: MLA caches extended past the prompt with a synthetic prefix "
                  "(workload.context_tokens; 0: right after the prompt)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--chunk-tokens", f->knobs.chunk_tokens, "prefill chunk (workload.prefill_chunk_tokens)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--page-tokens", f->knobs.page_tokens, "MLA cache page size")->check(CLI::PositiveNumber);
  cmd->add_option("--warmup-tokens", f->knobs.warmup_tokens,
                  "length of the untimed warm-up prefill before the timed ones (default: the whole first prompt; N: "
                  "its first N tokens, enough for a long prompt's chunk shapes; 0: none, the first prefill pays)")
      ->check(CLI::Range(int64_t{-1}, int64_t{1} << 40));
  cmd->add_option("--seed", f->knobs.prompt_seed, "seed of the random prompt token ids");
  cmd->add_option("--rank", f->knobs.rank,
                  "with parallelism.tp/ep > 1: the rank of the layout this GPU runs, its shards and collectives "
                  "emulated (docs/engine.md#parallel-layouts-and-rank-emulation)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--eager", f->eager, "decode without a CUDA graph (runtime.cuda_graphs=false)");
  cmd->add_option("--expert-layout", f->expert_layout,
                  "MXFP4 experts as the checkpoint orders them, or tiled for the decode GEMV (kernels/mxfp4_tiled.h; "
                  "where the expert shapes allow it)")
      ->check(CLI::IsMember({"tiled", "checkpoint"}));
  cmd->add_option("--json", f->json_path, "write the summary as JSON to this file");
  cmd->add_option("--trace", f->outputs.trace_path,
                  "record the decode steps with CUPTI (kernels attributed to the op graph's names through NVTX "
                  "ranges and CUDA-graph nodes) and write a Chrome/Perfetto trace (.json or .json.gz)");
  cmd->add_option("--trace-format", f->trace_format,
                  "k3perf, or kineto: the categories, names and fields of PyTorch's profiler, for HTA "
                  "(docs/profile.md#kineto-and-hta---trace-format-kineto)")
      ->check(CLI::IsMember({"k3perf", "kineto"}))
      ->capture_default_str();
  cmd->add_option("--trace-phase", f->trace_phase,
                  "what --trace records (default: the scenario's phase): the decode steps, or the timed prefills "
                  "(one chunk of the prompt is one instance of each op: pass --chunk-tokens equal to "
                  "--prompt-tokens to compare with the prediction)")
      ->check(CLI::IsMember({"decode", "prefill"}));
  cmd->add_option("--counters", f->outputs.counters_path,
                  "a separate run of the same workload for hardware counters: DRAM bytes read and written and "
                  "tensor math ops per op range of the decode steps (CUPTI Range Profiler, one pass, eager decode), "
                  "written as JSON for k3perf compare --counters");
  cmd->add_option("--counters-steps", f->counters_steps, "decode steps measured by --counters (sets --decode-tokens)")
      ->check(CLI::Range(2, 1024));
  cmd->add_option("--prediction-json", f->outputs.prediction_path,
                  "write sim/'s prediction of the traced phase of this run (for k3perf compare)");
  cmd->add_option("--hardware", f->hardware,
                  "hardware file (or name in the data folder) whose roofline prediction is printed beside the "
                  "measurement (default: the scenario's, else h200-sxm); 'none' to skip");
  cmd->add_flag("--dry-run", f->dry_run,
                "print what would run and its prediction (and write --prediction-json); no GPU needed");
  cmd->callback([f, cmd, &global] {
    RunFlags& o = *f;
    if (o.counters_steps > 0 && o.outputs.counters_path.empty()) throw InputError("--counters-steps needs --counters");
    if (o.counters_steps > 0) o.knobs.decode_tokens = o.counters_steps;
    o.knobs.tile_experts = o.expert_layout == "tiled";
    const DataPaths data = DataPaths::resolve(global.data_dir);
    o.outputs.predict = o.hardware != "none";
    const std::string hardware =
        o.hardware == "none" || o.hardware.empty() ? (o.scenario.empty() ? "h200-sxm" : "") : o.hardware;
    // The model: --model, else the scenario's, else the checkpoint's config.json.
    std::string model = o.model.empty() ? "" : data.model_file(o.model);
    if (model.empty() && o.scenario.empty() && o.knobs.weights.rfind("random", 0) != 0) {
      model = (std::filesystem::path(o.knobs.weights) / "config.json").string();
    }
    const Scenario scenario = session::load_run_scenario(o.scenario, model, hardware, data, shorthand_sets(o, *cmd));
    const session::RunPlan plan = session::plan_run(scenario, o.knobs);
    if (const auto stale = calibration_staleness(scenario.hardware)) fmt::print(stderr, "warning: {}\n", *stale);
    profiler::parse_trace_format(o.trace_format, &o.outputs.trace_format);
    o.outputs.trace_phase = o.trace_phase.empty()        ? plan.subject
                            : o.trace_phase == "prefill" ? session::RunPhase::prefill
                                                         : session::RunPhase::decode;
    if (o.dry_run) {
      fmt::print("{}", plan_text(plan, o.outputs.predict));
      session::write_prediction(plan, o.outputs);
      return;
    }
    const session::RunResult r =
        session::run_session(plan, o.outputs, [](const std::string& line) { fmt::print(stderr, "{}\n", line); });
    fmt::print("{}", session::summary_text(r.summary));
    if (!o.json_path.empty()) write_file_atomically(o.json_path, session::summary_json(r.summary));
  });
}

}  // namespace k3::cli
