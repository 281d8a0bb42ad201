// What the MXFP4 grouped op cases (mxfp4_cases.cpp) share with the plain MXFP4 tests beside them
// (tests/kernels/mxfp4_gpu_test.cpp): expert banks quantised with weights::mxfp4_quantize and decoded with
// weights::mxfp4_dequantize (or repacked into the tiled layout), routings built on the CPU in the device bucketing's
// contract, the fp64 reference y = x Wᵀ per slot, device copies, and the check of one algorithm on a case.
#pragma once

#include "engine/reference/tensor.h"
#include "kernels/mxfp4_grouped.h"
#include "kernels/mxfp4_tiled.h"
#include "tests/kernels/op_cases/op_case.h"

#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace k3::gpu_test::mxfp4 {

// fp32 accumulation (tensor-core fp32 sums) against fp64.
inline constexpr double kF32Tolerance = 1e-5;

// All experts of one projection as the checkpoint stacks them (or in the tiled layout), and each expert's decoded
// weights.
struct ExpertBank {
  int experts = 0;
  int64_t out = 0, in = 0;
  std::vector<uint8_t> packed;            // [experts, out, in/2]
  std::vector<uint8_t> scales;            // [experts, out, in/32]
  std::vector<ref::MatrixD> dequantized;  // [out, in] per expert
  kernels::Mxfp4Layout layout = kernels::Mxfp4Layout::canonical;
};
// The same bank in the tiled layout (kernels/mxfp4_tiled.h), repacked on the host.
ExpertBank tiled_bank(const ExpertBank& bank);
void decode_bank(ExpertBank& bank);
// Standard normal weights times a power of two per 32-element block (2^-6..2^6), so the scale bytes vary and some
// exceed 128 (the kernels' two-multiply path).
ExpertBank random_bank(int experts, int64_t out, int64_t in, std::mt19937& rng);

// The device bucketing's contract, built on the CPU from (token, expert) pairs in (token, choice) order: slots
// expert-major (within an expert in pair order), offsets [experts + 1], active ids ascending.
struct HostRouting {
  std::vector<int32_t> offsets, slot_token, active;
  int32_t active_count = 0;
  int slots() const { return static_cast<int>(slot_token.size()); }
};
HostRouting bucket(const std::vector<std::pair<int, int>>& token_expert, int experts);
// Expert e receives counts[e] slots, from distinct random tokens of [0, x_rows).
HostRouting routing_with_counts(const std::vector<int>& counts, int x_rows, std::mt19937& rng);
// A prefill-like routing: each token chooses top_k distinct experts with odds 1 / (1 + e).
HostRouting prefill_routing(int experts, int tokens, int top_k, std::mt19937& rng);
// y[s] = x[slot_token[s]] · W_eᵀ for every slot, in fp64.
ref::MatrixD reference(const ExpertBank& bank, const HostRouting& r, const ref::Matrix& x);

struct DeviceBank {
  DeviceBuffer<uint8_t> packed, scales;
  kernels::Mxfp4ExpertWeights view;
  explicit DeviceBank(const ExpertBank& b);
};

struct DeviceRouting {
  DeviceBuffer<int32_t> offsets, slot_token, active, count;
  int max_slots;
  explicit DeviceRouting(const HostRouting& h);
  void upload(const HostRouting& h);
  kernels::ExpertRouting view(int experts);
};

cudaError_t run(const kernels::Mxfp4ExpertWeights& w, const kernels::ExpertRouting& r, const __nv_bfloat16* x,
                int64_t x_stride, int64_t x_rows, float* y, int64_t y_stride, kernels::Mxfp4GroupedAlgorithm a,
                cudaStream_t stream = nullptr);
cudaError_t run(const kernels::Mxfp4ExpertWeights& w, const kernels::ExpertRouting& r, const __nv_bfloat16* x,
                int64_t x_stride, int64_t x_rows, __nv_bfloat16* y, int64_t y_stride, kernels::Mxfp4GroupedAlgorithm a,
                cudaStream_t stream = nullptr);
ref::Matrix download(const DeviceBuffer<float>& y, int64_t rows, int64_t stride);
ref::Matrix download(const DeviceBuffer<__nv_bfloat16>& y, int64_t rows, int64_t stride);
const char* name(kernels::Mxfp4GroupedAlgorithm a);

// `algorithm` on the checkpoint's layout and, where the shape allows it, on a tiled copy, with both output types on
// poisoned y (row stride out + 5): the normalised error, and the padding columns left poisoned.
void check_grouped(const ExpertBank& bank, const HostRouting& routing, const ref::Matrix& x, int64_t x_stride,
                   kernels::Mxfp4GroupedAlgorithm algorithm, Checks& gpu);

}  // namespace k3::gpu_test::mxfp4
