// `k3perf spec`: speculative decoding on a decode scenario (docs/spec.md): tokens/s and speedup over
// batch sizes and contexts, per acceptance profile, with the draft, verify and rollback terms.
#include "cli/commands.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/scenario.h"
#include "plot/chart.h"
#include "sim/spec/speculative.h"

#include <fmt/core.h>

#include <cmath>
#include <map>
#include <vector>

namespace k3::cli {

namespace {

struct SpecOptions {
  std::string scenario;
  std::vector<std::string> sets;
  int draft_tokens = 7;
  std::vector<std::string> profiles;  // name=tokens_per_step
  std::vector<double> accept_rates;
  std::vector<double> length_weights;
  std::string drafter = "block_parallel";
  int drafter_layers = 5;
  int drafter_mlp = 8192;
  std::string rollback = "replay_inputs";
  std::vector<long long> batches;
  std::vector<long long> contexts;
  double target_speedup = 0;
  std::string csv_path;
  std::string plot_path;
};

std::vector<std::pair<std::string, AcceptanceModel>> acceptance_profiles(const SpecOptions& o) {
  std::vector<std::pair<std::string, AcceptanceModel>> out;
  for (const std::string& p : o.profiles) {
    const auto eq = p.find('=');
    if (eq == std::string::npos || eq == 0)
      throw InputError(fmt::format("--profile '{}': expected name=tokens_per_step", p));
    double t = 0;
    try {
      t = std::stod(p.substr(eq + 1));
    } catch (const std::exception&) {
      throw InputError(fmt::format("--profile '{}': '{}' is not a number", p, p.substr(eq + 1)));
    }
    out.emplace_back(p.substr(0, eq),
                     AcceptanceModel::iid(iid_alpha_for_tokens_per_step(t, o.draft_tokens), o.draft_tokens));
  }
  if (!o.accept_rates.empty())
    out.emplace_back("per-position", AcceptanceModel::per_position(o.accept_rates).truncated(o.draft_tokens));
  if (!o.length_weights.empty()) {
    out.emplace_back("empirical", AcceptanceModel::empirical(o.length_weights).truncated(o.draft_tokens));
  }
  if (out.empty()) {  // the seed figures of K3-SPEC section 8
    for (const auto& [name, t] : {std::pair{"coding", 4.73}, std::pair{"creative", 2.61}}) {
      out.emplace_back(name, AcceptanceModel::iid(iid_alpha_for_tokens_per_step(t, o.draft_tokens), o.draft_tokens));
    }
  }
  return out;
}

}  // namespace

void add_spec_command(CLI::App& app, const GlobalOptions& global) {
  auto o = std::make_shared<SpecOptions>();
  CLI::App* cmd =
      app.add_subcommand("spec", "Speculative decoding on a decode scenario: draft, verify, rollback, speedup");
  cmd->add_option("scenario", o->scenario, "decode scenario YAML (docs/scenarios.md)")->required();
  cmd->add_option("--set", o->sets, "override a scenario key (repeatable)")->allow_extra_args(false);
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
  cmd->add_option("--batches", o->batches, "batch sizes (default: the scenario's)")->delimiter(',');
  cmd->add_option("--contexts", o->contexts, "cached tokens per sequence (default: the scenario's)")->delimiter(',');
  cmd->add_option("--target-speedup", o->target_speedup, "also invert: the acceptance this speedup requires");
  cmd->add_option("--csv", o->csv_path, "write every row as CSV");
  cmd->add_option("--plot", o->plot_path, "chart of speedup against batch per profile and context (.svg or .png)");
  cmd->callback([o, &global] {
    const Scenario base = load_scenario(o->scenario, DataPaths::resolve(global.data_dir), o->sets);
    DrafterSpec drafter;
    drafter.kind = parse_drafter_kind(o->drafter);
    drafter.layers = o->drafter_layers;
    drafter.mlp_intermediate = o->drafter_mlp;
    const RollbackKind rollback = parse_rollback_kind(o->rollback);
    const auto profiles = acceptance_profiles(*o);
    const std::vector<long long> batches = o->batches.empty() ? std::vector<long long>{base.phase.batch} : o->batches;
    const std::vector<long long> contexts =
        o->contexts.empty() ? std::vector<long long>{base.phase.context_tokens} : o->contexts;
    fmt::print("{} on {} x{} (tp {}, ep {}): {} drafter ({} MLA layers, MLP {}), {} draft tokens, rollback {}\n\n",
               base.model.name, base.hardware.name, base.parallelism.gpus(), base.parallelism.tp, base.parallelism.ep,
               to_string(drafter.kind), drafter.layers, drafter.mlp_intermediate, o->draft_tokens, to_string(rollback));
    fmt::print("{:<12} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>11} {:>10} {:>10} {:>8}{}\n", "profile", "batch",
               "context", "decode ms", "draft ms", "verify ms", "rollbk ms", "tokens/step", "base tok/s", "spec tok/s",
               "speedup", o->target_speedup > 0 ? fmt::format("  tokens/step for {:.2f}x", o->target_speedup) : "");
    std::map<std::string, plot::Series> series;  // "profile, context" -> speedup against log2(batch)
    std::string csv =
        "profile,batch,context_tokens,decode_us,draft_us,verify_us,rollback_us,tokens_per_step,"
        "tokens_per_step_std,baseline_tokens_per_s,speculative_tokens_per_s,speedup\n";
    for (long long ctx : contexts) {
      for (long long batch : batches) {
        Scenario s = base;
        s.phase = Phase::decode(batch, ctx);
        validate(s);
        const SpecStepCosts costs = speculative_step_costs(s, drafter, o->draft_tokens);
        std::string need;
        if (o->target_speedup > 0) {
          const RequiredAcceptance r = acceptance_for_speedup(s, costs, rollback, o->target_speedup);
          need = r.attainable ? fmt::format("  {:.2f} (alpha {:.3f})", r.tokens_per_step, r.alpha) : "  out of reach";
        }
        for (const auto& [name, acc] : profiles) {
          const SpecOutcome out = speculative_outcome(s, costs, acc, rollback);
          fmt::print(
              "{:<12} {:>6} {:>9} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>6.2f}±{:<4.2f} {:>10.1f} {:>10.1f} "
              "{:>7.2f}x{}\n",
              name, batch, ctx, costs.decode_us / 1000, costs.draft_us / 1000, costs.verify_us / 1000,
              out.rollback_us / 1000, out.tokens_per_step, out.tokens_per_step_std, out.baseline_tokens_per_s,
              out.tokens_per_s, out.speedup, need);
          plot::Series& line = series[fmt::format("{}, {} tokens", name, ctx)];
          line.name = fmt::format("{}, {} tokens", name, ctx);
          line.style = plot::SeriesStyle::line_and_markers;
          line.points.emplace_back(std::log2(double(batch)), out.speedup);
          csv +=
              fmt::format("{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g}\n", name, batch, ctx,
                          costs.decode_us, costs.draft_us, costs.verify_us, out.rollback_us, out.tokens_per_step,
                          out.tokens_per_step_std, out.baseline_tokens_per_s, out.tokens_per_s, out.speedup);
        }
      }
    }
    if (!o->csv_path.empty()) {
      write_file_atomically(o->csv_path, csv);
      fmt::print(stderr, "wrote {}\n", o->csv_path);
    }
    if (!o->plot_path.empty()) {
      plot::Chart chart;
      chart.title = fmt::format("speculative decoding: {} on {} x{}", base.model.name, base.hardware.name,
                                base.parallelism.gpus());
      chart.x_label = "batch (log2)";
      chart.y_label = "speedup over plain decode";
      for (auto& [key, line] : series) chart.series.push_back(line);
      plot::write_chart(chart, o->plot_path);
      fmt::print(stderr, "wrote {}\n", o->plot_path);
    }
  });
}

}  // namespace k3::cli
