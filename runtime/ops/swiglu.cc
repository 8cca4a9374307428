#include "runtime/ops/swiglu.h"

#include <algorithm>

#include <Eigen/Core>

#include "base/check.h"
#include "runtime/ops/host_ops.h"

namespace dt::rt {
namespace {

constexpr int64_t kChunk = 1024;  // elements per vectorised sigmoid chunk

// s = sigmoid(g) for len <= kChunk elements, with Eigen's vectorised exp
// through an aligned buffer (libm's scalar expf made SwiGLU several times
// slower than its memory traffic, which is how the planner prices it).
// Each element's value depends on its position in the chunk only, so a
// given plan is reproducible run to run.
void Sigmoid(const float* g, int64_t len, float* s) {
  Eigen::Map<const Eigen::ArrayXf> G(g, len);
  Eigen::Map<Eigen::ArrayXf, Eigen::Aligned64> S(s, len);
  S = ((-G).exp() + 1.0f).inverse();
}

}  // namespace

void SwiGluForward(Backend& be, const float* gate, const float* up, int64_t n, float* y) {
  DT_CHECK(gate && up && y) << "swiglu forward: null pointer";
  HostAccess(be, "SwiGLU");
  alignas(64) float s[kChunk];
  for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const int64_t len = std::min(kChunk, n - i0);
    Sigmoid(gate + i0, len, s);
    for (int64_t j = 0; j < len; ++j) y[i0 + j] = gate[i0 + j] * s[j] * up[i0 + j];
  }
}

void SwiGluBackward(Backend& be, const float* gate, const float* up, const float* dy, int64_t n,
                    float* dgate, float* dup) {
  DT_CHECK(gate && up && dy && dgate && dup) << "swiglu backward: null pointer";
  HostAccess(be, "SwiGLU");
  alignas(64) float s[kChunk];
  for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const int64_t len = std::min(kChunk, n - i0);
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
