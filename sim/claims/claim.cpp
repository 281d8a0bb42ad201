#include "sim/claims/claim.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <tuple>

namespace k3 {

std::string to_string(Verdict v) {
  switch (v) {
    case Verdict::reproduced: return "reproduced";
    case Verdict::explained: return "explained";
    case Verdict::contradicted: return "contradicted";
    case Verdict::not_modelled: return "not modelled yet";
  }
  return "?";
}

bool ReportedValue::accepts(double predicted) const {
  if (value) return std::fabs(predicted - *value) <= relative_tolerance * std::fabs(*value);
  return (!min || predicted >= *min) && (!max || predicted <= *max);
}

std::string ReportedValue::describe() const {
  const std::string u = unit.empty() ? "" : " " + unit;
  if (value) return fmt::format("{:.4g}{} ±{:.3g}%", *value, u, relative_tolerance * 100);
  return fmt::format("[{}, {}]{}", min ? fmt::format("{:.4g}", *min) : "-inf",
                     max ? fmt::format("{:.4g}", *max) : "inf", u);
}

std::string MeasuredValue::describe() const { return fmt::format("{:.4g} on {} ({})", value, hardware, source); }

std::optional<MeasuredValue> Claim::measured_for(const std::string& key) const {
  for (const MeasuredValue& m : measured) {
    if (m.key == key) return m;
  }
  return std::nullopt;
}

namespace {

std::vector<MeasuredValue> load_measured(const YamlNode& measured, const std::vector<ReportedValue>& reported) {
  std::vector<MeasuredValue> out;
  for (const auto& entry : measured.entries()) {
    const std::string& key = entry.first;  // a structured binding would not be captured by Clang 14's lambda
    const YamlNode& m = entry.second;
    if (std::none_of(reported.begin(), reported.end(), [&](const ReportedValue& r) { return r.key == key; })) {
      m.fail("a measured figure needs a reported figure of the same key");
    }
    m.expect_keys({"value", "hardware", "source", "command", "date", "commit", "note"});
    MeasuredValue v;
    v.key = key;
    v.value = m["value"].as_double();
    v.hardware = m["hardware"].as_string();
    v.source = m["source"].as_string();
    v.command = m["command"].as_string();
    v.date = m["date"].as_string();
    v.commit = m["commit"].as_string();
    if (auto note = m.find("note")) v.note = note->as_string();
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace

Claim load_claim(const std::string& path) {
  const YamlNode y = YamlNode::load_file(path);
  Claim c;
  c.file = path;
  c.id = y["id"].as_string();
  c.title = y["claim"].as_string();
  c.source = y["source"].as_string();
  c.evaluator = y["evaluator"].as_string();
  if (c.evaluator != "none" && !ClaimEvaluators::instance().contains(c.evaluator)) {
    y["evaluator"].fail(ClaimEvaluators::instance().unknown(c.evaluator) + "; or none");
  }
  if (auto p = y.find("params")) c.params = *p;
  if (auto reported = y.find("reported")) {
    for (const std::string& key : reported->keys()) {
      const YamlNode r = (*reported)[key];
      ReportedValue v;
      v.key = key;
      if (auto u = r.find("unit")) v.unit = u->as_string();
      if (auto val = r.find("value")) {
        v.value = val->as_double();
        v.relative_tolerance = r["relative_tolerance"].as_non_negative();
      } else {
        if (auto mn = r.find("min")) v.min = mn->as_double();
        if (auto mx = r.find("max")) v.max = mx->as_double();
        if (!v.min && !v.max) r.fail("expected 'value' with 'relative_tolerance', or 'min'/'max'");
      }
      c.reported.push_back(v);
    }
  }
  if (auto measured = y.find("measured")) c.measured = load_measured(*measured, c.reported);
  return c;
}

std::vector<Claim> load_claims(const std::string& claims_dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(claims_dir)) throw InputError(fmt::format("{}: claims directory not found", claims_dir));
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(claims_dir)) {
    if (e.path().extension() == ".yaml") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  std::vector<Claim> claims;
  for (const std::string& f : files) claims.push_back(load_claim(f));
  // Natural order of ids: P2 before P10. The digits compare as text (fewer digits first), so an id of any
  // length orders without a conversion that could overflow.
  std::stable_sort(claims.begin(), claims.end(), [](const Claim& a, const Claim& b) {
    auto num = [](const std::string& id) {
      std::size_t i = 0;
      while (i < id.size() && !std::isdigit(static_cast<unsigned char>(id[i]))) ++i;
      std::size_t digits = i;
      while (digits + 1 < id.size() && id[digits] == '0') ++digits;
      const std::string number = id.substr(digits);
      return std::make_tuple(id.substr(0, i), number.size(), number);
    };
    return num(a.id) < num(b.id);
  });
  return claims;
}

ClaimResult check_claim(const Claim& claim, const DataPaths& data) {
  ClaimResult r;
  r.claim = claim;
  if (claim.evaluator == "none") {
    for (const ReportedValue& v : claim.reported)
      r.values.push_back({v, std::nullopt, false, claim.measured_for(v.key)});
    r.verdict = Verdict::not_modelled;
    return r;
  }
  r.evaluation = ClaimEvaluators::instance().make(claim.evaluator)->evaluate(claim.inputs(), data);
  compare_with_reported(r);
  return r;
}

void compare_with_reported(ClaimResult& r) {
  const Claim& claim = r.claim;
  auto value_of = [&](const std::map<std::string, double>& preferred, const std::string& key) {
    auto it = preferred.find(key);
    if (it != preferred.end()) return it->second;
    auto main = r.evaluation.predicted.find(key);
    K3_CHECK(main != r.evaluation.predicted.end(), "{}: evaluator '{}' does not predict reported key '{}'", claim.file,
             claim.evaluator, key);
    return main->second;
  };
  r.values.clear();
  r.matches.clear();
  r.explained_by_index = -1;
  bool all_within = true;
  for (const ReportedValue& v : claim.reported) {
    const double predicted = value_of(r.evaluation.predicted, v.key);
    r.values.push_back({v, predicted, v.accepts(predicted), claim.measured_for(v.key)});
    all_within = all_within && r.values.back().within;
  }
  if (all_within) {
    r.verdict = Verdict::reproduced;
    return;
  }
  for (std::size_t i = 0; i < r.evaluation.alternatives.size(); ++i) {
    AlternativeMatch m{static_cast<int>(i), 0, static_cast<int>(claim.reported.size())};
    for (const ReportedValue& v : claim.reported)
      m.within += v.accepts(value_of(r.evaluation.alternatives[i].predicted, v.key));
    if (m.reproduces() && r.explained_by_index < 0) r.explained_by_index = m.index;
    r.matches.push_back(m);
  }
  r.verdict = r.explained_by_index >= 0 ? Verdict::explained : Verdict::contradicted;
}

const Alternative* ClaimResult::explained_by() const {
  return explained_by_index >= 0 ? &evaluation.alternatives[explained_by_index] : nullptr;
}

int ClaimResult::reproducing_alternatives() const {
  return static_cast<int>(
      std::count_if(matches.begin(), matches.end(), [](const AlternativeMatch& m) { return m.reproduces(); }));
}

const AlternativeMatch* ClaimResult::closest() const {
  const AlternativeMatch* best = nullptr;
  for (const AlternativeMatch& m : matches) {
    if (!best || m.within > best->within) best = &m;
  }
  return best;
}

std::string param_string(const ClaimInputs& c, const std::string& key, const std::string& fallback) {
  if (c.params) {
    if (auto v = c.params->find(key)) return v->as_string();
  }
  return fallback;
}

void expect_params(const ClaimInputs& c, const std::vector<std::string>& allowed) {
  if (c.params) c.params->expect_keys(allowed);
}

long long param_count(const ClaimInputs& c, const std::string& key, long long fallback, const IntLimit& limit) {
  if (c.params) {
    if (auto v = c.params->find(key)) return read_int<long long>(*v, limit);
  }
  return fallback;
}

bool param_bool(const ClaimInputs& c, const std::string& key, bool fallback) {
  if (c.params) {
    if (auto v = c.params->find(key)) return v->as_bool();
  }
  return fallback;
}

StorageFormat param_storage(const ClaimInputs& c, const std::string& key, StorageFormat fallback,
                            const std::vector<std::string>& allowed) {
  if (c.params) {
    if (auto v = c.params->find(key)) {
      StorageFormat f{};
      parse_storage_format(v->as_choice(allowed), &f);
      return f;
    }
  }
  return fallback;
}

double param_double(const ClaimInputs& c, const std::string& key, double fallback) {
  if (c.params) {
    if (auto v = c.params->find(key)) return v->as_double();
  }
  return fallback;
}

std::vector<double> param_list(const ClaimInputs& c, const std::string& key) {
  if (!c.params) throw InputError(fmt::format("{}: missing required key 'params.{}'", c.file, key));
  std::vector<double> out;
  for (const YamlNode& item : (*c.params)[key].items()) out.push_back(item.as_double());
  return out;
}

}  // namespace k3
