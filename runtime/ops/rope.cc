#include "runtime/ops/rope.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/check.h"
#include "runtime/ops/host_ops.h"

namespace dt::rt {
namespace {

// cos and sin of every (position, pair) angle up to the largest position
// asked for, per thread (LocalComm tests run ranks as threads): computed
// once per (theta, head_dim) instead of seq x head_dim/2 sincos per call,
// which was 3-4% of a llama-/mixtral-tiny step. Same values as computing
// them in place (double angle, rounded to float).
struct AngleTable {
  double theta = 0;
  int64_t head_dim = 0, positions = 0;
  std::vector<float> cos, sin;  // [position][pair]
};

const AngleTable& Angles(const RopeDims& d, int64_t max_position) {
  thread_local AngleTable t;
  if (t.theta != d.theta || t.head_dim != d.head_dim || t.positions <= max_position) {
    const int64_t half = d.head_dim / 2;
    const int64_t n = std::max(max_position + 1, t.theta == d.theta && t.head_dim == d.head_dim ? 2 * t.positions : 0);
    std::vector<double> inv_freq(half);
    for (int64_t i = 0; i < half; ++i)
      inv_freq[i] = std::pow(d.theta, -2.0 * static_cast<double>(i) / static_cast<double>(d.head_dim));
    t.cos.resize(n * half);
    t.sin.resize(n * half);
    for (int64_t p = 0; p < n; ++p)
      for (int64_t i = 0; i < half; ++i) {
        const double a = static_cast<double>(p) * inv_freq[i];
        t.cos[p * half + i] = static_cast<float>(std::cos(a));
        t.sin[p * half + i] = static_cast<float>(std::sin(a));
      }
    t.theta = d.theta;
    t.head_dim = d.head_dim;
    t.positions = n;
  }
  return t;
}

// sign = +1 rotates by +angle (forward), -1 by -angle (backward: R^T = R(-angle)).
void Rotate(Backend& be, const RopeDims& d, const int64_t* positions, float* x, float sign) {
  DT_CHECK(x && positions) << "rope: null pointer";
  DT_CHECK(d.head_dim % 2 == 0) << "rope: head_dim " << d.head_dim << " must be even";
  DT_CHECK(d.theta > 0) << "rope: theta " << d.theta;
  HostAccess(be, "RoPE");
  const int64_t half = d.head_dim / 2;
  int64_t max_position = 0;
  for (int64_t t = 0; t < d.seq; ++t) {
    DT_CHECK_GE(positions[t], 0) << "rope: negative position";
    max_position = std::max(max_position, positions[t]);
  }
  const AngleTable& table = Angles(d, max_position);
  std::vector<float> sn(half);
  for (int64_t t = 0; t < d.seq; ++t) {
    const float* cs = table.cos.data() + positions[t] * half;
    const float* s = table.sin.data() + positions[t] * half;
    for (int64_t i = 0; i < half; ++i) sn[i] = sign * s[i];
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
  Rotate(be, d, positions, x, 1.0f);
}

void RopeBackward(Backend& be, const RopeDims& d, const int64_t* positions, float* dx) {
  Rotate(be, d, positions, dx, -1.0f);
}

}  // namespace dt::rt
