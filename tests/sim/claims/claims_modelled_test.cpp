// The claims this work models (P4, P8, P9, P10, P15, P17, P20) get a verdict with a breakdown; P4 and
// P7 show the per-sequence bytes that bound a batch-enlarged ratio; the Markdown report is
// deterministic and explains every verdict.
#include "sim/claims/claim.h"
#include "sim/claims/claim_markdown.h"
#include "sim/test_data.h"

#include <gtest/gtest.h>

#include <map>

namespace k3 {
namespace {

std::map<std::string, ClaimResult> check_ids(const std::vector<std::string>& ids) {
  std::map<std::string, ClaimResult> out;
  for (const Claim& c : load_claims(test::data().claims_dir)) {
    for (const std::string& id : ids) {
      if (c.id == id) out.emplace(id, check_claim(c, test::data()));
    }
  }
  return out;
}

TEST(ClaimsModelled, EveryOneHasAVerdictAndABreakdown) {
  const auto r = check_ids({"P4", "P7", "P8", "P9", "P10", "P15", "P17", "P20"});
  ASSERT_EQ(r.size(), 8u);
  for (const auto& [id, result] : r) {
    EXPECT_NE(result.verdict, Verdict::not_modelled) << id;
    EXPECT_GE(result.evaluation.breakdown.size(), 3u) << id;
  }
  for (const char* id : {"P10", "P15", "P20"}) EXPECT_EQ(r.at(id).verdict, Verdict::reproduced) << id;
  // P8: with the per-kernel floors measured on the H200 (carried to the GB300 unchanged) and the collective latency
  // by group size, our engine's ~2,000 decode kernels put the TP8 / TP16 baselines at a third of the reported 111 and
  // 118 tok/s: the verdict is contradicted, and the breakdown says so.
  EXPECT_EQ(r.at("P8").verdict, Verdict::contradicted);
  EXPECT_LT(r.at("P8").evaluation.predicted.at("tp8_baseline_tok_s") / 111.0, 0.5);
  EXPECT_LT(r.at("P8").evaluation.predicted.at("tp16_baseline_tok_s") / 118.0, 0.5);
  // P4, P7: the breakdown separates the batch term from the per-sequence bytes that bound it.
  for (const char* id : {"P4", "P7"}) {
    bool ceiling = false;
    for (const std::string& line : r.at(id).evaluation.breakdown) {
      ceiling |= line.find("with weights fully amortised the ratio tends to") != std::string::npos;
    }
    EXPECT_TRUE(ceiling) << id;
  }
}

TEST(ClaimsModelled, MarkdownReportExplainsEveryVerdictDeterministically) {
  std::vector<ClaimResult> results;
  for (const auto& [id, result] : check_ids({"P4", "P9", "P10", "P17"})) results.push_back(result);
  const std::string a = format_claims_markdown(results), b = format_claims_markdown(results);
  EXPECT_EQ(a, b);
  for (const ClaimResult& r : results) {
    EXPECT_NE(a.find("## " + r.claim.id + "\n"), std::string::npos) << r.claim.id;
    EXPECT_NE(a.find(explain_verdict(r)), std::string::npos) << r.claim.id;
  }
  for (const ClaimResult& r : results) {
    const std::string why = explain_verdict(r);
    EXPECT_EQ(why.rfind(r.verdict == Verdict::reproduced     ? "Reproduced"
                        : r.verdict == Verdict::explained    ? "Explained"
                        : r.verdict == Verdict::contradicted ? "Contradicted"
                                                             : "Not modelled",
                        0),
              0u)
        << why;
  }
}

}  // namespace
}  // namespace k3
