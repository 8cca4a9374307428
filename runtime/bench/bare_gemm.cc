#include "runtime/bench/bare_gemm.h"

// Same Eigen configuration as runtime/backend/cpu_backend.cc (Eigen's own
// threading off; the template instances must agree across the program).
#define EIGEN_DONT_PARALLELIZE
#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "base/check.h"
#include "runtime/bench/stats.h"

namespace dt::rt::bench {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using CMap = Eigen::Map<const RowMat, 0, Eigen::OuterStride<>>;
using MMap = Eigen::Map<RowMat, 0, Eigen::OuterStride<>>;

std::vector<float> RandomBuffer(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (auto& x : v) x = d(g);
  return v;
}

// C rows [r0, r0 + rows) of the product, one single-threaded Eigen call.
void Part(const GemmShape& s, const float* a, const float* b, float* c, int64_t r0,
          int64_t rows) {
  if (rows <= 0) return;
  const bool tra = s.ta == Trans::kYes, trb = s.tb == Trans::kYes;
  CMap B(b, trb ? s.n : s.k, trb ? s.k : s.n, Eigen::OuterStride<>(s.ldb));
  MMap C(c + r0 * s.ldc, rows, s.n, Eigen::OuterStride<>(s.ldc));
  if (!tra) {
    CMap A(a + r0 * s.lda, rows, s.k, Eigen::OuterStride<>(s.lda));
    if (s.accumulate) {
      if (trb) C.noalias() += A * B.transpose();
      else C.noalias() += A * B;
    } else {
      if (trb) C.noalias() = A * B.transpose();
      else C.noalias() = A * B;
    }
  } else {
    CMap A(a + r0, s.k, rows, Eigen::OuterStride<>(s.lda));
    if (s.accumulate) {
      if (trb) C.noalias() += A.transpose() * B.transpose();
      else C.noalias() += A.transpose() * B;
    } else {
      if (trb) C.noalias() = A.transpose() * B.transpose();
      else C.noalias() = A.transpose() * B;
    }
  }
}

void Run(const GemmShape& s, const float* a, const float* b, float* c, int threads) {
  const int64_t per = (s.m + threads - 1) / threads;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int t = 0; t < threads; ++t) {
    const int64_t r0 = t * per;
    Part(s, a, b, c, r0, std::min(per, s.m - r0));
  }
}

}  // namespace

double BareGemmSeconds(const GemmShape& s, int threads, int reps) {
  DT_CHECK(threads >= 1 && reps >= 1) << "threads " << threads << " reps " << reps;
  const bool tra = s.ta == Trans::kYes, trb = s.tb == Trans::kYes;
  // Stored shapes: A is [m, k] or [k, m]; B is [k, n] or [n, k]; rows of ld floats.
  const auto a = RandomBuffer(static_cast<size_t>((tra ? s.k : s.m) * s.lda), 1);
  const auto b = RandomBuffer(static_cast<size_t>((trb ? s.n : s.k) * s.ldb), 2);
  auto c = RandomBuffer(static_cast<size_t>(s.m * s.ldc), 3);
  Run(s, a.data(), b.data(), c.data(), threads);  // warm-up
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    Run(s, a.data(), b.data(), c.data(), threads);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return Median(times);
}

}  // namespace dt::rt::bench
