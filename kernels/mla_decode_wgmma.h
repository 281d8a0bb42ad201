// mla_decode_wgmma: what the Hopper (sm_90a) split passes of mla_decode_paged_bf16 share on the host
// (kernels/mla_decode_wgmma_alternating.h, kernels/mla_decode_wgmma_cluster.h): the device check and the split count
// of the heads-as-M form. Defined in kernels/mla_decode_paged.cu.
#pragma once

#include "kernels/mla_decode_paged.h"

#include <cuda_runtime.h>

namespace k3::kernels {

// Splits of the context per sequence for wgmma_alternating: ⌊SMs / (batch · ⌈heads / 64⌉)⌋ (one wave of its
// one-block-per-SM blocks; the current device's SMs, an H200's 132 without one) within [1, mla_decode_num_splits].
int mla_decode_wgmma_num_splits(const MlaDecodeShape& shape);

// Whether `device` runs the sm_90a split passes: compute capability 9.0 (the code is built for sm_90a only).
bool mla_decode_wgmma_supported(int device);
// The current device for an sm_90a split pass: cudaErrorNotSupported where mla_decode_wgmma_supported is false; a
// failing cudaGetDevice comes back as its status.
cudaError_t mla_decode_wgmma_device(int& device);

}  // namespace k3::kernels
