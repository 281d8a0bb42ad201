// The external oracle: a tiny random Kimi Linear model built and run by `transformers`
// (scripts/oracle_kimi_linear.py, tests/data/kimi_linear_oracle/README.md). Our reference loads the
// same checkpoint and must give the same logits, for the prompt and for decode steps with a cache.
#include "engine/reference/checkpoint_loader.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace k3::ref {
namespace {

const std::string kDir = std::string(K3PERF_SOURCE_DIR) + "/tests/data/kimi_linear_oracle";

nlohmann::json expected() {
  std::ifstream in(kDir + "/expected_logits.json");
  return nlohmann::json::parse(in);
}

// max |ours - theirs| / max |theirs| over a set of logits.
double relative_error(const Eigen::RowVectorXf& ours, const std::vector<double>& theirs) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < theirs.size(); ++i) {
    diff = std::max(diff, std::abs(double(ours(i)) - theirs[i]));
    scale = std::max(scale, std::abs(theirs[i]));
  }
  return diff / scale;
}

TEST(OracleKimiLinear, PrefillAndDecodeLogitsMatchTransformers) {
  const LoadedModel loaded = load_reference_model(kDir);
  const nlohmann::json e = expected();
  const std::vector<int32_t> prompt = e["prompt"].get<std::vector<int32_t>>();
  ModelState state = ModelState::empty(loaded.config);
  const Matrix logits = loaded.model.forward(prompt, state);
  const auto prefill = e["prefill_logits"].get<std::vector<std::vector<double>>>();
  ASSERT_EQ(logits.rows(), static_cast<Eigen::Index>(prefill.size()));
  double worst = 0;
  for (Eigen::Index t = 0; t < logits.rows(); ++t) worst = std::max(worst, relative_error(logits.row(t), prefill[t]));
  RecordProperty("prefill_relative_error", std::to_string(worst));
  EXPECT_LE(worst, 1e-4) << "prefill";

  const auto tokens = e["decode_tokens"].get<std::vector<int32_t>>();
  const auto steps = e["decode_logits"].get<std::vector<std::vector<double>>>();
  ASSERT_EQ(tokens.size(), steps.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const Matrix step = loaded.model.forward({tokens[i]}, state);
    EXPECT_LE(relative_error(step.row(0), steps[i]), 1e-4) << "decode step " << i;
  }
  // Greedy generation picks the tokens transformers picked.
  EXPECT_EQ(loaded.model.generate(prompt, static_cast<int>(tokens.size())), tokens);
}

}  // namespace
}  // namespace k3::ref
