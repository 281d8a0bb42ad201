#include "engine/runtime/memory_plan.h"

#include "core/error.h"
#include "engine/weights/tensor_layout.h"

#include <fmt/format.h>

#include <algorithm>

namespace k3::runtime {

namespace {
constexpr double kGiB = double(1ull << 30);

uint64_t stored_bytes(const weights::TensorSpec& t) {
  uint64_t n = static_cast<uint64_t>(weights::element_size_bytes(t.dtype));
  for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
  return n;
}
}  // namespace

uint64_t MemoryPlan::total_bytes() const {
  uint64_t total = 0;
  for (const Item& i : items) total += i.bytes;
  return total;
}

std::string MemoryPlan::describe() const {
  std::vector<Item> sorted = items;
  std::stable_sort(sorted.begin(), sorted.end(), [](const Item& a, const Item& b) { return a.bytes > b.bytes; });
  std::string out;
  for (const Item& i : sorted) out += fmt::format("  {:<44} {:>10.3f} GiB\n", i.what, i.bytes / kGiB);
  out += fmt::format("  {:<44} {:>10.3f} GiB\n", "total", total_bytes() / kGiB);
  return out;
}

MemoryPlan plan_memory(const ModelConfig& m, const RunShape& s) {
  K3_CHECK(s.max_sequences > 0 && s.max_context_tokens > 0 && s.page_tokens > 0 && s.max_chunk_tokens > 0,
           "run shape needs positive sizes (sequences {}, context {}, page {}, chunk {})", s.max_sequences,
           s.max_context_tokens, s.page_tokens, s.max_chunk_tokens);
  MemoryPlan plan;
  uint64_t weights = 0;
  for (const weights::TensorSpec& t : weights::checkpoint_layout(m).tensors) weights += stored_bytes(t);
  plan.items.push_back({"weights (as stored, MXFP4 experts packed)", weights});

  const int mla = m.count_layers(AttentionKind::mla), kda = m.count_layers(AttentionKind::kda);
  if (mla > 0) {
    const int64_t pages_per_sequence = (s.max_context_tokens + s.page_tokens - 1) / s.page_tokens;
    const double value_bytes = s.kv_cache == StorageFormat::fp8 ? 1.0 : bytes_per_element(s.kv_cache);
    const double token_bytes = m.mla.cache_values_per_token() * value_bytes + (s.kv_cache == StorageFormat::fp8 ? 4 : 0);
    const uint64_t page_bytes = static_cast<uint64_t>(token_bytes * double(s.page_tokens));
    plan.items.push_back({fmt::format("MLA latent cache ({} layers, {} pages of {} tokens)", mla,
                                      pages_per_sequence * s.max_sequences, s.page_tokens),
                          page_bytes * uint64_t(pages_per_sequence) * uint64_t(s.max_sequences) * uint64_t(mla)});
  }
  if (kda > 0 && m.kda) {
    const KdaSpec& k = *m.kda;
    const uint64_t state = uint64_t(k.num_heads) * k.head_dim * k.head_dim * uint64_t(bytes_per_element(s.kda_state));
    const uint64_t conv = uint64_t(3) * k.projection_dim() * (k.conv_kernel - 1) * 4;  // fp32 conv cache
    plan.items.push_back({fmt::format("KDA state slots ({} layers x {} sequences, {})", kda, s.max_sequences,
                                      to_string(s.kda_state)),
                          state * uint64_t(kda) * uint64_t(s.max_sequences)});
    plan.items.push_back({"KDA conv-state slots", conv * uint64_t(kda) * uint64_t(s.max_sequences)});
  }
  // Workspace: the widest per-token activation of a layer, a few times over (inputs, outputs and the
  // AttnRes block bank of up to 9 vectors), for the largest step, plus fp32 logits of the decode batch.
  const int64_t step_tokens = std::max<int64_t>(s.max_chunk_tokens, s.max_sequences);
  int64_t widest = 3LL * m.hidden_size;
  if (m.kda) widest = std::max<int64_t>(widest, 5LL * m.kda->projection_dim());
  widest = std::max<int64_t>(widest, 2LL * m.mla.num_heads * (m.mla.qk_head_dim() + m.mla.v_head_dim));
  if (m.dense_intermediate > 0) widest = std::max<int64_t>(widest, 3LL * m.dense_intermediate);
  const int64_t bank = m.residual == ResidualKind::block_attnres ? 9LL * m.hidden_size : 0;
  plan.items.push_back({fmt::format("activation workspace ({} tokens)", step_tokens),
                        uint64_t(step_tokens) * uint64_t(widest + bank) * 2});
  plan.items.push_back({"logits (fp32)", uint64_t(s.max_sequences) * uint64_t(m.vocab_size) * 4});
  return plan;
}

void require_fits(const MemoryPlan& plan, uint64_t free_bytes, const std::string& device) {
  if (plan.total_bytes() <= free_bytes) return;
  throw InputError(fmt::format("the run does not fit on {}: it needs {:.3f} GiB, {:.3f} GiB are free:\n{}", device,
                               plan.total_bytes() / kGiB, free_bytes / kGiB, plan.describe()));
}

}  // namespace k3::runtime
