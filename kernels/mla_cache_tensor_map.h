// mla_cache_tensor_map: the paged MLA latent cache (kernels/mla_decode_paged.h: pages of page_tokens rows of 576 bf16)
// as a 2-D tensor map for Hopper's TMA (used by kernels/mla_decode_wgmma_cluster.cu), so that a decode kernel can copy
// a tile of cached tokens, 64 columns at a time, into shared memory in the 128-byte swizzle its wgmma operands use
// (kernels/ptx/wgmma_sm90.h's SW128 blocks): boxes of 64 columns × min(page_tokens, tile_tokens) rows, each inside one
// page. The pool's row count is not known to the decode API (only the page table names pages), so the map spans
// 2^31 − 1 rows; a kernel only asks for rows the page table names. Host code; the map is passed to the kernel as a
// __grid_constant__ parameter. Measurements: bench/results/kernel-notes.md (mla_cache_tensor_map).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>

namespace k3::kernels {

// Encodes `map` for tiles of tile_tokens cached tokens and returns the box's rows, or 0 — and the caller loads without
// TMA — where the pages do not split a tile into at most `max_pieces` whole pieces of at least 16 rows (page_tokens a
// multiple of tile_tokens, or a divisor of it), the pointer is not 16-byte aligned or the driver cannot encode the map.
int mla_cache_tensor_map(CUtensorMap& map, const __nv_bfloat16* cache_pages, int page_tokens, int tile_tokens,
                         int max_pieces);

}  // namespace k3::kernels
