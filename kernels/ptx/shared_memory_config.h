// shared_memory_config: the host-side function attributes a kernel needs before it launches with more than 48 KB of
// dynamic shared memory (the limit raised to its footprint, the largest shared-memory carveout so that several such
// blocks fit an SM). Both are properties of the kernel on the current device, not stream operations, so they may be
// set while a stream is being captured.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

namespace k3::kernels {

// Sets both attributes of `kernel` on the current device.
template <typename Kernel>
cudaError_t allow_dynamic_shared_memory(Kernel* kernel, int bytes) {
  const cudaError_t status = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (status != cudaSuccess) return status;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                              int(cudaSharedmemCarveoutMaxShared));
}

// The same once per device: bit d of `configured` (one per kernel) records device d < 64, so later launches make no
// attribute calls; a device beyond that sets them on every call.
template <typename Kernel>
cudaError_t allow_dynamic_shared_memory_once(Kernel* kernel, int bytes, int device, std::atomic<uint64_t>& configured) {
  const uint64_t bit = device >= 0 && device < 64 ? uint64_t(1) << device : 0;
  if (bit != 0 && (configured.load(std::memory_order_acquire) & bit) != 0) return cudaSuccess;
  const cudaError_t status = allow_dynamic_shared_memory(kernel, bytes);
  if (status != cudaSuccess) return status;
  configured.fetch_or(bit, std::memory_order_release);
  return cudaSuccess;
}

}  // namespace k3::kernels
