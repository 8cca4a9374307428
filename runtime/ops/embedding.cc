#include "runtime/ops/embedding.h"

#include <cstring>

#include "base/check.h"
#include "runtime/backend/parallel_for.h"
#include "runtime/tensor/allocator.h"

namespace dt::rt {

void EmbeddingForward(const float* w, int64_t vocab_start, int64_t vocab_local, int64_t hidden,
                      const int32_t* tokens, int64_t rows, float* out) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  ForRange(rows, rows * hidden > (1 << 14), [&](int64_t r) {
    const int64_t local = static_cast<int64_t>(tokens[r]) - vocab_start;
    float* o = out + r * hidden;
    if (local >= 0 && local < vocab_local) {
      std::memcpy(o, w + local * hidden, hidden * sizeof(float));
    } else {
      std::memset(o, 0, hidden * sizeof(float));
    }
  });
}

void EmbeddingBackward(const float* dout, const int32_t* tokens, int64_t rows,
                       int64_t vocab_start, int64_t vocab_local, int64_t hidden, float* dw) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  // Sequential over rows: the same token may repeat, and a fixed order keeps it deterministic.
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t local = static_cast<int64_t>(tokens[r]) - vocab_start;
    if (local < 0 || local >= vocab_local) continue;
    const float* d = dout + r * hidden;
    float* g = dw + local * hidden;
    for (int64_t c = 0; c < hidden; ++c) g[c] += d[c];
  }
}

void VocabParallelEmbeddingForward(const float* w, int64_t vocab_start, int64_t vocab_local,
                                   int64_t hidden, const int32_t* tokens, int64_t rows,
                                   float* out, Comm* tp) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  EmbeddingForward(w, vocab_start, vocab_local, hidden, tokens, rows, out);
  if (tp != nullptr && tp->size() > 1) tp->AllReduce(out, static_cast<size_t>(rows * hidden));
}

void PositionEmbeddingForward(const float* p, int64_t seq, int64_t batch, int64_t hidden,
                              float* out) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  ForRange(seq, seq * batch * hidden > (1 << 14), [&](int64_t t) {
    for (int64_t b = 0; b < batch; ++b) {
      float* o = out + (t * batch + b) * hidden;
      const float* pt = p + t * hidden;
      for (int64_t c = 0; c < hidden; ++c) o[c] += pt[c];
    }
  });
}

void PositionEmbeddingBackward(const float* dout, int64_t seq, int64_t batch, int64_t hidden,
                               float* dp) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  ForRange(seq, seq * batch * hidden > (1 << 14), [&](int64_t t) {
    float* g = dp + t * hidden;
    for (int64_t b = 0; b < batch; ++b) {
      const float* d = dout + (t * batch + b) * hidden;
      for (int64_t c = 0; c < hidden; ++c) g[c] += d[c];
    }
  });
}

}  // namespace dt::rt
