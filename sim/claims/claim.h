// Published claims as data (scenarios/claims/*.yaml, docs/verify.md) and the evaluators that
// predict them. A claim names an evaluator; an evaluator is one .cpp file in sim/claims/ that
// registers itself with K3PERF_REGISTER_CLAIM_EVALUATOR — adding one never edits this header.
#pragma once

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

struct Claim {
  std::string id;         // "P5"
  std::string title;      // the claim as reported
  std::string source;     // where it was reported
  std::string evaluator;  // registered evaluator name, or "none"
  std::string file;
  std::vector<ReportedValue> reported;
  std::optional<YamlNode> params;  // evaluator-specific inputs
};

// The same prediction under one named, different assumption (another GPU, batch, baseline, dtype,
// or a fitted term outside the roofline). Keys it leaves out keep the main prediction's value.
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
  virtual Evaluation evaluate(const Claim& claim, const DataPaths& data) const = 0;
};

using ClaimEvaluators = Registry<ClaimEvaluator>;

#define K3PERF_REGISTER_CLAIM_EVALUATOR(Class, name) K3PERF_REGISTER(::k3::ClaimEvaluator, Class, name)

enum class Verdict { reproduced, explained, contradicted, not_modelled };
std::string to_string(Verdict v);

struct ComparedValue {
  ReportedValue reported;
  std::optional<double> predicted;
  bool within = false;
};

struct ClaimResult {
  Claim claim;
  Verdict verdict = Verdict::not_modelled;
  std::vector<ComparedValue> values;
  Evaluation evaluation;
  const Alternative* explained_by() const;  // the alternative that reproduces the claim, if any
  int explained_by_index = -1;
};

Claim load_claim(const std::string& path);
std::vector<Claim> load_claims(const std::string& claims_dir);  // sorted by id (P1, P2, ..., P20)
ClaimResult check_claim(const Claim& claim, const DataPaths& data);

// Helpers shared by evaluators: claim parameters with defaults; errors name the claim file and key.
void expect_params(const Claim& c, const std::vector<std::string>& allowed);  // rejects unknown keys
std::string param_string(const Claim& c, const std::string& key, const std::string& fallback);
double param_double(const Claim& c, const std::string& key, double fallback);
long long param_count(const Claim& c, const std::string& key, long long fallback);  // positive integer
bool param_bool(const Claim& c, const std::string& key, bool fallback);
StorageFormat param_storage(const Claim& c, const std::string& key, StorageFormat fallback,
                            const std::vector<std::string>& allowed);
std::vector<double> param_list(const Claim& c, const std::string& key);

}  // namespace k3
