#include "engine/runtime/gpu_cache.h"

#include "core/error.h"
#include "engine/runtime/cuda_check.h"

#include <fmt/format.h>

namespace k3::runtime {

namespace {
void check_shape(const ModelConfig& c, const CacheShape& s) {
  if (s.max_sequences <= 0 || s.max_context_tokens <= 0 || s.page_tokens <= 0) {
    throw InputError(
        fmt::format("cache shape: max_sequences {}, max_context_tokens {} and page_tokens {} must be positive",
                    s.max_sequences, s.max_context_tokens, s.page_tokens));
  }
  if (s.max_context_tokens > c.max_position_embeddings && c.max_position_embeddings > 0) {
    throw InputError(fmt::format("context of {} tokens exceeds {}'s max_position_embeddings {}", s.max_context_tokens,
                                 c.name, c.max_position_embeddings));
  }
}
}  // namespace

uint64_t GpuCache::device_bytes(const ModelConfig& config, const CacheShape& shape) {
  check_shape(config, shape);
  GpuCache measuring(config, shape, DeviceArena::measuring());
  return measuring.arena_.used_bytes();
}

GpuCache::GpuCache(const ModelConfig& config, const CacheShape& shape, DeviceArena arena)
    : config_(config), shape_(shape), arena_(std::move(arena)) {
  lay_out(arena_);
}

GpuCache::GpuCache(const ModelConfig& config, const CacheShape& shape)
    : GpuCache(config, shape, DeviceArena(device_bytes(config, shape), "the KV cache and KDA state slots")) {
  CUDA_CHECK(cudaMemset(page_table_, 0, sizeof(int32_t) * size_t(shape_.max_sequences) * max_pages_per_sequence_));
  CUDA_CHECK(cudaMemset(step_positions_, 0, sizeof(int32_t) * 2 * shape_.max_sequences));
  free_.reserve(total_pages_);
  for (int64_t p = total_pages_ - 1; p >= 0; --p) free_.push_back(int32_t(p));
  pages_of_.assign(shape_.max_sequences, {});
  admitted_tokens_.assign(shape_.max_sequences, 0);
}

void GpuCache::lay_out(DeviceArena& arena) {
  const ModelConfig& c = config_;
  max_pages_per_sequence_ = int((shape_.max_context_tokens + shape_.page_tokens - 1) / shape_.page_tokens);
  total_pages_ = int64_t(max_pages_per_sequence_) * shape_.max_sequences;
  K3_CHECK(total_pages_ < INT32_MAX, "{} pages do not fit int32 page ids", total_pages_);
  const int64_t width = c.mla.cache_values_per_token();
  if (c.kda) {
    const int64_t P = c.kda->projection_dim();
    state_elements_ = int64_t(c.kda->num_heads) * c.kda->head_dim * c.kda->head_dim;
    conv_elements_ = 3 * P * (c.kda->conv_kernel - 1);
  }
  mla_pages_.assign(c.num_layers, nullptr);
  kda_state_.assign(c.num_layers, nullptr);
  conv_state_.assign(c.num_layers, nullptr);
  for (int l = 0; l < c.num_layers; ++l) {
    if (c.layer_attention[l] == AttentionKind::mla) {
      mla_pages_[l] = arena.take_n<__nv_bfloat16>(total_pages_ * shape_.page_tokens * width);
    } else {
      kda_state_[l] = arena.take_n<float>(state_elements_ * shape_.max_sequences);
      conv_state_[l] = arena.take_n<float>(conv_elements_ * shape_.max_sequences);
    }
  }
  page_table_ = arena.take_n<int32_t>(int64_t(shape_.max_sequences) * max_pages_per_sequence_);
  step_positions_ = arena.take_n<int32_t>(2 * shape_.max_sequences);
}

float* GpuCache::kda_state(int layer, int sequence) const {
  return kda_state_[layer] ? kda_state_[layer] + state_elements_ * sequence : nullptr;
}

float* GpuCache::conv_state(int layer, int sequence) const {
  return conv_state_[layer] ? conv_state_[layer] + conv_elements_ * sequence : nullptr;
}

void GpuCache::admit(int sequence, int64_t tokens) {
  K3_CHECK(sequence >= 0 && sequence < shape_.max_sequences, "sequence slot {} outside [0, {})", sequence,
           shape_.max_sequences);
  K3_CHECK(pages_of_[sequence].empty(), "sequence slot {} is already admitted", sequence);
  if (tokens > shape_.max_context_tokens) {
    throw InputError(fmt::format("a sequence of {} tokens exceeds the cache's {} tokens per sequence", tokens,
                                 shape_.max_context_tokens));
  }
  const int64_t pages = (tokens + shape_.page_tokens - 1) / shape_.page_tokens;
  if (pages > int64_t(free_.size())) {
    throw Error(fmt::format("sequence slot {} needs {} pages of {} tokens, {} are free", sequence, pages,
                            shape_.page_tokens, free_.size()));
  }
  std::vector<int32_t>& mine = pages_of_[sequence];
  for (int64_t i = 0; i < pages; ++i) {
    mine.push_back(free_.back());
    free_.pop_back();
  }
  CUDA_CHECK(cudaMemcpy(page_table_row(sequence), mine.data(), mine.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  for (int l = 0; l < config_.num_layers; ++l) {
    if (kda_state_[l]) {
      CUDA_CHECK(cudaMemset(kda_state(l, sequence), 0, sizeof(float) * state_elements_));
      CUDA_CHECK(cudaMemset(conv_state(l, sequence), 0, sizeof(float) * conv_elements_));
    }
  }
  admitted_tokens_[sequence] = tokens;
}

void GpuCache::release(int sequence) {
  K3_CHECK(sequence >= 0 && sequence < shape_.max_sequences, "sequence slot {} outside [0, {})", sequence,
           shape_.max_sequences);
  for (int32_t p : pages_of_[sequence]) free_.push_back(p);
  pages_of_[sequence].clear();
  admitted_tokens_[sequence] = 0;
}

}  // namespace k3::runtime
