#include "runtime/ops/attention.h"

#include <cmath>

#include "base/check.h"

namespace dt::rt {
namespace {
// Strides (in floats) of one sequence position in qkv and out.
struct Strides {
  int64_t qkv_row, out_row;
};
Strides StridesOf(const AttentionDims& d) {
  return {d.batch * d.heads * 3 * d.head_dim, d.batch * d.heads * d.head_dim};
}
// Offsets of head h of sequence b at position 0.
int64_t QOffset(const AttentionDims& d, int64_t b, int64_t h) {
  return (b * d.heads + h) * 3 * d.head_dim;
}
int64_t OutOffset(const AttentionDims& d, int64_t b, int64_t h) {
  return (b * d.heads + h) * d.head_dim;
}
float ScaleOf(const AttentionDims& d) { return 1.0f / std::sqrt(static_cast<float>(d.head_dim)); }
}  // namespace

void AttentionProbs(Backend& be, const AttentionDims& d, const float* qkv, float* probs) {
  DT_CHECK(qkv && probs) << "attention: null pointer";
  const Strides st = StridesOf(d);
  const int64_t s = d.seq, hd = d.head_dim;
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t h = 0; h < d.heads; ++h) {
      const float* q = qkv + QOffset(d, b, h);
      const float* k = q + hd;
      float* p = probs + (b * d.heads + h) * s * s;
      be.Gemm(Trans::kNo, Trans::kYes, s, s, hd, 1.0f, q, st.qkv_row, k, st.qkv_row, 0.0f, p, s);
    }
  }
  be.SoftmaxForward(probs, probs, d.batch * d.heads * s, s, ScaleOf(d), s);
}

void AttentionForward(Backend& be, const AttentionDims& d, const float* qkv, float* probs,
                      float* out) {
  DT_CHECK(out) << "attention: null output";
  AttentionProbs(be, d, qkv, probs);
  const Strides st = StridesOf(d);
  const int64_t s = d.seq, hd = d.head_dim;
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t h = 0; h < d.heads; ++h) {
      const float* v = qkv + QOffset(d, b, h) + 2 * hd;
      const float* p = probs + (b * d.heads + h) * s * s;
      be.Gemm(Trans::kNo, Trans::kNo, s, hd, s, 1.0f, p, s, v, st.qkv_row, 0.0f,
              out + OutOffset(d, b, h), st.out_row);
    }
  }
}

void AttentionBackward(Backend& be, const AttentionDims& d, const float* qkv, const float* probs,
                       const float* dout, float* dqkv, float* scratch) {
  DT_CHECK(qkv && probs && dout && dqkv && scratch) << "attention backward: null pointer";
  const Strides st = StridesOf(d);
  const int64_t s = d.seq, hd = d.head_dim;
  const float scale = ScaleOf(d);
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t h = 0; h < d.heads; ++h) {
      const float* q = qkv + QOffset(d, b, h);
      const float* k = q + hd;
      const float* v = q + 2 * hd;
      float* dq = dqkv + QOffset(d, b, h);
      float* dk = dq + hd;
      float* dv = dq + 2 * hd;
      const float* p = probs + (b * d.heads + h) * s * s;
      const float* dO = dout + OutOffset(d, b, h);
      // dV = P^T dO
      be.Gemm(Trans::kYes, Trans::kNo, s, hd, s, 1.0f, p, s, dO, st.out_row, 0.0f, dv, st.qkv_row);
      // dP = dO V^T, then dS = softmax backward (grad w.r.t. the unscaled scores Q K^T)
      be.Gemm(Trans::kNo, Trans::kYes, s, s, hd, 1.0f, dO, st.out_row, v, st.qkv_row, 0.0f,
              scratch, s);
      be.SoftmaxBackward(p, scratch, scratch, s, s, scale);
      // dQ = dS K, dK = dS^T Q
      be.Gemm(Trans::kNo, Trans::kNo, s, hd, s, 1.0f, scratch, s, k, st.qkv_row, 0.0f, dq, st.qkv_row);
      be.Gemm(Trans::kYes, Trans::kNo, s, hd, s, 1.0f, scratch, s, q, st.qkv_row, 0.0f, dk, st.qkv_row);
    }
  }
}

}  // namespace dt::rt
