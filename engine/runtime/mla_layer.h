// An MLA attention sublayer on the GPU: the fused q_a|kv_a projection, the latent norms and the paged cache
// append, q_proj, the output gate; decode in the absorbed form over the paged latent cache (q_absorb,
// attention, v_absorb), prefill in the expanded form over the cached prefix and the chunk (kv_b_proj,
// attention); o_proj. One op of the forward schedule at a time (forward_schedule.h).
#pragma once

#include "engine/runtime/device_arena.h"
#include "engine/runtime/forward_context.h"
#include "engine/runtime/forward_schedule.h"

namespace k3::runtime {

// MLA's activation buffers: T = max(max_chunk_tokens, max_batch) tokens, B = max_batch decode rows,
// S = max_prefill_context expanded tokens.
struct MlaWorkspace {
  bf16 *qkv_a = nullptr, *q_a_normed = nullptr, *q = nullptr, *gate = nullptr, *attn = nullptr;  // [T, …]
  bf16* q_abs = nullptr;                                                                         // [B, H, cache width]
  float* latent_out = nullptr;                                                                   // [B, H, kv_lora_rank]
  void* decode_ws = nullptr;  // the paged decode kernel's split workspace, for every batch up to B
  size_t decode_ws_bytes = 0;
  bf16 *latents = nullptr, *kv = nullptr, *keys = nullptr, *values = nullptr;  // [S, …]
  void lay_out(const ModelConfig& config, const ModelRunShape& shape, int64_t tokens, DeviceArena& arena);
};

class MlaLayer {
 public:
  // `iota`: device 0, 1, 2, … (at least max_batch), the decode rows' slots.
  MlaLayer(const ForwardContext& context, const MlaWorkspace& workspace, const int32_t* iota)
      : ctx_(context), w_(workspace), iota_(iota) {}
  // Runs op `id` (an mla.* op) of layer `layer`.
  void run(OpId id, const ForwardPass& pass, int layer, const SublayerIo& io) const;

 private:
  const ForwardContext& ctx_;
  const MlaWorkspace& w_;
  const int32_t* iota_;
};

}  // namespace k3::runtime
