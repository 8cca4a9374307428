#include "runtime/ops/swiglu.h"

#include <cmath>

#include "base/check.h"
#include "runtime/ops/host_ops.h"

namespace dt::rt {
namespace {
inline float Sigmoid(float g) { return 1.0f / (1.0f + std::exp(-g)); }
}  // namespace

void SwiGluForward(Backend& be, const float* gate, const float* up, int64_t n, float* y) {
  DT_CHECK(gate && up && y) << "swiglu forward: null pointer";
  HostAccess(be, "SwiGLU");
  for (int64_t i = 0; i < n; ++i) y[i] = gate[i] * Sigmoid(gate[i]) * up[i];
}

void SwiGluBackward(Backend& be, const float* gate, const float* up, const float* dy, int64_t n,
                    float* dgate, float* dup) {
  DT_CHECK(gate && up && dy && dgate && dup) << "swiglu backward: null pointer";
  HostAccess(be, "SwiGLU");
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i], s = Sigmoid(g), silu = g * s;
    const float d = dy[i];
    dup[i] = d * silu;
    dgate[i] = d * up[i] * (s + g * s * (1.0f - s));  // silu'(g) = s (1 + g (1 - s))
  }
}

}  // namespace dt::rt
