#include "sim/spec/spec_sweep.h"

#include "core/op_graph.h"
#include "sim/memory.h"

#include "core/error.h"
#include "core/limits.h"
#include "core/yaml_reader.h"

#include <climits>

namespace k3 {

namespace {

std::vector<long long> int_list(const YamlNode& n, const IntLimit& limit) {
  if (!n.is_sequence()) n.fail("expected a list of integers");
  std::vector<long long> out;
  for (const YamlNode& v : n.items()) out.push_back(read_int<long long>(v, limit));
  if (out.empty()) n.fail("expected at least one value");
  return out;
}

}  // namespace

SpecDefaults load_spec_defaults(const std::string& path) {
  const YamlNode y = YamlNode::load_file(path);
  y.expect_keys({"draft_tokens", "drafter", "rollback", "profiles", "batches", "contexts"});
  SpecDefaults d;
  d.draft_tokens = read_int<int>(y["draft_tokens"], limit::draft_tokens);
  const YamlNode dr = y["drafter"];
  dr.expect_keys({"kind", "layers", "mlp_intermediate"});
  d.drafter.kind = parse_drafter_kind(dr["kind"].as_choice({"block_parallel", "autoregressive"}));
  d.drafter.layers = read_int<int>(dr["layers"], limit::layers);
  d.drafter.mlp_intermediate = read_int<int>(dr["mlp_intermediate"], limit::model_dim);
  d.rollback = parse_rollback_kind(y["rollback"].as_choice({"replay_inputs", "copy_states"}));
  const YamlNode p = y["profiles"];
  if (!p.is_map() || p.keys().empty()) p.fail("expected a mapping of profile name to tokens per step");
  for (const auto& [name, t] : p.entries()) {
    const double tokens = t.as_positive();
    if (tokens < 1 || tokens > d.draft_tokens + 1) {
      t.fail(fmt::format("expected tokens per step in 1..draft_tokens + 1 = {}, got {}", d.draft_tokens + 1, tokens));
    }
    d.profiles.emplace_back(name, tokens);
  }
  if (auto b = y.find("batches")) d.batches = int_list(*b, limit::batch);
  if (auto c = y.find("contexts")) d.contexts = int_list(*c, limit::tokens);
  return d;
}

std::vector<AcceptanceProfile> iid_profiles(const std::vector<std::pair<std::string, double>>& tokens_per_step,
                                            int draft_tokens) {
  std::vector<AcceptanceProfile> out;
  for (const auto& [name, t] : tokens_per_step) {
    out.push_back({name, AcceptanceModel::iid(iid_alpha_for_tokens_per_step(t, draft_tokens), draft_tokens)});
  }
  return out;
}

std::vector<SpecSweepRow> spec_sweep(const Scenario& base, const SpecSweepRequest& r) {
  const std::vector<long long> batches = r.batches.empty() ? std::vector<long long>{base.phase.batch} : r.batches;
  const std::vector<long long> contexts =
      r.contexts.empty() ? std::vector<long long>{base.phase.context_tokens} : r.contexts;
  std::vector<SpecSweepRow> rows;
  for (long long ctx : contexts) {
    for (long long batch : batches) {
      Scenario s = base;
      s.phase = Phase::decode(batch, ctx);
      validate(s);
      const MemoryBreakdown memory = estimate_memory(s, build_op_graph(s.model, s.phase, s.parallelism, s.precision));
      const SpecStepCosts costs = speculative_step_costs(s, r.drafter, r.draft_tokens);
      std::optional<RequiredAcceptance> required;
      if (r.target_speedup > 0) required = acceptance_for_speedup(s, costs, r.rollback, r.target_speedup);
      for (const AcceptanceProfile& p : r.profiles) {
        rows.push_back({p.name, batch, ctx, costs, speculative_outcome(s, costs, p.acceptance, r.rollback), required,
                        memory.total_bytes, memory.usable_bytes});
      }
    }
  }
  return rows;
}

std::string spec_sweep_csv(const std::vector<SpecSweepRow>& rows) {
  std::string csv =
      "profile,batch,context_tokens,decode_us,draft_us,verify_us,rollback_us,tokens_per_step,"
      "tokens_per_step_std,baseline_tokens_per_s,speculative_tokens_per_s,speedup,memory_per_gpu_bytes,"
      "usable_per_gpu_bytes,fits\n";
  for (const SpecSweepRow& row : rows) {
    const SpecStepCosts& c = row.costs;
    const SpecOutcome& o = row.outcome;
    csv += fmt::format("{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.0f},{:.0f},{}\n",
                       row.profile, row.batch, row.context_tokens, c.decode_us, c.draft_us, c.verify_us, o.rollback_us,
                       o.tokens_per_step, o.tokens_per_step_std, o.baseline_tokens_per_s, o.tokens_per_s, o.speedup,
                       row.memory_per_gpu_bytes, row.usable_per_gpu_bytes, row.fits() ? "yes" : "no");
  }
  return csv;
}

}  // namespace k3
