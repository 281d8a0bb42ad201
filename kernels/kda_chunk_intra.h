// kda_chunk_intra: what the translation units of the KDA chunked prefill share (kernels/kda_chunk_prefill.h: the
// workspace layout that phase 1 writes and the state pass reads, the TF32 mma.sync helpers), and the phase-1 launch
// (kernels/kda_chunk_intra.cu). Internal to kernels/kda_chunk_*.cu; device code, so it is
// included by .cu files only.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace k3::kernels::kda_chunk {

constexpr int kD = 128;     // head_dim: key and value channels
constexpr int kChunk = 64;  // tokens per chunk
constexpr int kTile = 16;   // tokens per sub-tile (and the tensor-core tile edge)
constexpr int kTilesPerChunk = kChunk / kTile;

// Workspace: per (head, chunk) block b = head·chunks + chunk. U [64, 128] and e^{G_last} [128] in fp32 (they enter
// fp32 arithmetic), then W, Qg, Kd [64, 128] and A_qk [64, 64] (zero above the diagonal), which the state passes use
// only as product operands, in the element type Operand:
//   - __half (what the prefill uses): rounded to fp16, whose 10-bit mantissa is TF32's, so the stored values are
//     TF32 values too wherever they lie inside fp16's range (normal above 6.1e-5, finite below 65504); half the bytes;
//   - float: TF32-rounded (tf32_round), the layout's full size (kda_chunk_prefill_workspace_bytes sizes it).
// Every array starts 512-byte aligned relative to the (256-byte aligned) base, as WMMA's 32-byte pointer alignment
// and cp.async's 16 bytes need. The fp32 layout is the largest; kda_chunk_prefill_workspace_bytes gives its size.
constexpr int64_t kRowsBlock = int64_t(kChunk) * kD;       // W, U, Qg, Kd: [64, 128]
constexpr int64_t kScoreBlock = int64_t(kChunk) * kChunk;  // A_qk: [64, 64]
constexpr int64_t kFloatsPerBlock = 4 * kRowsBlock + kScoreBlock + kD;

template <typename Operand>
struct WorkspaceOf {
  float* base;
  int64_t blocks;  // heads · chunks
  __device__ float* u(int64_t b) const { return base + b * kRowsBlock; }
  __device__ float* decay(int64_t b) const { return base + blocks * kRowsBlock + b * kD; }
  __device__ Operand* w(int64_t b) const { return operands() + b * kRowsBlock; }
  __device__ Operand* qg(int64_t b) const { return operands() + (blocks + b) * kRowsBlock; }
  __device__ Operand* kd(int64_t b) const { return operands() + (2 * blocks + b) * kRowsBlock; }
  __device__ Operand* a_qk(int64_t b) const { return operands() + 3 * blocks * kRowsBlock + b * kScoreBlock; }

 private:
  // After U and e^{G_last}: blocks · 8320 floats, a multiple of 512 bytes.
  __device__ Operand* operands() const { return reinterpret_cast<Operand*>(base + blocks * (kRowsBlock + kD)); }
};
using Workspace = WorkspaceOf<float>;
using WorkspaceF16 = WorkspaceOf<__half>;

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
// A product operand as the workspace stores it (see WorkspaceOf): TF32-rounded fp32, or fp16 rounded to nearest.
template <typename Operand>
__device__ __forceinline__ Operand to_operand(float x);
template <>
__device__ __forceinline__ float to_operand<float>(float x) {
  return tf32_round(x);
}
template <>
__device__ __forceinline__ __half to_operand<__half>(float x) {
  return __float2half_rn(x);
}
__device__ __forceinline__ float operand_value(float x) { return x; }
__device__ __forceinline__ float operand_value(__half x) { return __half2float(x); }
// c += a · b on one m16n8k8 tile, TF32 operands, fp32 accumulation. Fragments (g = lane / 4, t = lane % 4):
// a = A[g][t], A[g + 8][t], A[g][t + 4], A[g + 8][t + 4]; b = B[t][g], B[t + 4][g];
// c = C[g][2t], C[g][2t + 1], C[g + 8][2t], C[g + 8][2t + 1].
__device__ __forceinline__ void mma_tf32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// x, unknown to the compiler: values the state passes derive from it (a lane's shared-memory bases, a copy's offsets)
// are rebuilt where they are used instead of being hoisted out of the chunk loop and held in registers (which
// spilled).
__device__ __forceinline__ int opaque(int x) {
  int y;
  asm volatile("mov.b32 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}

// Sᵀ ← Sᵀ Diag(e^{G_last}) on a warp's four 8-key tiles of its Sᵀ slice, held as m16n8 accumulators (elements 0, 2 at
// key 2t of the tile, 1, 3 at key 2t + 1): `decay` points at e^{G_last} of the slice's first key plus 2t.
__device__ __forceinline__ void decay_state_tiles(float (&s)[4][4], const float* decay) {
#pragma unroll
  for (int kb = 0; kb < 4; ++kb) {
    const float2 d2 = *reinterpret_cast<const float2*>(decay + 8 * kb);
    s[kb][0] *= d2.x;
    s[kb][1] *= d2.y;
    s[kb][2] *= d2.x;
    s[kb][3] *= d2.y;
  }
}

// Phase 1 (kda_chunk_intra_factored): fills every array of the workspace (W, Qg, Kd,
// A_qk as WorkspaceOf's operands) for `chunks` 64-token chunks × `heads` heads from q, k, v, g, β (the layouts of
// kda_chunk_prefill_f32state). tensor_diagonal selects the diagonal tiles' path as in the other versions
// (middle-token reference on tensor cores, or pair by pair). Arguments are checked by the caller.
template <typename Operand>
cudaError_t launch_intra_factored(const float* q, const float* k, const float* v, const float* g, const float* beta,
                                  int tokens, int heads, int chunks, WorkspaceOf<Operand> ws, bool tensor_diagonal,
                                  cudaStream_t stream);

}  // namespace k3::kernels::kda_chunk
