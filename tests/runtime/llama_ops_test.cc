// Llama's ops (RMSNorm, SwiGLU, RoPE): values against direct formulas and
// backward against central finite differences of a random projection
// L = sum_i r_i y_i (double), fp32 forward.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/ops/rmsnorm.h"
#include "runtime/ops/rope.h"
#include "runtime/ops/swiglu.h"
#include "tests/runtime/test_util.h"

namespace dt::rt {
namespace {

using testing_util::Random;
using testing_util::Vec;

double Dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
  return s;
}

void CheckGrad(const char* what, Vec& x, const Vec& analytic, const std::function<double()>& loss,
               double eps = 1e-2, double rtol = 1e-2, double atol = 1e-3) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  int checked = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float orig = x[i];
    x[i] = orig + static_cast<float>(eps);
    const double lp = loss();
    x[i] = orig - static_cast<float>(eps);
    const double lm = loss();
    x[i] = orig;
    const double numeric = (lp - lm) / (2 * eps);
    EXPECT_NEAR(analytic[i], numeric, atol + rtol * std::max(std::fabs(numeric), std::fabs(double(analytic[i]))))
        << what << "[" << i << "]";
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

class LlamaOpsTest : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> be = MakeCpuBackend();
};

TEST_F(LlamaOpsTest, RmsNormValuesAndGradients) {
  const int64_t rows = 3, cols = 8;
  const float eps = 1e-5f;
  Vec x = Random(rows * cols, 1), g = Random(cols, 2, 0.5f), r = Random(rows * cols, 3);
  for (auto& v : g) v += 1.0f;
  Vec y(rows * cols), rstd(rows);
  auto fwd = [&] {
    RmsNormForward(*be, x.data(), g.data(), rows, cols, eps, y.data(), rstd.data());
    return Dot(y, r);
  };
  fwd();
  double ss = 0;
  for (int c = 0; c < cols; ++c) ss += double(x[cols + c]) * x[cols + c];
  const double ref_rstd = 1.0 / std::sqrt(ss / cols + eps);
  EXPECT_NEAR(rstd[1], ref_rstd, 1e-5 * ref_rstd);
  EXPECT_NEAR(y[cols + 5], x[cols + 5] * ref_rstd * g[5], 1e-5);
  Vec dx(x.size()), dg(g.size(), 0.0f);
  RmsNormBackward(*be, x.data(), g.data(), rstd.data(), r.data(), rows, cols, dx.data(), dg.data());
  CheckGrad("dx", x, dx, fwd);
  CheckGrad("dgamma", g, dg, fwd);
}

TEST_F(LlamaOpsTest, SwiGluValuesAndGradients) {
  const int64_t n = 40;
  Vec gate = Random(n, 4, 2.0f), up = Random(n, 5), r = Random(n, 6), y(n);
  auto fwd = [&] {
    SwiGluForward(*be, gate.data(), up.data(), n, y.data());
    return Dot(y, r);
  };
  fwd();
  const double g = gate[7];
  EXPECT_NEAR(y[7], g / (1 + std::exp(-g)) * up[7], 1e-6);
  Vec dgate(n), dup(n);
  SwiGluBackward(*be, gate.data(), up.data(), r.data(), n, dgate.data(), dup.data());
  CheckGrad("dgate", gate, dgate, fwd, 1e-3);
  CheckGrad("dup", up, dup, fwd, 1e-3);
}

TEST_F(LlamaOpsTest, RopeRotatesHalvesByPositionAndInvertsInBackward) {
  RopeDims d{3, 2, 2, 8, 500.0};  // seq, batch, heads, head_dim, theta
  const std::vector<int64_t> pos = {5, 6, 17};  // not the local index: as under context parallelism
  const int64_t n = d.seq * d.batch * d.heads * d.head_dim;
  Vec x = Random(n, 7), r = Random(n, 8);
  Vec y = x;
  RopeForward(*be, d, pos.data(), y.data());
  // Element (t=2, b=1, head=1), pair i=1: angle = 17 * 500^(-2/8).
  const int64_t base = ((2 * d.batch + 1) * d.heads + 1) * d.head_dim;
  const double a = 17.0 * std::pow(500.0, -2.0 / 8.0);
  EXPECT_NEAR(y[base + 1], x[base + 1] * std::cos(a) - x[base + 5] * std::sin(a), 1e-5);
  EXPECT_NEAR(y[base + 5], x[base + 5] * std::cos(a) + x[base + 1] * std::sin(a), 1e-5);
  // Pair 0 of position 0 would be unrotated; position 5 is not.
  EXPECT_NE(y[0], x[0]);
  // Norm preserved per head (a rotation).
  double nx = 0, ny = 0;
  for (int64_t e = 0; e < d.head_dim; ++e) {
    nx += double(x[base + e]) * x[base + e];
    ny += double(y[base + e]) * y[base + e];
  }
  EXPECT_NEAR(nx, ny, 1e-4 * nx);
  // Backward is the gradient of L = r . rope(x).
  auto fwd = [&] {
    Vec t = x;
    RopeForward(*be, d, pos.data(), t.data());
    return Dot(t, r);
  };
  Vec dx = r;
  RopeBackward(*be, d, pos.data(), dx.data());
  CheckGrad("dx", x, dx, fwd);
}

}  // namespace
}  // namespace dt::rt
