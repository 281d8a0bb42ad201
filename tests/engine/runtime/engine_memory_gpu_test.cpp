// The engine's memory plan is what it allocates: DeviceWeights, GpuCache and GpuModel size their buffers with the
// code that lays them out (measuring arenas; no GPU needed). Here, against the simulator's sizes (sim/memory.h)
// for K3 at 4 sequences of 128 K tokens, and the checkpoint's stored bytes for the weights.
#include "core/parameters.h"
#include "engine/runtime/device_weights.h"
#include "engine/runtime/gpu_cache.h"
#include "engine/runtime/gpu_model.h"
#include "engine/weights/tensor_layout.h"
#include "sim/memory.h"

#include <gtest/gtest.h>

namespace k3::runtime {
namespace {

ModelConfig model(const std::string& name) {
  return load_model_config(std::string(K3PERF_SOURCE_DIR) + "/scenarios/models/" + name + ".json");
}

// The weights in the device layout are the checkpoint's tensors as stored (MXFP4 experts packed with their
// scales), each in its own 256-byte-aligned piece. (The twin at K3's widths: laying out all of K3's tensors
// takes minutes.)
TEST(EngineMemory, WeightsAreTheCheckpointsTensorsAsStored) {
  const ModelConfig m = model("k3-twin-wide");
  uint64_t stored = 0;
  const weights::CheckpointLayout layout = weights::checkpoint_layout(m);
  for (const weights::TensorSpec& t : layout.tensors) {
    uint64_t n = uint64_t(weights::element_size_bytes(t.dtype));
    for (int64_t d : t.shape) n *= uint64_t(d);
    stored += n;
  }
  const uint64_t device = DeviceWeights::device_bytes(m);
  EXPECT_GE(device, stored);
  EXPECT_LE(device, stored + 256 * layout.tensors.size());
}

TEST(EngineMemory, K3SizesFollowTheModel) {
  const ModelConfig m = model("kimi-k3");
  // The cache: exactly the simulator's KV bytes per token (24 layers x 1152 B) for whole pages, its recurrent
  // state per sequence, the fp32 conv state, the page table and the step positions.
  CacheShape s;
  s.max_sequences = 4;
  s.max_context_tokens = 131072;
  s.page_tokens = 64;
  const Precision prec;
  const uint64_t kv = uint64_t(kv_bytes_per_token(m, prec)) * 131072 * 4;
  const uint64_t state = uint64_t(kda_recurrent_state_bytes(m, prec)) * 4;
  const uint64_t conv = uint64_t(m.count_layers(AttentionKind::kda)) * 3 * m.kda->projection_dim() *
                        (m.kda->conv_kernel - 1) * sizeof(float) * 4;
  const uint64_t page_table = 4 * (131072 / 64) * sizeof(int32_t), positions = 256;  // one aligned piece
  EXPECT_EQ(GpuCache::device_bytes(m, s), kv + state + conv + page_table + positions);
  // A context that is not a multiple of the page rounds up to whole pages (and the page table to 256 bytes).
  s.max_context_tokens = 131073;
  const uint64_t longer_table = (4 * (131072 / 64 + 1) * sizeof(int32_t) + 255) / 256 * 256;
  EXPECT_EQ(GpuCache::device_bytes(m, s),
            uint64_t(24) * 1152 * (131072 + 64) * 4 + state + conv + longer_table + positions);
  // The activation workspace grows with the chunk (the largest step) and is the same for the same shape.
  ModelRunShape small, large;
  large.max_chunk_tokens = 8192;
  large.max_prefill_context = 8192;
  EXPECT_GT(GpuModel::workspace_bytes(m, large), GpuModel::workspace_bytes(m, small));
  EXPECT_EQ(GpuModel::workspace_bytes(m, small), GpuModel::workspace_bytes(m, small));
}

}  // namespace
}  // namespace k3::runtime
