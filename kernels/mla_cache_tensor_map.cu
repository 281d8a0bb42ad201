#include "kernels/mla_cache_tensor_map.h"
#include "kernels/mla_decode_paged.h"

#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace k3::kernels {

namespace {

// cuTensorMapEncodeTiled through the runtime's driver entry point (no link against the driver library); null where
// the driver does not have it.
PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return PFN_cuTensorMapEncodeTiled_v12000(nullptr);
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}

}  // namespace

int mla_cache_tensor_map(CUtensorMap& map, const __nv_bfloat16* cache_pages, int page_tokens, int tile_tokens,
                         int max_pieces) {
  if (page_tokens <= 0 || tile_tokens <= 0 || (page_tokens % tile_tokens != 0 && tile_tokens % page_tokens != 0))
    return 0;
  const int box_rows = std::min(page_tokens, tile_tokens);
  if (box_rows < 16 || tile_tokens / box_rows > max_pieces) return 0;
  if (reinterpret_cast<uintptr_t>(cache_pages) % 16 != 0) return 0;
  const PFN_cuTensorMapEncodeTiled_v12000 encode = encode_tiled();
  if (encode == nullptr) return 0;
  const cuuint64_t dims[2] = {cuuint64_t(kMlaDecodeCacheWidth), (cuuint64_t(1) << 31) - 1};
  const cuuint64_t strides[1] = {cuuint64_t(kMlaDecodeCacheWidth) * 2};
  const cuuint32_t box[2] = {64, cuuint32_t(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult result =
      encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<__nv_bfloat16*>(cache_pages), dims, strides, box,
             element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return result == CUDA_SUCCESS ? box_rows : 0;
}

}  // namespace k3::kernels
