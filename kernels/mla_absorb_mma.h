// mla_absorb_mma: MlaAbsorbAlgorithm::mma_tiled, the tensor-core version of mla_absorb's two products (the ops
// and their shapes: kernels/mla_absorb.h). Per head each product is a small GEMM over the batch's tokens:
//   absorb_q: [tokens × dn] · [dn × r]   (q's nope half, bf16; kv_b's rows h·(dn+dv) … + dn − 1)
//   apply_v:  [tokens × r] · [r × dv]    (the fp32 latent output; kv_b's rows h·(dn+dv) + dn … + dv − 1, read as Wᵀ)
// A block of 8 warps computes 64 tokens × 64 output columns of one head on bf16 m16n8k16 MMAs with fp32
// accumulation (a warp 16 tokens × 32 columns), staging 64-wide k chunks of both operands in shared memory; the
// next chunk's global loads (kv_b and the fp32 latent by 16-byte vectors) are in flight into registers meanwhile.
// apply_v's fp32 latent is split into two bf16 halves (hi = bf16(x), lo = bf16(x − hi)) and both are multiplied,
// so its products keep about 16 bits of each latent value, as fp32 FMAs would to the bf16 output. kv_b is read once
// per 64 tokens (the weight_stream version reads it once per 8), so this is the version for batches past a few
// tokens. Needs r a multiple of 8 and kv_b 16-byte aligned (as weight_stream), and apply_v the latent 16-byte
// aligned; the launchers return cudaErrorInvalidValue otherwise.
#pragma once

#include "kernels/mla_absorb.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace k3::kernels::mla_absorb_mma {

// Whether the mma_tiled version runs these dims and operands.
bool absorb_q_applies(const MlaDims& d, const __nv_bfloat16* kv_b);
bool apply_v_applies(const MlaDims& d, const __nv_bfloat16* kv_b, const float* lat);

// The launchers, arguments checked by mla_absorb_q_bf16 / mla_apply_v_bf16 (tokens > 0).
cudaError_t absorb_q(const __nv_bfloat16* q, int64_t q_stride, const __nv_bfloat16* kv_b, const MlaDims& d, int tokens,
                     __nv_bfloat16* q_abs, cudaStream_t stream);
cudaError_t apply_v(const float* lat, const __nv_bfloat16* kv_b, const __nv_bfloat16* gate, int64_t gate_stride,
                    const MlaDims& d, int tokens, __nv_bfloat16* out, cudaStream_t stream);

}  // namespace k3::kernels::mla_absorb_mma
