#include "runtime/ops/attention.h"

#include <cmath>

#include "base/check.h"
#include "runtime/ops/host_ops.h"

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

void AttentionDropProbs(Backend& be, const AttentionDims& d, const AttentionDropout& drop, const float* probs,
                        uint8_t* mask, float* dropped) {
  DT_CHECK(drop.on() && drop.samples && static_cast<int64_t>(drop.samples->size()) == d.batch && mask && dropped)
      << "attention dropout: masks need the rng, one sample index per batch row and mask/dropped buffers";
  HostAccess(be, "attention dropout");
  const int64_t s = d.seq;
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t h = 0; h < d.heads; ++h) {
      const int64_t off = (b * d.heads + h) * s * s;
      for (int64_t t = 0; t < s; ++t) {
        // Causal: keys after t have probability 0; their mask bytes are drawn anyway.
        const uint64_t key =
            drop.rng->RowKey(DropoutSite::kAttentionProbs, drop.layer, (*drop.samples)[b], drop.head0 + h, t);
        DrawMaskRow(*drop.rng, key, 0, s, mask + off + t * s);
      }
    }
  ApplyMask(probs, mask, drop.rng->scale(), d.ProbsNumel(), dropped);
}

void AttentionForward(Backend& be, const AttentionDims& d, const float* qkv, float* probs,
                      float* out, const AttentionDropout& drop, uint8_t* mask, float* dropped) {
  DT_CHECK(out) << "attention: null output";
  AttentionProbs(be, d, qkv, probs);
  const float* pv = probs;
  if (drop.on()) {
    AttentionDropProbs(be, d, drop, probs, mask, dropped);
    pv = dropped;
  }
  const Strides st = StridesOf(d);
  const int64_t s = d.seq, hd = d.head_dim;
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t h = 0; h < d.heads; ++h) {
      const float* v = qkv + QOffset(d, b, h) + 2 * hd;
      const float* p = pv + (b * d.heads + h) * s * s;
      be.Gemm(Trans::kNo, Trans::kNo, s, hd, s, 1.0f, p, s, v, st.qkv_row, 0.0f,
              out + OutOffset(d, b, h), st.out_row);
    }
  }
}

void AttentionBackward(Backend& be, const AttentionDims& d, const float* qkv, const float* probs,
                       const float* dout, float* dqkv, float* scratch, const AttentionDropout& drop,
                       const uint8_t* mask, const float* dropped) {
  DT_CHECK(qkv && probs && dout && dqkv && scratch) << "attention backward: null pointer";
  DT_CHECK(!drop.on() || (mask && dropped)) << "attention backward: dropout without its mask";
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
      const int64_t off = (b * d.heads + h) * s * s;
      const float* p = probs + off;
      const float* dO = dout + OutOffset(d, b, h);
      // dV = P^T dO (the dropped probabilities under dropout)
      be.Gemm(Trans::kYes, Trans::kNo, s, hd, s, 1.0f, drop.on() ? dropped + off : p, s, dO, st.out_row, 0.0f,
              dv, st.qkv_row);
      // dP = dO V^T (through the mask under dropout), then dS = softmax
      // backward (grad w.r.t. the unscaled scores Q K^T)
      be.Gemm(Trans::kNo, Trans::kYes, s, s, hd, 1.0f, dO, st.out_row, v, st.qkv_row, 0.0f,
              scratch, s);
      if (drop.on()) {
        HostAccess(be, "attention dropout backward");
        ApplyMask(scratch, mask + off, drop.rng->scale(), s * s, scratch);
      }
      be.SoftmaxBackward(p, scratch, scratch, s, s, scale);
      // dQ = dS K, dK = dS^T Q
      be.Gemm(Trans::kNo, Trans::kNo, s, hd, s, 1.0f, scratch, s, k, st.qkv_row, 0.0f, dq, st.qkv_row);
      be.Gemm(Trans::kYes, Trans::kNo, s, hd, s, 1.0f, scratch, s, q, st.qkv_row, 0.0f, dk, st.qkv_row);
    }
  }
}

}  // namespace dt::rt
