#include "runtime/bench/profiling_backend.h"

#include <chrono>
#include <sstream>

namespace dt::rt::bench {

std::string GemmShape::ToString() const {
  std::ostringstream os;
  os << (ta == Trans::kYes ? 'T' : 'N') << (tb == Trans::kYes ? 'T' : 'N') << " m=" << m
     << " n=" << n << " k=" << k << " lda=" << lda << " ldb=" << ldb << " ldc=" << ldc
     << (accumulate ? " (+=)" : "");
  return os.str();
}

template <typename F>
void ProfilingBackend::Timed(const char* op, F&& f) {
  if (gemms_only_) {
    f();
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  f();
  const auto t1 = std::chrono::steady_clock::now();
  OpStat& s = ops_[op];
  ++s.calls;
  s.seconds += std::chrono::duration<double>(t1 - t0).count();
}

void ProfilingBackend::Reset() {
  ops_.clear();
  gemms_.clear();
  gemm_times_.clear();
}

double ProfilingBackend::total_seconds() const {
  double t = 0;
  for (const auto& [name, s] : ops_) t += s.seconds;
  return t;
}

double ProfilingBackend::gemm_flops() const {
  double f = 0;
  for (const auto& [shape, calls] : gemms_) f += shape.flops() * double(calls);
  return f;
}

float* ProfilingBackend::Alloc(size_t n) {
  float* p = nullptr;
  Timed("alloc", [&] { p = inner_.Alloc(n); });
  return p;
}
void ProfilingBackend::Free(float* p, size_t n) {
  Timed("free", [&] { inner_.Free(p, n); });
}
void ProfilingBackend::CopyToDevice(float* dst, const float* src, size_t n) {
  Timed("copy", [&] { inner_.CopyToDevice(dst, src, n); });
}
void ProfilingBackend::CopyToHost(float* dst, const float* src, size_t n) {
  Timed("copy", [&] { inner_.CopyToHost(dst, src, n); });
}
void ProfilingBackend::Copy(float* dst, const float* src, size_t n) {
  Timed("copy", [&] { inner_.Copy(dst, src, n); });
}
void ProfilingBackend::Fill(float* x, float v, size_t n) {
  Timed("fill", [&] { inner_.Fill(x, v, n); });
}

void ProfilingBackend::Gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
                            const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                            float* c, int64_t ldc) {
  const auto t0 = std::chrono::steady_clock::now();
  inner_.Gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const GemmShape s{ta, tb, m, n, k, lda, ldb, ldc, beta != 0.0f};
  OpStat& st = gemm_times_[s];
  ++st.calls;
  st.seconds += dt;
  if (gemms_only_) return;
  ++gemms_[s];
  OpStat& g = ops_["gemm"];
  ++g.calls;
  g.seconds += dt;
}

void ProfilingBackend::Add(const float* a, const float* b, float* out, int64_t n) {
  Timed("add", [&] { inner_.Add(a, b, out, n); });
}
void ProfilingBackend::Axpy(float alpha, const float* x, float* y, int64_t n) {
  Timed("axpy", [&] { inner_.Axpy(alpha, x, y, n); });
}
void ProfilingBackend::Scale(float* x, float alpha, int64_t n) {
  Timed("scale", [&] { inner_.Scale(x, alpha, n); });
}
void ProfilingBackend::AddBias(float* y, const float* bias, int64_t rows, int64_t cols) {
  Timed("add_bias", [&] { inner_.AddBias(y, bias, rows, cols); });
}
void ProfilingBackend::BiasGrad(const float* dy, float* db, int64_t rows, int64_t cols) {
  Timed("bias_grad", [&] { inner_.BiasGrad(dy, db, rows, cols); });
}
void ProfilingBackend::GeluForward(const float* x, float* y, int64_t n) {
  Timed("gelu_fwd", [&] { inner_.GeluForward(x, y, n); });
}
void ProfilingBackend::GeluBackward(const float* x, const float* dy, float* dx, int64_t n) {
  Timed("gelu_bwd", [&] { inner_.GeluBackward(x, dy, dx, n); });
}
void ProfilingBackend::LayerNormForward(const float* x, const float* gamma, const float* beta,
                                        float* y, float* mean, float* rstd, int64_t rows,
                                        int64_t cols, float eps) {
  Timed("layernorm_fwd",
        [&] { inner_.LayerNormForward(x, gamma, beta, y, mean, rstd, rows, cols, eps); });
}
void ProfilingBackend::LayerNormBackward(const float* x, const float* gamma, const float* mean,
                                         const float* rstd, const float* dy, float* dx,
                                         float* dgamma, float* dbeta, int64_t rows,
                                         int64_t cols) {
  Timed("layernorm_bwd", [&] {
    inner_.LayerNormBackward(x, gamma, mean, rstd, dy, dx, dgamma, dbeta, rows, cols);
  });
}
void ProfilingBackend::SoftmaxForward(const float* x, float* y, int64_t rows, int64_t cols,
                                      float scale, int64_t causal_period) {
  Timed("softmax_fwd", [&] { inner_.SoftmaxForward(x, y, rows, cols, scale, causal_period); });
}
void ProfilingBackend::SoftmaxBackward(const float* y, const float* dy, float* dx, int64_t rows,
                                       int64_t cols, float scale) {
  Timed("softmax_bwd", [&] { inner_.SoftmaxBackward(y, dy, dx, rows, cols, scale); });
}

}  // namespace dt::rt::bench
