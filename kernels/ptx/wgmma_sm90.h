// Inline-PTX building blocks for Hopper's warpgroup MMA (wgmma, sm_90a only): shared-memory matrix descriptors for
// the 128-byte-swizzled canonical layout, the fences and group waits, and the bf16 → fp32 products the MLA decode
// kernels use (m64n64k16 with A from shared memory or registers, m64n256k16 with A from registers, m64n96k16 with both
// operands from shared memory in either major order, from wgmma_products_sm90.h's set of every shape). Device
// functions only; included by .cu files compiled for sm_90a (their bodies are empty elsewhere, so other targets still
// compile).
//
// The shared-memory layout every operand here uses, "SW128 blocks": a matrix of `rows` rows and a multiple of 64 bf16
// columns is stored as column blocks of 64 (128 bytes), block j at j · rows · 128 bytes, row r of a block at r · 128,
// and its 16-byte chunk c at chunk position c ^ (r % 8) (sw128_offset). With the blocks 1024-byte aligned this is
// the hardware's 128-byte swizzle (address bits 4–6 XOR bits 7–9), read two ways:
//   K-major   (rows = M or N, columns = K):  SBO = 1024 (from one 8-row group to the next), LBO unused (16); a k16
//             step inside a block advances the start address by 32 bytes, the next block by rows · 128.
//   MN-major  (rows = K, columns = M or N; trans-a / trans-b = 1): SBO = 1024 (from one 8-row K group to the next),
//             LBO = rows · 128 (from one 64-column block to the next); a k16 step advances the start address by 2048
//             bytes. A width that is not a multiple of 64 (N = 96) leaves the last block part-filled.
// Register fragments (per warp w of the warpgroup, lane = 4g + t): accumulator d[4j + e] holds row 16w + g + 8·(e/2),
// column 8j + 2t + e%2; the A fragment a[0..3] holds rows 16w + g (a[0], a[2]) and 16w + g + 8 (a[1], a[3]) ×
// columns 2t, 2t+1 (a[0], a[1]) and 2t+8, 2t+9 (a[2], a[3]), the lower column in the low 16 bits — the m16n8k16
// layouts of mma.sync stacked over the 4 warps.
#pragma once

#include "kernels/ptx/wgmma_products_sm90.h"

#include <cstdint>

namespace k3::kernels::wgmma {

// Byte offset of 16-byte chunk `chunk` (of the row's 8·(columns/64) chunks) of row `row` in SW128 blocks of `rows`
// rows.
__host__ __device__ constexpr uint32_t sw128_offset(int rows, int row, int chunk) {
  return uint32_t((chunk >> 3) * rows * 128 + row * 128 + (((chunk & 7) ^ (row & 7)) << 4));
}

// Shared-memory matrix descriptor: start address, leading and stride byte offsets (all in 16-byte units), 128-byte
// swizzle (mode 1 in bits 62–63), base offset 0 (the blocks are 1024-byte aligned).
__device__ __forceinline__ uint64_t sw128_descriptor(uint32_t smem_address, uint32_t leading_bytes,
                                                     uint32_t stride_bytes) {
  return uint64_t((smem_address & 0x3FFFF) >> 4) | (uint64_t((leading_bytes & 0x3FFFF) >> 4) << 16) |
         (uint64_t((stride_bytes & 0x3FFFF) >> 4) << 32) | (uint64_t(1) << 62);
}

// Orders this thread's register writes (accumulators, A fragments) before the wgmma that reads them.
__device__ __forceinline__ void fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void commit_group() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Waits until at most kPending committed groups of this warpgroup are still in flight.
template <int kPending>
__device__ __forceinline__ void wait_group() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#endif
}
// Makes this thread's generic-proxy shared-memory writes (st.shared, cp.async) visible to the async proxy that
// wgmma reads operands through; each writing thread runs it before the barrier that precedes the wgmma.
__device__ __forceinline__ void fence_proxy_async_shared() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// Keeps the compiler from moving accesses of accumulator registers across an in-flight wgmma.
template <int kCount>
__device__ __forceinline__ void fence_registers(float (&d)[kCount]) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// d[32] += A (shared, K-major descriptor) · B (shared descriptor; kTransB: MN-major), m64n64k16.
template <int kTransB>
__device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[32], uint64_t a_desc, uint64_t b_desc) {
  mma_ss<0, kTransB>(d, a_desc, b_desc);
}

// d[32] += A (registers, the m16n8k16 A fragment per warp) · B (shared descriptor; kTransB: MN-major), m64n64k16.
template <int kTransB>
__device__ __forceinline__ void wgmma_m64n64k16_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t b_desc) {
  mma_rs<kTransB>(d, a, b_desc);
}

// d[128] += A (registers, the m16n8k16 A fragment per warp) · B (shared descriptor; kTransB: MN-major), m64n256k16.
template <int kTransB>
__device__ __forceinline__ void wgmma_m64n256k16_rs(float (&d)[128], const uint32_t (&a)[4], uint64_t b_desc) {
  mma_rs<kTransB>(d, a, b_desc);
}

// d[48] += A (shared descriptor; kTransA: MN-major) · B (shared descriptor; kTransB: MN-major), m64n96k16: MLA's
// products with tokens as M and 96 heads as N.
template <int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_m64n96k16_ss(float (&d)[48], uint64_t a_desc, uint64_t b_desc) {
  mma_ss<kTransA, kTransB>(d, a_desc, b_desc);
}

}  // namespace k3::kernels::wgmma
