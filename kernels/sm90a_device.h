// sm90a_device: whether a device runs the kernels built for the arch-specific sm_90a target alone (Hopper's warpgroup
// MMA: kernels/wgmma_sm90.h), i.e. is of compute capability 9.0; and whether the current device launches thread
// block clusters (compute capability ≥ 9.0). Host side; false when the attributes cannot be read.
#pragma once

#include <cuda_runtime.h>

namespace k3::kernels {

inline bool sm90a_device(int device) {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess)
    return false;
  return major == 9 && minor == 0;
}

inline bool current_device_launches_clusters() {
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess)
    return false;
  return major >= 9;
}

}  // namespace k3::kernels
