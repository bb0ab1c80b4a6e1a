// Element-wise arithmetic of the training step, written once for both backends: the cpu backend
// loops over rows calling these, the cuda backend's kernels call the same functions (MB_HD), so
// the CPU tests check the arithmetic the GPU runs. No containers, no exceptions, only the C math
// functions that exist on host and device.
//
// Reductions here accumulate in float, as a device thread would; a GPU kernel that splits a row
// over threads reuses the per-element pieces (rmsnorm_rstd, rmsnorm_dx, rope_inv_freq, ...).
#pragma once

#include <cmath>
#include <cstdint>

#include "harness/math/hd.hpp"
#include "harness/math/params.hpp"

namespace moebench {

// ---- RMSNorm: y = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps) ----

MB_HD float rmsnorm_rstd(float sum_sq, std::int64_t cols, float eps) {
  return 1.0f / ::sqrtf(sum_sq / static_cast<float>(cols) + eps);
}

// Returns rstd (saved for backward).
MB_HD float rmsnorm_row_forward(const float* x, const float* w, std::int64_t cols, float eps,
                                float* y) {
  float sum_sq = 0.0f;
  for (std::int64_t i = 0; i < cols; ++i) sum_sq += x[i] * x[i];
  const float rstd = rmsnorm_rstd(sum_sq, cols, eps);
  for (std::int64_t i = 0; i < cols; ++i) y[i] = x[i] * rstd * w[i];
  return rstd;
}

// dx_i = rstd * (w_i dy_i - x_i rstd^2 mean_j(w_j dy_j x_j)); `mean_wdyx` is that mean.
MB_HD float rmsnorm_dx(float dy, float x, float w, float rstd, float mean_wdyx) {
  return rstd * (w * dy - x * rstd * rstd * mean_wdyx);
}

// dx overwritten; dw accumulates dy_i * x_i * rstd (the caller sums it over rows).
MB_HD void rmsnorm_row_backward(const float* dy, const float* x, const float* w, float rstd,
                                std::int64_t cols, float* dx, float* dw) {
  float dot = 0.0f;
  for (std::int64_t i = 0; i < cols; ++i) dot += w[i] * dy[i] * x[i];
  const float mean_wdyx = dot / static_cast<float>(cols);
  for (std::int64_t i = 0; i < cols; ++i) {
    dx[i] = rmsnorm_dx(dy[i], x[i], w[i], rstd, mean_wdyx);
    dw[i] += dy[i] * x[i] * rstd;
  }
}

// ---- Rotary embedding, "rotate half" layout: pairs (i, i + dim/2) ----

// theta^(-2i/dim), the frequency of pair i.
MB_HD float rope_inv_freq(std::int64_t i, std::int64_t dim, float theta) {
  return ::powf(theta, -2.0f * static_cast<float>(i) / static_cast<float>(dim));
}

MB_HD float rope_angle(std::int64_t pos, std::int64_t i, std::int64_t dim, float theta) {
  return static_cast<float>(pos) * rope_inv_freq(i, dim, theta);
}

// Rotates (a, b) by the angle whose cosine and sine are c and s; the inverse passes -s.
MB_HD void rope_rotate_pair(float* a, float* b, float c, float s) {
  const float x0 = *a;
  const float x1 = *b;
  *a = x0 * c - x1 * s;
  *b = x0 * s + x1 * c;
}

// Rotates one head segment of `dim` (even) elements at position `pos`; `inverse` undoes it
// (the backward pass, since the rotation is orthogonal).
MB_HD void rope_rotate(float* x, std::int64_t dim, std::int64_t pos, float theta, bool inverse) {
  const std::int64_t half = dim / 2;
  for (std::int64_t i = 0; i < half; ++i) {
    const float angle = rope_angle(pos, i, dim, theta);
    const float s = ::sinf(angle);
    rope_rotate_pair(x + i, x + i + half, ::cosf(angle), inverse ? -s : s);
  }
}

// ---- SwiGLU: out = silu(gate) * up ----

MB_HD float silu(float x) {
  return x / (1.0f + ::expf(-x));
}

// d silu / dx = sig(x) * (1 + x * (1 - sig(x))).
MB_HD float silu_grad(float x) {
  const float sig = 1.0f / (1.0f + ::expf(-x));
  return sig * (1.0f + x * (1.0f - sig));
}

MB_HD float swiglu_forward(float gate, float up) {
  return silu(gate) * up;
}

MB_HD void swiglu_backward(float gate, float up, float dout, float* dgate, float* dup) {
  *dgate = dout * up * silu_grad(gate);
  *dup = dout * silu(gate);
}

// ---- Cross-entropy over one row of logits, fused with its gradient ----
// loss = log(sum_j exp(z_j - max)) + max - z_label; d loss / d z_j = softmax_j - [j == label].

MB_HD float cross_entropy_loss(float max, float sum_exp, float label_logit) {
  return ::logf(sum_exp) + (max - label_logit);  // max - z first: exact where both are large
}

// scale * d loss / d z of one logit, from the row's max and sum of exp(z - max).
MB_HD float cross_entropy_grad(float z, float max, float sum_exp, bool is_label, float scale) {
  return scale * (::expf(z - max) / sum_exp - (is_label ? 1.0f : 0.0f));
}

// Returns the row's loss and overwrites z with scale * its gradient.
MB_HD float cross_entropy_row(float* z, std::int64_t cols, std::int64_t label, float scale) {
  float max = z[0];
  for (std::int64_t i = 1; i < cols; ++i) max = z[i] > max ? z[i] : max;
  float sum_exp = 0.0f;
  for (std::int64_t i = 0; i < cols; ++i) sum_exp += ::expf(z[i] - max);
  const float loss = cross_entropy_loss(max, sum_exp, z[label]);
  for (std::int64_t i = 0; i < cols; ++i) {
    z[i] = cross_entropy_grad(z[i], max, sum_exp, i == label, scale);
  }
  return loss;
}

// ---- AdamW (decoupled weight decay, bias-corrected) ----

// The per-call constants, computed once on the host and passed to every element.
struct AdamWCoeffs {
  float lr;
  float beta1;
  float beta2;
  float eps;
  float weight_decay;
  float grad_scale;
  float inv_bias1;  // 1 / (1 - beta1^step)
  float inv_bias2;  // 1 / (1 - beta2^step)
};

MB_HD AdamWCoeffs adamw_coeffs(const AdamWStep& s) {
  const float step = static_cast<float>(s.step);
  return AdamWCoeffs{s.lr,
                     s.beta1,
                     s.beta2,
                     s.eps,
                     s.weight_decay,
                     s.grad_scale,
                     1.0f / (1.0f - ::powf(s.beta1, step)),
                     1.0f / (1.0f - ::powf(s.beta2, step))};
}

// The gradient is scaled first (1/dp for a mean); decay uses the parameter before the step.
MB_HD void adamw_update(const AdamWCoeffs& c, float* param, float grad, float* m, float* v) {
  const float g = grad * c.grad_scale;
  const float m_new = c.beta1 * *m + (1.0f - c.beta1) * g;
  const float v_new = c.beta2 * *v + (1.0f - c.beta2) * g * g;
  *m = m_new;
  *v = v_new;
  const float m_hat = m_new * c.inv_bias1;
  const float v_hat = v_new * c.inv_bias2;
  *param -= c.lr * (m_hat / (::sqrtf(v_hat) + c.eps) + c.weight_decay * *param);
}

}  // namespace moebench
