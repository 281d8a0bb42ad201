// A KDA attention sublayer on the GPU (Kimi Delta Attention): projections, short conv and gates, the
// recurrent step (decode) or the chunked scan (prefill) on the cache's state slot, the gated output norm,
// o_proj. One op of the forward schedule at a time (forward_schedule.h).
#pragma once

#include "engine/runtime/device_arena.h"
#include "engine/runtime/forward_context.h"
#include "engine/runtime/forward_schedule.h"

namespace k3::runtime {

// KDA's activation buffers, for T = max(max_chunk_tokens, max_batch) tokens; P = heads · head_dim.
struct KdaWorkspace {
  bf16 *qkv = nullptr, *gate = nullptr, *fa = nullptr, *o_gated = nullptr;  // [T, 3P], [T, P], [T, rank], [T, P]
  float *f = nullptr, *b = nullptr, *q = nullptr, *k = nullptr, *v = nullptr, *g = nullptr, *beta = nullptr,
        *o = nullptr;        // [T, P] or [T, heads]
  void* chunk_ws = nullptr;  // the chunked prefill's workspace
  size_t chunk_ws_bytes = 0;
  void lay_out(const ModelConfig& config, const ModelRunShape& shape, int64_t tokens, DeviceArena& arena);
};

class KdaLayer {
 public:
  KdaLayer(const ForwardContext& context, const KdaWorkspace& workspace) : ctx_(context), w_(workspace) {}
  // Runs op `id` (a kda.* op) of layer `layer`.
  void run(OpId id, const ForwardPass& pass, int layer, const SublayerIo& io) const;

 private:
  const ForwardContext& ctx_;
  const KdaWorkspace& w_;
};

}  // namespace k3::runtime
