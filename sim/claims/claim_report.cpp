#include "sim/claims/claim_report.h"

#include "core/output_header.h"

#include <fmt/format.h>

#include <cmath>
#include <map>

namespace k3 {

std::string format_claim_results(const std::vector<ClaimResult>& results) {
  std::string out;
  std::map<Verdict, int> tally;
  for (const ClaimResult& r : results) {
    ++tally[r.verdict];
    out += fmt::format("{:<4} {:<17} {}\n", r.claim.id, to_string(r.verdict), r.claim.title);
    out += fmt::format("     source: {}\n", r.claim.source);
    for (const ComparedValue& v : r.values) {
      out += fmt::format("     {:<34} reported {:<22} predicted {}\n", v.reported.key, v.reported.describe(),
                         v.predicted ? fmt::format("{:.4g}{}", *v.predicted, v.within ? "" : "  (outside)") : "-");
      if (v.measured) {
        out += fmt::format("     {:<34} measured {}{}\n", "", v.measured->describe(),
                           v.measured_within() ? "" : "  (outside)");
        if (!v.measured->note.empty()) out += fmt::format("     {:<34}   {}\n", "", v.measured->note);
      }
    }
    for (const std::string& line : r.evaluation.breakdown) out += fmt::format("       {}\n", line);
    auto values_of = [](const Alternative& alt) {
      std::string values;
      for (const auto& [key, value] : alt.predicted)
        values += fmt::format("{}{} {:.4g}", values.empty() ? "" : ", ", key, value);
      return values;
    };
    if (const Alternative* alt = r.explained_by()) {
      const int more = r.reproducing_alternatives() - 1;
      out +=
          fmt::format("     why: reproduced {} ({}){}\n", alt->assumption, values_of(*alt),
                      more > 0 ? fmt::format("; {} more of the {} alternatives also do", more, r.matches.size()) : "");
    } else if (r.verdict == Verdict::contradicted) {
      const AlternativeMatch* near = r.closest();
      out += fmt::format(
          "     why: no alternative reproduces it ({} tried{})\n", r.evaluation.alternatives.size(),
          near ? fmt::format("; closest: {}, {} of {} figures ({})", r.evaluation.alternatives[near->index].assumption,
                             near->within, near->of, values_of(r.evaluation.alternatives[near->index]))
               : std::string());
    }
    out += "\n";
  }
  out += fmt::format("{} claims: {} reproduced, {} explained, {} contradicted, {} not modelled yet\n", results.size(),
                     tally[Verdict::reproduced], tally[Verdict::explained], tally[Verdict::contradicted],
                     tally[Verdict::not_modelled]);
  return out;
}

namespace {

// A bound of a range, null when absent or infinite (unbounded).
nlohmann::ordered_json bound(const std::optional<double>& b) {
  return b && std::isfinite(*b) ? nlohmann::ordered_json(*b) : nlohmann::ordered_json();
}

nlohmann::ordered_json reported_json(const ReportedValue& r) {
  nlohmann::ordered_json j;
  if (r.value) {
    j["value"] = *r.value;
    j["relative_tolerance"] = r.relative_tolerance;
  } else {
    j["min"] = bound(r.min);
    j["max"] = bound(r.max);
  }
  j["unit"] = r.unit;
  j["text"] = r.describe();
  return j;
}

}  // namespace

std::string verdict_id(Verdict v) { return v == Verdict::not_modelled ? "not_modelled" : to_string(v); }

nlohmann::ordered_json to_json(const std::vector<ClaimResult>& results) {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  std::map<Verdict, int> tally;
  for (const ClaimResult& r : results) {
    ++tally[r.verdict];
    nlohmann::ordered_json values = nlohmann::ordered_json::array();
    for (const ComparedValue& v : r.values) {
      nlohmann::ordered_json jv = {{"key", v.reported.key}, {"reported", reported_json(v.reported)}};
      jv["predicted"] = v.predicted ? nlohmann::ordered_json(*v.predicted) : nlohmann::ordered_json();
      jv["within_tolerance"] = v.predicted ? nlohmann::ordered_json(v.within) : nlohmann::ordered_json();
      if (const auto& m = v.measured) {
        jv["measured"] = {{"value", m->value},       {"within_tolerance", v.measured_within()},
                          {"hardware", m->hardware}, {"source", m->source},
                          {"command", m->command},   {"date", m->date},
                          {"commit", m->commit},     {"note", m->note}};
      }
      values.push_back(jv);
    }
    arr.push_back({{"id", r.claim.id},
                   {"claim", r.claim.title},
                   {"source", r.claim.source},
                   {"file", r.claim.file},
                   {"evaluator", r.claim.evaluator},
                   {"verdict", verdict_id(r.verdict)},
                   {"values", values},
                   {"breakdown", r.evaluation.breakdown},
                   {"explained_by", r.explained_by() ? r.explained_by()->assumption : ""},
                   {"alternatives_tried", r.evaluation.alternatives.size()},
                   {"alternatives_reproducing", r.reproducing_alternatives()}});
  }
  nlohmann::ordered_json j = output_header("k3perf-verify", 1);
  j["summary"] = {{"claims", results.size()},
                  {"reproduced", tally[Verdict::reproduced]},
                  {"explained", tally[Verdict::explained]},
                  {"contradicted", tally[Verdict::contradicted]},
                  {"not_modelled", tally[Verdict::not_modelled]}};
  j["claims"] = arr;
  return j;
}

}  // namespace k3
