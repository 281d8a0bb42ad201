#include "engine/runtime/dense_mlp.h"

#include "core/error.h"

#include <algorithm>

namespace k3::runtime {

void GluScratch::lay_out(const ModelConfig& c, int64_t T, int64_t expert_slots, DeviceArena& a) {
  int64_t intermediate = c.dense_intermediate;
  if (!c.moe) {
    gate_up = a.take_n<float>(T * 2 * intermediate);
    act = a.take_n<bf16>(T * intermediate);
    return;
  }
  const MoeSpec& e = *c.moe;
  const int64_t slots = expert_slots;
  intermediate = std::max<int64_t>(intermediate, std::max<int64_t>(e.expert_intermediate, e.shared_intermediate));
  gate_up = a.take_n<float>(std::max(slots * 2 * e.expert_intermediate, T * 2 * intermediate));
  act = a.take_n<bf16>(std::max(slots * e.expert_intermediate, T * intermediate));
}

void DenseMlp::run(OpId id, const ForwardPass& pass, int l, const SublayerIo& io) const {
  const ModelConfig& c = ctx_.config;
  const GluDeviceWeights& W = ctx_.weights.layers[l].dense;
  const GluScratch& w = w_;
  const int64_t T = pass.tokens, h = c.hidden_size, I = c.dense_intermediate;
  switch (id) {
    case OpId::mlp_gate_up_proj: ctx_.gemm_f32(io.x, h, W.gate_up, w.gate_up, 2 * I, T, 2 * I, h); return;
    case OpId::mlp_act: ctx_.glu(w.gate_up, 2 * I, w.act, T, I, "dense MLP GLU"); return;
    case OpId::mlp_down_proj: ctx_.gemm(w.act, I, W.down, io.out, h, T, h, I, io.accumulate ? 1.0f : 0.0f); return;
    default: throw Error(fmt::format("layer {}: {} is not a dense MLP op", l + 1, op_name(id, l)));
  }
}

}  // namespace k3::runtime
