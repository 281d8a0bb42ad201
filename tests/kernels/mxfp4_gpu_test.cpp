// MXFP4 grouped products beside their op cases (tests/kernels/op_cases/mxfp4_cases.cpp: every algorithm and layout
// against the fp64 reference, every E2M1 code exactly, NaN scales): the test routing's bucketing contract, a CUDA
// graph replaying a new routing, the algorithm choice, argument rejection; the dequantise-then-cuBLASLt path's bf16
// decode bit for bit against the CPU's; the tiled layout's decode table, host and device repacks, its bf16 decode,
// its GEMV's block shape and that GEMV beyond one wave of whole-SM blocks (sized by the device's SM count).
#include "engine/runtime/gemm_cublaslt.h"
#include "engine/weights/mx_format.h"
#include "gpu_harness.h"
#include "kernels/mxfp4_grouped.h"
#include "kernels/mxfp4_grouped_dequantized.h"
#include "kernels/mxfp4_tiled.h"
#include "tests/kernels/op_cases/mxfp4_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace k3::gpu_test {
namespace {

using kernels::Mxfp4GroupedAlgorithm;
using namespace mxfp4;

TEST(GpuMxfp4Grouped, BucketingContractOfTheTestRouting) {
  // Tokens 0..2 choose experts (4, 1), (1, 2), (4, 0) of 5.
  const HostRouting r = bucket({{0, 4}, {0, 1}, {1, 1}, {1, 2}, {2, 4}, {2, 0}}, 5);
  EXPECT_EQ(r.offsets, (std::vector<int32_t>{0, 1, 3, 4, 4, 6}));
  EXPECT_EQ(r.slot_token, (std::vector<int32_t>{2, 0, 1, 1, 0, 2}));
  EXPECT_EQ(r.active, (std::vector<int32_t>{0, 1, 2, 4, -1}));
  EXPECT_EQ(r.active_count, 4);
}

// The launch depends only on the host bounds: a graph captured with one routing replays another (the wgmma GEMM on
// the tiled layout).
TEST(GpuMxfp4Grouped, GraphReplaysANewRouting) {
  std::mt19937 rng(20261213);
  const ExpertBank bank = random_bank(7, 48, 128, rng);
  const HostRouting first = routing_with_counts({5, 0, 3, 4, 0, 0, 0}, 20, rng);
  const HostRouting second = routing_with_counts({0, 1, 0, 2, 6, 1, 2}, 20, rng);  // same 12 slots
  const ref::Matrix x = round_to_bf16(random_matrix(20, 128, rng));
  const ref::MatrixD expected = reference(bank, second, x);
  K3_REQUIRE_GPU();
  DeviceBank dbank(bank);
  DeviceRouting droute(first);
  DeviceBuffer<__nv_bfloat16> dx(to_bf16(x));
  const ExpertBank tiled = tiled_bank(bank);
  DeviceBank dtiled(tiled);
  for (const Mxfp4GroupedAlgorithm a :
       {Mxfp4GroupedAlgorithm::gemv, Mxfp4GroupedAlgorithm::gemm_pipelined, Mxfp4GroupedAlgorithm::gemm_wgmma}) {
    const bool on_tiled = a == Mxfp4GroupedAlgorithm::gemm_wgmma;
    if (on_tiled && !kernels::mxfp4_grouped_gemm_wgmma_supported(dtiled.view)) continue;
    const kernels::Mxfp4ExpertWeights& weights = on_tiled ? dtiled.view : dbank.view;
    droute.upload(first);
    DeviceBuffer<float> dy(size_t(second.slots() * bank.out));
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreate(&stream));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    CUDA_CHECK(run(weights, droute.view(bank.experts), dx.get(), 128, 20, dy.get(), bank.out, a, stream));
    CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    droute.upload(second);
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const ref::Matrix got = download(dy, second.slots(), bank.out);
    EXPECT_LE(normalized_error(got, expected.cast<float>()), kF32Tolerance) << name(a);
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaStreamDestroy(stream));
  }
}

// The GEMV at decode, a GEMM at prefill.
TEST(GpuMxfp4Grouped, ChoosesGemvAtDecodeAndGemmAtPrefill) {
  alignas(16) static uint8_t packed[16], scales[32];
  const kernels::Mxfp4ExpertWeights k3_w1{packed, scales, 896, 3072, 3584};
  const auto bounds = [](int tokens) {
    return kernels::ExpertRouting{nullptr, nullptr, nullptr, nullptr, tokens * 16, std::min(tokens * 16, 896)};
  };
  for (const int tokens : {1, 8, 16, 64, 256}) {
    EXPECT_EQ(kernels::mxfp4_grouped_algorithm(k3_w1, bounds(tokens)), Mxfp4GroupedAlgorithm::gemv) << tokens;
  }
  for (const int tokens : {512, 8192}) {
    EXPECT_EQ(kernels::mxfp4_grouped_algorithm(k3_w1, bounds(tokens)), Mxfp4GroupedAlgorithm::gemm_pipelined) << tokens;
  }
  // Tiled weights: the wgmma GEMM from 104 slots per expert on compute capability 9.0 (8192 tokens: 146), the
  // pipelined one below it (4096: 73) and elsewhere.
  kernels::Mxfp4ExpertWeights tiled_w1 = k3_w1;
  tiled_w1.layout = kernels::Mxfp4Layout::tiled16;
  int device = 0, major = 0, minor = 0;
  const bool hopper = cudaGetDevice(&device) == cudaSuccess &&
                      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
                      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess &&
                      major == 9 && minor == 0;
  EXPECT_EQ(kernels::mxfp4_grouped_gemm_wgmma_supported(tiled_w1), hopper);
  EXPECT_FALSE(kernels::mxfp4_grouped_gemm_wgmma_supported(k3_w1));
  EXPECT_EQ(kernels::mxfp4_grouped_algorithm(tiled_w1, bounds(8192)),
            hopper ? Mxfp4GroupedAlgorithm::gemm_wgmma : Mxfp4GroupedAlgorithm::gemm_pipelined);
  EXPECT_EQ(kernels::mxfp4_grouped_algorithm(tiled_w1, bounds(64)), Mxfp4GroupedAlgorithm::gemv);
  EXPECT_EQ(kernels::mxfp4_grouped_algorithm(tiled_w1, bounds(4096)), Mxfp4GroupedAlgorithm::gemm_pipelined);
}

// Argument checks happen on the host before any launch, so they run without a GPU too.
TEST(GpuMxfp4Grouped, RejectsBadArguments) {
  alignas(16) static uint8_t packed[4096], scales[256];
  alignas(16) static __nv_bfloat16 x[1024];
  alignas(16) static float y[1024];
  static int32_t offsets[3], slot_token[4], active[2], count[1];
  const kernels::Mxfp4ExpertWeights good_w{packed, scales, 2, 16, 64};
  const kernels::ExpertRouting good_r{offsets, slot_token, active, count, 4, 2};
  const auto call = [&](kernels::Mxfp4ExpertWeights w, kernels::ExpertRouting r, const __nv_bfloat16* xp,
                        int64_t x_stride, int64_t x_rows, int64_t y_stride,
                        Mxfp4GroupedAlgorithm a = Mxfp4GroupedAlgorithm::automatic) {
    return kernels::mxfp4_grouped_bf16_to_f32(w, r, xp, x_stride, x_rows, y, y_stride, nullptr, a);
  };
  auto w = good_w;
  w.in_features = 48;  // not a multiple of 32
  EXPECT_EQ(call(w, good_r, x, 64, 4, 16), cudaErrorInvalidValue);
  w = good_w;
  w.out_features = 24;  // not a multiple of 16
  EXPECT_EQ(call(w, good_r, x, 64, 4, 24), cudaErrorInvalidValue);
  w = good_w;
  w.packed = packed + 1;  // not 16-byte aligned
  EXPECT_EQ(call(w, good_r, x, 64, 4, 16), cudaErrorInvalidValue);
  w = good_w;
  w.experts = 0;
  EXPECT_EQ(call(w, good_r, x, 64, 4, 16), cudaErrorInvalidValue);
  w = good_w;
  w.scales = nullptr;
  EXPECT_EQ(call(w, good_r, x, 64, 4, 16), cudaErrorInvalidValue);
  auto r = good_r;
  r.slot_token = nullptr;
  EXPECT_EQ(call(good_w, r, x, 64, 4, 16), cudaErrorInvalidValue);
  r = good_r;
  r.max_slots = -1;
  EXPECT_EQ(call(good_w, r, x, 64, 4, 16), cudaErrorInvalidValue);
  EXPECT_EQ(call(good_w, good_r, x + 1, 64, 4, 16), cudaErrorInvalidValue);  // x not 16-byte aligned
  EXPECT_EQ(call(good_w, good_r, x, 56, 4, 16), cudaErrorInvalidValue);      // x stride below in
  EXPECT_EQ(call(good_w, good_r, x, 68, 4, 16), cudaErrorInvalidValue);      // x stride not a multiple of 8
  EXPECT_EQ(call(good_w, good_r, x, 64, 0, 16), cudaErrorInvalidValue);      // no x rows
  EXPECT_EQ(call(good_w, good_r, x, 64, 4, 15), cudaErrorInvalidValue);      // y stride below out
  EXPECT_EQ(call(good_w, good_r, nullptr, 64, 4, 16), cudaErrorInvalidValue);
  // Not an enumerator.
  EXPECT_EQ(call(good_w, good_r, x, 64, 4, 16, static_cast<Mxfp4GroupedAlgorithm>(99)), cudaErrorInvalidValue);
  EXPECT_EQ(call(good_w, good_r, x, 64, 4, 16, static_cast<Mxfp4GroupedAlgorithm>(-1)), cudaErrorInvalidValue);
  r = good_r;
  r.max_slots = 2 * kernels::kMxfp4GroupedGemmMaxActiveExperts + 2;
  r.max_active_experts = kernels::kMxfp4GroupedGemmMaxActiveExperts + 1;  // the GEMM's prefix would not fit
  w = good_w;
  w.experts = kernels::kMxfp4GroupedGemmMaxActiveExperts + 1;
  EXPECT_EQ(call(w, r, x, 64, 4, 16, Mxfp4GroupedAlgorithm::gemm_pipelined), cudaErrorInvalidValue);
  r = good_r;
  r.max_slots = 0;  // nothing routed: nothing to do, for every algorithm
  for (const Mxfp4GroupedAlgorithm a :
       {Mxfp4GroupedAlgorithm::gemv, Mxfp4GroupedAlgorithm::gemm_pipelined, Mxfp4GroupedAlgorithm::automatic}) {
    EXPECT_EQ(call(good_w, r, nullptr, 0, 0, 0, a), cudaSuccess) << name(a);
  }
}

// The bf16 decode of every expert against the CPU's, bit for bit: random blocks, all 16 codes in one row, and scale
// bytes 0, 1, 254 (6 · 2^127 overflows to ±Inf) and 0xFF (NaN); out 40 rows (not a multiple of 16), in 17 blocks,
// out row stride in + 8 with the padding left poisoned.
TEST(GpuMxfp4Dequantized, DecodesEachExpertBitForBit) {
  std::mt19937 rng(20261217);
  ExpertBank bank = random_bank(3, 40, 544, rng);
  const int64_t blocks = bank.in / 32, n = bank.out * bank.in;
  for (int code = 0; code < 16; ++code) {  // expert 1, row 2: codes 0..15 twice
    const auto byte = static_cast<uint8_t>(code | (((code + 5) % 16) << 4));
    bank.packed[size_t(n / 2 + 2 * bank.in / 2 + code)] = byte;
  }
  const std::pair<int64_t, uint8_t> scale_cases[] = {{0, 0},
                                                     {1, 1},
                                                     {blocks + 3, 254},
                                                     {n / 32 + 2 * blocks, 254},
                                                     {n / 32 + 2 * blocks + 1, weights::kE8m0Nan},
                                                     {2 * n / 32 + 5, weights::kE8m0Nan}};
  for (const auto& [index, byte] : scale_cases) bank.scales[size_t(index)] = byte;
  decode_bank(bank);
  K3_REQUIRE_GPU();
  DeviceBank dbank(bank);
  const int64_t stride = bank.in + 8;
  int infinities = 0, nans = 0;
  for (int e = 0; e < bank.experts; ++e) {
    DeviceBuffer<__nv_bfloat16> out(size_t(bank.out * stride));
    CUDA_CHECK(kernels::mxfp4_dequantize_expert_bf16(dbank.view, e, out.get(), stride, nullptr));
    const std::vector<__nv_bfloat16> got = out.download();
    int mismatches = 0;
    for (int64_t o = 0; o < bank.out; ++o) {
      for (int64_t i = 0; i < stride; ++i) {
        const float value = __bfloat162float(got[size_t(o * stride + i)]);
        if (i >= bank.in) {
          if (!std::isnan(value))
            ADD_FAILURE() << "expert " << e << " row " << o << ": padding column " << i << " written";
          continue;
        }
        const auto want = static_cast<float>(bank.dequantized[size_t(e)](o, i));
        infinities += std::isinf(want) ? 1 : 0;
        nans += std::isnan(want) ? 1 : 0;
        const bool same = std::isnan(want) ? std::isnan(value) : value == want;
        if (!same && ++mismatches <= 5) {
          ADD_FAILURE() << "expert " << e << " row " << o << " column " << i << ": " << value << ", expected " << want;
        }
      }
    }
    EXPECT_EQ(mismatches, 0) << "expert " << e;
  }
  EXPECT_GT(infinities, 0);  // the cases above reached the overflow and the NaN scale
  EXPECT_EQ(nans, 2 * 32);   // the two NaN-scale blocks
}

TEST(GpuMxfp4Dequantized, RejectsBadArguments) {
  alignas(16) static uint8_t packed[4096], scales[256];
  alignas(16) static __nv_bfloat16 out[4096];
  const kernels::Mxfp4ExpertWeights w{packed, scales, 2, 16, 64};
  EXPECT_EQ(kernels::mxfp4_dequantize_expert_bf16(w, 2, out, 64, nullptr), cudaErrorInvalidValue);  // no expert 2
  EXPECT_EQ(kernels::mxfp4_dequantize_expert_bf16(w, -1, out, 64, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::mxfp4_dequantize_expert_bf16(w, 0, out, 60, nullptr), cudaErrorInvalidValue);  // stride < in
  EXPECT_EQ(kernels::mxfp4_dequantize_expert_bf16(w, 0, out, 68, nullptr), cudaErrorInvalidValue);  // not 8k
  EXPECT_EQ(kernels::mxfp4_dequantize_expert_bf16(w, 0, out + 1, 64, nullptr), cudaErrorInvalidValue);
  auto bad = w;
  bad.in_features = 48;
  EXPECT_EQ(kernels::mxfp4_dequantize_expert_bf16(bad, 0, out, 64, nullptr), cudaErrorInvalidValue);
  K3_REQUIRE_GPU();  // the grouped path's runner needs a device
  runtime::GemmRunner gemm;
  alignas(16) static __nv_bfloat16 x[4096], scratch[4096];
  alignas(16) static float y[4096];
  const int32_t offsets[3] = {0, 2, 5}, decreasing[3] = {0, 3, 2};
  const auto call = [&](const kernels::Mxfp4ExpertWeights& ww, const int32_t* off, int64_t x_stride, int64_t y_stride,
                        int64_t scratch_elements) {
    return kernels::mxfp4_grouped_dequantized_bf16_to_f32(gemm, ww, off, x, x_stride, y, y_stride, scratch,
                                                          scratch_elements, nullptr);
  };
  EXPECT_EQ(call(w, decreasing, 64, 16, 1024), cudaErrorInvalidValue);
  EXPECT_EQ(call(w, nullptr, 64, 16, 1024), cudaErrorInvalidValue);
  EXPECT_EQ(call(w, offsets, 64, 16, 1023), cudaErrorInvalidValue);  // scratch below out · in
  EXPECT_EQ(call(w, offsets, 60, 16, 1024), cudaErrorInvalidValue);
  EXPECT_EQ(call(w, offsets, 64, 14, 1024), cudaErrorInvalidValue);
  bad = w;
  bad.out_features = 12;  // not a multiple of 8
  EXPECT_EQ(call(bad, offsets, 64, 16, 1024), cudaErrorInvalidValue);
  const int32_t none[3] = {0, 0, 0};  // nothing routed: nothing to do
  EXPECT_EQ(call(w, none, 64, 16, 1024), cudaSuccess);
}

// ---- The tiled layout (kernels/mxfp4_tiled.h) ----------------------------------------------------------------
// Its decode table: each output's pieces give exactly the 8 bits of a bf16 pair (sign, e1, e0, m of both halves)
// once, and the pieces' sources, over the 8 outputs, are the 64 bits of a lane's block once each.
TEST(Mxfp4Tiled, DecodeTableTakesEveryBitOnce) {
  std::vector<int> taken(64, 0);
  for (int o = 0; o < 8; ++o) {
    uint32_t covered = 0;
    for (const kernels::TiledPiece& piece : kernels::kTiledOutputs[o].piece) {
      EXPECT_EQ(covered & piece.mask, 0u) << "output " << o << ": pieces overlap";
      covered |= piece.mask;
      for (int i = 0; i < 32; ++i)
        if (piece.mask >> i & 1u) ++taken[size_t((i + piece.rotation) % 64)];
    }
    EXPECT_EQ(covered, kernels::kTiledAllBits) << "output " << o;
  }
  for (int b = 0; b < 64; ++b) EXPECT_EQ(taken[size_t(b)], 1) << "source bit " << b;
}

// The host repack, decoded the way the tiled GEMV decodes it (the pieces, then the bf16 bits as v · 2^-126 times
// 2^(scale − 127)), gives every weight of the checkpoint's decode, at its row and element.
TEST(Mxfp4Tiled, RepackDecodesToTheCheckpointWeights) {
  std::mt19937 rng(20261218);
  const ExpertBank bank = random_bank(2, 32, 192, rng);
  const ExpertBank tiled = tiled_bank(bank);
  const int64_t pairs = bank.in / 64, per_expert = bank.out * bank.in / 2, scales_per_expert = bank.out * bank.in / 32;
  const auto rotate = [](uint32_t w0, uint32_t w1, int r) {
    const uint64_t v = uint64_t(w1) << 32 | w0;
    return uint32_t(r == 0 ? v : (v >> r | v << (64 - r)));
  };
  int64_t checked = 0, mismatches = 0;
  for (int e = 0; e < bank.experts; ++e)
    for (int64_t tile = 0; tile < bank.out / 16; ++tile)
      for (int64_t pair = 0; pair < pairs; ++pair)
        for (int lane = 0; lane < 32; ++lane)
          for (int b = 0; b < 2; ++b) {
            const int g = lane / 4, t = lane % 4;
            const int64_t unit = tile * pairs + pair, block = 2 * pair + b;
            const uint8_t* bytes = tiled.packed.data() + e * per_expert + unit * 512 + lane * 16 + 8 * b;
            const uint8_t* scale = tiled.scales.data() + e * scales_per_expert + unit * 32 + 4 * g;
            uint32_t w[2] = {0, 0};
            for (int k = 0; k < 8; ++k) w[k / 4] |= uint32_t(bytes[k]) << (8 * (k % 4));
            for (int o = 0; o < 8; ++o) {
              uint32_t bits = 0;
              for (const kernels::TiledPiece& piece : kernels::kTiledOutputs[o].piece)
                bits |= rotate(w[0], w[1], piece.rotation) & piece.mask;
              const int64_t row = tile * 16 + g + (o >= 4 ? 8 : 0);
              const int scale_byte = scale[(o >= 4 ? 2 : 0) + b];
              for (int half = 0; half < 2; ++half) {
                const uint32_t f32 = (half == 0 ? bits & 0xFFFFu : bits >> 16) << 16;
                float v = 0.0f;
                std::memcpy(&v, &f32, 4);
                const double got = std::ldexp(double(v), 126 + scale_byte - 127);
                const int64_t column = block * 32 + 8 * t + 2 * (o % 4) + half;
                const double want = bank.dequantized[size_t(e)](row, column);
                ++checked;
                if (got != want && ++mismatches <= 5)
                  ADD_FAILURE() << "expert " << e << " row " << row << " column " << column << ": " << got
                                << ", expected " << want;
              }
            }
          }
  EXPECT_EQ(checked, bank.experts * bank.out * bank.in);
  EXPECT_EQ(mismatches, 0);
}

// The tiled layout's bf16 decode (the dequantised prefill path) against the CPU's, bit for bit, with scale bytes 254
// (6 · 2^127 overflows to ±Inf) and 0xFF (NaN) among random ones; out row stride in + 8, the padding poisoned.
TEST(GpuMxfp4Tiled, DequantisesEachExpertBitForBit) {
  std::mt19937 rng(20261221);
  ExpertBank bank = random_bank(2, 32, 448, rng);
  const int64_t blocks = bank.in / 32;
  bank.scales[size_t(3 * blocks + 5)] = 254;
  bank.scales[size_t(bank.out * blocks + 17 * blocks + 2)] = weights::kE8m0Nan;
  decode_bank(bank);
  const ExpertBank tiled = tiled_bank(bank);
  K3_REQUIRE_GPU();
  DeviceBank dbank(tiled);
  const int64_t stride = bank.in + 8;
  for (int e = 0; e < bank.experts; ++e) {
    DeviceBuffer<__nv_bfloat16> out(size_t(bank.out * stride));
    CUDA_CHECK(kernels::mxfp4_dequantize_expert_bf16(dbank.view, e, out.get(), stride, nullptr));
    const std::vector<__nv_bfloat16> got = out.download();
    int mismatches = 0;
    for (int64_t o = 0; o < bank.out; ++o)
      for (int64_t i = 0; i < stride; ++i) {
        const float value = __bfloat162float(got[size_t(o * stride + i)]);
        const bool same = i >= bank.in ? std::isnan(value) : [&] {
          const auto want = static_cast<float>(bank.dequantized[size_t(e)](o, i));
          return std::isnan(want) ? std::isnan(value) : value == want;
        }();
        if (!same && ++mismatches <= 5)
          ADD_FAILURE() << "expert " << e << " row " << o << " column " << i << ": " << value;
      }
    EXPECT_EQ(mismatches, 0) << "expert " << e;
  }
}

// The block shape of the tiled GEMV: one 28-warp block per SM where the tiles fit one wave of them (w2 at T = 1 on an
// H200: 16 experts × 224 tiles ≤ 28 × 132), else 4-warp blocks (w13 at T = 1: 16 × 384; w2 at T = 8: 128 × 224).
TEST(Mxfp4Tiled, GemvTakesWholeSmBlocksWhereTheTilesFitOneWave) {
  EXPECT_EQ(kernels::mxfp4_gemv_tiled_block_warps(16, 3584, 132), 28);
  EXPECT_EQ(kernels::mxfp4_gemv_tiled_block_warps(16, 6144, 132), 4);
  EXPECT_EQ(kernels::mxfp4_gemv_tiled_block_warps(128, 3584, 132), 4);
  EXPECT_EQ(kernels::mxfp4_gemv_tiled_block_warps(132, 448, 132), 28);  // exactly 28 tiles per SM
  EXPECT_EQ(kernels::mxfp4_gemv_tiled_block_warps(132, 464, 132), 4);
  EXPECT_EQ(kernels::mxfp4_gemv_tiled_block_warps(1, 16, 0), 4);
}

// The tiled GEMV with more tiles than one wave of 28 warps per SM holds, so that it runs 4-warp blocks (the tests
// above run 28-warp blocks, one tile per block at the small shapes and blocks across expert boundaries at K3's): one
// or two slots on each of SMs experts of out = 464 (29 tiles; a partly used last block), in = 320.
TEST(GpuMxfp4Tiled, GemvMatchesFp64ReferenceBeyondOneWave) {
  K3_REQUIRE_GPU();
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  ASSERT_EQ(kernels::mxfp4_gemv_tiled_block_warps(sms, 464, sms), kernels::kMxfp4GemvTiledBlockWarps);
  std::mt19937 rng(20261201);
  const ExpertBank bank = random_bank(sms, 464, 320, rng);
  std::vector<int> counts(static_cast<size_t>(sms), 0);
  for (int e = 0; e < sms; ++e) counts[size_t(e)] = 1 + e % 2;
  const int x_rows = 8;
  const int64_t x_stride = 320 + 8;
  const HostRouting routing = routing_with_counts(counts, x_rows, rng);
  const ref::Matrix x = round_to_bf16(random_matrix(x_rows, x_stride, rng));
  for (const Mxfp4GroupedAlgorithm a :
       {Mxfp4GroupedAlgorithm::gemv, Mxfp4GroupedAlgorithm::gemm_pipelined, Mxfp4GroupedAlgorithm::automatic}) {
    Checks checks;
    check_grouped(bank, routing, x, x_stride, a, checks);
    expect_checks(checks, std::string("464x320 ") + name(a));
  }
}

// The device repack writes the host's bytes; shapes without the layout, aliasing buffers and the first GEMM on it are
// refused.
TEST(GpuMxfp4Tiled, DeviceRepackMatchesTheHostsAndBadUsesAreRefused) {
  alignas(16) static uint8_t packed[4096], scales[256], tiled_packed[4096], tiled_scales[256];
  EXPECT_FALSE(kernels::mxfp4_tiled_supported(24, 64));
  EXPECT_FALSE(kernels::mxfp4_tiled_supported(16, 96));
  EXPECT_TRUE(kernels::mxfp4_tiled_supported(16, 128));
  EXPECT_EQ(kernels::mxfp4_tiled_repack(packed, scales, 1, 16, 96, tiled_packed, tiled_scales, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::mxfp4_tiled_repack(packed, scales, 1, 16, 64, packed, tiled_scales, nullptr),
            cudaErrorInvalidValue);  // in place
  EXPECT_EQ(kernels::mxfp4_tiled_repack(packed, scales, 0, 16, 64, tiled_packed, tiled_scales, nullptr),
            cudaErrorInvalidValue);
  std::mt19937 rng(20261220);
  const ExpertBank bank = random_bank(3, 48, 448, rng);
  const ExpertBank tiled = tiled_bank(bank);
  K3_REQUIRE_GPU();
  DeviceBank dbank(bank);
  DeviceBuffer<uint8_t> out_packed(bank.packed.size()), out_scales(bank.scales.size());
  CUDA_CHECK(kernels::mxfp4_tiled_repack(dbank.packed.get(), dbank.scales.get(), bank.experts, bank.out, bank.in,
                                         out_packed.get(), out_scales.get(), nullptr));
  EXPECT_EQ(out_packed.download(), tiled.packed);
  EXPECT_EQ(out_scales.download(), tiled.scales);
}

}  // namespace
}  // namespace k3::gpu_test
