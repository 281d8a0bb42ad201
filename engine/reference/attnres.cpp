#include "engine/reference/attnres.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace k3::ref {

using Index = Eigen::Index;

Matrix attnres_mix(const std::vector<const Matrix*>& candidates, const AttnResMixer& mixer, double eps) {
  K3_CHECK(!candidates.empty(), "AttnRes mix needs at least one candidate");
  for (const Matrix* v : candidates) K3_CHECK(v != nullptr, "AttnRes candidate is null");
  const Index tokens = candidates[0]->rows(), h = candidates[0]->cols();
  for (const Matrix* v : candidates) {
    K3_CHECK(v->rows() == tokens && v->cols() == h, "AttnRes candidates are [{}, {}] and [{}, {}]", tokens, h,
             v->rows(), v->cols());
  }
  K3_CHECK(mixer.query.size() == h && mixer.key_norm.size() == h, "AttnRes mixer has {}/{} values, expected {}",
           mixer.query.size(), mixer.key_norm.size(), h);

  // γ ⊙ w once: the score is the RMS-normalised candidate dotted with it.
  std::vector<double> score_weight(h);
  for (Index i = 0; i < h; ++i) score_weight[i] = double(mixer.key_norm(i)) * mixer.query(i);

  const size_t n = candidates.size();
  std::vector<double> prob(n);
  Matrix out(tokens, h);
  for (Index t = 0; t < tokens; ++t) {
    for (size_t c = 0; c < n; ++c) {
      const Matrix& v = *candidates[c];
      double sum_sq = 0, dot = 0;
      for (Index i = 0; i < h; ++i) {
        sum_sq += double(v(t, i)) * v(t, i);
        dot += double(v(t, i)) * score_weight[i];
      }
      prob[c] = dot / std::sqrt(sum_sq / double(h) + eps);
    }
    const double max_score = *std::max_element(prob.begin(), prob.end());
    double total = 0;
    for (double& p : prob) {
      p = std::exp(p - max_score);
      total += p;
    }
    for (Index i = 0; i < h; ++i) {
      double mixed = 0;
      for (size_t c = 0; c < n; ++c) mixed += prob[c] * (*candidates[c])(t, i);  // raw V, not normalised
      out(t, i) = float(mixed / total);
    }
  }
  return out;
}

AttnResStack::AttnResStack(ResidualKind kind, int block_layers, double eps)
    : kind_(kind), block_layers_(block_layers), eps_(eps) {
  K3_CHECK(kind != ResidualKind::block_attnres || block_layers > 0, "block AttnRes needs a positive block size, got {}",
           block_layers);
}

AttnResStack::AttnResStack(const ModelConfig& cfg)
    : AttnResStack(cfg.residual, cfg.attn_res_block_layers, cfg.rms_norm_eps) {}

void AttnResStack::expect(Phase phase, int layer, const char* call) const {
  K3_CHECK(phase_ == phase && layer == layer_, "AttnResStack::{} for layer {} out of order (at layer {}, phase {})",
           call, layer, layer_, int(phase_));
}

void AttnResStack::begin(const Matrix& embedding) {
  blocks_.clear();
  partial_ = embedding;
  layer_ = 0;
  candidates_ = 0;
  phase_ = Phase::attention_input;
}

Matrix AttnResStack::mix(const AttnResMixer& mixer) {
  std::vector<const Matrix*> candidates;
  for (const Matrix& b : blocks_) candidates.push_back(&b);
  candidates.push_back(&*partial_);
  candidates_ = int(candidates.size());
  return attnres_mix(candidates, mixer, eps_);
}

void AttnResStack::accumulate(const Matrix& output) {
  if (!partial_) {
    partial_ = output;
    return;
  }
  K3_CHECK(output.rows() == partial_->rows() && output.cols() == partial_->cols(),
           "sublayer output is [{}, {}], the residual stream [{}, {}]", output.rows(), output.cols(), partial_->rows(),
           partial_->cols());
  *partial_ += output;
}

Matrix AttnResStack::attention_input(int layer, const AttnResMixer& mixer) {
  expect(Phase::attention_input, layer, "attention_input");
  phase_ = Phase::attention_output;
  candidates_ = 0;
  if (kind_ == ResidualKind::plain) return *partial_;
  Matrix h = blocks_.empty() ? *partial_ : mix(mixer);  // layer 0 reads the embedding unmixed
  if (layer % block_layers_ == 0) {
    blocks_.push_back(std::move(*partial_));
    partial_.reset();
  }
  return h;
}

void AttnResStack::add_attention_output(int layer, const Matrix& attention_output) {
  expect(Phase::attention_output, layer, "add_attention_output");
  accumulate(attention_output);
  phase_ = Phase::mlp_input;
}

Matrix AttnResStack::mlp_input(int layer, const AttnResMixer& mixer) {
  expect(Phase::mlp_input, layer, "mlp_input");
  phase_ = Phase::mlp_output;
  candidates_ = 0;
  if (kind_ == ResidualKind::plain) return *partial_;
  return mix(mixer);
}

void AttnResStack::add_mlp_output(const Matrix& mlp_output) {
  expect(Phase::mlp_output, layer_, "add_mlp_output");
  accumulate(mlp_output);
  ++layer_;
  phase_ = Phase::attention_input;
}

Matrix AttnResStack::final_input(const AttnResMixer& mixer) {
  expect(Phase::attention_input, layer_, "final_input");
  candidates_ = 0;
  if (kind_ == ResidualKind::plain) return *partial_;
  return blocks_.empty() ? *partial_ : mix(mixer);
}

}  // namespace k3::ref
