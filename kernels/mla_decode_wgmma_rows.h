// mla_decode_wgmma_rows: what the Hopper split passes of the MLA absorbed decode
// (kernels/mla_decode_wgmma_alternating.cu, kernels/mla_decode_wgmma_cluster.cu) share around their products: a split's
// range of context tiles, a cached token's row in the paged cache, P as the output product's A fragments with the rows'
// running sums, and the writes of a thread's two output rows (heads row_lo and row_lo + 8, the wgmma accumulator layout
// of kernels/ptx/wgmma_sm90.h) with their softmax statistics. Device code, internal to those files; the workspace
// format is kernels/mla_decode_paged.h's.
#pragma once

#include "kernels/mla_decode_paged.h"

#include <cuda_bf16.h>

#include <cstdint>

namespace k3::kernels::mla_wgmma {

// Split `split` of `splits` takes context tiles [begin, end): ⌈tiles / splits⌉ each, the last ones shorter or
// empty.
struct SplitTiles {
  int context, begin, end;
};
template <int kTileTokens>
__device__ __forceinline__ SplitTiles split_tiles(const int32_t* context_tokens, int b, int max_context, int splits,
                                                  int split) {
  const int context = min(max(context_tokens[b], 0), max_context);
  const int tiles = (context + kTileTokens - 1) / kTileTokens;
  const int tiles_per_split = (tiles + splits - 1) / splits;
  const int begin = min(split * tiles_per_split, tiles);
  return {context, begin, min(begin + tiles_per_split, tiles)};
}

// The cached row (kMlaDecodeCacheWidth values) of `token` of sequence b, through its page table.
__device__ __forceinline__ const __nv_bfloat16* token_row(const __nv_bfloat16* pages, const int32_t* page_table, int b,
                                                          int max_pages, int page_tokens, int token) {
  const int64_t page = page_table[int64_t(b) * max_pages + token / page_tokens];
  return pages + (page * page_tokens + token % page_tokens) * kMlaDecodeCacheWidth;
}

// (max, sum) of the thread's rows into partial_stats [batch, splits, heads] (rows past the last head skipped).
__device__ __forceinline__ void store_split_stats(float2* partial_stats, int b, int splits, int split, int heads,
                                                  int head0, int row_lo, const float (&m_run)[2],
                                                  const float (&l_run)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int head = head0 + row_lo + 8 * h;
    if (head < heads) partial_stats[(int64_t(b) * splits + split) * heads + head] = make_float2(m_run[h], l_run[h]);
  }
}

// The thread's accumulators o (columns kColumns·wg + 8j + 2t4 (+1) of rows row_lo and row_lo + 8) into out,
// normalised by row_sum(h) (0 for a sequence with no tokens), with one split; into partial_out [batch, splits, heads,
// 512], unnormalised, with several.
template <int kColumns, typename RowSum>
__device__ __forceinline__ void store_rows(const float (&o)[kColumns / 2], float* out, float* partial_out, int b,
                                           int splits, int split, int heads, int head0, int row_lo, int wg, int t4,
                                           RowSum row_sum) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row_lo + 8 * h, head = head0 + row;
    if (head >= heads) continue;
    float* dst;
    float factor = 1.0f;
    if (splits == 1) {
      dst = out + (int64_t(b) * heads + head) * kMlaDecodeLatentDim;
      const float sum = row_sum(h);
      factor = sum > 0.0f ? 1.0f / sum : 0.0f;  // a sequence with no tokens gets zeros
    } else {
      dst = partial_out + ((int64_t(b) * splits + split) * heads + head) * kMlaDecodeLatentDim;
    }
#pragma unroll
    for (int j = 0; j < kColumns / 8; ++j) {
      const int column = wg * kColumns + 8 * j + 2 * t4;
      *reinterpret_cast<float2*>(dst + column) = make_float2(o[4 * j + 2 * h] * factor, o[4 * j + 2 * h + 1] * factor);
    }
  }
}

// P = exp2(scores − m_new) in bf16 as the A fragments of the output product's kSteps k16 steps (fragment r of step kk
// from scores 8kk + 2r and 8kk + 2r + 1, row half r % 2), and the rows' softmax statistics: l_run = l_run · alpha +
// the row's sum (over the 4 lanes that hold it) of exactly the rounded P the product uses, m_run = m_new.
template <int kSteps>
__device__ __forceinline__ void p_fragments(const float (&scores)[8 * kSteps], const float (&m_new)[2],
                                            const float (&alpha)[2], uint32_t (&pa)[kSteps][4], float (&l_run)[2],
                                            float (&m_run)[2]) {
  float tile_sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int h = r & 1;
      const __nv_bfloat162 p =
          __floats2bfloat162_rn(exp2f(scores[8 * kk + 2 * r] - m_new[h]), exp2f(scores[8 * kk + 2 * r + 1] - m_new[h]));
      const float2 rounded = __bfloat1622float2(p);
      tile_sum[h] += rounded.x + rounded.y;
      pa[kk][r] = *reinterpret_cast<const uint32_t*>(&p);
    }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    tile_sum[h] += __shfl_xor_sync(0xffffffffu, tile_sum[h], 1);
    tile_sum[h] += __shfl_xor_sync(0xffffffffu, tile_sum[h], 2);
    l_run[h] = l_run[h] * alpha[h] + tile_sum[h];
    m_run[h] = m_new[h];
  }
}

}  // namespace k3::kernels::mla_wgmma
