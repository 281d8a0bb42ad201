#include "engine/parallel/layout.h"

#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>

namespace k3::parallel {

namespace {

void require_positive(const char* key, int value) {
  if (value < 1) throw InputError(fmt::format("parallelism.{} must be at least 1, got {}", key, value));
}

}  // namespace

std::string RankLayout::describe() const {
  const Parallelism& p = parallelism;
  return fmt::format(
      "rank {} of {}: stage {}/{}, attention group {}/{}, tp {}/{}, ep {}/{}, moe_tp {}/{}, layers [{}, {})", rank,
      p.gpus(), stage, p.pp, attention_dp_rank, p.attention_dp, tp_rank, p.tp, ep_rank, p.ep, moe_tp_rank, p.moe_tp(),
      first_layer, last_layer);
}

RankLayout rank_layout(const Parallelism& par, int rank, int num_layers) {
  require_positive("tp", par.tp);
  require_positive("attention_dp", par.attention_dp);
  require_positive("ep", par.ep);
  require_positive("pp", par.pp);
  if (par.stage_gpus() % par.ep != 0) {
    throw InputError(fmt::format("parallelism.ep {} must divide tp x attention_dp = {}", par.ep, par.stage_gpus()));
  }
  if (num_layers < 1) throw InputError(fmt::format("a model of {} layers cannot be laid out", num_layers));
  const int per_stage = (num_layers + par.pp - 1) / par.pp;
  if ((par.pp - 1) * per_stage >= num_layers) {
    throw InputError(fmt::format("parallelism.pp {} leaves the last stage without layers ({} layers, {} per stage)",
                                 par.pp, num_layers, per_stage));
  }
  if (rank < 0 || rank >= par.gpus()) {
    throw InputError(fmt::format("rank {} is outside the {} GPUs of tp {} x attention_dp {} x pp {}", rank, par.gpus(),
                                 par.tp, par.attention_dp, par.pp));
  }

  RankLayout r;
  r.parallelism = par;
  r.rank = rank;
  const int stage_gpus = par.stage_gpus(), moe_tp = par.moe_tp();
  r.stage = rank / stage_gpus;
  r.stage_rank = rank % stage_gpus;
  r.attention_dp_rank = r.stage_rank / par.tp;
  r.tp_rank = r.stage_rank % par.tp;
  r.ep_rank = r.stage_rank / moe_tp;
  r.moe_tp_rank = r.stage_rank % moe_tp;

  const int base = r.stage * stage_gpus;
  for (int t = 0; t < par.tp; ++t) r.tp_group.push_back(base + r.attention_dp_rank * par.tp + t);
  for (int e = 0; e < par.ep; ++e) r.ep_group.push_back(base + e * moe_tp + r.moe_tp_rank);
  for (int t = 0; t < moe_tp; ++t) r.moe_tp_group.push_back(base + r.ep_rank * moe_tp + t);
  for (int g = 0; g < stage_gpus; ++g) r.stage_group.push_back(base + g);
  for (int s = 0; s < par.pp; ++s) r.pp_group.push_back(s * stage_gpus + r.stage_rank);

  r.first_layer = r.stage * per_stage;
  r.last_layer = std::min(num_layers, r.first_layer + per_stage);
  return r;
}

}  // namespace k3::parallel
