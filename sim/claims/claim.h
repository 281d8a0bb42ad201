// Published claims as data (scenarios/claims/*.yaml, docs/verify.md) and the evaluators that
// predict them. A claim names an evaluator; an evaluator is one .cpp file in sim/claims/ that
// registers itself with K3PERF_REGISTER_CLAIM_EVALUATOR — adding one never edits this header.
// Most claims use the generic `scenario_metric` evaluator (sim/claims/scenario_metric.h); the
// others are adapters for models that are not one scenario and a metric (spec, cache, comm,
// break-even).
//
// An evaluator never sees the reported figures: it receives ClaimInputs (id, file, params), a
// separate object that holds none. Comparing predictions with the figures, and finding which
// alternative reproduces a missed claim, is one step after evaluation (check_claim).
#pragma once

#include "core/limits.h"
#include "core/registry.h"
#include "core/scenario.h"
#include "core/yaml_reader.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace k3 {

// A reported figure: a value with a relative tolerance, or a range [min, max].
struct ReportedValue {
  std::string key;
  std::optional<double> value;
  double relative_tolerance = 0;
  std::optional<double> min;
  std::optional<double> max;
  std::string unit;
  bool accepts(double predicted) const;
  std::string describe() const;  // "2.2 ±10%" or "[0, 2]"
};

// A figure measured on real kernels (the engine on a GPU), kept in the claim file with its provenance: the
// bench/results folder, the command, the date, the commit and the GPU. Shown beside the prediction; the
// verdict stays the prediction's.
struct MeasuredValue {
  std::string key;  // a reported key
  double value = 0;
  std::string hardware, source, command, date, commit, note;
  std::string describe() const;  // "1.93 on 1x H200 SXM (bench/results/…)"
};

// What an evaluator may read: the claim's id and file (for messages) and its params. No reported
// figure is reachable from here (params is the `params` subtree alone).
struct ClaimInputs {
  std::string id;
  std::string file;
  std::optional<YamlNode> params;  // evaluator-specific inputs
};

struct Claim {
  std::string id;         // "P5"
  std::string title;      // the claim as reported
  std::string source;     // where it was reported
  std::string evaluator;  // registered evaluator name, or "none"
  std::string file;
  std::vector<ReportedValue> reported;
  std::vector<MeasuredValue> measured;  // never seen by the evaluator
  std::optional<YamlNode> params;       // evaluator-specific inputs
  std::optional<MeasuredValue> measured_for(const std::string& key) const;
  ClaimInputs inputs() const { return {id, file, params}; }
};

// The same prediction under one named, physically motivated assumption (another GPU, batch,
// baseline, dtype, or another reading of the quantity). Keys it leaves out keep the main
// prediction's value. Never a term fitted to the reported figure.
struct Alternative {
  std::string assumption;
  std::map<std::string, double> predicted;
};

// What an evaluator returns. `predicted` keys match the claim's reported keys. When the main
// prediction misses, the claim is "explained" only if one alternative reproduces every reported
// value; otherwise it is "contradicted". Alternatives are enumerated, never tuned to the claim.
struct Evaluation {
  std::map<std::string, double> predicted;
  std::vector<std::string> breakdown;  // lines, with numbers, that show how the prediction is made
  std::vector<Alternative> alternatives;
};

class ClaimEvaluator {
 public:
  static constexpr const char* kind = "claim evaluator";
  virtual ~ClaimEvaluator() = default;
  // Contract: deterministic; reads its inputs only from claim.params (errors name the claim file
  // and key) and the data directory; never prints.
  virtual Evaluation evaluate(const ClaimInputs& claim, const DataPaths& data) const = 0;
};

using ClaimEvaluators = Registry<ClaimEvaluator>;

#define K3PERF_REGISTER_CLAIM_EVALUATOR(Class, name) K3PERF_REGISTER(::k3::ClaimEvaluator, Class, name)

enum class Verdict { reproduced, explained, contradicted, not_modelled };
std::string to_string(Verdict v);

struct ComparedValue {
  ReportedValue reported;
  std::optional<double> predicted;
  bool within = false;
  std::optional<MeasuredValue> measured;  // when the claim file has one for this key
  bool measured_within() const { return measured && reported.accepts(measured->value); }
};

// How one alternative fares against the reported figures (the search step of check_claim).
struct AlternativeMatch {
  int index = -1;  // into Evaluation::alternatives
  int within = 0;  // reported figures it reproduces
  int of = 0;      // reported figures
  bool reproduces() const { return within == of; }
};

struct ClaimResult {
  Claim claim;
  Verdict verdict = Verdict::not_modelled;
  std::vector<ComparedValue> values;
  Evaluation evaluation;
  // Every alternative, in the evaluator's order, against the reported figures; filled only when
  // the main prediction misses.
  std::vector<AlternativeMatch> matches;
  const Alternative* explained_by() const;  // the first alternative that reproduces the claim, if any
  int explained_by_index = -1;
  int reproducing_alternatives() const;
  const AlternativeMatch* closest() const;  // most figures reproduced, the first on a tie; nullptr if none
};

Claim load_claim(const std::string& path);
std::vector<Claim> load_claims(const std::string& claims_dir);  // sorted by id (P1, P2, ..., P20)
// Evaluates the claim (the evaluator sees claim.inputs() only), compares every predicted figure
// with the reported one and, on a miss, every alternative (search_alternatives).
ClaimResult check_claim(const Claim& claim, const DataPaths& data);
// The search step alone: which alternatives reproduce which reported figures, and the verdict.
// `r.evaluation` and `r.claim` must be set; fills values, matches, verdict and explained_by_index.
void compare_with_reported(ClaimResult& r);

// Helpers shared by evaluators: claim parameters with defaults; errors name the claim file and key.
void expect_params(const ClaimInputs& c, const std::vector<std::string>& allowed);  // rejects unknown keys
std::string param_string(const ClaimInputs& c, const std::string& key, const std::string& fallback);
double param_double(const ClaimInputs& c, const std::string& key, double fallback);
// An integer within `limit` (an InputError naming the claim file, key, value and limit otherwise).
long long param_count(const ClaimInputs& c, const std::string& key, long long fallback, const IntLimit& limit);
bool param_bool(const ClaimInputs& c, const std::string& key, bool fallback);
StorageFormat param_storage(const ClaimInputs& c, const std::string& key, StorageFormat fallback,
                            const std::vector<std::string>& allowed);
std::vector<double> param_list(const ClaimInputs& c, const std::string& key);

}  // namespace k3
