// kda_prefill_bench: the KDA chunked prefill (kernels/kda_chunk_prefill) for one sequence over K3's 96 heads × 128
// at 8K, 32K and 128K tokens against the roofline sim/ gives kda.chunk, and the recurrent decode kernel stepped over
// the same 8K-token sequence inside one CUDA graph, the baseline the chunked form must beat by 10× (method and
// output: bench/gpu/bench_harness.h). The kernel is timed as a whole call and, for the breakdown, launch by
// launch (kda_chunk_prefill_phase_for_bench): "phase 1" (chunk-parallel: scores, UT transform, W, U into the
// workspace) and "phase 2" (the sequential state pass over that workspace), each its own row.
//
// Counts: FLOPs as core/op_graph.cpp counts kda.chunk, per token and head 10·C·d + 6·d² + (2/3)·C² with C = 64.
// Bytes are the fewest the op must move (q, k, v, g, β in, out, the state read and written once, fp32); op_graph also
// counts its intermediate passes (W, U, the chunk-boundary states), so this roofline is the stricter one, and the
// kernel's own workspace traffic (≈ 9 bytes per input byte of q) is part of what it is measured against. Compute at
// TF32 peak (the precision of the fp32 versions' products; op_graph uses bf16). The default, split_key_f16, runs its
// state pass on fp16 products (the same 10-bit mantissa); priced at the fp16 peak, the whole call's bound is the
// memory term instead, about 0.62× the TF32 one: the output's top level gives that bound for each length
// ("roofline_us_at_fp16_peak") and the default's time over it. The phase rows split the FLOPs as the kernel splits
// its products: the state pass does W S, Qg S, Kdᵀ V' (6·d² per token and head) and A_qk V' over the tiles on and
// below the diagonal (10 of 16: 1.25·C·d), phase 1 the rest; their bytes are the phase's own inputs and outputs, the
// workspace traffic of that version included (phase 1 writes it, the state pass reads it), since that traffic is
// the design's.
// Inputs are random within the kernel's contract (q, k normal(0, 0.09), v normal(0, 1), g uniform in [−1, −0.01], β
// uniform in [0, 1]), so the state stays finite over the repeats. Constant fills, used before, ran the default version
// up to 6 % faster on an H200 (bench/results/2026-11-30-h200-kernels-11 run 15). One buffer set per length (every
// length's working set is far beyond the L2).
//
// The chain sweep: the same call and its state pass at the head counts of one rank of a deployment (6 at TP16, 12 at
// TP8, 24 at TP4) over 1K, 8K and 32K tokens. With 4 state-pass blocks per head, 6 heads leave most SMs idle and the
// pass walks its chunks one after another at a time per chunk that the bytes do not set: the serial step of
// scenarios/hardware/h200-sxm.yaml (serial_step_us.kda_chunk, sim/roofline.h).
//
// Usage: kda_prefill_bench [--hardware scenarios/hardware/h200-sxm.yaml] [--repeats N]
#include "bench/gpu/bench_harness.h"
#include "kernels/kda_chunk_prefill.h"
#include "kernels/kda_decode.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

using k3::EfficiencyClass;
using k3::bench::device_alloc;
using k3::bench::Result;
using k3::bench::time_us;

namespace {

constexpr int kHeads = 96, kD = 128, kChunk = 64;  // K3's heads on one GPU; the chain sweep takes fewer
constexpr float kGateLowerBound = -5.0f;
constexpr const char* kVersionName = "kda_chunk_ut_factored_split_key_f16";  // the kernel's one version

// One sequence's inputs (random: q and k at the scale of L2-normalised 128-vectors, v normal, the gate's log decay
// uniform in [−1, −0.01] inside the bound, β uniform in [0, 1]; constant inputs can run faster), output and state.
struct Sequence {
  int64_t tokens;
  int heads;
  float *q, *k, *v, *g, *beta, *out, *state;
  explicit Sequence(int64_t t, int h = kHeads) : tokens(t), heads(h) {
    const size_t n = size_t(t) * h * kD;
    q = k3::bench::device_normal_f32(n, 0.0f, 0.09f, 1);
    k = k3::bench::device_normal_f32(n, 0.0f, 0.09f, 2);
    v = k3::bench::device_normal_f32(n, 0.0f, 1.0f, 3);
    g = k3::bench::device_uniform_f32(n, -1.0f, -0.01f, 4);
    beta = k3::bench::device_uniform_f32(size_t(t) * h, 0.0f, 1.0f, 5);
    out = device_alloc<float>(n, 0);
    state = device_alloc<float>(size_t(h) * kD * kD, 0);
  }
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;
  ~Sequence() {
    for (float* p : {q, k, v, g, beta, out, state}) cudaFree(p);
  }
  // q, k, v, g, β in, out, state in and out.
  double bytes() const {
    return (5.0 * tokens * heads * kD + double(tokens) * heads + 2.0 * heads * kD * kD) * sizeof(float);
  }
};

double chunk_flops(int64_t tokens, int heads = kHeads) {
  const double C = kChunk, d = kD;
  return double(tokens) * heads * (10 * C * d + 6 * d * d + (2.0 / 3.0) * C * C);
}
double state_pass_flops(int64_t tokens, int heads = kHeads) {
  const double C = kChunk, d = kD;
  return double(tokens) * heads * (6 * d * d + 1.25 * C * d);
}

}  // namespace

int main(int argc, char** argv) {
  const k3::bench::Session session(argc, argv);
  std::vector<Result> results;
  double prefill_8k_us = 0;
  std::string fp16_peak_bounds;  // "tokens": [bound µs, the default's time over it], ...

  using k3::kernels::KdaChunkPhase;
  for (int64_t tokens : {int64_t{8192}, int64_t{32768}, int64_t{131072}}) {
    Sequence seq(tokens);
    const size_t workspace_bytes = k3::kernels::kda_chunk_prefill_workspace_bytes(int(tokens), kHeads, kD);
    void* workspace = device_alloc<uint8_t>(workspace_bytes, 0);
    const double input_bytes = (4.0 * tokens * kHeads * kD + double(tokens) * kHeads) * sizeof(float);
    const double out_state_bytes = (double(tokens) * kHeads * kD + 2.0 * kHeads * kD * kD) * sizeof(float);
    Result r{fmt::format("kda_chunk_prefill_f32state {} tokens, heads 96 d 128 ({})", tokens, kVersionName),
             seq.bytes(), chunk_flops(tokens)};
    r.cls = EfficiencyClass::chunked_scan;
    r.median_us = time_us(
        [&](int) {
          CUDA_CHECK(k3::kernels::kda_chunk_prefill_f32state(seq.q, seq.k, seq.v, seq.g, seq.beta, seq.state, seq.out,
                                                             int(tokens), kHeads, kD, kGateLowerBound, workspace,
                                                             workspace_bytes, nullptr));
        },
        session.repeats);
    r.roofline_us = session.roofline_us(r.flops, r.bytes, EfficiencyClass::chunked_scan, k3::ComputeType::tf32);
    results.push_back(r);
    if (tokens == 8192) prefill_8k_us = r.median_us;
    const double fp16_bound_us =
        session.roofline_us(r.flops, r.bytes, EfficiencyClass::chunked_scan, k3::ComputeType::bf16);
    fp16_peak_bounds += fmt::format("{}\"{}\": [{:.1f}, {:.2f}]", fp16_peak_bounds.empty() ? "" : ", ", tokens,
                                    fp16_bound_us, r.median_us / fp16_bound_us);

    // Launch by launch; the state pass reuses the workspace the timed phase-1 launches (and the calls above) left.
    for (const KdaChunkPhase phase : {KdaChunkPhase::intra_chunk, KdaChunkPhase::state_pass}) {
      const bool intra = phase == KdaChunkPhase::intra_chunk;
      const double flops = intra ? chunk_flops(tokens) - state_pass_flops(tokens) : state_pass_flops(tokens);
      const double bytes = double(k3::kernels::kda_chunk_prefill_workspace_traffic_bytes(int(tokens), kHeads, kD)) +
                           (intra ? input_bytes : out_state_bytes);
      Result p{fmt::format("kda_chunk_prefill {} {} tokens, heads 96 d 128 ({})",
                           intra ? "phase 1 (chunk-parallel)" : "phase 2 (state pass)", tokens, kVersionName),
               bytes, flops};
      p.cls = EfficiencyClass::chunked_scan;
      p.median_us = time_us(
          [&](int) {
            CUDA_CHECK(k3::kernels::kda_chunk_prefill_phase_for_bench(
                phase, seq.q, seq.k, seq.v, seq.g, seq.beta, seq.state, seq.out, int(tokens), kHeads, kD,
                kGateLowerBound, workspace, workspace_bytes, nullptr));
          },
          session.repeats);
      p.roofline_us = session.roofline_us(p.flops, p.bytes, EfficiencyClass::chunked_scan, k3::ComputeType::tf32);
      results.push_back(p);
    }
    CUDA_CHECK(cudaFree(workspace));
  }

  // The chain sweep: a rank's heads, the whole call and its state pass alone (its operands from phase 1 first).
  for (const int heads : {6, 12, 24}) {
    for (int64_t tokens : {int64_t{1024}, int64_t{8192}, int64_t{32768}}) {
      Sequence seq(tokens, heads);
      const size_t workspace_bytes = k3::kernels::kda_chunk_prefill_workspace_bytes(int(tokens), heads, kD);
      void* workspace = device_alloc<uint8_t>(workspace_bytes, 0);
      for (const bool whole : {true, false}) {
        const KdaChunkPhase phase = KdaChunkPhase::state_pass;
        const double out_state_bytes = (double(tokens) * heads * kD + 2.0 * heads * kD * kD) * sizeof(float);
        Result p{fmt::format("kda_chunk_prefill {} {} tokens, heads {} d 128, {} chunks (chain sweep)",
                             whole ? "whole call" : "phase 2 (state pass)", tokens, heads, (tokens + 63) / 64),
                 whole ? seq.bytes()
                       : double(k3::kernels::kda_chunk_prefill_workspace_traffic_bytes(int(tokens), heads, kD)) +
                             out_state_bytes,
                 whole ? chunk_flops(tokens, heads) : state_pass_flops(tokens, heads)};
        p.cls = EfficiencyClass::chunked_scan;
        if (!whole) {  // phase 1 once, so that the state pass reads a filled workspace
          CUDA_CHECK(k3::kernels::kda_chunk_prefill_phase_for_bench(
              KdaChunkPhase::intra_chunk, seq.q, seq.k, seq.v, seq.g, seq.beta, seq.state, seq.out, int(tokens), heads,
              kD, kGateLowerBound, workspace, workspace_bytes, nullptr));
        }
        p.median_us = time_us(
            [&](int) {
              if (whole) {
                CUDA_CHECK(k3::kernels::kda_chunk_prefill_f32state(seq.q, seq.k, seq.v, seq.g, seq.beta, seq.state,
                                                                   seq.out, int(tokens), heads, kD, kGateLowerBound,
                                                                   workspace, workspace_bytes, nullptr));
              } else {
                CUDA_CHECK(k3::kernels::kda_chunk_prefill_phase_for_bench(
                    phase, seq.q, seq.k, seq.v, seq.g, seq.beta, seq.state, seq.out, int(tokens), heads, kD,
                    kGateLowerBound, workspace, workspace_bytes, nullptr));
              }
            },
            session.repeats);
        p.roofline_us = session.roofline_us(p.flops, p.bytes, EfficiencyClass::chunked_scan, k3::ComputeType::tf32);
        results.push_back(p);
      }
      CUDA_CHECK(cudaFree(workspace));
    }
  }

  // The recurrent kernel over the same 8K-token sequence: one decode step per token, all captured in one CUDA graph
  // (as a decode loop would replay them), so launch overhead is the graph's, not the host's.
  {
    const int64_t tokens = 8192;
    const int64_t width = int64_t(kHeads) * kD;
    Sequence seq(tokens);
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreate(&stream));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    for (int64_t t = 0; t < tokens; ++t) {
      CUDA_CHECK(k3::kernels::kda_decode_step_f32state(seq.q + t * width, seq.k + t * width, seq.v + t * width,
                                                       seq.g + t * width, seq.beta + t * kHeads, seq.state,
                                                       seq.out + t * width, 1, kHeads, kD, stream));
    }
    CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    // Per step the state is read and written once (K3-SPEC §3 recurrence: 7·d² + 2·d FLOPs per head).
    const double state_bytes = double(kHeads) * kD * kD * sizeof(float);
    const double bytes = tokens * (2.0 * state_bytes + (5.0 * width + kHeads) * sizeof(float));
    const double flops = double(tokens) * kHeads * (7.0 * kD * kD + 2.0 * kD);
    Result r{"kda_decode_step_f32state x 8192 tokens in one CUDA graph, batch 1, heads 96 d 128", bytes, flops};
    r.cls = EfficiencyClass::recurrent;
    r.median_us = time_us([&](int) { CUDA_CHECK(cudaGraphLaunch(exec, nullptr)); },
                          std::max(3, std::min(session.repeats, 10)), 2);
    r.roofline_us = session.roofline_us(flops, bytes, EfficiencyClass::recurrent, k3::ComputeType::fp32);
    results.push_back(r);
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaStreamDestroy(stream));
    session.print(results,
                  fmt::format("\"prefill_speedup_over_recurrent_8192_tokens\": {:.2f}, \"prefill_variant\": \"{}\", "
                              "\"roofline_us_at_fp16_peak\": {{{}}}",
                              r.median_us / prefill_8k_us, kVersionName, fp16_peak_bounds));
  }
  return 0;
}
