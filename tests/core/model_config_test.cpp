// Model configs: every shipped config.json loads; the exact parameter counts of Kimi K3 (K3-SPEC §1)
// and of the published models; hand-computed counts for the twin configs; and every malformed input
// fails with an InputError naming the file and the key path.
#include "core/model_config.h"
#include "core/error.h"
#include "core/limits.h"
#include "core/parameters.h"
#include "expect_input_error.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#ifndef K3PERF_SOURCE_DIR
#error "tests/CMakeLists.txt defines K3PERF_SOURCE_DIR as the repository root"
#endif

namespace k3 {
namespace {

namespace fs = std::filesystem;

const std::string kModelsDir = std::string(K3PERF_SOURCE_DIR) + "/scenarios/models";

ModelConfig load(const std::string& name) { return load_model_config(kModelsDir + "/" + name + ".json"); }

nlohmann::json read_json(const std::string& name) {
  std::ifstream in(kModelsDir + "/" + name + ".json");
  EXPECT_TRUE(in.good()) << name;
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

using test::expect_input_error;

// 0-based indices of the layers with the given attention kind.
std::vector<int> layers_of(const ModelConfig& m, AttentionKind kind) {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(m.layer_attention.size()); ++i) {
    if (m.layer_attention[i] == kind) out.push_back(i);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Every shipped config loads.

TEST(ModelConfigFiles, EveryShippedConfigLoads) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(kModelsDir)) {
    if (e.path().extension() == ".json") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  // The seven documented in scenarios/models/SOURCES.md at least.
  ASSERT_GE(files.size(), 7u);
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    ModelConfig m;
    ASSERT_NO_THROW(m = load_model_config(f));
    EXPECT_EQ(m.name, fs::path(f).stem().string());
    EXPECT_EQ(m.source_file, f);
    EXPECT_EQ(static_cast<int>(m.layer_attention.size()), m.num_layers);
    EXPECT_EQ(static_cast<int>(m.layer_mlp.size()), m.num_layers);
    EXPECT_GT(count_parameters(m).total(), 0);
  }
}

TEST(ModelConfigFiles, LoadByNameFindsShippedModel) {
  const ModelConfig m = load_model_config_by_name("kimi-k3", kModelsDir);
  EXPECT_EQ(m.name, "kimi-k3");
  EXPECT_EQ(m.num_layers, 93);
}

TEST(ModelConfigFiles, UnknownNameListsAvailableModels) {
  expect_input_error([] { load_model_config_by_name("kimi-k9", kModelsDir); },
                     {"kimi-k9", "kimi-k3", "kimi-linear-48b-a3b", "deepseek-v3", "k3-twin", kModelsDir});
}

TEST(ModelConfigFiles, MissingFileNamesThePath) {
  const std::string path = kModelsDir + "/does-not-exist.json";
  expect_input_error([&] { load_model_config(path); }, {path});
}

// ---------------------------------------------------------------------------------------------
// Kimi K3: the exact counts of K3-SPEC §1 and the architecture flags.

TEST(KimiK3, ExactTotalAndActiveCounts) {
  const ModelConfig m = load("kimi-k3");
  const ParameterCounts c = count_parameters(m);
  EXPECT_EQ(c.total(), 2'779'484'478'208LL);
  EXPECT_EQ(c.active_per_token, 104'189'614'848LL);                // ≈104.19 B, without the input embedding
  EXPECT_EQ(c.active_per_token + c.embedding, 105'364'019'968LL);  // ≈105.36 B with it
}

TEST(KimiK3, PerBlockCounts) {
  const ModelConfig m = load("kimi-k3");
  EXPECT_EQ(kda_layer_params(m).total(), 443'740'416LL);
  EXPECT_EQ(mla_layer_params(m).total(), 232'196'096LL);
  EXPECT_EQ(routed_expert_params(m).total(), 33'030'144LL);
  EXPECT_EQ(routed_expert_params(m).total(), 3LL * 3072 * 3584);
  // MoE non-routed = router (+ correction bias) + fused shared expert + latent down/up (+ norm).
  EXPECT_EQ(moe_router_params(m).total(), 896LL * 7168 + 896);        // 6.42 M
  EXPECT_EQ(moe_shared_params(m).total(), 3LL * 6144 * 7168);         // 132.12 M
  EXPECT_EQ(moe_latent_params(m).total(), 2LL * 3584 * 7168 + 3584);  // 51.38 M + norm
  EXPECT_EQ(moe_router_params(m).total() + moe_shared_params(m).total() + moe_latent_params(m).total(), 189'927'808LL);
  EXPECT_EQ(dense_mlp_params(m).total(), 726'663'168LL);
  EXPECT_EQ(embedding_params(m), 1'174'405'120LL);
  EXPECT_EQ(lm_head_params(m), 1'174'405'120LL);
}

TEST(KimiK3, LayerSchedule) {
  const ModelConfig m = load("kimi-k3");
  ASSERT_EQ(m.num_layers, 93);
  // 1-based MLA layers 4, 8, ..., 92 and 93 -> 0-based 3, 7, ..., 91 and 92.
  std::vector<int> expected;
  for (int one_based = 4; one_based <= 92; one_based += 4) expected.push_back(one_based - 1);
  expected.push_back(92);
  EXPECT_EQ(expected.size(), 24u);
  EXPECT_EQ(layers_of(m, AttentionKind::mla), expected);
  EXPECT_EQ(m.count_layers(AttentionKind::mla), 24);
  EXPECT_EQ(m.count_layers(AttentionKind::kda), 69);
  // Layer 0 dense, layers 1..92 MoE.
  EXPECT_EQ(m.layer_mlp[0], MlpKind::dense);
  EXPECT_EQ(m.count_layers(MlpKind::moe), 92);
  EXPECT_EQ(m.count_layers(MlpKind::dense), 1);
}

TEST(KimiK3, ArchitectureFlags) {
  const ModelConfig m = load("kimi-k3");
  EXPECT_EQ(m.model_type, "kimi_linear");
  EXPECT_EQ(m.hidden_size, 7168);
  EXPECT_EQ(m.vocab_size, 163840);
  EXPECT_EQ(m.max_position_embeddings, 1'048'576);
  ASSERT_TRUE(m.kda.has_value());
  EXPECT_EQ(m.kda->num_heads, 96);
  EXPECT_EQ(m.kda->head_dim, 128);
  EXPECT_EQ(m.kda->conv_kernel, 4);
  EXPECT_EQ(m.kda->gate_form, KdaGateForm::bounded_sigmoid);
  EXPECT_EQ(to_string(m.kda->gate_form), "bounded_sigmoid");
  EXPECT_DOUBLE_EQ(m.kda->gate_lower_bound, -5.0);
  EXPECT_TRUE(m.kda->full_rank_output_gate);
  EXPECT_EQ(m.kda->a_log_stored_values, 128);  // 96 heads + 32 pads
  EXPECT_EQ(m.mla.num_heads, 96);
  EXPECT_EQ(m.mla.q_lora_rank, 1536);
  EXPECT_FALSE(m.mla.rotary);  // NoPE
  EXPECT_TRUE(m.mla.output_gate);
  EXPECT_EQ(m.mla.cache_values_per_token(), 576);
  EXPECT_EQ(m.activation, Activation::situ);
  EXPECT_DOUBLE_EQ(m.situ_beta, 4.0);
  EXPECT_DOUBLE_EQ(m.situ_linear_beta, 25.0);
  EXPECT_EQ(m.residual, ResidualKind::block_attnres);
  EXPECT_EQ(m.attn_res_block_layers, 12);
  ASSERT_TRUE(m.moe.has_value());
  EXPECT_EQ(m.moe->num_experts, 896);
  EXPECT_EQ(m.moe->top_k, 16);
  EXPECT_EQ(m.moe->latent_dim, 3584);
  EXPECT_TRUE(m.moe->latent_norm);
  EXPECT_EQ(m.moe->shared_intermediate, 6144);
  EXPECT_TRUE(m.moe->score_correction_bias);
  EXPECT_EQ(m.routed_expert_format, StorageFormat::mxfp4);
  EXPECT_EQ(m.weight_format, StorageFormat::bf16);
  EXPECT_FALSE(m.quantize_attention_and_dense);
}

// AttnRes candidates, worked by hand from the K3-SPEC §2 loop (blocks close at ℓ ∈ {0,12,...,84}):
//   before attention at ℓ: no mixer at ℓ=0; else (blocks closed at ℓ' < ℓ) + the running p.
//   before the MLP at ℓ:   (blocks closed at ℓ' <= ℓ) + p.
TEST(KimiK3, AttnResCandidates) {
  const ModelConfig m = load("kimi-k3");
  EXPECT_EQ(m.attnres_candidates_before_attention(0), 0);   // h = embedding, no mixer
  EXPECT_EQ(m.attnres_candidates_before_mlp(0), 2);         // [embedding] + p = a_0
  EXPECT_EQ(m.attnres_candidates_before_attention(1), 2);   // [embedding] + p
  EXPECT_EQ(m.attnres_candidates_before_attention(12), 2);  // block at 12 closes after this mixer
  EXPECT_EQ(m.attnres_candidates_before_mlp(11), 2);
  EXPECT_EQ(m.attnres_candidates_before_mlp(12), 3);  // [emb, block 0..11] + p = a_12
  EXPECT_EQ(m.attnres_candidates_before_attention(13), 3);
  EXPECT_EQ(m.attnres_candidates_before_attention(84), 8);  // 7 closed (0..72) + p
  EXPECT_EQ(m.attnres_candidates_before_mlp(84), 9);        // 8 closed (0..84) + p
  EXPECT_EQ(m.attnres_candidates_before_attention(92), 9);
  EXPECT_EQ(m.attnres_candidates_before_mlp(92), 9);
  EXPECT_EQ(m.attnres_candidates_final(), 9);  // the spec's maximum: 8 stored + 1
  // Without AttnRes there are no mixers at all.
  const ModelConfig plain = without_attnres(m);
  EXPECT_EQ(plain.residual, ResidualKind::plain);
  EXPECT_EQ(plain.attnres_candidates_before_mlp(50), 0);
  EXPECT_EQ(plain.attnres_candidates_final(), 0);
  // The mixers' weights disappear from the count: 2 mixers x 2 vectors x 7168 per layer, 2 x 7168 final.
  EXPECT_EQ(count_parameters(m).total() - count_parameters(plain).total(), (93LL * 4 + 2) * 7168);
}

TEST(KimiK3, CounterfactualVariants) {
  const ModelConfig m = load("kimi-k3");
  const ModelConfig all_mla = with_all_attention(m, AttentionKind::mla);
  EXPECT_EQ(all_mla.count_layers(AttentionKind::mla), 93);
  EXPECT_EQ(all_mla.name, "kimi-k3+all-mla");
  const ModelConfig all_kda = with_all_attention(m, AttentionKind::kda);
  EXPECT_EQ(all_kda.count_layers(AttentionKind::kda), 93);
  // A model without KDA cannot become all-KDA.
  expect_input_error([] { with_all_attention(load("deepseek-v3"), AttentionKind::kda); }, {"deepseek-v3.json", "KDA"});
}

// ---------------------------------------------------------------------------------------------
// Published predecessors and siblings.

TEST(KimiLinear48B, CountsAndForm) {
  const ModelConfig m = load("kimi-linear-48b-a3b");
  const ParameterCounts c = count_parameters(m);
  EXPECT_EQ(c.total(), 49'122'681'728LL);  // the published tensor census (SOURCES.md §7)
  EXPECT_EQ(c.active_per_token, 3'106'972'544LL);
  ASSERT_TRUE(m.kda.has_value());
  EXPECT_EQ(m.kda->gate_form, KdaGateForm::softplus);
  EXPECT_FALSE(m.kda->full_rank_output_gate);
  EXPECT_EQ(m.kda->a_log_stored_values, 32);  // stored [1,1,32,1]
  EXPECT_EQ(m.residual, ResidualKind::plain);
  EXPECT_EQ(m.attnres_candidates_final(), 0);
  EXPECT_EQ(m.activation, Activation::silu);
  EXPECT_EQ(m.mla.q_lora_rank, 0);
  EXPECT_FALSE(m.mla.output_gate);
  EXPECT_EQ(layers_of(m, AttentionKind::mla), (std::vector<int>{3, 7, 11, 15, 19, 23, 26}));
  EXPECT_EQ(m.count_layers(AttentionKind::kda), 20);
  EXPECT_EQ(m.max_position_embeddings, 1'048'576);  // from model_max_length
  EXPECT_EQ(m.routed_expert_format, StorageFormat::bf16);
}

TEST(DeepSeekV3, MainModelTotalAndFp8) {
  const ModelConfig m = load("deepseek-v3");
  const ParameterCounts c = count_parameters(m);
  // 671 B main model; the MTP layer (num_nextn_predict_layers) is not counted.
  EXPECT_NEAR(static_cast<double>(c.total()), 671.03e9, 0.01e9);
  EXPECT_EQ(m.num_layers, 61);
  EXPECT_EQ(m.count_layers(AttentionKind::mla), 61);
  EXPECT_TRUE(m.mla.rotary);
  EXPECT_FALSE(m.kda.has_value());
  EXPECT_EQ(m.weight_format, StorageFormat::fp8);
  EXPECT_EQ(m.routed_expert_format, StorageFormat::fp8);
  EXPECT_TRUE(m.quantize_attention_and_dense);
  EXPECT_EQ(m.count_layers(MlpKind::dense), 3);
}

TEST(KimiK2, TotalAndFormats) {
  const ModelConfig k2 = load("kimi-k2");
  EXPECT_EQ(count_parameters(k2).total(), 1'026'408'232'448LL);
  EXPECT_EQ(k2.weight_format, StorageFormat::fp8);

  const ModelConfig thinking = load("kimi-k2-thinking");
  EXPECT_EQ(count_parameters(thinking).total(), 1'026'408'232'448LL);  // same parameters as K2
  EXPECT_EQ(thinking.routed_expert_format, StorageFormat::int4);
  EXPECT_EQ(thinking.weight_format, StorageFormat::bf16);
  EXPECT_FALSE(thinking.quantize_attention_and_dense);
}

// ---------------------------------------------------------------------------------------------
// Twins: counts worked out by hand from the JSON dimensions.

TEST(K3Twin, HandComputedCounts) {
  const ModelConfig m = load("k3-twin");
  // Dimensions from k3-twin.json (asserted so the arithmetic below is about this file).
  const long long h = 64, L = 9, V = 256;
  const long long H = 4, d = 16, P = H * d, r = d /* gate rank = head_dim */, K = 4;
  const long long A_log = 128;  // K3 nested layout pads A_log to a multiple of 128 values
  const long long Hm = 4, q_lora = 32, kv_lora = 16, nope = 16, rope = 8, v_dim = 16;
  const long long E = 8, top_k = 2, moe_i = 32, latent = 64, shared_i = 2 * moe_i, dense_i = 128;
  ASSERT_EQ(m.hidden_size, h);
  ASSERT_EQ(m.num_layers, L);
  ASSERT_EQ(m.kda->projection_dim(), P);
  ASSERT_EQ(m.moe->latent_dim, latent);
  ASSERT_EQ(m.moe->shared_intermediate, shared_i);

  // KDA = q,k,v + forget gate (low rank) + beta + output gate (full rank) + o_proj
  //       + conv weights + A_log + dt_bias + output-norm weight
  const long long kda = 3 * P * h + (r * h + P * r) + H * h + P * h + h * P + 3 * P * K + A_log + P + d;
  EXPECT_EQ(kda, 23'760);
  EXPECT_EQ(kda_layer_params(m).total(), kda);
  EXPECT_EQ(kda_layer_params(m).other, 3 * P * K + A_log + P + d);

  // MLA = q_a + q_a_norm + q_b + kv_a (latent + rope key) + kv_a_norm + kv_b + o_proj + g_proj
  const long long mla = q_lora * h + q_lora + Hm * (nope + rope) * q_lora + (kv_lora + rope) * h + kv_lora +
                        Hm * (nope + v_dim) * kv_lora + h * Hm * v_dim + Hm * v_dim * h;
  EXPECT_EQ(mla, 16'944);
  EXPECT_EQ(mla_layer_params(m).total(), mla);

  const long long expert = 3 * moe_i * latent;            // w1, w3 [moe_i, latent], w2 [latent, moe_i]
  const long long router = E * h + E;                     // gate weight + e_score_correction_bias
  const long long shared = 3 * shared_i * h;              // 2 shared experts, fused
  const long long latent_proj = 2 * latent * h + latent;  // down + up + latent RMSNorm
  const long long dense = 3 * dense_i * h;
  EXPECT_EQ(routed_expert_params(m).total(), expert);
  EXPECT_EQ(moe_router_params(m).total(), router);
  EXPECT_EQ(moe_shared_params(m).total(), shared);
  EXPECT_EQ(moe_latent_params(m).total(), latent_proj);
  EXPECT_EQ(dense_mlp_params(m).total(), dense);

  // Norms: 2 RMSNorms + 2 AttnRes mixers (w, γ) per layer; final norm + final mixer.
  const long long norms = L * (2 * h + 4 * h) + (h + 2 * h);
  const long long embed = V * h;
  const long long moe_layers = L - 1;
  const long long total =
      2 * embed + 3 * mla + 6 * kda + dense + moe_layers * (E * expert + router + shared + latent_proj) + norms;
  EXPECT_EQ(total, 816'112);
  const ParameterCounts c = count_parameters(m);
  EXPECT_EQ(c.embedding, embed);
  EXPECT_EQ(c.lm_head, embed);
  EXPECT_EQ(c.norms, norms);
  EXPECT_EQ(c.total(), total);
  EXPECT_EQ(c.active_per_token, total - embed - moe_layers * (E - top_k) * expert);
}

TEST(K3Twin, ScheduleAndFlags) {
  const ModelConfig m = load("k3-twin");
  EXPECT_EQ(layers_of(m, AttentionKind::mla), (std::vector<int>{3, 7, 8}));
  EXPECT_EQ(m.kda->gate_form, KdaGateForm::bounded_sigmoid);
  EXPECT_TRUE(m.kda->full_rank_output_gate);
  EXPECT_EQ(m.attn_res_block_layers, 3);
  // Block size 3 over 9 layers: blocks close at 0, 3, 6 -> final mixer sees 3 + p.
  EXPECT_EQ(m.attnres_candidates_final(), 4);
  EXPECT_EQ(m.attnres_candidates_before_attention(3), 2);
  EXPECT_EQ(m.attnres_candidates_before_mlp(3), 3);
  EXPECT_EQ(m.routed_expert_format, StorageFormat::mxfp4);
}

TEST(KimiLinearTwin, HandComputedCounts) {
  const ModelConfig m = load("kimi-linear-twin");
  const long long h = 64, L = 5, V = 256;
  const long long H = 4, d = 16, P = H * d, r = d, K = 4;
  const long long A_log = H;  // flat Kimi Linear layout: one value per head
  const long long Hm = 4, kv_lora = 16, nope = 16, rope = 8, v_dim = 16;
  const long long E = 8, top_k = 2, moe_i = 32, shared_i = 1 * moe_i, dense_i = 128;
  ASSERT_EQ(m.hidden_size, h);
  ASSERT_EQ(m.num_layers, L);
  ASSERT_EQ(m.kda->projection_dim(), P);

  // KDA with a low-rank output gate (r*h + P*r) instead of the full-rank P*h.
  const long long kda = 3 * P * h + (r * h + P * r) + H * h + (r * h + P * r) + h * P + 3 * P * K + A_log + P + d;
  EXPECT_EQ(kda, 21'588);
  EXPECT_EQ(kda_layer_params(m).total(), kda);

  // MLA with a direct q_proj (q_lora_rank null) and no output gate.
  const long long mla =
      Hm * (nope + rope) * h + (kv_lora + rope) * h + kv_lora + Hm * (nope + v_dim) * kv_lora + h * Hm * v_dim;
  EXPECT_EQ(mla, 13'840);
  EXPECT_EQ(mla_layer_params(m).total(), mla);

  const long long expert = 3 * moe_i * h;  // no latent: experts work at hidden size
  const long long router = E * h + E;
  const long long shared = 3 * shared_i * h;
  const long long dense = 3 * dense_i * h;
  EXPECT_EQ(routed_expert_params(m).total(), expert);
  EXPECT_EQ(moe_router_params(m).total(), router);
  EXPECT_EQ(moe_shared_params(m).total(), shared);
  EXPECT_EQ(moe_latent_params(m).total(), 0);
  EXPECT_EQ(dense_mlp_params(m).total(), dense);

  const long long norms = L * 2 * h + h;  // plain residual: no mixers
  const long long embed = V * h;
  const long long moe_layers = L - 1;
  const long long total = 2 * embed + 2 * mla + 3 * kda + dense + moe_layers * (E * expert + router + shared) + norms;
  EXPECT_EQ(total, 373'756);
  const ParameterCounts c = count_parameters(m);
  EXPECT_EQ(c.total(), total);
  EXPECT_EQ(c.active_per_token, total - embed - moe_layers * (E - top_k) * expert);
  EXPECT_EQ(c.active_per_token, 209'916);
  EXPECT_EQ(m.kda->gate_form, KdaGateForm::softplus);
  EXPECT_EQ(m.max_position_embeddings, 4096);  // model_max_length
}

// ---------------------------------------------------------------------------------------------
// Bad inputs: each one is the twin with one edit, parsed as "bad.json".

nlohmann::json twin() { return read_json("k3-twin"); }
ModelConfig parse(const nlohmann::json& j) { return parse_model_config(j.dump(), "bad.json"); }

TEST(ModelConfigErrors, TwinParsesUnedited) {
  // The baseline for the edits below: the unedited twin parses from text.
  EXPECT_EQ(count_parameters(parse(twin())).total(), count_parameters(load("k3-twin")).total());
}

TEST(ModelConfigErrors, UnknownExtraKeysAreIgnored) {
  nlohmann::json j = twin();
  j["text_config"]["some_future_key"] = {{"nested", 1}};
  j["another_top_level_key"] = "x";
  ModelConfig m;
  ASSERT_NO_THROW(m = parse(j));
  EXPECT_EQ(count_parameters(m).total(), count_parameters(load("k3-twin")).total());
}

TEST(ModelConfigErrors, MalformedJson) {
  const std::string text = twin().dump();
  expect_input_error([&] { parse_model_config(text.substr(0, text.size() / 2), "bad.json"); },
                     {"bad.json", "malformed JSON"});
}

TEST(ModelConfigErrors, TopLevelNotAnObject) {
  expect_input_error([] { parse_model_config("[1, 2, 3]", "bad.json"); }, {"bad.json", "object"});
}

TEST(ModelConfigErrors, MissingHiddenSize) {
  nlohmann::json j = twin();
  j["text_config"].erase("hidden_size");
  expect_input_error([&] { parse(j); }, {"bad.json", "text_config.hidden_size", "missing"});
}

TEST(ModelConfigErrors, MissingHiddenSizeFlatLayout) {
  nlohmann::json j = read_json("kimi-linear-twin");
  j.erase("hidden_size");
  expect_input_error([&] { parse(j); }, {"bad.json", "'hidden_size'"});
}

TEST(ModelConfigErrors, HiddenSizeAsString) {
  nlohmann::json j = twin();
  j["text_config"]["hidden_size"] = "64";
  expect_input_error([&] { parse(j); }, {"bad.json", "text_config.hidden_size", "integer"});
}

TEST(ModelConfigErrors, NonPositiveLayerCount) {
  for (int layers : {-3, 0}) {
    SCOPED_TRACE(layers);
    nlohmann::json j = twin();
    j["text_config"]["num_hidden_layers"] = layers;
    expect_input_error([&] { parse(j); }, {"bad.json", "text_config.num_hidden_layers", "positive"});
  }
}

// Values that wrapped when narrowed to int (2^31 + 8 read back as negative, 2^32 as 0 and a division by it) are
// refused in their own type, the limit in the message; the limit itself is accepted.
TEST(ModelConfigErrors, IntegersBeyondTheirLimit) {
  struct Case {
    std::vector<std::string> path;
    long long value;
    long long limit;
  };
  const std::vector<Case> cases = {
      {{"text_config", "hidden_size"}, (1LL << 31) + 8, limit::model_dim.max},
      {{"text_config", "attn_res_block_size"}, 1LL << 32, limit::layers.max},
      {{"text_config", "num_hidden_layers"}, 100'000'000, limit::layers.max},
      {{"text_config", "num_experts"}, 2'000'000'000, limit::experts.max},
      {{"text_config", "vocab_size"}, 1LL << 40, limit::vocab.max},
      {{"text_config", "linear_attn_config", "num_heads"}, 1LL << 32, limit::heads.max},
      {{"text_config", "max_position_embeddings"}, std::numeric_limits<long long>::max(), limit::positions.max},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path.back());
    nlohmann::json j = twin();
    nlohmann::json* at = &j;
    for (const std::string& key : c.path) at = &(*at)[key];
    *at = c.value;
    std::string key = c.path[0];
    for (std::size_t i = 1; i < c.path.size(); ++i) key += "." + c.path[i];
    expect_input_error([&] { parse(j); }, {"bad.json", key, fmt::format("{} exceeds {}", c.value, c.limit)});
  }
  nlohmann::json j = twin();
  j["text_config"]["attn_res_block_size"] = limit::layers.max;  // at the limit: one block holds every layer
  EXPECT_EQ(parse(j).attn_res_block_layers, limit::layers.max);
}

TEST(ModelConfigErrors, UnknownModelType) {
  nlohmann::json j = twin();
  j["text_config"]["model_type"] = "llama";
  expect_input_error([&] { parse(j); }, {"bad.json", "text_config.model_type", "llama"});
}

TEST(ModelConfigErrors, LayerInBothLists) {
  nlohmann::json j = twin();
  j["text_config"]["linear_attn_config"]["kda_layers"].push_back(4);  // 4 is also a full-attention layer
  expect_input_error([&] { parse(j); }, {"bad.json", "text_config.linear_attn_config.kda_layers", "layer 4", "twice"});
}

TEST(ModelConfigErrors, LayerOutOfRange) {
  for (int layer : {10, 0}) {  // 1-based: valid layers are 1..9
    SCOPED_TRACE(layer);
    nlohmann::json j = twin();
    j["text_config"]["linear_attn_config"]["full_attn_layers"].push_back(layer);
    expect_input_error([&] { parse(j); }, {"bad.json", "text_config.linear_attn_config.full_attn_layers",
                                           fmt::format("layer {}", layer), "outside"});
  }
}

TEST(ModelConfigErrors, LayerInNeitherList) {
  nlohmann::json j = twin();
  j["text_config"]["linear_attn_config"]["full_attn_layers"] = {4, 8};  // 9 dropped
  expect_input_error([&] { parse(j); }, {"bad.json", "text_config.linear_attn_config", "layer 9", "neither"});
}

TEST(ModelConfigErrors, TopKExceedsExperts) {
  nlohmann::json j = twin();
  j["text_config"]["num_experts_per_token"] = 9;  // 8 experts
  expect_input_error([&] { parse(j); }, {"bad.json", "text_config.num_experts_per_token"});
  j["text_config"]["num_experts_per_token"] = 8;  // the boundary is allowed
  EXPECT_NO_THROW(parse(j));
}

TEST(ModelConfigErrors, UnsupportedActivation) {
  nlohmann::json j = twin();
  j["text_config"]["hidden_act"] = "gelu";
  expect_input_error([&] { parse(j); }, {"bad.json", "text_config.hidden_act", "gelu"});
}

TEST(ModelConfigErrors, UnsupportedQuantMethod) {
  nlohmann::json j = twin();
  j["text_config"]["quantization_config"]["quant_method"] = "awq";
  expect_input_error([&] { parse(j); }, {"bad.json", "text_config.quantization_config.quant_method", "awq"});
}

}  // namespace
}  // namespace k3
