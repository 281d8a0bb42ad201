// Small ops of the K3 family, written for clarity (fp32, reductions in fp64).
//   rmsnorm      y = x / sqrt(mean(x²) + eps) · w                      x [T, d], w [d]
//   silu         a · sigmoid(a)
//   situ_glu     SiTU(a, u) = β·tanh(a/β)·sigmoid(a) · β_lin·tanh(u/β_lin)   (K3-SPEC §5; β=4, β_lin=25)
//   swiglu       silu(a) · u
//   l2_normalize x / sqrt(Σx² + eps), per row
// Sources: K3-SPEC §2-§5; the HF Kimi Linear / K3 modeling code (read for facts).
#pragma once

#include "engine/reference/tensor.h"

namespace k3::ref {

Matrix rmsnorm(const Matrix& x, const Vector& weight, double eps);
float silu(float a);
float sigmoid(float a);
float situ(float gate, float up, double beta, double linear_beta);
// Gated MLP on [T, in]: y = W_down · act(W_gate x, W_up x); weights [I, in], [I, in], [out, I].
Matrix glu_mlp_silu(const Matrix& x, const Matrix& w_gate, const Matrix& w_up, const Matrix& w_down);
Matrix glu_mlp_situ(const Matrix& x, const Matrix& w_gate, const Matrix& w_up, const Matrix& w_down, double beta,
                    double linear_beta);
Matrix l2_normalize_rows(const Matrix& x, double eps);

}  // namespace k3::ref
