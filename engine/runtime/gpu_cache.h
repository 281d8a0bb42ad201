// The per-sequence state of the GPU runtime, in sequence slots 0..max_sequences−1:
//   - the MLA latent cache: per MLA layer a pool of pages [pages, page_tokens, r + dr] bf16; all MLA
//     layers use the same page ids, so one page table [max_sequences, max_pages_per_sequence] int32
//     (device) serves them all. Pages come from a free list when a sequence is admitted (enough for
//     the tokens it will hold) and go back when it is released;
//   - KDA recurrent states [max_sequences, H, d, d] fp32 and conv states [max_sequences, 3P, K−1] fp32
//     per KDA layer, zeroed on admission;
//   - the decode step's positions and lengths (device int32 [2·batch]: positions = tokens cached before
//     the step, lengths = positions + 1), advanced on the device so a captured step can replay.
#pragma once

#include "core/model_config.h"
#include "engine/runtime/device_arena.h"

#include <cuda_bf16.h>

#include <cstdint>
#include <vector>

namespace k3::runtime {

struct CacheShape {
  int max_sequences = 1;
  int64_t max_context_tokens = 4096;
  int page_tokens = 64;
};

class GpuCache {
 public:
  GpuCache(const ModelConfig& config, const CacheShape& shape);
  static uint64_t device_bytes(const ModelConfig& config, const CacheShape& shape);

  // Takes pages for `tokens` tokens from the free list for `sequence` and zeroes its KDA states.
  // Error naming the sequence, the pages asked and free when the pool is short.
  void admit(int sequence, int64_t tokens);
  void release(int sequence);
  int64_t free_pages() const { return int64_t(free_.size()); }

  const CacheShape& shape() const { return shape_; }
  int max_pages_per_sequence() const { return max_pages_per_sequence_; }
  __nv_bfloat16* mla_pages(int layer) const { return mla_pages_[layer]; }
  float* kda_state(int layer, int sequence) const;     // [H, d, d], the slots of 0..n−1 contiguous
  float* conv_state(int layer, int sequence) const;    // [3P, K−1]
  int32_t* page_table() const { return page_table_; }  // device [max_sequences, max_pages_per_sequence]
  int32_t* page_table_row(int sequence) const { return page_table_ + int64_t(sequence) * max_pages_per_sequence_; }
  int32_t* step_positions() const { return step_positions_; }  // device [2 · max_sequences]
  int64_t admitted_tokens(int sequence) const { return admitted_tokens_[sequence]; }

 private:
  GpuCache(const ModelConfig& config, const CacheShape& shape, DeviceArena arena);
  void lay_out(DeviceArena& arena);

  ModelConfig config_;
  CacheShape shape_;
  int max_pages_per_sequence_ = 0;
  int64_t total_pages_ = 0;
  int64_t state_elements_ = 0, conv_elements_ = 0;  // per sequence and KDA layer
  DeviceArena arena_;
  std::vector<__nv_bfloat16*> mla_pages_;       // per layer (null for KDA layers)
  std::vector<float*> kda_state_, conv_state_;  // per layer (null for MLA layers)
  int32_t* page_table_ = nullptr;
  int32_t* step_positions_ = nullptr;
  std::vector<int32_t> free_;                   // page ids, popped from the back
  std::vector<std::vector<int32_t>> pages_of_;  // per sequence
  std::vector<int64_t> admitted_tokens_;
};

}  // namespace k3::runtime
