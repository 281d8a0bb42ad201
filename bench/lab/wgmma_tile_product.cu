// wgmma_tile_product: one warpgroup computes one bf16 tile product with Hopper's wgmma (sm_90a), fp32 accumulation,
// in exactly the operand forms the MLA kernels use (kernels/ptx/wgmma_sm90.h: the SW128 shared-memory layout, its
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
// The check: every form against an fp64 product of the same bf16 inputs (normalised error ≤ 1e-4; a layout mistake
// errs by O(1)). Reading a failure: ss_n64_k_major alone → the A descriptor; every K-major form → the K-major B
// descriptor or the swizzle; rs_n256_mn_major alone → the leading byte offset between 64-column blocks of an MN-major
// B; both MN-major forms → trans-b or the MN-major stride byte offset; ss_n96_k_major → a K-major B of 96 rows per
// block; ss_n96_mn_major → trans-a (an MN-major A) or an MN-major B whose last 64-column block is half filled.
// Needs compute capability 9.0 (exit 77 elsewhere).
#include "bench/lab/lab_common.h"
#include "kernels/ptx/wgmma_sm90.h"

#include <cuda_bf16.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

namespace k3::lab {
namespace {

namespace wgmma = kernels::wgmma;

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

constexpr int kM = 64;
constexpr int kThreads = 128;                         // one warpgroup
constexpr int kABytes = 64 * 576 * 2;                 // the largest A: 64 rows of 576 bf16
constexpr int kBBytes = 96 * 576 * 2;                 // the largest B: 96 rows of 576 bf16
constexpr int kSmemBytes = kABytes + kBBytes + 1024;  // A and B, plus slack to align them to 1024 bytes

// Copies a row-major bf16 [rows, cols] matrix into SW128 blocks at `dst` (16 bytes per thread and step).
__device__ void store_sw128(unsigned char* dst, const __nv_bfloat16* src, int rows, int cols) {
  const int chunks_per_row = cols / 8;
  for (int i = threadIdx.x; i < rows * chunks_per_row; i += kThreads) {
    const int row = i / chunks_per_row, chunk = i % chunks_per_row;
    *reinterpret_cast<uint4*>(dst + wgmma::sw128_offset(rows, row, chunk)) =
        *reinterpret_cast<const uint4*>(src + int64_t(row) * cols + chunk * 8);
  }
}

// The A fragment of k16 step `ks` of a row-major bf16 [64, k] matrix (wgmma_sm90.h: rows 16w + g (+8), columns
// 16ks + 2t (+1, +8, +9)).
__device__ void load_a_fragment(uint32_t (&a)[4], const __nv_bfloat16* src, int k, int ks) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int row = 16 * warp + g + 8 * (r & 1), column = 16 * ks + 2 * t + 8 * (r >> 1);
    a[r] = *reinterpret_cast<const uint32_t*>(src + int64_t(row) * k + column);
  }
}

template <int kN>
__device__ void store_accumulators(float* d, const float (&acc)[kN / 2]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) {
    const int row = 16 * warp + g + 8 * ((i & 3) >> 1), column = 8 * (i >> 2) + 2 * t + (i & 1);
    d[row * kN + column] = acc[i];
  }
}

// A and B in dynamic shared memory, 1024-byte aligned: their shared-window addresses and generic pointers.
struct SharedOperands {
  uint32_t a_smem, b_smem;
  unsigned char *a_ptr, *b_ptr;
};
__device__ SharedOperands shared_operands(unsigned char* smem_raw) {
  const uint32_t raw = uint32_t(__cvta_generic_to_shared(smem_raw));
  const uint32_t a_smem = (raw + 1023) & ~1023u;
  unsigned char* a_ptr = smem_raw + (a_smem - raw);
  return {a_smem, a_smem + kABytes, a_ptr, a_ptr + kABytes};
}

// Commits the issued products, waits for them and stores the accumulators.
template <int kN>
__device__ void retire_and_store(float* d, float (&acc)[kN / 2]) {
  wgmma::commit_group();
  wgmma::wait_group<0>();
  wgmma::fence_registers(acc);
  store_accumulators<kN>(d, acc);
}

// The two forms with 96 heads as N (tokens as M), both operands from shared memory.
template <WgmmaTileForm kForm>
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_tile_product_n96(const __nv_bfloat16* __restrict__ a, const __nv_bfloat16* __restrict__ b,
                           float* __restrict__ d) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  const SharedOperands smem = shared_operands(smem_raw);
  const uint32_t a_smem = smem.a_smem, b_smem = smem.b_smem;
  unsigned char *a_ptr = smem.a_ptr, *b_ptr = smem.b_ptr;
  constexpr bool kKMajor = kForm == WgmmaTileForm::ss_n96_k_major;
  constexpr int kN = 96, kK = kKMajor ? 576 : 64;
  if constexpr (kKMajor) {
    store_sw128(a_ptr, a, kM, kK);  // rows = M (tokens), columns = K
    store_sw128(b_ptr, b, kN, kK);  // rows = N (heads), columns = K
  } else {
    store_sw128(a_ptr, a, kK, kM);  // rows = K (tokens), columns = M (latent columns)
    store_sw128(b_ptr, b, kK, kN);  // rows = K (tokens), columns = N (heads): a full and a half-filled block
  }
  wgmma::fence_proxy_async_shared();
  __syncthreads();
  float acc[kN / 2];
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) acc[i] = 0.0f;
  wgmma::fence_registers(acc);
  wgmma::fence();
#pragma unroll
  for (int ks = 0; ks < kK / 16; ++ks) {
    if constexpr (kKMajor) {  // block ks / 4 (of 64 or 96 rows), 32 bytes per k16 step inside it
      const uint32_t in_block = (ks & 3) * 32;
      wgmma::wgmma_m64n96k16_ss<0, 0>(acc,
                                      wgmma::sw128_descriptor(a_smem + (ks >> 2) * (kM * 128) + in_block, 16, 1024),
                                      wgmma::sw128_descriptor(b_smem + (ks >> 2) * (kN * 128) + in_block, 16, 1024));
    } else {  // rows 16ks … 16ks+15 of both; 64-column blocks kK · 128 bytes apart
      wgmma::wgmma_m64n96k16_ss<1, 1>(acc, wgmma::sw128_descriptor(a_smem + ks * 2048, kK * 128, 1024),
                                      wgmma::sw128_descriptor(b_smem + ks * 2048, kK * 128, 1024));
    }
  }
  retire_and_store<kN>(d, acc);
#elif defined(__CUDA_ARCH__)
  __trap();  // built without sm_90a: the host side refuses before launching
#endif
}

template <WgmmaTileForm kForm>
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_tile_product(const __nv_bfloat16* __restrict__ a, const __nv_bfloat16* __restrict__ b,
                       float* __restrict__ d) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr bool kKMajor = kForm == WgmmaTileForm::ss_n64_k_major || kForm == WgmmaTileForm::rs_n64_k_major;
  constexpr int kN = kForm == WgmmaTileForm::rs_n256_mn_major ? 256 : 64;
  constexpr int kK = kKMajor ? 576 : 64;
  constexpr int kKSteps = kK / 16;
  extern __shared__ unsigned char smem_raw[];
  const SharedOperands smem = shared_operands(smem_raw);
  const uint32_t a_smem = smem.a_smem, b_smem = smem.b_smem;
  unsigned char *a_ptr = smem.a_ptr, *b_ptr = smem.b_ptr;

  if constexpr (kForm == WgmmaTileForm::ss_n64_k_major) store_sw128(a_ptr, a, kM, kK);
  if constexpr (kKMajor) {
    store_sw128(b_ptr, b, kN, kK);  // rows = N (tokens), columns = K
  } else {
    store_sw128(b_ptr, b, kK, kN);  // rows = K (tokens), columns = N
  }
  wgmma::fence_proxy_async_shared();
  __syncthreads();

  float acc[kN / 2];
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) acc[i] = 0.0f;
  [[maybe_unused]] uint32_t a_frag[kForm == WgmmaTileForm::ss_n64_k_major ? 1 : kKSteps][4];
  if constexpr (kForm != WgmmaTileForm::ss_n64_k_major) {
#pragma unroll
    for (int ks = 0; ks < kKSteps; ++ks) load_a_fragment(a_frag[ks], a, kK, ks);
  }
  wgmma::fence_registers(acc);
  wgmma::fence();
#pragma unroll
  for (int ks = 0; ks < kKSteps; ++ks) {
    if constexpr (kKMajor) {
      const uint32_t offset = (ks >> 2) * (64 * 128) + (ks & 3) * 32;  // block ks / 4 of 64 rows, 32 bytes per k16
      const uint64_t b_desc = wgmma::sw128_descriptor(b_smem + offset, 16, 1024);
      if constexpr (kForm == WgmmaTileForm::ss_n64_k_major) {
        wgmma::wgmma_m64n64k16_ss<0>(acc, wgmma::sw128_descriptor(a_smem + offset, 16, 1024), b_desc);
      } else {
        wgmma::wgmma_m64n64k16_rs<0>(acc, a_frag[ks], b_desc);
      }
    } else {
      // Rows 16ks … 16ks+15 of B (two 8-row groups of 1024 bytes); 64-column blocks kK · 128 bytes apart.
      const uint64_t b_desc = wgmma::sw128_descriptor(b_smem + ks * 2048, kK * 128, 1024);
      if constexpr (kN == 256) {
        wgmma::wgmma_m64n256k16_rs<1>(acc, a_frag[ks], b_desc);
      } else {
        wgmma::wgmma_m64n64k16_rs<1>(acc, a_frag[ks], b_desc);
      }
    }
  }
  retire_and_store<kN>(d, acc);
#elif defined(__CUDA_ARCH__)
  __trap();  // built without sm_90a: the host side refuses before launching
#endif
}

template <WgmmaTileForm kForm>
cudaError_t launch(const __nv_bfloat16* a, const __nv_bfloat16* b, float* d, cudaStream_t stream) {
  constexpr bool kN96 = kForm == WgmmaTileForm::ss_n96_k_major || kForm == WgmmaTileForm::ss_n96_mn_major;
  const auto kernel = kN96 ? wgmma_tile_product_n96<kForm> : wgmma_tile_product<kForm>;
  const cudaError_t status = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  if (status != cudaSuccess) return status;
  kernel<<<1, kThreads, kSmemBytes, stream>>>(a, b, d);
  return cudaGetLastError();
}

WgmmaTileShape wgmma_tile_shape(WgmmaTileForm form) {
  switch (form) {
    case WgmmaTileForm::ss_n64_k_major:
    case WgmmaTileForm::rs_n64_k_major: return {64, 576, true};
    case WgmmaTileForm::rs_n64_mn_major: return {64, 64, false};
    case WgmmaTileForm::rs_n256_mn_major: return {256, 64, false};
    case WgmmaTileForm::ss_n96_k_major: return {96, 576, true};
    case WgmmaTileForm::ss_n96_mn_major: return {96, 64, false, false};
  }
  return {0, 0, false};
}

cudaError_t wgmma_tile_product_bf16(WgmmaTileForm form, const __nv_bfloat16* a, const __nv_bfloat16* b, float* d,
                                    cudaStream_t stream) {
  if (reinterpret_cast<uintptr_t>(a) % 16 != 0 || reinterpret_cast<uintptr_t>(b) % 16 != 0)
    return cudaErrorInvalidValue;
  switch (form) {
    case WgmmaTileForm::ss_n64_k_major: return launch<WgmmaTileForm::ss_n64_k_major>(a, b, d, stream);
    case WgmmaTileForm::rs_n64_k_major: return launch<WgmmaTileForm::rs_n64_k_major>(a, b, d, stream);
    case WgmmaTileForm::rs_n64_mn_major: return launch<WgmmaTileForm::rs_n64_mn_major>(a, b, d, stream);
    case WgmmaTileForm::rs_n256_mn_major: return launch<WgmmaTileForm::rs_n256_mn_major>(a, b, d, stream);
    case WgmmaTileForm::ss_n96_k_major: return launch<WgmmaTileForm::ss_n96_k_major>(a, b, d, stream);
    case WgmmaTileForm::ss_n96_mn_major: return launch<WgmmaTileForm::ss_n96_mn_major>(a, b, d, stream);
  }
  return cudaErrorInvalidValue;
}

const char* name(WgmmaTileForm f) {
  switch (f) {
    case WgmmaTileForm::ss_n64_k_major: return "ss_n64_k_major";
    case WgmmaTileForm::rs_n64_k_major: return "rs_n64_k_major";
    case WgmmaTileForm::rs_n64_mn_major: return "rs_n64_mn_major";
    case WgmmaTileForm::rs_n256_mn_major: return "rs_n256_mn_major";
    case WgmmaTileForm::ss_n96_k_major: return "ss_n96_k_major";
    case WgmmaTileForm::ss_n96_mn_major: return "ss_n96_mn_major";
  }
  return "?";
}

// d[64, n] = A · Bᵀ (b [n, k]) or A · B (b [k, n]) in fp64, with A = a (a [64, k]) or aᵀ (a [k, 64]).
std::vector<double> cpu_product(const std::vector<float>& a, const std::vector<float>& b, const WgmmaTileShape& s) {
  std::vector<double> d(size_t(kM) * s.n, 0.0);
  for (int i = 0; i < kM; ++i)
    for (int j = 0; j < s.n; ++j) {
      double sum = 0.0;
      for (int k = 0; k < s.k; ++k) {
        const double x = s.a_k_major ? a[size_t(i) * s.k + k] : a[size_t(k) * kM + i];
        const double y = s.b_k_major ? b[size_t(j) * s.k + k] : b[size_t(k) * s.n + j];
        sum += x * y;
      }
      d[size_t(i) * s.n + j] = sum;
    }
  return d;
}

int run() {
  if (device_capability() != 90) {
    std::printf("wgmma_tile_product: needs compute capability 9.0 (sm_90a); skipped\n");
    return kSkipped;
  }
  const WgmmaTileForm forms[] = {WgmmaTileForm::ss_n64_k_major,  WgmmaTileForm::rs_n64_k_major,
                                 WgmmaTileForm::rs_n64_mn_major, WgmmaTileForm::rs_n256_mn_major,
                                 WgmmaTileForm::ss_n96_k_major,  WgmmaTileForm::ss_n96_mn_major};
  std::mt19937 rng(20261215);
  int failures = 0;
  for (const WgmmaTileForm form : forms) {
    const WgmmaTileShape s = wgmma_tile_shape(form);
    const std::vector<float> a = random_bf16_values(size_t(kM) * s.k, rng),
                             b = random_bf16_values(size_t(s.n) * s.k, rng);
    const std::vector<double> want = cpu_product(a, b, s);
    __nv_bfloat16* da = device_copy(to_bf16(a));
    __nv_bfloat16* db = device_copy(to_bf16(b));
    float* dd = device_copy(std::vector<float>(size_t(kM) * s.n, NAN));  // every element must be written
    LAB_CUDA(wgmma_tile_product_bf16(form, da, db, dd, nullptr));
    LAB_CUDA(cudaDeviceSynchronize());
    const double error = normalized_error(host_copy(dd, size_t(kM) * s.n), want);
    const double us = time_us([&] { (void)wgmma_tile_product_bf16(form, da, db, dd, nullptr); });
    const bool ok = error <= 1e-4;
    failures += ok ? 0 : 1;
    std::printf("%-17s n %3d k %3d  error %.3g  %s  %.2f us per product (one block)\n", name(form), s.n, s.k, error,
                ok ? "ok" : "FAILED", us);
    LAB_CUDA(cudaFree(da));
    LAB_CUDA(cudaFree(db));
    LAB_CUDA(cudaFree(dd));
  }
  const auto* odd = reinterpret_cast<const __nv_bfloat16*>(uintptr_t(8));
  if (wgmma_tile_product_bf16(WgmmaTileForm::ss_n64_k_major, odd, nullptr, nullptr, nullptr) != cudaErrorInvalidValue) {
    std::printf("an unaligned operand was not refused: FAILED\n");
    ++failures;
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace k3::lab

int main() { return k3::lab::run(); }
