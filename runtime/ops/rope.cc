#include "runtime/ops/rope.h"

#include <cmath>
#include <vector>

#include "base/check.h"
#include "runtime/ops/host_ops.h"

namespace dt::rt {
namespace {

// sign = +1 rotates by +angle (forward), -1 by -angle (backward: R^T = R(-angle)).
void Rotate(Backend& be, const RopeDims& d, const int64_t* positions, float* x, double sign) {
  DT_CHECK(x && positions) << "rope: null pointer";
  DT_CHECK(d.head_dim % 2 == 0) << "rope: head_dim " << d.head_dim << " must be even";
  DT_CHECK(d.theta > 0) << "rope: theta " << d.theta;
  HostAccess(be, "RoPE");
  const int64_t half = d.head_dim / 2;
  std::vector<double> inv_freq(half);
  for (int64_t i = 0; i < half; ++i)
    inv_freq[i] = std::pow(d.theta, -2.0 * static_cast<double>(i) / static_cast<double>(d.head_dim));
  std::vector<float> cs(half), sn(half);
  for (int64_t t = 0; t < d.seq; ++t) {
    const double p = static_cast<double>(positions[t]);
    for (int64_t i = 0; i < half; ++i) {
      const double a = p * inv_freq[i];
      cs[i] = static_cast<float>(std::cos(a));
      sn[i] = static_cast<float>(sign * std::sin(a));
    }
    float* row = x + t * d.batch * d.heads * d.head_dim;
    for (int64_t v = 0; v < d.batch * d.heads; ++v) {
      float* h = row + v * d.head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float a = h[i], b = h[i + half];
        h[i] = a * cs[i] - b * sn[i];
        h[i + half] = b * cs[i] + a * sn[i];
      }
    }
  }
}

}  // namespace

void RopeForward(Backend& be, const RopeDims& d, const int64_t* positions, float* x) {
  Rotate(be, d, positions, x, 1.0);
}

void RopeBackward(Backend& be, const RopeDims& d, const int64_t* positions, float* dx) {
  Rotate(be, d, positions, dx, -1.0);
}

}  // namespace dt::rt
