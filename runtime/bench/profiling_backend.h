// ProfilingBackend: a Backend decorator for the runtime benchmark. Forwards
// every call to an inner backend (not owned; must outlive it) and records,
// per primitive, the number of calls and the wall time spent in it, plus
// every GEMM's exact shape (transposes, m, n, k, leading dimensions, beta)
// with its call count and time. The benchmark derives the step's FLOPs from these
// shapes (2mnk per call, exactly what was multiplied) and replays them as
// bare GEMMs (bare_gemm.h).
//
// Timing is host wall time around the call, so it is meaningful only for a
// synchronous backend (the CPU backend). Not thread-safe, like Backend.
// kGemmsOnly (the profiler's in-step GEMM timing, planner/profiler/
// measure_compute.cc) forwards every other primitive untimed, so the step
// around the timed GEMMs runs at nearly the undecorated speed; a GEMM's
// recorded time is the inner call alone, its bookkeeping outside.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "runtime/backend/backend.h"

namespace dt::rt::bench {

struct GemmShape {
  Trans ta = Trans::kNo, tb = Trans::kNo;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  bool accumulate = false;  // beta != 0
  double flops() const { return 2.0 * double(m) * double(n) * double(k); }
  bool operator<(const GemmShape& o) const {
    return std::tie(ta, tb, m, n, k, lda, ldb, ldc, accumulate) <
           std::tie(o.ta, o.tb, o.m, o.n, o.k, o.lda, o.ldb, o.ldc, o.accumulate);
  }
  std::string ToString() const;  // "NT m=1024 n=2304 k=768 lda=.. (+=)"
};

struct OpStat {
  int64_t calls = 0;
  double seconds = 0.0;
};

class ProfilingBackend final : public Backend {
 public:
  enum Mode { kEverything, kGemmsOnly };
  explicit ProfilingBackend(Backend& inner, Mode mode = kEverything)
      : inner_(inner), gemms_only_(mode == kGemmsOnly) {}
  const char* name() const override { return inner_.name(); }
  GemmInputs gemm_inputs() const override { return inner_.gemm_inputs(); }
  bool host_accessible() const override { return inner_.host_accessible(); }

  // Clears all counters (e.g. after warm-up steps).
  void Reset();
  const std::map<std::string, OpStat>& ops() const { return ops_; }
  const std::map<GemmShape, int64_t>& gemms() const { return gemms_; }
  // Calls and wall time per GEMM shape.
  const std::map<GemmShape, OpStat>& gemm_times() const { return gemm_times_; }
  double total_seconds() const;   // time inside any primitive
  double gemm_flops() const;      // sum of 2mnk over recorded GEMM calls

  float* Alloc(size_t n) override;
  void Free(float* p, size_t n) override;
  void CopyToDevice(float* dst, const float* src, size_t n) override;
  void CopyToHost(float* dst, const float* src, size_t n) override;
  void Copy(float* dst, const float* src, size_t n) override;
  void Fill(float* x, float v, size_t n) override;
  void Synchronize() override { inner_.Synchronize(); }
  void Gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
            int64_t lda, const float* b, int64_t ldb, float beta, float* c,
            int64_t ldc) override;
  void Add(const float* a, const float* b, float* out, int64_t n) override;
  void Axpy(float alpha, const float* x, float* y, int64_t n) override;
  void Scale(float* x, float alpha, int64_t n) override;
  void AddBias(float* y, const float* bias, int64_t rows, int64_t cols) override;
  void BiasGrad(const float* dy, float* db, int64_t rows, int64_t cols) override;
  void GeluForward(const float* x, float* y, int64_t n) override;
  void GeluBackward(const float* x, const float* dy, float* dx, int64_t n) override;
  void LayerNormForward(const float* x, const float* gamma, const float* beta, float* y,
                        float* mean, float* rstd, int64_t rows, int64_t cols,
                        float eps) override;
  void LayerNormBackward(const float* x, const float* gamma, const float* mean,
                         const float* rstd, const float* dy, float* dx, float* dgamma,
                         float* dbeta, int64_t rows, int64_t cols) override;
  void SoftmaxForward(const float* x, float* y, int64_t rows, int64_t cols, float scale,
                      int64_t causal_period) override;
  void SoftmaxBackward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                       float scale) override;

 private:
  template <typename F>
  void Timed(const char* op, F&& f);

  Backend& inner_;
  const bool gemms_only_;
  std::map<std::string, OpStat> ops_;
  std::map<GemmShape, int64_t> gemms_;
  std::map<GemmShape, OpStat> gemm_times_;
};

}  // namespace dt::rt::bench
