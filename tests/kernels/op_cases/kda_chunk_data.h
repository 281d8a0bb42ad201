// Inputs, the fp64 reference and device calls of the KDA chunked prefill (kernels/kda_chunk_prefill), shared by its
// op cases (kda_chunk_cases.cpp) and the plain tests beside them (tests/kernels/kda_chunk_gpu_test.cpp).
#pragma once

#include "engine/reference/kda.h"
#include "kernels/kda_chunk_prefill.h"
#include "tests/kernels/op_cases/device_data.h"

#include <random>
#include <vector>

namespace k3::gpu_test::kda_chunk {

inline constexpr int kD = 128;
inline constexpr float kGateLowerBound = -5.0f;  // K3's bounded gate
// The kernel's products take fp16 operands (TF32's 10-bit mantissa, rounded to nearest: 2^-11 ≈ 4.9e-4 relative
// per operand) with fp32 accumulation. A CPU model of its algorithm with that rounding lands at 3.3e-4 .. 4.8e-4
// normalised error against the fp64 recurrence on inputs made like these (1 to 8192 tokens); 2e-3 leaves 4× room
// and is still far below what a wrong index or a lost decay factor gives (order 1, or the 1e-2+ of the state checks).
inline constexpr double kTf32Tolerance = 2e-3;

enum class Gate {
  bounded_sigmoid,  // g = lb·sigmoid(z), z uniform in [-9, 3]: the K3 gate's form, slow and fast channels
  bounded_uniform,  // g uniform in [lb, 0]: tile exponents close to the 40-nat limit
  softplus,         // g = -e^a·softplus(z), down to about -44 per token: unbounded, passed as lower bound 0
};
inline float lower_bound_of(Gate g) { return g == Gate::softplus ? 0.0f : kGateLowerBound; }

struct Inputs {
  ref::Matrix q, k, v, g, beta;
  std::vector<ref::MatrixD> state;  // initial, per head [d_k, d_v]
};
Inputs random_inputs(int tokens, int heads, Gate gate, std::mt19937& rng);
// Rows [t0, t0 + n) as a dense copy (the call's own inputs), starting from `state`.
Inputs slice(const Inputs& in, Eigen::Index t0, Eigen::Index n, const std::vector<ref::MatrixD>& state);

// The kernel's state layout [heads, d, d] ↔ per-head matrices.
std::vector<float> flatten(const std::vector<ref::MatrixD>& S);

struct Reference {
  ref::Matrix out;
  ref::Matrix final_state;  // [heads·d, d]
};
Reference recurrent_reference(const Inputs& in, int heads);

// Device copies of one call's inputs, its output (poisoned) and its workspace (poisoned).
struct DeviceCall {
  DeviceBuffer<float> q, k, v, g, beta, out, workspace;
  int tokens, heads;
  DeviceCall(const Inputs& in, int heads);
  cudaError_t run(DeviceBuffer<float>& state, float lower_bound, cudaStream_t stream = nullptr);
  cudaError_t run_phase(kernels::KdaChunkPhase phase, DeviceBuffer<float>& state, float lower_bound);
  ref::Matrix output() const;
  // NaN again in the output and the workspace, so a second run cannot pass on the first run's values.
  void poison();
};

// Normalised error of a device state [heads·d, d] against the reference's.
double state_error(const DeviceBuffer<float>& state, const Reference& want, int heads);

}  // namespace k3::gpu_test::kda_chunk
