// read_floor: a kernel that only reads — the measured floor of memory-bound ops (bench/gpu's mla_bench and moe_bench
// time it beside them). It reads `chunks` chunks of `chunk_bytes` each, chunk c at base + index[c] · chunk_bytes (a
// paged cache's pages through its page table; index null: chunk c at c), with streaming 16-byte loads, 4 in flight per
// thread, one full wave of blocks each taking an equal contiguous share of the vectors, and XORs every 32-bit word it
// read into sink[block] (so the loads are kept, and a test can check that each word was read exactly once). Beside an
// op's time, its time says how much of the gap to bytes / copy bandwidth any kernel reading those bytes at that size
// pays too: a launch's ramp and drain, which a 1 GiB copy hides.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace k3::bench {

// Blocks of one full wave of the kernel on the current device: the words `sink` must hold.
int read_floor_blocks();

// Reads as the header says and XORs into sink[0 … read_floor_blocks()) (which the caller zeroes first; the result is
// the XOR of those words). chunk_bytes a multiple of 16, base 16-byte aligned, chunks × chunk_bytes / 16 < 2^32, index
// entries ≥ 0. cudaErrorInvalidValue otherwise. Capturable in a CUDA graph.
cudaError_t read_floor(const void* base, const int32_t* index, int64_t chunk_bytes, int64_t chunks, uint32_t* sink,
                       cudaStream_t stream);

}  // namespace k3::bench
