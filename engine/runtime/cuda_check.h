// CUDA error translation for the callers of kernels/. Kernel entry points return cudaError_t (no engine types, no
// exceptions across the kernel boundary); callers on the host wrap calls in CUDA_CHECK, which throws k3::Error naming
// the call, file:line and CUDA's message.
#pragma once

#include "core/error.h"

#include <cuda_runtime.h>

#define CUDA_CHECK(call)                                                                                               \
  do {                                                                                                                 \
    const cudaError_t k3_cuda_status_ = (call);                                                                        \
    if (k3_cuda_status_ != cudaSuccess) {                                                                              \
      ::k3::detail::check_failed(                                                                                      \
          #call, __FILE__, __LINE__,                                                                                   \
          ::fmt::format("CUDA error {}: {}", cudaGetErrorName(k3_cuda_status_), cudaGetErrorString(k3_cuda_status_))); \
    }                                                                                                                  \
  } while (0)
