#include "runtime/ops/swiglu.h"

#include <algorithm>

#include "base/check.h"
#include "runtime/backend/vec_exp.h"
#include "runtime/ops/host_ops.h"

namespace dt::rt {
namespace {

// s = sigmoid(g) for len <= kExpChunk elements, exp vectorised (vec_exp.h).
void Sigmoid(const float* g, int64_t len, float* s) {
  ExpAffine(g, len, -1.0f, 0.0f, s);
  for (int64_t i = 0; i < len; ++i) s[i] = 1.0f / (s[i] + 1.0f);
}

}  // namespace

void SwiGluForward(Backend& be, const float* gate, const float* up, int64_t n, float* y) {
  DT_CHECK(gate && up && y) << "swiglu forward: null pointer";
  HostAccess(be, "SwiGLU");
  alignas(64) float s[kExpChunk];
  for (int64_t i0 = 0; i0 < n; i0 += kExpChunk) {
    const int64_t len = std::min(kExpChunk, n - i0);
    Sigmoid(gate + i0, len, s);
    for (int64_t j = 0; j < len; ++j) y[i0 + j] = gate[i0 + j] * s[j] * up[i0 + j];
  }
}

void SwiGluBackward(Backend& be, const float* gate, const float* up, const float* dy, int64_t n,
                    float* dgate, float* dup) {
  DT_CHECK(gate && up && dy && dgate && dup) << "swiglu backward: null pointer";
  HostAccess(be, "SwiGLU");
  alignas(64) float s[kExpChunk];
  for (int64_t i0 = 0; i0 < n; i0 += kExpChunk) {
    const int64_t len = std::min(kExpChunk, n - i0);
    Sigmoid(gate + i0, len, s);
    for (int64_t j = 0; j < len; ++j) {
      const int64_t i = i0 + j;
      const float g = gate[i], sg = s[j], silu = g * sg;
      const float d = dy[i];
      dup[i] = d * silu;
      dgate[i] = d * up[i] * (sg + g * sg * (1.0f - sg));  // silu'(g) = s (1 + g (1 - s))
    }
  }
}

}  // namespace dt::rt
