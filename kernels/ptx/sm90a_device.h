// sm90a_device: whether a device runs the kernels built for the arch-specific sm_90a target alone (Hopper's warpgroup
// MMA: kernels/ptx/wgmma_sm90.h), i.e. is of compute capability 9.0; whether the current device launches thread block
// clusters (compute capability ≥ 9.0); the current device's SM count; and a launch configuration in clusters. Host
// side; false (0) when the attributes cannot be read.
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

inline int current_device_multiprocessors() {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
    return 0;
  return sms;
}

// The configuration of a launch in clusters of `cluster_blocks` blocks along x, for
// cudaLaunchKernelEx(&launch.config, kernel, args...). Not copyable: config points at the attribute inside.
struct ClusterLaunch {
  cudaLaunchAttribute attribute{};
  cudaLaunchConfig_t config{};
  ClusterLaunch(dim3 grid, dim3 block, unsigned cluster_blocks, cudaStream_t stream) {
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim.x = cluster_blocks;
    attribute.val.clusterDim.y = 1;
    attribute.val.clusterDim.z = 1;
    config.gridDim = grid;
    config.blockDim = block;
    config.stream = stream;
    config.attrs = &attribute;
    config.numAttrs = 1;
  }
  ClusterLaunch(const ClusterLaunch&) = delete;
  ClusterLaunch& operator=(const ClusterLaunch&) = delete;
};

}  // namespace k3::kernels
