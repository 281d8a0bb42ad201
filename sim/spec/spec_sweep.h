// The sweep `k3perf spec` prints (docs/spec.md): every acceptance profile at every batch and context
// of a decode scenario, with the draft, verify and rollback terms. What it assumes where the caller
// says nothing is data: scenarios/spec/defaults.yaml (the drafter, the rollback, the draft length,
// the seed acceptance profiles and, optionally, the sweep's batches and contexts).
#pragma once

#include "core/scenario.h"
#include "sim/spec/acceptance.h"
#include "sim/spec/speculative.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace k3 {

struct SpecDefaults {
  int draft_tokens = 0;
  DrafterSpec drafter;
  RollbackKind rollback = RollbackKind::replay_inputs;
  std::vector<std::pair<std::string, double>> profiles;  // name -> tokens per step (i.i.d.), in file order
  std::vector<long long> batches, contexts;              // empty: the scenario's
};
// Every key required but `batches` and `contexts`; errors name the file, the key and the value.
SpecDefaults load_spec_defaults(const std::string& path);

struct AcceptanceProfile {
  std::string name;
  AcceptanceModel acceptance;
};
// i.i.d. profiles from tokens per step ("coding" 4.73 at γ = 7 is α ≈ 0.80).
std::vector<AcceptanceProfile> iid_profiles(const std::vector<std::pair<std::string, double>>& tokens_per_step,
                                            int draft_tokens);

struct SpecSweepRow {
  std::string profile;
  long long batch = 0;
  long long context_tokens = 0;
  SpecStepCosts costs;
  SpecOutcome outcome;
  std::optional<RequiredAcceptance> required;  // with a target speedup
  double memory_per_gpu_bytes = 0;             // the decode shape's weights, KV, state, activations and reserve
  double usable_per_gpu_bytes = 0;
  bool fits() const { return memory_per_gpu_bytes <= usable_per_gpu_bytes; }
};

struct SpecSweepRequest {
  DrafterSpec drafter;
  int draft_tokens = 0;
  RollbackKind rollback = RollbackKind::replay_inputs;
  std::vector<AcceptanceProfile> profiles;
  std::vector<long long> batches, contexts;  // empty: the scenario's
  double target_speedup = 0;                 // > 0: also the acceptance this speedup requires
};

// Rows by context, then batch, then profile (the order k3perf spec prints). Each (batch, context)
// is validated against the scenario (InputError naming the scenario) and carries its memory per GPU, so that a
// caller can leave out the shapes that do not fit (k3perf spec does unless --report-unfit).
std::vector<SpecSweepRow> spec_sweep(const Scenario& base, const SpecSweepRequest& request);
// One CSV line per row, with its header.
std::string spec_sweep_csv(const std::vector<SpecSweepRow>& rows);

}  // namespace k3
