// kda_chunk_intra: what the two translation units of the KDA chunked prefill share (kernels/kda_chunk_prefill.h: the
// workspace layout that phase 1 writes and the state pass reads, the TF32 mma.sync helpers), and the phase-1 launch of
// its ut_factored_split_value version (kernels/kda_chunk_intra.cu). Internal to kernels/kda_chunk_prefill.cu and
// kernels/kda_chunk_intra.cu; device code, so it is included by .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace k3::kernels::kda_chunk {

constexpr int kD = 128;     // head_dim: key and value channels
constexpr int kChunk = 64;  // tokens per chunk
constexpr int kTile = 16;   // tokens per sub-tile (and the tensor-core tile edge)
constexpr int kTilesPerChunk = kChunk / kTile;

// Workspace: per (head, chunk) block b = head·chunks + chunk, fp32. Every array starts 512-byte aligned relative
// to the (256-byte aligned) base, as WMMA's 32-byte pointer alignment needs. kda_chunk_intra_factored (the phase 1
// of both ut_factored versions) stores W, Qg, Kd and A_qk already rounded to TF32 (tf32_round: the value every
// state pass's products would round them to), U and e^{G_last} in full fp32 (they enter fp32 arithmetic); the
// split_key state pass feeds the rounded arrays to its products as they are, split_value's rounds them again
// (which changes nothing).
constexpr int64_t kRowsBlock = int64_t(kChunk) * kD;       // W, U, Qg, Kd: [64, 128]
constexpr int64_t kScoreBlock = int64_t(kChunk) * kChunk;  // A_qk: [64, 64]
constexpr int64_t kFloatsPerBlock = 4 * kRowsBlock + kScoreBlock + kD;

struct Workspace {
  float* base;
  int64_t blocks;  // heads · chunks
  __device__ float* w(int64_t b) const { return base + b * kRowsBlock; }
  __device__ float* u(int64_t b) const { return base + (blocks + b) * kRowsBlock; }
  __device__ float* qg(int64_t b) const { return base + (2 * blocks + b) * kRowsBlock; }
  __device__ float* kd(int64_t b) const { return base + (3 * blocks + b) * kRowsBlock; }
  __device__ float* a_qk(int64_t b) const { return base + 4 * blocks * kRowsBlock + b * kScoreBlock; }
  __device__ float* decay(int64_t b) const { return base + 4 * blocks * kRowsBlock + blocks * kScoreBlock + b * kD; }
};

// 16 bytes global → shared, asynchronous (completes at a later cp_async_wait of the issuing thread).
__device__ __forceinline__ void cp_async_16(float* dst_shared, const float* src_global) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(dst_shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(__cvta_generic_to_global(src_global))
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Waits until at most kPending of this thread's most recent groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}
// The TF32 value nearest x (as WMMA's __float_to_tf32), as an operand register.
__device__ __forceinline__ uint32_t tf32_rna(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}
// tf32_rna(x) as an fp32 value with its 13 low mantissa bits zero: a TF32 value exactly, so tf32_rna of it (and the
// mma's own reading of its 19 high bits) gives it back unchanged. Phase 1 stores the arrays that enter only
// products in this form (kernels/kda_chunk_prefill.h).
__device__ __forceinline__ float tf32_round(float x) { return __uint_as_float(tf32_rna(x) & 0xFFFFE000u); }
// c += a · b on one m16n8k8 tile, TF32 operands, fp32 accumulation. Fragments (g = lane / 4, t = lane % 4):
// a = A[g][t], A[g + 8][t], A[g][t + 4], A[g + 8][t + 4]; b = B[t][g], B[t + 4][g];
// c = C[g][2t], C[g][2t + 1], C[g + 8][2t], C[g + 8][2t + 1].
__device__ __forceinline__ void mma_tf32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Phase 1 of ut_factored_split_value and ut_factored_split_key (kda_chunk_intra_factored): fills every array of the
// workspace (W, Qg, Kd, A_qk TF32-rounded, see Workspace) for `chunks` 64-token chunks × `heads` heads from q, k, v,
// g, β (the layouts of kda_chunk_prefill_f32state). tensor_diagonal selects the diagonal tiles' path as in the other
// versions (middle-token reference on tensor cores, or pair by pair). Arguments are checked by the caller.
cudaError_t launch_intra_factored(const float* q, const float* k, const float* v, const float* g, const float* beta,
                                  int tokens, int heads, int chunks, Workspace ws, bool tensor_diagonal,
                                  cudaStream_t stream);

}  // namespace k3::kernels::kda_chunk
