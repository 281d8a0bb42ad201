// `k3perf spec`: speculative decoding on a decode scenario (docs/spec.md): tokens/s and speedup over
// batch sizes and contexts, per acceptance profile, with the draft, verify and rollback terms.
#include "cli/commands.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/scenario.h"
#include "plot/chart.h"
#include "plot/views/sim_charts.h"
#include "sim/spec/spec_sweep.h"
#include "sim/text_report.h"

#include <fmt/core.h>

#include <vector>

namespace k3::cli {

namespace {

struct SpecOptions {
  std::string scenario;
  std::vector<std::string> sets;
  std::string defaults;  // empty: the data folder's spec/defaults.yaml
  int draft_tokens = 0;
  std::vector<std::string> profiles;  // name=tokens_per_step
  std::vector<double> accept_rates;
  std::vector<double> length_weights;
  std::string drafter;
  int drafter_layers = 0;
  int drafter_mlp = 0;
  std::string rollback;
  std::vector<long long> batches;
  std::vector<long long> contexts;
  double target_speedup = 0;
  bool report_unfit = false;  // also the shapes whose memory does not fit one GPU
  std::string csv_path;
  std::string plot_path;
};

// --profile name=tokens_per_step, --accept-rates and --accepted-length-weights; none: the defaults' profiles.
std::vector<AcceptanceProfile> acceptance_profiles(const SpecOptions& o, const SpecDefaults& d, int draft_tokens) {
  std::vector<std::pair<std::string, double>> iid;
  for (const std::string& p : o.profiles) {
    const auto eq = p.find('=');
    if (eq == std::string::npos || eq == 0)
      throw InputError(fmt::format("--profile '{}': expected name=tokens_per_step", p));
    try {
      iid.emplace_back(p.substr(0, eq), std::stod(p.substr(eq + 1)));
    } catch (const std::exception&) {
      throw InputError(fmt::format("--profile '{}': '{}' is not a number", p, p.substr(eq + 1)));
    }
  }
  std::vector<AcceptanceProfile> out = iid_profiles(iid, draft_tokens);
  if (!o.accept_rates.empty())
    out.push_back({"per-position", AcceptanceModel::per_position(o.accept_rates).truncated(draft_tokens)});
  if (!o.length_weights.empty()) {
    out.push_back({"empirical", AcceptanceModel::empirical(o.length_weights).truncated(draft_tokens)});
  }
  if (out.empty()) out = iid_profiles(d.profiles, draft_tokens);
  return out;
}

}  // namespace

void add_spec_command(CLI::App& app, const GlobalOptions& global) {
  auto o = std::make_shared<SpecOptions>();
  CLI::App* cmd =
      app.add_subcommand("spec", "Speculative decoding on a decode scenario: draft, verify, rollback, speedup");
  set_help_footer(*cmd,
                  "k3perf spec scenarios/k3-gb300-tp8-decode-128k.yaml --batches 1 --contexts 4096 --target-speedup 3");
  cmd->add_option("scenario", o->scenario, "decode scenario YAML (docs/scenarios.md)")->required();
  cmd->add_option("--set", o->sets, "override a scenario key (repeatable)")->allow_extra_args(false);
  cmd->add_option("--defaults", o->defaults,
                  "what the flags below default to (default: spec/defaults.yaml in the data folder; docs/spec.md)");
  cmd->add_option("--draft-tokens", o->draft_tokens, "tokens drafted per step (gamma)")->check(CLI::Range(1, 64));
  cmd->add_option("--profile", o->profiles, "acceptance profile name=tokens_per_step, e.g. coding=4.73 (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--accept-rates", o->accept_rates, "per-position acceptance p1,p2,... (a profile 'per-position')")
      ->delimiter(',');
  cmd->add_option("--accepted-length-weights", o->length_weights,
                  "frequencies of 1..gamma+1 tokens per step (a profile 'empirical')")
      ->delimiter(',');
  cmd->add_option("--drafter", o->drafter, "block_parallel or autoregressive");
  cmd->add_option("--drafter-layers", o->drafter_layers, "MLA layers of the drafter")->check(CLI::PositiveNumber);
  cmd->add_option("--drafter-mlp", o->drafter_mlp, "dense MLP width of the drafter")->check(CLI::PositiveNumber);
  cmd->add_option("--rollback", o->rollback, "KDA rollback: replay_inputs or copy_states");
  cmd->add_option("--batches", o->batches, "batch sizes (default: the defaults file's, else the scenario's)")
      ->delimiter(',');
  cmd->add_option("--contexts", o->contexts,
                  "cached tokens per sequence (default: the defaults file's, else the scenario's)")
      ->delimiter(',');
  cmd->add_option("--target-speedup", o->target_speedup, "also invert: the acceptance this speedup requires");
  cmd->add_flag("--report-unfit", o->report_unfit,
                "also print and plot the batch and context shapes whose memory does not fit a GPU (marked)");
  cmd->add_option("--csv", o->csv_path, "write every row as CSV (with its memory and whether it fits)");
  cmd->add_option("--plot", o->plot_path, "chart of speedup against batch per profile and context (.svg or .png)");
  cmd->callback([o, &global] {
    const DataPaths data = DataPaths::resolve(global.data_dir);
    const Scenario base = load_scenario(o->scenario, data, o->sets);
    const SpecDefaults d = load_spec_defaults(o->defaults.empty() ? data.spec_dir + "/defaults.yaml" : o->defaults);
    SpecSweepRequest r;
    r.draft_tokens = o->draft_tokens > 0 ? o->draft_tokens : d.draft_tokens;
    r.drafter = d.drafter;
    if (!o->drafter.empty()) r.drafter.kind = parse_drafter_kind(o->drafter);
    if (o->drafter_layers > 0) r.drafter.layers = o->drafter_layers;
    if (o->drafter_mlp > 0) r.drafter.mlp_intermediate = o->drafter_mlp;
    r.rollback = o->rollback.empty() ? d.rollback : parse_rollback_kind(o->rollback);
    r.profiles = acceptance_profiles(*o, d, r.draft_tokens);
    r.batches = o->batches.empty() ? d.batches : o->batches;
    r.contexts = o->contexts.empty() ? d.contexts : o->contexts;
    r.target_speedup = o->target_speedup;
    fmt::print("{} on {} x{} (tp {}, ep {}): {} drafter ({} MLA layers, MLP {}), {} draft tokens, rollback {}\n\n",
               base.model.name, base.hardware.name, base.parallelism.gpus(), base.parallelism.tp, base.parallelism.ep,
               to_string(r.drafter.kind), r.drafter.layers, r.drafter.mlp_intermediate, r.draft_tokens,
               to_string(r.rollback));
    fmt::print("{:<12} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>11} {:>10} {:>10} {:>8}{}\n", "profile", "batch",
               "context", "decode ms", "draft ms", "verify ms", "rollbk ms", "tokens/step", "base tok/s", "spec tok/s",
               "speedup", o->target_speedup > 0 ? fmt::format("  tokens/step for {:.2f}x", o->target_speedup) : "");
    const std::vector<SpecSweepRow> rows = spec_sweep(base, r);
    std::vector<SpecSweepRow> shown;
    std::vector<std::string> left_out;  // one line per (batch, context) that does not fit; rows come in such runs
    std::pair<long long, long long> last_left_out{-1, -1};
    for (const SpecSweepRow& row : rows) {
      if (row.fits() || o->report_unfit) {
        shown.push_back(row);
      } else if (std::pair{row.batch, row.context_tokens} != last_left_out) {
        last_left_out = {row.batch, row.context_tokens};
        left_out.push_back(fmt::format("batch {} at context {}: needs {} per GPU of {} usable", row.batch,
                                       row.context_tokens, format_gib(row.memory_per_gpu_bytes),
                                       format_gib(row.usable_per_gpu_bytes)));
      }
    }
    for (const SpecSweepRow& row : shown) {
      std::string need;
      if (row.required) {
        need = row.required->attainable
                   ? fmt::format("  {:.2f} (alpha {:.3f})", row.required->tokens_per_step, row.required->alpha)
                   : "  out of reach";
      }
      const SpecStepCosts& c = row.costs;
      const SpecOutcome& out = row.outcome;
      fmt::print(
          "{:<12} {:>6} {:>9} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>6.2f}±{:<4.2f} {:>10.1f} {:>10.1f} {:>7.2f}x{}\n",
          row.profile, row.batch, row.context_tokens, c.decode_us / 1000, c.draft_us / 1000, c.verify_us / 1000,
          out.rollback_us / 1000, out.tokens_per_step, out.tokens_per_step_std, out.baseline_tokens_per_s,
          out.tokens_per_s, out.speedup, need + (row.fits() ? "" : "  DOES NOT FIT"));
    }
    if (!left_out.empty()) {
      fmt::print("\nleft out, their memory does not fit one GPU (--report-unfit shows them):\n");
      for (const std::string& line : left_out) fmt::print("  {}\n", line);
    }
    if (!o->csv_path.empty()) {
      write_file_atomically(o->csv_path, spec_sweep_csv(rows));
      fmt::print(stderr, "wrote {}\n", o->csv_path);
    }
    if (!o->plot_path.empty()) {
      plot::write_chart(plot::spec_speedup_chart(base, shown), o->plot_path);
      fmt::print(stderr, "wrote {}\n", o->plot_path);
    }
  });
}

}  // namespace k3::cli
