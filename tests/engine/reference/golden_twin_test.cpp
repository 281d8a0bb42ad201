// The committed golden activations of the K3 twin (tests/data/k3_twin_golden) still match what the
// reference computes from the deterministic synthetic checkpoint: a guard against silent drift of
// the data the GPU engine is checked against.
#include "engine/reference/checkpoint_loader.h"
#include "engine/weights/safetensors.h"
#include "engine/weights/synthetic_checkpoint.h"
#include "engine/weights/tensor_decode.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace k3::ref {
namespace {

namespace fs = std::filesystem;
const std::string kGolden = std::string(K3PERF_SOURCE_DIR) + "/tests/data/k3_twin_golden";

Matrix read(const weights::SafetensorsFile& f, const std::string& name) {
  const weights::TensorInfo* t = f.find(name);
  if (!t) throw std::runtime_error("golden trace lacks " + name);
  const std::vector<float> v = weights::decode_to_float(t->dtype, f.bytes(*t));
  return Eigen::Map<const Matrix>(v.data(), t->shape[0], t->shape[1]);
}

TEST(GoldenTwin, ReferenceReproducesTheCommittedTrace) {
  const fs::path ckpt = fs::temp_directory_path() / fmt::format("k3perf_golden_{}", ::getpid());
  weights::SyntheticCheckpointOptions o;
  o.config_path = std::string(K3PERF_SOURCE_DIR) + "/scenarios/models/k3-twin.json";
  o.out_dir = ckpt.string();
  o.seed = 2026;
  weights::write_synthetic_checkpoint(o);
  const LoadedModel loaded = load_reference_model(ckpt.string());
  fs::remove_all(ckpt);

  std::ifstream in(kGolden + "/prompt.txt");
  std::vector<int32_t> prompt;
  for (int32_t t; in >> t;) prompt.push_back(t);
  const weights::SafetensorsFile golden = weights::SafetensorsFile::open(kGolden + "/trace.safetensors");
  ModelState state = ModelState::empty(loaded.config);
  ForwardTrace trace;
  const Matrix logits = loaded.model.forward(prompt, state, &trace);
  auto close = [](const Matrix& a, const Matrix& b) {
    return (a - b).cwiseAbs().maxCoeff() <= 1e-5 * std::max(1.0f, b.cwiseAbs().maxCoeff());
  };
  for (int l = 0; l < loaded.config.num_layers; ++l) {
    const std::string p = fmt::format("L{:03d}.", l + 1);
    EXPECT_TRUE(close(trace.attention_in[l], read(golden, p + "attention_in"))) << p;
    EXPECT_TRUE(close(trace.attention_out[l], read(golden, p + "attention_out"))) << p;
    EXPECT_TRUE(close(trace.mlp_in[l], read(golden, p + "mlp_in"))) << p;
    EXPECT_TRUE(close(trace.mlp_out[l], read(golden, p + "mlp_out"))) << p;
  }
  EXPECT_TRUE(close(logits, read(golden, "logits")));
  std::vector<int32_t> expected;
  std::istringstream gen(golden.metadata().at("generated"));
  for (int32_t t; gen >> t;) expected.push_back(t);
  EXPECT_EQ(loaded.model.generate(prompt, static_cast<int>(expected.size())), expected);
}

}  // namespace
}  // namespace k3::ref
