#include "runtime/ops/rmsnorm.h"

#include <cmath>

#include "base/check.h"
#include "runtime/backend/lane_reduce.h"
#include "runtime/backend/parallel_for.h"
#include "runtime/ops/host_ops.h"

namespace dt::rt {

void RmsNormForward(Backend& be, const float* x, const float* gamma, int64_t rows, int64_t cols,
                    float eps, float* y, float* rstd) {
  DT_CHECK(x && gamma && y && rstd) << "rmsnorm forward: null pointer";
  HostAccess(be, "RMSNorm");
  // Rows are independent (one thread each): the result does not depend on
  // the thread count.
  ForRange(rows, rows * cols > (1 << 14), [&](int64_t r) {
    const float* xr = x + r * cols;
    const double ss = LaneSum(cols, [xr](int64_t c) { return static_cast<double>(xr[c]) * xr[c]; });
    const float s = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(cols) + eps));
    rstd[r] = s;
    float* yr = y + r * cols;
    for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] * s * gamma[c];
  });
}

void RmsNormBackward(Backend& be, const float* x, const float* gamma, const float* rstd,
                     const float* dy, int64_t rows, int64_t cols, float* dx, float* dgamma) {
  DT_CHECK(x && gamma && rstd && dy && dx && dgamma) << "rmsnorm backward: null pointer";
  HostAccess(be, "RMSNorm");
  // With g = gamma * dy and s = rstd: dx = s * g - x * s^3 * mean_c(g * x).
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    const double s = rstd[r];
    const double gx =
        LaneSum(cols, [&](int64_t c) { return static_cast<double>(gamma[c]) * dyr[c] * xr[c]; });
    const double k = s * s * s * gx / static_cast<double>(cols);
    float* dxr = dx + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      dgamma[c] += static_cast<float>(dyr[c] * xr[c] * s);
      dxr[c] = static_cast<float>(s * gamma[c] * dyr[c] - xr[c] * k);
    }
  }
}

}  // namespace dt::rt
