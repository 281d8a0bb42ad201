// mxfp4_tiled: MXFP4 expert weights in the layout the tiled GEMV reads (Mxfp4Layout::tiled16 of
// kernels/mxfp4_grouped.h): the checkpoint's bytes per expert, packed [out, in/2] and scales [out, in/32], permuted
// so that every lane of an m16n8k16 MMA loads its A fragments with one 16-byte load per two blocks and decodes them
// with fewer instructions than the checkpoint order allows. Same sizes, so a buffer of either layout holds the other.
//
// Why: on an H200 the canonical-order GEMV is bound by the SM's side, not by DRAM (Nsight Compute at w13, T = 64:
// the L1 data pipe's wavefronts at 86 % of peak, the ALU pipe at 75 %): each lane's 16-byte weight loads touch 8 rows
// (half a line each), its 1-byte scale loads 8 more lines, its x loads need a byte permutation, and each pair of bf16
// weights costs 4 integer instructions. Here a warp's weight loads read 512 contiguous bytes, its scale loads 32, x
// is read in its natural order, and 8 pairs cost 18 instructions instead of 30.
//
// The layout (out a multiple of 16, in a multiple of 64; per expert, at the canonical offsets):
//   A tile is 16 output rows; a unit is one tile × two 32-element blocks (2p, 2p + 1): 512 weight bytes at
//   ((tile · in/64) + p) · 512 and 32 scale bytes at ((tile · in/64) + p) · 32.
//   Weights: lane L = 4g + t (g = 0 … 7, t = 0 … 3) owns bytes [16L, 16L + 16): 8 bytes for block 2p, then 8 for
//   block 2p + 1. Each 8 bytes, words W0 and W1 (little-endian), hold the 16 E2M1 codes of elements 8t … 8t + 7 of
//   the block in rows g and g + 8 of the tile, their bits placed by kTiledOutputs below.
//   Scales: bytes [4g, 4g + 4) of the unit: row g block 2p, row g block 2p + 1, row g + 8 block 2p, row g + 8 block
//   2p + 1.
// The MMA's k order follows: for k-half h of a block, lane t's A and B columns 2t, 2t + 1 are elements 8t + 4h,
// 8t + 4h + 1 and columns 2t + 8, 2t + 9 are 8t + 4h + 2, 8t + 4h + 3, so B is x's elements 8t … 8t + 7 of the block
// as they lie in memory (one 16-byte load, no permutation).
//
// The decode: output o (o = 0 … 3: row g, o = 4 … 7: row g + 8) is the bf16 pair of elements 2j and 2j + 1, j = o % 4
// (low half 2j), as the bits of v · 2^-126 (sign at 15 / 31, e1 e0 m at 8 … 6 / 24 … 22: mxfp4_grouped_device.h's
// placement). Each output is one or two pieces: the 64 bits W1:W0 rotated right by `rotation`, masked by `mask`
// (rotation 0 is W0 and 32 is W1, free). Six outputs are one piece (the same 8 target bits) and two are two pieces;
// their rotations partition the 64 bits, so a lane's 8 outputs cost 18 integer instructions (a rotation is one funnel
// shift, a piece one AND or AND-OR) against 30 in the checkpoint order. No set of rotations gives every output in one
// piece: the 8-bit target pattern {6, 7, 8, 15, 22, 23, 24, 31} tiles no 64-bit word by rotations (an exhaustive
// search; the best by instruction count found is this one).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace k3::kernels {

constexpr int kTiledRows = 16;              // output rows of a tile (the MMA's M)
constexpr int kTiledUnitWeightBytes = 512;  // a tile × 2 blocks
constexpr int kTiledUnitScaleBytes = 32;

struct TiledPiece {
  int rotation;   // 0 … 63: output bit i is bit (i + rotation) % 64 of W1:W0
  uint32_t mask;  // the output bits this piece provides (0: no piece)
};
struct TiledOutput {
  TiledPiece piece[2];
};

constexpr uint32_t kTiledAllBits = 0x81C081C0u;    // sign, e1, e0, m of both halves: bits 15, 8, 7, 6 and 31, 24 … 22
constexpr uint32_t kTiledExponents = 0x00C000C0u;  // bits 6, 7 and 22, 23 (m, e0 of both halves)
constexpr uint32_t kTiledSignsE1 = 0x81008100u;    // bits 8, 15 and 24, 31 (e1, sign of both halves)
inline constexpr TiledOutput kTiledOutputs[8] = {
    {{{0, kTiledAllBits}, {0, 0}}},
    {{{4, kTiledAllBits}, {0, 0}}},
    {{{10, kTiledAllBits}, {0, 0}}},
    {{{30, kTiledAllBits}, {0, 0}}},
    {{{36, kTiledAllBits}, {0, 0}}},
    {{{42, kTiledAllBits}, {0, 0}}},
    {{{7, kTiledExponents}, {32, kTiledSignsE1}}},
    {{{31, kTiledSignsE1}, {62, kTiledExponents}}},
};

// Whether a projection's shape has the tiled layout: out a multiple of 16 and in a multiple of 64.
bool mxfp4_tiled_supported(int64_t out_features, int64_t in_features);

// The 8 bytes (W0, W1) of one block for one lane: `row_lo` and `row_hi` are rows g and g + 8 in the checkpoint
// order (in/2 bytes each), `block` the block, `t` the lane's quarter; `outputs` is kTiledOutputs (on the device, a
// copy in constant memory). Host and device (the repack kernel).
__host__ __device__ inline void mxfp4_tiled_lane_words(const TiledOutput* outputs, const uint8_t* row_lo,
                                                       const uint8_t* row_hi, int64_t block, int t, uint32_t& w0,
                                                       uint32_t& w1) {
  uint32_t word[2];
  for (int r = 0; r < 2; ++r) {
    const uint8_t* p = (r == 0 ? row_lo : row_hi) + block * 16 + t * 4;
    word[r] = uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
  }
  uint64_t bits = 0;
  for (int o = 0; o < 8; ++o) {
    const uint32_t q = word[o / 4];
    const int j = o % 4;
    for (const TiledPiece& piece : outputs[o].piece) {
      for (int i = 0; i < 32; ++i) {
        if ((piece.mask >> i & 1u) == 0) continue;
        const int element = 2 * j + (i >= 16 ? 1 : 0);
        const int code_bit = (i % 16) == 15 ? 3 : (i % 16) - 6;  // 6: m, 7: e0, 8: e1, 15: sign
        const uint64_t bit = (q >> (4 * element + code_bit)) & 1u;
        bits |= bit << ((i + piece.rotation) % 64);
      }
    }
  }
  w0 = uint32_t(bits);
  w1 = uint32_t(bits >> 32);
}

// The checkpoint order into the tiled one for `experts` matrices [out, in], out of place (the buffers' sizes are the
// same). The host form serves tests; the device form the engine's load and the benchmarks.
void mxfp4_tiled_repack_host(const uint8_t* packed, const uint8_t* scales, int experts, int64_t out_features,
                             int64_t in_features, uint8_t* tiled_packed, uint8_t* tiled_scales);
cudaError_t mxfp4_tiled_repack(const uint8_t* packed, const uint8_t* scales, int experts, int64_t out_features,
                               int64_t in_features, uint8_t* tiled_packed, uint8_t* tiled_scales, cudaStream_t stream);

}  // namespace k3::kernels
