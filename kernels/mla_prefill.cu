#include "kernels/mla_prefill.h"
#include "kernels/mla_prefill_wgmma.h"
#include "kernels/ptx/ptx_mma.h"

#include <cmath>
#include <cstdint>

namespace k3::kernels {

namespace {

constexpr int kQk = kMlaPrefillQkDim;    // 192
constexpr int kV = kMlaPrefillValueDim;  // 128
constexpr int kQkChunks = kQk * 2 / 16;  // 24 chunks of 16 bytes per q/k row
constexpr int kVChunks = kV * 2 / 16;    // 16 per v row
constexpr int kBlockKeys = 64;
constexpr float kLog2e = 1.4426950408889634f;

// A block of kBlockQueries queries (16 · kRowTiles per warp) of one head: its thread count, loaders per tile row,
// shared memory.
template <int kBlockQueries, int kRowTiles>
struct FlashShape {
  static constexpr int kWarps = kBlockQueries / (16 * kRowTiles);
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kQLoaders = kThreads / kBlockQueries;  // threads per Q row
  static constexpr int kKvLoaders = kThreads / kBlockKeys;    // threads per K or V row
  static_assert(kThreads % kBlockQueries == 0 && kThreads % kBlockKeys == 0, "whole loader groups per row");
  // Shared memory (bytes): Q [kBlockQueries][192] | K 2 × [64][192] | V 2 × [64][128], all bf16.
  static constexpr int kQkTileBytes = kBlockKeys * kMlaPrefillQkDim * 2;
  static constexpr int kVTileBytes = kBlockKeys * kMlaPrefillValueDim * 2;
  static constexpr int kSmemQ = 0;
  static constexpr int kSmemK = kSmemQ + kBlockQueries * kMlaPrefillQkDim * 2;
  static constexpr int kSmemV = kSmemK + 2 * kQkTileBytes;
  static constexpr int kSmemBytes = kSmemV + 2 * kVTileBytes;  // 106,496 / 131,072 / 180,224 for 64 / 128 / 256
  static constexpr int kBlocksPerSm = kBlockQueries == 64 ? 2 : 1;
};

static_assert(kQkChunks % 8 == 0 && kVChunks % 8 == 0, "the XOR swizzle permutes chunks within groups of 8");

// Byte offset of 16-byte chunk `chunk` of row `row` in a tile of rows of `row_chunks` chunks, XOR-swizzled by
// row % 8 (row strides are multiples of 128 bytes, so the 8 rows of an ldmatrix would otherwise share banks).
__device__ __forceinline__ uint32_t swizzled(int row, int chunk, int row_chunks) {
  return uint32_t((row * row_chunks + (chunk ^ (row & 7))) << 4);
}

using namespace ptx;  // cp.async, ldmatrix, mma (kernels/ptx/ptx_mma.h)

// Grid: x = query block (reversed: the last blocks, with the most key tiles, start first), y = head.
// Fragment layouts (PTX ISA, mma.m16n8k16): lane = 4g + t; a holds rows g, g+8 × columns 2t, 2t+1 (+8); b holds
// k = 2t, 2t+1 (+8) × column g; c holds rows g, g+8 × columns 2t, 2t+1 — so the score tile's c fragments of two
// adjacent 8-key tiles are exactly the a fragment of the next product over those 16 keys.
template <int kBlockQueries, int kRowTiles>
__global__ void __launch_bounds__(FlashShape<kBlockQueries, kRowTiles>::kThreads,
                                  FlashShape<kBlockQueries, kRowTiles>::kBlocksPerSm)
    mla_prefill_flash(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                      const __nv_bfloat16* __restrict__ v, int q_tokens, int kv_tokens, int heads, float scale_log2,
                      __nv_bfloat16* __restrict__ out) {
  using Shape = FlashShape<kBlockQueries, kRowTiles>;
  constexpr int kQkTileBytes = Shape::kQkTileBytes, kVTileBytes = Shape::kVTileBytes;
  constexpr int kSmemQ = Shape::kSmemQ, kSmemK = Shape::kSmemK, kSmemV = Shape::kSmemV;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t smem_base = uint32_t(__cvta_generic_to_shared(smem));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int query0 = (int(gridDim.x) - 1 - int(blockIdx.x)) * kBlockQueries;
  const int h = blockIdx.y;
  const int offset = kv_tokens - q_tokens;  // position of query i is offset + i
  const int64_t qk_stride = int64_t(heads) * kQk, v_stride = int64_t(heads) * kV;

  const int last_position = offset + min(query0 + kBlockQueries, q_tokens) - 1;
  const int key_tiles = last_position / kBlockKeys + 1;  // tiles past the last query's position are all masked
  const int first_position = offset + query0;

  // Loader role: thread i fills row i / L of each K and V tile, chunks i % L, i % L + L, … (L = kKvLoaders), and
  // likewise row i / kQLoaders of Q.
  const int load_row = threadIdx.x / Shape::kKvLoaders, load_chunk0 = threadIdx.x % Shape::kKvLoaders;
  const auto load_kv = [&](int tile, int stage) {
    const int key = tile * kBlockKeys + load_row;
    const bool valid = key < kv_tokens;
    const __nv_bfloat16* k_src = valid ? k + key * qk_stride + h * kQk : k;
    const __nv_bfloat16* v_src = valid ? v + key * v_stride + h * kV : v;
    const uint32_t k_dst = smem_base + kSmemK + stage * kQkTileBytes;
    const uint32_t v_dst = smem_base + kSmemV + stage * kVTileBytes;
    for (int chunk = load_chunk0; chunk < kQkChunks; chunk += Shape::kKvLoaders)
      cp_async_16(k_dst + swizzled(load_row, chunk, kQkChunks), k_src + (valid ? chunk * 8 : 0), valid);
    for (int chunk = load_chunk0; chunk < kVChunks; chunk += Shape::kKvLoaders)
      cp_async_16(v_dst + swizzled(load_row, chunk, kVChunks), v_src + (valid ? chunk * 8 : 0), valid);
  };
  {
    const int q_row = threadIdx.x / Shape::kQLoaders, q_chunk0 = threadIdx.x % Shape::kQLoaders;
    const int query = query0 + q_row;
    const bool valid = query < q_tokens;  // rows past the last query are zeros, never written out
    const __nv_bfloat16* src = valid ? q + query * qk_stride + h * kQk : q;
    for (int chunk = q_chunk0; chunk < kQkChunks; chunk += Shape::kQLoaders)
      cp_async_16(smem_base + kSmemQ + swizzled(q_row, chunk, kQkChunks), src + (valid ? chunk * 8 : 0), valid);
  }
  load_kv(0, 0);
  cp_async_commit();
  cp_async_wait_all();
  __syncthreads();

  // Warp w owns query rows 16·kRowTiles·w … of the block, in kRowTiles 16-row tiles mt: per tile, the running max /
  // sum of rows g and g + 8 and the output. With one tile the q fragments stay in registers; with two they are read
  // from shared memory at each key tile, and each K and V fragment a warp loads serves both tiles.
  const int warp_row0 = 16 * kRowTiles * warp;
  uint32_t qf[kRowTiles == 1 ? kQk / 16 : 1][4];
  if constexpr (kRowTiles == 1) {
#pragma unroll
    for (int ks = 0; ks < kQk / 16; ++ks)
      ldmatrix_x4(qf[ks], smem_base + kSmemQ + swizzled(warp_row0 + (lane & 15), 2 * ks + (lane >> 4), kQkChunks));
  }
  float m[kRowTiles][2], l[kRowTiles][2];  // [tile][row g, row g + 8]
  float o[kRowTiles][kV / 8][4];
#pragma unroll
  for (int mt = 0; mt < kRowTiles; ++mt) {
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.0f;
#pragma unroll
    for (int n = 0; n < kV / 8; ++n) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.0f;
  }

  int stage = 0;
  for (int tile = 0; tile < key_tiles; ++tile) {
    cp_async_wait_all();
    __syncthreads();  // this tile landed; every warp is done with the previous tile's stage
    if (tile + 1 < key_tiles) load_kv(tile + 1, stage ^ 1);
    cp_async_commit();
    const uint32_t k_smem = smem_base + kSmemK + stage * kQkTileBytes;
    const uint32_t v_smem = smem_base + kSmemV + stage * kVTileBytes;
    const int key0 = tile * kBlockKeys;

    // Scores of the warp's rows × 64 keys.
    float s[kRowTiles][kBlockKeys / 8][4];
#pragma unroll
    for (int mt = 0; mt < kRowTiles; ++mt)
#pragma unroll
      for (int n = 0; n < kBlockKeys / 8; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < kQk / 16; ++ks) {
      uint32_t a[kRowTiles][4];
#pragma unroll
      for (int mt = 0; mt < kRowTiles; ++mt) {
        if constexpr (kRowTiles == 1) {
#pragma unroll
          for (int e = 0; e < 4; ++e) a[mt][e] = qf[ks][e];
        } else {
          ldmatrix_x4(
              a[mt], smem_base + kSmemQ + swizzled(warp_row0 + 16 * mt + (lane & 15), 2 * ks + (lane >> 4), kQkChunks));
        }
      }
#pragma unroll
      for (int np = 0; np < kBlockKeys / 16; ++np) {
        uint32_t bb[4];
        ldmatrix_x4(
            bb, k_smem + swizzled(16 * np + (lane & 7) + ((lane >> 4) << 3), 2 * ks + ((lane >> 3) & 1), kQkChunks));
#pragma unroll
        for (int mt = 0; mt < kRowTiles; ++mt) {
          mma_bf16(s[mt][2 * np], a[mt], bb[0], bb[1]);
          mma_bf16(s[mt][2 * np + 1], a[mt], bb[2], bb[3]);
        }
      }
    }
    const bool masked = key0 + kBlockKeys - 1 > first_position || key0 + kBlockKeys > kv_tokens;

    uint32_t p[kRowTiles][kBlockKeys / 8][2];  // bf16 pairs: [mt][n][0] row g, [mt][n][1] row g + 8
#pragma unroll
    for (int mt = 0; mt < kRowTiles; ++mt) {
      const int position_lo = first_position + warp_row0 + 16 * mt + g, position_hi = position_lo + 8;
#pragma unroll
      for (int n = 0; n < kBlockKeys / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = key0 + 8 * n + 2 * t4 + (e & 1);
          const int position = e < 2 ? position_lo : position_hi;
          s[mt][n][e] = masked && (key > position || key >= kv_tokens) ? -INFINITY : s[mt][n][e] * scale_log2;
        }
      }

      // Online softmax of rows g (elements 0, 1) and g + 8 (elements 2, 3); the row's values sit in the 4 lanes of
      // g.
      float max_lo = -INFINITY, max_hi = -INFINITY;
#pragma unroll
      for (int n = 0; n < kBlockKeys / 8; ++n) {
        max_lo = fmaxf(max_lo, fmaxf(s[mt][n][0], s[mt][n][1]));
        max_hi = fmaxf(max_hi, fmaxf(s[mt][n][2], s[mt][n][3]));
      }
#pragma unroll
      for (int d = 1; d <= 2; d *= 2) {
        max_lo = fmaxf(max_lo, __shfl_xor_sync(0xffffffffu, max_lo, d));
        max_hi = fmaxf(max_hi, __shfl_xor_sync(0xffffffffu, max_hi, d));
      }
      // Finite: key 0 is visible to every row (positions ≥ 0) and tile 0 comes first, so m is finite from then on.
      const float new_lo = fmaxf(m[mt][0], max_lo), new_hi = fmaxf(m[mt][1], max_hi);
      const float alpha_lo = exp2f(m[mt][0] - new_lo), alpha_hi = exp2f(m[mt][1] - new_hi);
      m[mt][0] = new_lo;
      m[mt][1] = new_hi;
      float sum_lo = 0.0f, sum_hi = 0.0f;
#pragma unroll
      for (int n = 0; n < kBlockKeys / 8; ++n) {
        const __nv_bfloat162 lo = __floats2bfloat162_rn(exp2f(s[mt][n][0] - new_lo), exp2f(s[mt][n][1] - new_lo));
        const __nv_bfloat162 hi = __floats2bfloat162_rn(exp2f(s[mt][n][2] - new_hi), exp2f(s[mt][n][3] - new_hi));
        const float2 lo_f = __bfloat1622float2(lo), hi_f = __bfloat1622float2(hi);  // sum what the product uses
        sum_lo += lo_f.x + lo_f.y;
        sum_hi += hi_f.x + hi_f.y;
        p[mt][n][0] = *reinterpret_cast<const uint32_t*>(&lo);
        p[mt][n][1] = *reinterpret_cast<const uint32_t*>(&hi);
      }
      l[mt][0] = l[mt][0] * alpha_lo + sum_lo;  // per-lane partial sums; reduced over the 4 lanes at the end
      l[mt][1] = l[mt][1] * alpha_hi + sum_hi;
#pragma unroll
      for (int n = 0; n < kV / 8; ++n) {
        o[mt][n][0] *= alpha_lo;
        o[mt][n][1] *= alpha_lo;
        o[mt][n][2] *= alpha_hi;
        o[mt][n][3] *= alpha_hi;
      }
    }

    // o += P · V over the tile's 64 keys, 16 at a time.
#pragma unroll
    for (int kk = 0; kk < kBlockKeys / 16; ++kk) {
#pragma unroll
      for (int np = 0; np < kV / 16; ++np) {
        uint32_t bb[4];
        ldmatrix_x4_trans(bb, v_smem + swizzled(16 * kk + (lane & 15), 2 * np + (lane >> 4), kVChunks));
#pragma unroll
        for (int mt = 0; mt < kRowTiles; ++mt) {
          const uint32_t a[4] = {p[mt][2 * kk][0], p[mt][2 * kk][1], p[mt][2 * kk + 1][0], p[mt][2 * kk + 1][1]};
          mma_bf16(o[mt][2 * np], a, bb[0], bb[1]);
          mma_bf16(o[mt][2 * np + 1], a, bb[2], bb[3]);
        }
      }
    }
    stage ^= 1;
  }
  cp_async_wait_all();

#pragma unroll
  for (int mt = 0; mt < kRowTiles; ++mt) {
    float l_lo = l[mt][0], l_hi = l[mt][1];
#pragma unroll
    for (int d = 1; d <= 2; d *= 2) {
      l_lo += __shfl_xor_sync(0xffffffffu, l_lo, d);
      l_hi += __shfl_xor_sync(0xffffffffu, l_hi, d);
    }
    const float inv_lo = 1.0f / l_lo, inv_hi = 1.0f / l_hi;  // l ≥ 1: the row's maximum contributes 2^0
    const int query_lo = query0 + warp_row0 + 16 * mt + g, query_hi = query_lo + 8;
#pragma unroll
    for (int n = 0; n < kV / 8; ++n) {
      const int column = h * kV + 8 * n + 2 * t4;
      if (query_lo < q_tokens)
        *reinterpret_cast<__nv_bfloat162*>(out + query_lo * v_stride + column) =
            __floats2bfloat162_rn(o[mt][n][0] * inv_lo, o[mt][n][1] * inv_lo);
      if (query_hi < q_tokens)
        *reinterpret_cast<__nv_bfloat162*>(out + query_hi * v_stride + column) =
            __floats2bfloat162_rn(o[mt][n][2] * inv_hi, o[mt][n][3] * inv_hi);
    }
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <int kBlockQueries, int kRowTiles>
cudaError_t launch_flash(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, int q_tokens,
                         int kv_tokens, int heads, float scale, __nv_bfloat16* out, cudaStream_t stream) {
  using Shape = FlashShape<kBlockQueries, kRowTiles>;
  const auto kernel = mla_prefill_flash<kBlockQueries, kRowTiles>;
  const cudaError_t status =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Shape::kSmemBytes);
  if (status != cudaSuccess) return status;
  const dim3 grid(unsigned((q_tokens + kBlockQueries - 1) / kBlockQueries), unsigned(heads));
  kernel<<<grid, Shape::kThreads, Shape::kSmemBytes, stream>>>(q, k, v, q_tokens, kv_tokens, heads, scale * kLog2e,
                                                               out);
  return cudaGetLastError();
}

}  // namespace

cudaError_t mla_prefill_attention_bf16(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                       int q_tokens, int kv_tokens, int heads, float scale, __nv_bfloat16* out,
                                       cudaStream_t stream, MlaPrefillAlgorithm algorithm) {
  if (q_tokens < 0 || kv_tokens < q_tokens || heads <= 0 || heads > 65535 || !std::isfinite(scale))
    return cudaErrorInvalidValue;
  if (algorithm != MlaPrefillAlgorithm::automatic && algorithm != MlaPrefillAlgorithm::flash_q64 &&
      algorithm != MlaPrefillAlgorithm::flash_q128 && algorithm != MlaPrefillAlgorithm::flash_q256 &&
      algorithm != MlaPrefillAlgorithm::wgmma)
    return cudaErrorInvalidValue;
  if (algorithm == MlaPrefillAlgorithm::wgmma && !(scale > 0.0f)) return cudaErrorInvalidValue;
  if (q_tokens == 0) return cudaSuccess;
  if (!aligned16(q) || !aligned16(k) || !aligned16(v) || !aligned16(out)) return cudaErrorInvalidValue;
  if (algorithm == MlaPrefillAlgorithm::automatic) {
    int device = 0;
    const bool wgmma = scale > 0.0f && cudaGetDevice(&device) == cudaSuccess && mla_prefill_wgmma_supported(device);
    algorithm = q_tokens > 128  ? (wgmma ? MlaPrefillAlgorithm::wgmma : MlaPrefillAlgorithm::flash_q256)
                : q_tokens > 64 ? MlaPrefillAlgorithm::flash_q128
                                : MlaPrefillAlgorithm::flash_q64;
  }
  if (algorithm == MlaPrefillAlgorithm::wgmma)
    return mla_prefill_wgmma(q, k, v, q_tokens, kv_tokens, heads, scale * kLog2e, out, stream);
  if (algorithm == MlaPrefillAlgorithm::flash_q256)
    return launch_flash<256, 2>(q, k, v, q_tokens, kv_tokens, heads, scale, out, stream);
  if (algorithm == MlaPrefillAlgorithm::flash_q128)
    return launch_flash<128, 1>(q, k, v, q_tokens, kv_tokens, heads, scale, out, stream);
  return launch_flash<64, 1>(q, k, v, q_tokens, kv_tokens, heads, scale, out, stream);
}

}  // namespace k3::kernels
