// wgmma_tile_product: one warpgroup computes one bf16 tile product with Hopper's wgmma (sm_90a), fp32 accumulation,
// in exactly the operand forms mla_decode_wgmma uses (kernels/wgmma_sm90.h: the SW128 shared-memory layout, its
// descriptors, the register fragments), so that a descriptor or layout mistake shows up as one small failing product
// instead of a wrong attention output. Forms (all row-major in global memory; d fp32 [64, n]):
//   ss_n64_k_major    d[64,64]  = a[64,576] · b[64,576]ᵀ, A and B from shared memory, both K-major (MLA's scores:
//                     36 k16 steps over 9 SW128 blocks)
//   rs_n64_k_major    the same product with A from registers
//   rs_n64_mn_major   d[64,64]  = a[64,64] · b[64,64], A from registers, B MN-major (trans-b), one SW128 block
//   rs_n256_mn_major  d[64,256] = a[64,64] · b[64,256], A from registers, B MN-major over 4 SW128 blocks (MLA's output
//                     product: the leading byte offset between the blocks matters only here)
//   ss_n96_k_major    d[64,96]  = a[64,576] · b[96,576]ᵀ, both K-major from shared memory, B in SW128 blocks of 96
//                     rows (the score product with tokens as M and 96 heads as N: cache rows · Qᵀ)
//   ss_n96_mn_major   d[64,96]  = a[64,64]ᵀ · b[64,96] with a given as [k, 64] and b as [k, 96], both MN-major
//                     (trans-a, trans-b), B over one full and one part-filled SW128 block (the output product with
//                     tokens as M: Vᵀ · Pᵀ from the cache tile and P as stored)
// Launching on a device that is not compute capability 9.0 throws k3::Error; a or b not 16-byte aligned returns
// cudaErrorInvalidValue.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace k3::kernels {

enum class WgmmaTileForm {
  ss_n64_k_major,
  rs_n64_k_major,
  rs_n64_mn_major,
  rs_n256_mn_major,
  ss_n96_k_major,
  ss_n96_mn_major
};

struct WgmmaTileShape {
  int n, k;
  bool b_k_major;         // b is [n, k] (true) or [k, n] (false)
  bool a_k_major = true;  // a is [64, k] (true) or [k, 64] (false)
};
WgmmaTileShape wgmma_tile_shape(WgmmaTileForm form);

// Whether `device` runs wgmma code of this build: compute capability 9.0 (the sm_90a target).
bool wgmma_device_supported(int device);

cudaError_t wgmma_tile_product_bf16(WgmmaTileForm form, const __nv_bfloat16* a, const __nv_bfloat16* b, float* d,
                                    cudaStream_t stream);

}  // namespace k3::kernels
