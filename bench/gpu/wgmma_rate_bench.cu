// wgmma_rate_bench: two measured ceilings that decide the design of a tensor-core decode kernel on one GPU (Hopper,
// sm_90a), each against the same-run copy bandwidth:
//   1. the issue rate of warpgroup MMA (wgmma m64nNk16, bf16 in, fp32 accumulate) by operand form: A and B both from
//      shared memory (SS) with either operand K-major or MN-major, or A from registers (RS), N = 32 … 256, one or two
//      warpgroups per SM issuing back to back. With both operands read from shared memory each k16 step reads
//      2 KiB of A and N·32 bytes of B for 64·N·16 multiply-adds, so a small N asks the most shared-memory bandwidth
//      per FLOP; the rows show where (at which N, in which form) the rate drops below the large-N rate.
//   2. the rate at which 73,728-byte tiles (64 tokens × 576 bf16, one MLA latent-cache page of 64 tokens) reach
//      shared memory by cp.async (3 tiles in flight per SM), when every SM streams its own tiles and when pairs of
//      SMs stream the same tiles (as two blocks of head groups of one split do): bytes delivered to the SMs per
//      second, beside the unique bytes read from HBM per second.
//   3. the cost of handing a 64 × 96 fp32 score tile (24 KiB) between the two blocks of a cluster through
//      distributed shared memory with mbarrier hand-offs, as a split of the score product over two blocks would per
//      tile: microseconds per round.
//   4. whether bulk copies landing in an SM's shared memory take bandwidth from the tensor cores' operand reads: part
//      1's m64n48k16 loop (both operands K-major in shared memory, as MLA's score product) on two warpgroups while a
//      third warp keeps bulk copies (cp.async.bulk) of an L2-resident buffer landing in another part of the same
//      shared memory, against each alone: the wgmma rate and the copies' bytes per second.
//   5. the ridge: the tensor work and the cache bytes of MLA's absorbed decode at batch 1 and 1 M tokens (96 heads),
//      part 4's loop beside bulk copies from HBM with nothing tying them together, against each alone, with the SM
//      clock each ran at: what sharing the board's power limit costs a kernel that must keep both busy at once.
// Operand values are pseudo-random (zeros run faster on tensor cores). Prints the JSON object of bench_harness.h; the
// rows' "flops" (part 1) and "bytes" (part 2: delivered to the SMs; part 3: written to the other block) give the
// rates.
#include "bench/gpu/bench_harness.h"
#include "kernels/ptx/mbarrier_sm90.h"
#include "kernels/ptx/ptx_mma.h"
#include "kernels/ptx/sm90a_device.h"
#include "kernels/ptx/wgmma_products_sm90.h"
#include "kernels/ptx/wgmma_sm90.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace {

using namespace k3;
namespace wgmma = kernels::wgmma;

// ---- Part 1: wgmma issue rate ----
// The products: kernels/ptx/wgmma_products_sm90.h (this file is built for sm_90a alone, bench/gpu/CMakeLists.txt).
using wgmma::mma_rs;
using wgmma::mma_ss;

constexpr int kSmemBlock = 8192;                        // one SW128 block: 64 rows × 128 bytes
constexpr int kProbeSmemBytes = 5 * kSmemBlock + 1024;  // A (1 block) + B (up to 4 blocks), 1024-byte alignment slack
constexpr int kStepsPerGroup = 16;  // k16 steps per commit group (4 passes over the 4 steps of a 64-wide block)

// Fills n bytes of shared memory from `base` with bf16 values in [-1, 1) from a per-byte hash.
__device__ void fill_pseudo_random(unsigned char* base, int n) {
  for (int i = 2 * threadIdx.x; i < n; i += 2 * blockDim.x) {
    const uint32_t h = (uint32_t(i) * 2654435761u) ^ (uint32_t(i) >> 7);
    const float v = float(int(h % 2001u) - 1000) * 1e-3f;
    *reinterpret_cast<__nv_bfloat16*>(base + i) = __float2bfloat16(v);
  }
}

// Descriptor of a 64-wide k block of an operand in SW128 blocks and the byte step of one k16 step:
//   K-major (rows = M or N, 128-byte rows of 64 k):  LBO unused, SBO 1024, step 32 bytes;
//   MN-major (rows = k, 64 M or N per block, blocks 8 KiB apart):  LBO 8192, SBO 1024, step 2048 bytes.
struct Operand {
  uint64_t descriptor;
  uint32_t step_bytes;
};
__device__ Operand operand(uint32_t smem, bool mn_major) {
  return mn_major ? Operand{wgmma::sw128_descriptor(smem, kSmemBlock, 1024), 2048}
                  : Operand{wgmma::sw128_descriptor(smem, 16, 1024), 32};
}

// The warpgroup runs `groups` commit groups of kStepsPerGroup back-to-back wgmma (keeping one group in flight) on the
// same operands and returns the sum of its accumulators, so the work is kept.
template <int kN, bool kRegistersA, int kTransA, int kTransB>
__device__ float issue_groups(int groups, const Operand& a, const Operand& b) {
  uint32_t a_fragment[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) a_fragment[i] = 0x3C003C00u ^ (threadIdx.x * 0x00110011u + i);  // bf16 pairs near ±1
  float d[kN / 2];
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) d[i] = 0.0f;
  wgmma::fence_registers(d);
  for (int g = 0; g < groups; ++g) {
    wgmma::fence();
#pragma unroll
    for (int s = 0; s < kStepsPerGroup; ++s) {
      const uint64_t k = s % 4;
      if constexpr (kRegistersA)
        mma_rs<kTransB>(d, a_fragment, b.descriptor + ((k * b.step_bytes) >> 4));
      else
        mma_ss<kTransA, kTransB>(d, a.descriptor + ((k * a.step_bytes) >> 4), b.descriptor + ((k * b.step_bytes) >> 4));
    }
    wgmma::commit_group();
    wgmma::wait_group<1>();
  }
  wgmma::wait_group<0>();
  wgmma::fence_registers(d);
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) sum += d[i];
  return sum;
}

// Every warpgroup of the block runs issue_groups on the same shared-memory operands; the sums go to sink.
template <int kN, bool kRegistersA, int kTransA, int kTransB>
__global__ void __launch_bounds__(256, 1) wgmma_rate(int groups, float* sink) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = uint32_t(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw + 1023) & ~1023u;
  unsigned char* smem = smem_raw + (base - raw);
  fill_pseudo_random(smem, 5 * kSmemBlock);
  wgmma::fence_proxy_async_shared();
  __syncthreads();
  sink[blockIdx.x * blockDim.x + threadIdx.x] = issue_groups<kN, kRegistersA, kTransA, kTransB>(
      groups, operand(base, kTransA), operand(base + kSmemBlock, kTransB));
#else
  __trap();
#endif
}

// ---- Part 2: tiles into shared memory ----
constexpr int kTileBytes = 64 * 576 * 2;  // 73,728
constexpr int kTileSlots = 3;
constexpr int kStreamThreads = 256;
constexpr int kChunksPerThread = kTileBytes / 16 / kStreamThreads;  // 18
static_assert(kChunksPerThread * 16 * kStreamThreads == kTileBytes);

// Block b streams tiles stream, stream + streams, … of `tiles` (stream = b / sharing, streams = gridDim.x / sharing):
// with sharing 2, blocks 2s and 2s + 1 load the same tiles. kTileSlots tiles in flight; each landed tile is summed by
// one word per thread so the loads are used.
__global__ void __launch_bounds__(kStreamThreads, 1)
    stream_tiles(const uint4* __restrict__ data, int64_t tiles, int sharing, float* sink) {
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = uint32_t(__cvta_generic_to_shared(smem_raw));
  const int stream = blockIdx.x / sharing, streams = gridDim.x / sharing;
  uint32_t acc = 0;
  int64_t issued = 0, consumed = 0;
  const auto issue = [&](int64_t tile) {
    const uint4* src = data + tile * (kTileBytes / 16);
    const uint32_t dst = base + uint32_t(issued % kTileSlots) * kTileBytes;
#pragma unroll
    for (int c = 0; c < kChunksPerThread; ++c) {
      const int chunk = threadIdx.x + c * kStreamThreads;
      kernels::ptx::cp_async_16(dst + chunk * 16, src + chunk, true);
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
    ++issued;
  };
  int64_t next = stream;
  for (int s = 0; s < kTileSlots - 1; ++s, next += streams)
    if (next < tiles)
      issue(next);
    else
      asm volatile("cp.async.commit_group;\n" ::: "memory");
  for (int64_t tile = stream; tile < tiles; tile += streams, next += streams) {
    if (next < tiles)
      issue(next);
    else
      asm volatile("cp.async.commit_group;\n" ::: "memory");
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kTileSlots - 1) : "memory");
    __syncthreads();
    acc += reinterpret_cast<const uint32_t*>(smem_raw + (consumed % kTileSlots) * kTileBytes)[threadIdx.x];
    ++consumed;
    __syncthreads();  // the slot is refilled by the next iteration's issue
  }
  sink[blockIdx.x * blockDim.x + threadIdx.x] = float(acc);
}

// ---- Part 3: partial scores exchanged between the two blocks of a cluster ----
constexpr int kExchangeThreads = 128;                        // one warpgroup
constexpr int kExchangeFloats = 64 * 96 / kExchangeThreads;  // 48 per thread: a 64 × 96 fp32 score tile, 24 KiB

__device__ __forceinline__ uint32_t peer_address(uint32_t local, uint32_t peer_rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(local), "r"(peer_rank));
  return remote;
}
__device__ __forceinline__ void remote_arrive(uint32_t remote_barrier) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(remote_barrier) : "memory");
}
__device__ __forceinline__ void wait_parity(uint32_t barrier, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\nwait_%=:\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n}\n" ::"r"(barrier),
      "r"(parity)
      : "memory");
}

// Clusters of 2 blocks; per round each thread writes its 48 fp32 into the other block's buffer (double-buffered) with
// st.shared::cluster, arrives on that block's "full" barrier, waits on its own, adds what the other block wrote and
// arrives on the other block's "empty" barrier (which the writer waits on before reusing the buffer two rounds
// later) — the hand-off a two-block split of the score product needs once per 64-token tile.
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kExchangeThreads, 1)
    exchange_scores(int rounds, float* sink) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __shared__ __align__(16) float buffer[2][kExchangeThreads * kExchangeFloats];
  __shared__ __align__(8) uint64_t full[2], empty[2];
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  const uint32_t peer = rank ^ 1u;
  const auto local = [](const void* p) { return uint32_t(__cvta_generic_to_shared(p)); };
  if (threadIdx.x == 0) {
    for (int b = 0; b < 2; ++b) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(local(&full[b])), "r"(kExchangeThreads));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(local(&empty[b])), "r"(kExchangeThreads));
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");

  float mine[kExchangeFloats], acc = 0.0f;
#pragma unroll
  for (int i = 0; i < kExchangeFloats; ++i) mine[i] = float(threadIdx.x + i + rank);
  for (int r = 0; r < rounds; ++r) {
    const int b = r & 1;
    if (r >= 2) wait_parity(local(&empty[b]), uint32_t((r / 2 - 1) & 1));
    // float4 j of thread t at (j · 128 + t) · 16 bytes: a warp's 16-byte stores and loads are contiguous.
    const uint32_t dst = peer_address(local(&buffer[b][4 * threadIdx.x]), peer);
#pragma unroll
    for (int i = 0; i < kExchangeFloats; i += 4)
      asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst + 4 * i * kExchangeThreads),
                   "f"(mine[i]), "f"(mine[i + 1]), "f"(mine[i + 2]), "f"(mine[i + 3])
                   : "memory");
    remote_arrive(peer_address(local(&full[b]), peer));
    wait_parity(local(&full[b]), uint32_t((r / 2) & 1));
    const float4* in = reinterpret_cast<const float4*>(&buffer[b][4 * threadIdx.x]);
#pragma unroll
    for (int i = 0; i < kExchangeFloats / 4; ++i) {
      const float4 v = in[i * kExchangeThreads];
      acc += v.x + v.y + v.z + v.w;
    }
    remote_arrive(peer_address(local(&empty[b]), peer));
  }
  // Neither block may exit while the other can still arrive on its barriers.
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
  sink[blockIdx.x * blockDim.x + threadIdx.x] = acc;
#else
  __trap();
#endif
}

// ---- Parts 4 and 5: the wgmma rate with bulk copies landing in the same shared memory ----
constexpr int kCopyBytes = 16384;             // per bulk copy
constexpr int kCopySourceBytes = 8 << 20;     // part 4's source, read over and over (L2-resident)
constexpr int kCopyKernelThreads = 256 + 32;  // two warpgroups and the copy warp
constexpr int kCopyRegion = 5 * kSmemBlock;   // the copies land after part 1's operands (1024-aligned)
constexpr int copy_barriers_at(int slots) { return kCopyRegion + slots * kCopyBytes; }
// The copies, two mbarriers per slot, a flag and the alignment slack.
constexpr int copy_kernel_smem_bytes(int slots) { return copy_barriers_at(slots) + 2 * slots * 8 + 16 + 1024; }

// The SM clock and the global timer at a block's start: write(timing, role) stores the cycles and nanoseconds since
// then at timing[4 · block + 2 · role + {0, 1}]. Device code of sm_90a alone, as the kernels that use it.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
struct Stamps {
  long long clock0;
  unsigned long long ns0;
  __device__ static unsigned long long global_ns() {
    unsigned long long ns;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
    return ns;
  }
  __device__ Stamps() : clock0(clock64()), ns0(global_ns()) {}
  __device__ void write(unsigned long long* timing, int role) const {
    const unsigned long long ns1 = global_ns();
    timing[4 * blockIdx.x + 2 * role] = (unsigned long long)(clock64() - clock0);
    timing[4 * blockIdx.x + 2 * role + 1] = ns1 - ns0;
  }
};
#endif

// Where the copies come from: block b's copy n reads copy ((b / share) · region + n) mod copies of `source`.
struct CopySource {
  const uint4* source;
  long long copies, region;
  int share;
};

// Threads 0–255 run part 1's loop for m64n48k16 K-major (kWgmma) and then raise a flag; the last warp's first lane
// keeps kSlots bulk copies in flight (kCopies), each counted on its slot's mbarrier, until max_copies (and, with
// stop_at_done, no longer than the flag is down), waits for the ones still in flight and writes the bytes it copied.
// Stamps at the end of its wgmma loop (role 0) and of its copies (role 1).
template <bool kWgmma, bool kCopies, int kSlots>
__global__ void __launch_bounds__(kCopyKernelThreads, 1)
    wgmma_with_copies(int groups, CopySource from, long long max_copies, bool stop_at_done, float* sink,
                      unsigned long long* copied, unsigned long long* timing) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  namespace mbarrier = kernels::mbarrier;
  constexpr int kBarriers = copy_barriers_at(kSlots);
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = uint32_t(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw + 1023) & ~1023u;
  unsigned char* smem = smem_raw + (base - raw);
  volatile int* done = reinterpret_cast<volatile int*>(smem + kBarriers + kSlots * 8);
  const auto full = [&](int slot) { return base + kBarriers + 8u * uint32_t(slot); };
  fill_pseudo_random(smem, 5 * kSmemBlock);
  wgmma::fence_proxy_async_shared();
  if (threadIdx.x == 0) {
    for (int slot = 0; slot < kSlots; ++slot) mbarrier::init(full(slot), 1);
    mbarrier::fence_init();
    *done = 0;
  }
  __syncthreads();
  const Stamps stamps;

  if (threadIdx.x >= 256) {  // the copy warp
    if (!kCopies || threadIdx.x != 256) return;
    const long long first = (blockIdx.x / from.share) * from.region;
    long long n = 0;
    while (n < max_copies && !(stop_at_done && *done != 0)) {
      const int slot = int(n % kSlots);
      if (n >= kSlots) mbarrier::wait(full(slot), uint32_t((n / kSlots - 1) & 1));
      mbarrier::arrive_expect_bytes(full(slot), kCopyBytes);
      const uint4* src = from.source + ((first + n) % from.copies) * (kCopyBytes / 16);
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                       base + kCopyRegion + uint32_t(slot) * kCopyBytes),
                   "l"(src), "r"(kCopyBytes), "r"(full(slot))
                   : "memory");
      ++n;
    }
    for (long long k = n > kSlots ? n - kSlots : 0; k < n; ++k)
      mbarrier::wait(full(int(k % kSlots)), uint32_t((k / kSlots) & 1));
    copied[blockIdx.x] = (unsigned long long)(n)*kCopyBytes;
    stamps.write(timing, 1);
    return;
  }
  float sum = 0.0f;
  if constexpr (kWgmma) {
    sum = issue_groups<48, false, 0, 0>(groups, operand(base, false), operand(base + kSmemBlock, false));
    asm volatile("bar.sync 1, 256;\n" ::: "memory");
    if (threadIdx.x == 0) {
      *done = 1;
      stamps.write(timing, 0);
    }
  }
  sink[blockIdx.x * 256 + threadIdx.x] = sum;  // the copy warp returned: sink has 256 floats per block
#else
  __trap();
#endif
}

// Part 5's multicast form, as the MLA decode delivers its tiles: clusters of 2 blocks, each copy landing in both
// blocks' shared memory (slot s of kSlots issued by rank s % 2), so that a pair of SMs receives every copy
// while the L2 sends it once. Per slot: `full` counts the bytes landed in this block; `empty` (count 2, in the
// issuing block) that both blocks saw the last copy land and armed `full` again. pair_copies copies per cluster from
// region blockIdx.x / 2; with prefetch_ahead > 0, the issuer also asks the L2 for its copy that many copies ahead
// (cp.async.bulk.prefetch.L2) as it issues each. Timing as wgmma_with_copies.
template <bool kWgmma, bool kCopies, int kSlots>
__global__ void __launch_bounds__(kCopyKernelThreads, 1)
    wgmma_with_multicast_copies(int groups, const uint4* __restrict__ source, long long pair_copies, int prefetch_ahead,
                                float* sink, unsigned long long* copied, unsigned long long* timing) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  namespace mbarrier = kernels::mbarrier;
  constexpr int kBarriers = copy_barriers_at(kSlots);
  static_assert(kSlots % 2 == 0, "each rank issues half the slots");
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = uint32_t(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw + 1023) & ~1023u;
  unsigned char* smem = smem_raw + (base - raw);
  const uint32_t rank = mbarrier::cluster_rank();
  const auto full = [&](int slot) { return base + kBarriers + 8u * uint32_t(slot); };
  const auto empty = [&](int slot) { return base + kBarriers + 8u * uint32_t(kSlots + slot); };
  fill_pseudo_random(smem, 5 * kSmemBlock);
  wgmma::fence_proxy_async_shared();
  if (threadIdx.x == 0) {
    for (int slot = 0; slot < kSlots; ++slot) {
      mbarrier::init(full(slot), 1);
      mbarrier::init(empty(slot), 2);
    }
    mbarrier::fence_init();
    for (int slot = 0; slot < kSlots; ++slot) mbarrier::arrive_expect_bytes(full(slot), kCopyBytes);
  }
  mbarrier::cluster_sync();  // both blocks' barriers armed before either copies
  const Stamps stamps;

  if (threadIdx.x >= 256) {  // the copy warp
    if (kCopies && threadIdx.x == 256) {
      const long long first = (blockIdx.x / 2) * pair_copies;
      const long long source_copies = (gridDim.x / 2) * pair_copies;
      for (long long n = 0; n < pair_copies; ++n) {
        const int slot = int(n % kSlots);
        const uint32_t use = uint32_t(n / kSlots), owner = uint32_t(slot % 2);
        if (n >= kSlots) {  // copy n − kSlots landed here: arm for copy n, tell its issuer
          mbarrier::wait(full(slot), (use - 1) & 1);
          mbarrier::arrive_expect_bytes(full(slot), kCopyBytes);
          if (owner == rank)
            mbarrier::arrive(empty(slot));
          else
            mbarrier::arrive_remote(mbarrier::peer_address(empty(slot), owner));
        }
        if (owner != rank) continue;
        if (n >= kSlots) mbarrier::wait(empty(slot), (use - 1) & 1);
        const uint4* src = source + ((first + n) % source_copies) * (kCopyBytes / 16);
        if (prefetch_ahead > 0 && n + prefetch_ahead < pair_copies)
          asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(
                           source + ((first + n + prefetch_ahead) % source_copies) * (kCopyBytes / 16)),
                       "r"(kCopyBytes)
                       : "memory");
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, "
            "[%3], %4;\n" ::"r"(base + kCopyRegion + uint32_t(slot) * kCopyBytes),
            "l"(src), "r"(kCopyBytes), "r"(full(slot)), "h"(uint16_t(3))
            : "memory");
      }
      for (long long k = pair_copies > kSlots ? pair_copies - kSlots : 0; k < pair_copies; ++k)
        mbarrier::wait(full(int(k % kSlots)), uint32_t((k / kSlots) & 1));
      copied[blockIdx.x] = (unsigned long long)(pair_copies)*kCopyBytes;
      stamps.write(timing, 1);
    }
    __syncwarp();
  } else {
    float sum = 0.0f;
    if constexpr (kWgmma) {
      sum = issue_groups<48, false, 0, 0>(groups, operand(base, false), operand(base + kSmemBlock, false));
      asm volatile("bar.sync 1, 256;\n" ::: "memory");
      if (threadIdx.x == 0) stamps.write(timing, 0);
    }
    sink[blockIdx.x * 256 + threadIdx.x] = sum;
  }
  mbarrier::cluster_sync();  // no block exits while copies or arrivals may still reach it
#else
  __trap();
#endif
}

struct RateCase {
  const char* form;
  int n;
  void (*kernel)(int, float*);
};

}  // namespace

int main(int argc, char** argv) {
  bench::Session session(argc, argv);
  if (session.prop.major != 9 || session.prop.minor != 0) {  // built for sm_90a only: nothing to measure here
    session.print(
        {}, fmt::format("\"skipped\": \"compute capability {}.{}, not 9.0\"", session.prop.major, session.prop.minor));
    return 0;
  }
  const int sms = session.prop.multiProcessorCount;
  float* sink = bench::device_alloc<float>(size_t(sms) * 256, 0);
  std::vector<bench::Result> results;

  // Part 1. Forms: ss_kk (A, B K-major: MLA's scores with either mapping), ss_mm (both MN-major: the output product
  // V^T · P^T with tokens as M), ss_km (A K-major, B MN-major), rs_k / rs_m (A from registers, B K- / MN-major: the
  // output product P · V with heads as M).
  const RateCase cases[] = {
      {"ss_kk", 32, wgmma_rate<32, false, 0, 0>},   {"ss_kk", 48, wgmma_rate<48, false, 0, 0>},
      {"ss_kk", 64, wgmma_rate<64, false, 0, 0>},   {"ss_kk", 96, wgmma_rate<96, false, 0, 0>},
      {"ss_kk", 128, wgmma_rate<128, false, 0, 0>}, {"ss_kk", 256, wgmma_rate<256, false, 0, 0>},
      {"ss_mm", 48, wgmma_rate<48, false, 1, 1>},   {"ss_mm", 96, wgmma_rate<96, false, 1, 1>},
      {"ss_mm", 256, wgmma_rate<256, false, 1, 1>}, {"ss_km", 64, wgmma_rate<64, false, 0, 1>},
      {"rs_k", 48, wgmma_rate<48, true, 0, 0>},     {"rs_k", 64, wgmma_rate<64, true, 0, 0>},
      {"rs_k", 96, wgmma_rate<96, true, 0, 0>},     {"rs_k", 256, wgmma_rate<256, true, 0, 0>},
      {"rs_m", 64, wgmma_rate<64, true, 0, 1>},     {"rs_m", 256, wgmma_rate<256, true, 0, 1>},
  };
  double best_flops_per_s = 0;
  for (const RateCase& c : cases) {
    CUDA_CHECK(cudaFuncSetAttribute(c.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kProbeSmemBytes));
    for (int warpgroups = 1; warpgroups <= 2; ++warpgroups) {
      // About 0.5 ms per launch at the full rate: 64·N·16·2 FLOPs per step.
      const double flops_per_group = 2.0 * 64 * c.n * 16 * kStepsPerGroup;
      const int groups = int(std::max(64.0, 4e14 * 0.5e-3 / (flops_per_group * warpgroups * sms)));
      const double us = bench::time_us(
          [&](int) {
            c.kernel<<<sms, 128 * warpgroups, kProbeSmemBytes>>>(groups, sink);
            CUDA_CHECK(cudaGetLastError());
          },
          session.repeats);
      bench::Result r;
      r.name =
          fmt::format("wgmma {} m64n{}k16, {} warpgroup{} per SM", c.form, c.n, warpgroups, warpgroups > 1 ? "s" : "");
      r.flops = flops_per_group * groups * warpgroups * sms;
      r.bytes = 1;  // no global traffic; time_over_roofline is against the compute bound
      r.median_us = us;
      r.cls = EfficiencyClass::gemm;
      r.roofline_us = session.roofline_us(r.flops, 0, r.cls, ComputeType::bf16);
      best_flops_per_s = std::max(best_flops_per_s, r.flops / (us * 1e-6));
      results.push_back(r);
    }
  }

  // Part 2: 1.2 GB of tiles (the latent cache of 1 M tokens), far beyond L2.
  const int64_t tiles = 16384;
  uint4* data = bench::device_alloc<uint4>(size_t(tiles) * kTileBytes / 16, 3);
  const int stream_smem = kTileSlots * kTileBytes;
  CUDA_CHECK(cudaFuncSetAttribute(stream_tiles, cudaFuncAttributeMaxDynamicSharedMemorySize, stream_smem));
  struct StreamCase {
    int blocks, sharing;
    const char* what;
  };
  const StreamCase streams[] = {{sms, 1, "every SM its own tiles"},
                                {sms - sms % 2, 2, "pairs of SMs the same tiles"},
                                {sms / 2, 1, "half the SMs their own tiles"}};
  for (const StreamCase& s : streams) {
    const double us = bench::time_us(
        [&](int) {
          stream_tiles<<<s.blocks, kStreamThreads, stream_smem>>>(data, tiles, s.sharing, sink);
          CUDA_CHECK(cudaGetLastError());
        },
        session.repeats);
    bench::Result r;
    r.name = fmt::format("tiles of 73728 B into shared memory, {} blocks, {} (HBM reads {:.4g} B/s)", s.blocks, s.what,
                         double(tiles) * kTileBytes / (us * 1e-6));
    r.bytes = double(tiles) * kTileBytes * s.sharing;  // delivered to the SMs
    r.median_us = us;
    r.cls = EfficiencyClass::elementwise;
    r.roofline_us = session.roofline_us(0, double(tiles) * kTileBytes, r.cls, ComputeType::bf16);
    results.push_back(r);
  }
  CUDA_CHECK(cudaFree(data));

  // Part 3: 66 clusters of 2 blocks, 20,000 rounds per launch; the time is per round.
  const int rounds = 20000, clusters = sms / 2;
  const double exchange_us = bench::time_us(
      [&](int) {
        exchange_scores<<<2 * clusters, kExchangeThreads>>>(rounds, sink);
        CUDA_CHECK(cudaGetLastError());
      },
      session.repeats);
  bench::Result x;
  x.name = fmt::format(
      "score tile of 24 KiB exchanged between the 2 blocks of each of {} clusters, per round "
      "(median_us is per launch of {} rounds)",
      clusters, rounds);
  x.bytes = 2.0 * clusters * rounds * kExchangeThreads * kExchangeFloats * 4;  // written to the other block
  x.median_us = exchange_us;
  x.cls = EfficiencyClass::elementwise;
  x.roofline_us = exchange_us;  // no model: a measured hand-off cost
  results.push_back(x);

  // Parts 4 and 5: one kernel, wgmma_with_copies; its counters and how it is timed.
  unsigned long long* copied = bench::device_alloc<unsigned long long>(size_t(sms), 0);
  unsigned long long* timing = bench::device_alloc<unsigned long long>(4 * size_t(sms), 0);
  const auto copied_bytes = [&] {
    std::vector<unsigned long long> host(static_cast<size_t>(sms), 0);
    CUDA_CHECK(cudaMemcpy(host.data(), copied, host.size() * sizeof(host[0]), cudaMemcpyDeviceToHost));
    double total = 0;
    for (const unsigned long long b : host) total += double(b);
    return total;
  };
  // The last launch's SM clock (MHz, mean over blocks) and duration (µs, the longest block's) of a role.
  struct RoleTiming {
    double mhz = 0, us = 0;
  };
  const auto role_timing = [&](int role) {
    std::vector<unsigned long long> host(4 * static_cast<size_t>(sms), 0);
    CUDA_CHECK(cudaMemcpy(host.data(), timing, host.size() * sizeof(host[0]), cudaMemcpyDeviceToHost));
    RoleTiming t;
    int blocks = 0;
    for (int block = 0; block < sms; ++block) {
      const double cycles = double(host[4 * block + 2 * role]), ns = double(host[4 * block + 2 * role + 1]);
      if (ns <= 0) continue;  // a block the launch did not have, or without this role
      t.mhz += 1e3 * cycles / ns;
      t.us = std::max(t.us, ns * 1e-3);
      ++blocks;
    }
    t.mhz /= std::max(1, blocks);
    return t;
  };
  const auto run = [&](auto kernel, int slots, int groups, CopySource from, long long max_copies, bool stop_at_done) {
    const int smem_bytes = copy_kernel_smem_bytes(slots);
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
    CUDA_CHECK(cudaMemset(timing, 0, 4 * size_t(sms) * sizeof(unsigned long long)));
    CUDA_CHECK(cudaMemset(copied, 0, size_t(sms) * sizeof(unsigned long long)));
    return bench::time_us(
        [&](int) {
          kernel<<<sms, kCopyKernelThreads, smem_bytes>>>(groups, from, max_copies, stop_at_done, sink, copied, timing);
          CUDA_CHECK(cudaGetLastError());
        },
        session.repeats);
  };
  const double flops_per_group = 2.0 * 64 * 48 * 16 * kStepsPerGroup;
  const auto row = [&](std::string name, double flops, double bytes, double us) {
    bench::Result r;
    r.name = std::move(name);
    r.flops = flops;
    r.bytes = bytes;
    r.median_us = us;
    // The wgmma rows against the tensor peak; the copies alone, as part 2's tiles, against the HBM bandwidth.
    r.cls = flops > 0 ? EfficiencyClass::gemm : EfficiencyClass::elementwise;
    r.roofline_us = session.roofline_us(flops, flops > 0 ? 0 : bytes, r.cls, ComputeType::bf16);
    results.push_back(r);
  };

  // Part 4: about 0.5 ms of m64n48k16 per launch; the copies alone for as many bytes as they move beside it.
  {
    constexpr int kSlots = 4;
    uint4* source = bench::device_alloc<uint4>(kCopySourceBytes / 16, 5);
    const CopySource from{source, kCopySourceBytes / kCopyBytes, 37, 1};
    const int groups = int(4e14 * 0.5e-3 / (flops_per_group * 2 * sms));
    const double wgmma_flops = flops_per_group * groups * 2 * sms;
    const double alone_us = run(wgmma_with_copies<true, false, kSlots>, kSlots, groups, from, 0, true);
    const double both_us = run(wgmma_with_copies<true, true, kSlots>, kSlots, groups, from, 1LL << 40, true);
    const double both_bytes = copied_bytes();
    const long long copies_per_sm = (long long)(both_bytes / kCopyBytes / sms) + 1;
    const double copies_us = run(wgmma_with_copies<false, true, kSlots>, kSlots, groups, from, copies_per_sm, true);
    const double copies_bytes = copied_bytes();
    row(fmt::format("wgmma ss_kk m64n48k16, 2 warpgroups per SM, no copies ({:.4g} FLOP/s)",
                    wgmma_flops / (alone_us * 1e-6)),
        wgmma_flops, 1, alone_us);
    row(fmt::format("wgmma ss_kk m64n48k16, 2 warpgroups per SM, {} bulk copies of {} B in flight per SM into the same "
                    "shared memory ({:.4g} FLOP/s, copies {:.4g} B/s)",
                    kSlots, kCopyBytes, wgmma_flops / (both_us * 1e-6), both_bytes / (both_us * 1e-6)),
        wgmma_flops, both_bytes, both_us);
    row(fmt::format("{} bulk copies of {} B in flight per SM into shared memory, no wgmma ({:.4g} B/s)", kSlots,
                    kCopyBytes, copies_bytes / (copies_us * 1e-6)),
        0, copies_bytes, copies_us);
    CUDA_CHECK(cudaFree(source));
  }

  // Part 5: the ridge. MLA's absorbed decode of 96 heads at batch 1 and 1 M tokens does F = 2 · 96 · 2^20 · (576 +
  // 512) FLOPs on B = 2^20 · 576 · 2 bytes of latent cache, each tile delivered to both blocks of a cluster. Here
  // every SM does its share of F as part 4's m64n48k16 loop and receives its share of 2B by bulk copies from HBM, with
  // nothing tying the two together: how close to max(alone) the two run together when they share the board's power
  // limit, the least any kernel doing that work needs. Each form runs the wgmma alone, the copies alone and both.
  const double ridge_flops = 2.0 * 96 * double(1 << 20) * (576 + 512), ridge_bytes = 2.0 * double(1 << 20) * 576;
  const std::string ridge_work = "MLA decode's work at batch 1 and 1 M tokens";
  // time_form(kWgmma, kCopies) times one launch configuration of a form (std::bool_constant arguments).
  const auto ridge_rows = [&](const std::string& form, double flops, double hbm_bytes, const auto& time_form) {
    const double wgmma_us = time_form(std::true_type{}, std::false_type{});
    const RoleTiming wgmma_alone = role_timing(0);
    const double copies_us = time_form(std::false_type{}, std::true_type{});
    const RoleTiming copies_alone = role_timing(1);
    const double delivered = copied_bytes();
    const double both_us = time_form(std::true_type{}, std::true_type{});
    const RoleTiming wgmma_both = role_timing(0), copies_both = role_timing(1);
    const std::string what = fmt::format("ridge, {}, {}", ridge_work, form);
    row(fmt::format("{}: wgmma alone (SM clock {:.0f} MHz, {:.4g} FLOP/s)", what, wgmma_alone.mhz,
                    flops / (wgmma_us * 1e-6)),
        flops, 1, wgmma_us);
    row(fmt::format("{}: copies alone, {:.4g} B delivered (SM clock {:.0f} MHz, HBM reads {:.4g} B/s)", what, delivered,
                    copies_alone.mhz, hbm_bytes / (copies_us * 1e-6)),
        0, hbm_bytes, copies_us);
    row(fmt::format("{}: both ({:.3f}x the slower alone; wgmma done at {:.1f} us at {:.0f} MHz, copies at {:.1f} us at "
                    "{:.0f} MHz)",
                    what, both_us / std::max(wgmma_us, copies_us), wgmma_both.us, wgmma_both.mhz, copies_both.us,
                    copies_both.mhz),
        flops, hbm_bytes, both_us);
  };
  // Every SM its own copies, two SMs reading each region (so HBM is read B bytes and the L2 sends 2B), 8 or 11 in
  // flight per SM (11: the most that fit beside the operands).
  const auto ridge_pairs = [&](auto slots) {
    constexpr int kSlots = decltype(slots)::value;
    const int groups = int(std::lround(ridge_flops / (flops_per_group * 2 * sms)));
    const long long copies_per_sm = std::llround(2 * ridge_bytes / sms / kCopyBytes);
    const long long source_copies = (sms / 2) * copies_per_sm;
    uint4* source = bench::device_alloc<uint4>(size_t(source_copies) * kCopyBytes / 16, 5);
    const CopySource from{source, source_copies, copies_per_sm, 2};
    ridge_rows(fmt::format("pairs of SMs reading the same copies, {} of {} B in flight per SM", kSlots, kCopyBytes),
               flops_per_group * groups * 2 * sms, double(source_copies) * kCopyBytes, [&](auto wgmma, auto copies) {
                 return run(wgmma_with_copies<decltype(wgmma)::value, decltype(copies)::value, kSlots>, kSlots, groups,
                            from, copies_per_sm, false);
               });
    CUDA_CHECK(cudaFree(source));
  };
  ridge_pairs(std::integral_constant<int, 8>{});
  ridge_pairs(std::integral_constant<int, 11>{});
  // Each copy multicast to both blocks of a cluster (as the MLA decode's tiles), on as many clusters of 2 as the
  // device runs at once, 8 or 10 copies in flight per cluster, without and with each copy asked of the L2 16 copies
  // (256 KiB) ahead.
  const auto ridge_multicast = [&](auto slots, int prefetch_ahead) {
    constexpr int kSlots = decltype(slots)::value;
    const int smem_bytes = copy_kernel_smem_bytes(kSlots);
    int clusters = 0;
    {
      kernels::ClusterLaunch probe(dim3(sms), dim3(kCopyKernelThreads), 2, nullptr);
      probe.config.dynamicSmemBytes = smem_bytes;
      CUDA_CHECK(cudaFuncSetAttribute(wgmma_with_multicast_copies<true, true, kSlots>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
      CUDA_CHECK(
          cudaOccupancyMaxActiveClusters(&clusters, wgmma_with_multicast_copies<true, true, kSlots>, &probe.config));
    }
    clusters = std::min(clusters, sms / 2);
    const int blocks = 2 * clusters;
    const int groups = int(std::lround(ridge_flops / (flops_per_group * 2 * blocks)));
    const long long pair_copies = std::llround(ridge_bytes / clusters / kCopyBytes);
    uint4* source = bench::device_alloc<uint4>(size_t(clusters) * size_t(pair_copies) * kCopyBytes / 16, 5);
    const auto time_form = [&](auto wgmma, auto copies) {
      const auto kernel = wgmma_with_multicast_copies<decltype(wgmma)::value, decltype(copies)::value, kSlots>;
      CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
      CUDA_CHECK(cudaMemset(timing, 0, 4 * size_t(sms) * sizeof(unsigned long long)));
      CUDA_CHECK(cudaMemset(copied, 0, size_t(sms) * sizeof(unsigned long long)));
      return bench::time_us(
          [&](int) {
            kernels::ClusterLaunch launch(dim3(blocks), dim3(kCopyKernelThreads), 2, nullptr);
            launch.config.dynamicSmemBytes = smem_bytes;
            CUDA_CHECK(cudaLaunchKernelEx(&launch.config, kernel, groups, static_cast<const uint4*>(source),
                                          pair_copies, prefetch_ahead, sink, copied, timing));
          },
          session.repeats);
    };
    ridge_rows(fmt::format("{} clusters of 2, multicast, {} of {} B in flight per cluster, L2 prefetch {} copies ahead",
                           clusters, kSlots, kCopyBytes, prefetch_ahead),
               flops_per_group * groups * 2 * blocks, double(clusters) * double(pair_copies) * kCopyBytes, time_form);
    CUDA_CHECK(cudaFree(source));
  };
  for (const int prefetch_ahead : {0, 16}) {
    ridge_multicast(std::integral_constant<int, 8>{}, prefetch_ahead);
    ridge_multicast(std::integral_constant<int, 10>{}, prefetch_ahead);
  }
  CUDA_CHECK(cudaFree(copied));
  CUDA_CHECK(cudaFree(timing));
  CUDA_CHECK(cudaFree(sink));
  session.print(results, fmt::format("\"best_wgmma_bf16_flops_per_s\": {:.4g}", best_flops_per_s));
  return 0;
}
