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

// The angle table RoPE keeps between calls (rope.cc) must give what the
// formula gives whatever came before it on the thread: a different theta
// or head_dim, and positions beyond those seen so far (the table grows).
TEST_F(LlamaOpsTest, RopeTableServesAnyThetaHeadDimAndPosition) {
  auto direct = [](const RopeDims& d, const std::vector<int64_t>& pos, Vec x) {
    const int64_t half = d.head_dim / 2;
    for (int64_t t = 0; t < d.seq; ++t)
      for (int64_t v = 0; v < d.batch * d.heads; ++v) {
        float* h = x.data() + (t * d.batch * d.heads + v) * d.head_dim;
        for (int64_t i = 0; i < half; ++i) {
          const double ang = static_cast<double>(pos[t]) *
                             std::pow(d.theta, -2.0 * static_cast<double>(i) / static_cast<double>(d.head_dim));
          const float c = static_cast<float>(std::cos(ang)), s = static_cast<float>(std::sin(ang));
          const float a = h[i], b = h[i + half];
          h[i] = a * c - b * s;
          h[i + half] = b * c + a * s;
        }
      }
    return x;
  };
  const std::vector<std::pair<RopeDims, std::vector<int64_t>>> calls = {
      {RopeDims{2, 1, 2, 8, 10000.0}, {0, 1}},        // fills the table to position 1
      {RopeDims{3, 1, 2, 8, 10000.0}, {7, 300, 2}},   // grows it
      {RopeDims{2, 2, 1, 4, 500.0}, {3, 4}},          // another theta and head_dim
      {RopeDims{2, 1, 2, 8, 10000.0}, {299, 4096}}};  // back, and further out
  uint64_t seed = 11;
  for (const auto& [d, pos] : calls) {
    Vec x = Random(d.seq * d.batch * d.heads * d.head_dim, seed++);
    Vec y = x;
    RopeForward(*be, d, pos.data(), y.data());
    const Vec want = direct(d, pos, x);
    for (size_t e = 0; e < y.size(); ++e)  // equal up to the compiler's fused multiply-adds
      ASSERT_NEAR(y[e], want[e], 1e-6f * (1.0f + std::fabs(want[e]))) << "theta " << d.theta << " head_dim "
                                                                       << d.head_dim << " element " << e;
  }
}

}  // namespace
}  // namespace dt::rt
