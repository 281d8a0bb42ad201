// mbarrier_sm90: inline-PTX building blocks for Hopper's shared-memory barriers (mbarrier) and thread-block
// clusters (sm_90): barrier init and phase waits, arrivals on this block's or another block's barrier (through
// mapa's distributed-shared-memory address), cp.async completion tracked by a barrier, and the cluster-wide barrier.
// Device functions only; their bodies are empty below sm_90, so other targets still compile. Addresses are
// shared-window addresses (__cvta_generic_to_shared).
//
// Phases: a barrier initialised with count c completes a phase when c arrivals (and, for cp.async tracking, the
// copies) are in; the k-th completion (k = 0, 1, …) has parity k % 2, and wait(barrier, k % 2) returns once it is in.
#pragma once

#include <cstdint>

namespace k3::kernels::mbarrier {

__device__ __forceinline__ void init(uint32_t barrier, uint32_t count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(barrier), "r"(count) : "memory");
#endif
}

// Makes the barriers this thread initialised visible to the whole cluster (before the cluster barrier).
__device__ __forceinline__ void fence_init() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

// Every thread of every block of the cluster arrives and waits (release / acquire at cluster scope).
__device__ __forceinline__ void cluster_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t rank = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
#endif
  return rank;
}

// The address of the same shared-memory location in block `rank` of the cluster.
__device__ __forceinline__ uint32_t peer_address(uint32_t local, uint32_t rank) {
  uint32_t remote = local;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(local), "r"(rank));
#endif
  return remote;
}

// Arrival on this block's barrier (release at block scope).
__device__ __forceinline__ void arrive(uint32_t barrier) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];\n" ::"r"(barrier) : "memory");
#endif
}

// Arrival on a barrier of any block of the cluster (an address from peer_address) with the default semantics (release
// at block scope): enough to say "done reading" to a producer that then overwrites the data (the consumer release of
// a multicast TMA pipeline), without the fence a cluster-scope release costs (MEMBAR.GPU on an H200).
__device__ __forceinline__ void arrive_remote(uint32_t remote_barrier) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(remote_barrier) : "memory");
#endif
}

// Waits for the completion of the phase with this parity (acquire at block scope: what the arrivals released, and the
// bytes that a bulk copy counted in, are visible after it). Not cluster scope: on an H200 an acquire at
// cluster scope costs an L1 invalidation (CCTL.IVALL) per wait, which Nsight Compute found dominating a kernel's
// stalls.
__device__ __forceinline__ void wait(uint32_t barrier, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n.reg .pred done;\nwait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n}\n" ::"r"(barrier),
      "r"(parity)
      : "memory");
#endif
}

// This thread's arrival on its block's barrier, raising the bytes the current phase waits for by `bytes` (which
// bulk copies then count down).
__device__ __forceinline__ void arrive_expect_bytes(uint32_t barrier, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(barrier), "r"(bytes) : "memory");
#endif
}

// One arrival on the barrier once every cp.async this thread issued so far has landed (the barrier's count includes
// it: noinc).
__device__ __forceinline__ void arrive_on_cp_async(uint32_t barrier) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(barrier) : "memory");
#endif
}

}  // namespace k3::kernels::mbarrier
