// CUDA backend parity: every Backend primitive on the device vs the CPU
// oracle. Skips (GTEST_SKIP) when no CUDA device is present.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/cuda/cuda_backend.h"

#include "tests/runtime/test_util.h"

namespace dt::rt {
namespace {

using testing_util::Vec;

using testing_util::Random;

class CudaParity : public ::testing::Test {
 protected:
  void SetUp() override {
    auto count = CudaDeviceCount();
    if (!count.ok()) GTEST_SKIP() << count.status().message();
    if (*count == 0) GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount returned 0";
    auto be = MakeCudaBackend(0);
    ASSERT_TRUE(be.ok()) << be.status().message();
    gpu = std::move(*be);
  }
  float* Up(const Vec& v) {
    float* p = gpu->Alloc(v.size());
    gpu->CopyToDevice(p, v.data(), v.size());
    owned.push_back({p, v.size()});
    return p;
  }
  Vec Down(const float* p, size_t n) {
    Vec v(n);
    gpu->CopyToHost(v.data(), p, n);
    return v;
  }
  void TearDown() override {
    for (auto& [p, n] : owned) gpu->Free(p, n);
  }
  static void ExpectNear(const Vec& a, const Vec& b, float tol, const char* what) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i)
      ASSERT_NEAR(a[i], b[i], tol * (1.0f + std::fabs(a[i]))) << what << "[" << i << "]";
  }
  std::unique_ptr<Backend> cpu = MakeCpuBackend();
  std::unique_ptr<Backend> gpu;
  std::vector<std::pair<float*, size_t>> owned;
};

TEST_F(CudaParity, Gemm) {
  const int64_t m = 37, n = 19, k = 23;
  for (Trans ta : {Trans::kNo, Trans::kYes})
    for (Trans tb : {Trans::kNo, Trans::kYes}) {
      Vec a = Random(m * k, 1), b = Random(k * n, 2), c = Random(m * n, 3);
      const int64_t lda = ta == Trans::kNo ? k : m, ldb = tb == Trans::kNo ? n : k;
      float *da = Up(a), *db = Up(b), *dc = Up(c);
      cpu->Gemm(ta, tb, m, n, k, 0.7f, a.data(), lda, b.data(), ldb, 0.3f, c.data(), n);
      gpu->Gemm(ta, tb, m, n, k, 0.7f, da, lda, db, ldb, 0.3f, dc, n);
      ExpectNear(c, Down(dc, c.size()), 1e-5f, "gemm");
    }
}

TEST_F(CudaParity, Elementwise) {
  const int64_t rows = 9, cols = 300, n = rows * cols;
  Vec a = Random(n, 4), b = Random(n, 5), bias = Random(cols, 6);
  float *da = Up(a), *db = Up(b), *dbias = Up(bias), *dout = Up(Vec(n)), *dgrad = Up(Vec(cols));
  Vec out(n), grad(cols, 0.0f);
  cpu->Add(a.data(), b.data(), out.data(), n);
  gpu->Add(da, db, dout, n);
  ExpectNear(out, Down(dout, n), 1e-6f, "add");
  cpu->Axpy(2.0f, a.data(), out.data(), n);
  gpu->Axpy(2.0f, da, dout, n);
  cpu->Scale(out.data(), 0.5f, n);
  gpu->Scale(dout, 0.5f, n);
  cpu->AddBias(out.data(), bias.data(), rows, cols);
  gpu->AddBias(dout, dbias, rows, cols);
  ExpectNear(out, Down(dout, n), 1e-6f, "axpy/scale/bias");
  cpu->BiasGrad(a.data(), grad.data(), rows, cols);
  gpu->BiasGrad(da, dgrad, rows, cols);
  ExpectNear(grad, Down(dgrad, cols), 1e-5f, "bias grad");
}

TEST_F(CudaParity, Gelu) {
  const int64_t n = 1000;
  Vec x = Random(n, 7, 3.0f), dy = Random(n, 8), y(n), dx(n);
  float *dxx = Up(x), *ddy = Up(dy), *dyy = Up(Vec(n)), *ddx = Up(Vec(n));
  cpu->GeluForward(x.data(), y.data(), n);
  gpu->GeluForward(dxx, dyy, n);
  ExpectNear(y, Down(dyy, n), 1e-5f, "gelu");
  cpu->GeluBackward(x.data(), dy.data(), dx.data(), n);
  gpu->GeluBackward(dxx, ddy, ddx, n);
  ExpectNear(dx, Down(ddx, n), 1e-5f, "gelu backward");
}

TEST_F(CudaParity, LayerNorm) {
  const int64_t rows = 7, cols = 513;
  Vec x = Random(rows * cols, 9, 2.0f), g = Random(cols, 10), b = Random(cols, 11), dy = Random(rows * cols, 12);
  Vec y(rows * cols), mean(rows), rstd(rows), dx(rows * cols), dg(cols, 0.0f), dbb(cols, 0.0f);
  float *gx = Up(x), *gg = Up(g), *gb = Up(b), *gdy = Up(dy), *gy = Up(y), *gm = Up(mean), *gr = Up(rstd);
  float *gdx = Up(dx), *gdg = Up(dg), *gdb = Up(dbb);
  cpu->LayerNormForward(x.data(), g.data(), b.data(), y.data(), mean.data(), rstd.data(), rows, cols, 1e-5f);
  gpu->LayerNormForward(gx, gg, gb, gy, gm, gr, rows, cols, 1e-5f);
  ExpectNear(y, Down(gy, y.size()), 1e-4f, "layernorm");
  ExpectNear(rstd, Down(gr, rows), 1e-4f, "rstd");
  cpu->LayerNormBackward(x.data(), g.data(), mean.data(), rstd.data(), dy.data(), dx.data(), dg.data(), dbb.data(), rows, cols);
  gpu->LayerNormBackward(gx, gg, gm, gr, gdy, gdx, gdg, gdb, rows, cols);
  ExpectNear(dx, Down(gdx, dx.size()), 1e-4f, "layernorm dx");
  ExpectNear(dg, Down(gdg, cols), 1e-4f, "layernorm dgamma");
  ExpectNear(dbb, Down(gdb, cols), 1e-4f, "layernorm dbeta");
}

TEST_F(CudaParity, CausalSoftmax) {
  const int64_t period = 17, rows = 2 * period, cols = period;
  Vec x = Random(rows * cols, 13, 3.0f), dy = Random(rows * cols, 14), y(rows * cols), dx(rows * cols);
  float *gx = Up(x), *gdy = Up(dy), *gy = Up(y), *gdx = Up(dx);
  for (int64_t causal : {int64_t{0}, period}) {
    cpu->SoftmaxForward(x.data(), y.data(), rows, cols, 0.5f, causal);
    gpu->SoftmaxForward(gx, gy, rows, cols, 0.5f, causal);
    ExpectNear(y, Down(gy, y.size()), 1e-5f, "softmax");
    cpu->SoftmaxBackward(y.data(), dy.data(), dx.data(), rows, cols, 0.5f);
    gpu->SoftmaxBackward(gy, gdy, gdx, rows, cols, 0.5f);
    ExpectNear(dx, Down(gdx, dx.size()), 1e-5f, "softmax backward");
  }
}

}  // namespace
}  // namespace dt::rt
