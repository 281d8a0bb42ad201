// The GPU runtime's memory plan: every buffer the engine will allocate for a model and a run shape,
// computed before allocating anything, so that a run that cannot fit is refused with what needs how
// much against how much is free — instead of failing halfway through loading.
//   weights     the checkpoint layout's tensors as stored (MXFP4 experts stay packed)
//   KV pages    MLA latent cache in pages of page_tokens, for max_sequences × max_context_tokens
//   KDA state   recurrent state slots (fp32 or bf16) and conv-state slots, one per sequence and layer
//   workspace   activations of the largest step (a prefill chunk or a decode batch) and the logits
#pragma once

#include "core/dtype.h"
#include "core/model_config.h"

#include <cstdint>
#include <string>
#include <vector>

namespace k3::runtime {

struct RunShape {
  int max_sequences = 1;              // sequences resident at once (decode batch)
  int64_t max_context_tokens = 4096;  // per sequence, prompt + generated
  int64_t page_tokens = 64;           // MLA cache page size
  int64_t max_chunk_tokens = 8192;    // prefill chunk; the decode batch is max_sequences tokens
  StorageFormat kda_state = StorageFormat::fp32;
  StorageFormat kv_cache = StorageFormat::bf16;
};

struct MemoryPlan {
  struct Item {
    std::string what;
    uint64_t bytes = 0;
  };
  std::vector<Item> items;
  uint64_t total_bytes() const;
  std::string describe() const;  // one line per item, GiB, then the total
};

MemoryPlan plan_memory(const ModelConfig& model, const RunShape& shape);

// Throws InputError when the plan does not fit in `free_bytes`: names the device, the total, the free
// bytes and every item, largest first.
void require_fits(const MemoryPlan& plan, uint64_t free_bytes, const std::string& device);

}  // namespace k3::runtime
