#include "sim/claims/claim_report.h"

#include <fmt/format.h>

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

nlohmann::ordered_json to_json(const std::vector<ClaimResult>& results) {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const ClaimResult& r : results) {
    nlohmann::ordered_json values = nlohmann::ordered_json::array();
    for (const ComparedValue& v : r.values) {
      nlohmann::ordered_json jv = {{"key", v.reported.key}, {"reported", v.reported.describe()}};
      if (v.predicted) {
        jv["predicted"] = *v.predicted;
        jv["within_tolerance"] = v.within;
      }
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
                   {"verdict", to_string(r.verdict)},
                   {"values", values},
                   {"breakdown", r.evaluation.breakdown},
                   {"explained_by", r.explained_by() ? r.explained_by()->assumption : ""},
                   {"alternatives_tried", r.evaluation.alternatives.size()},
                   {"alternatives_reproducing", r.reproducing_alternatives()}});
  }
  return {{"claims", arr}};
}

}  // namespace k3
