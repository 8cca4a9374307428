#include "runtime/bench/bare_gemm.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "base/check.h"
#include "runtime/backend/bf16_gemm.h"
#include "runtime/bench/stats.h"

namespace dt::rt::bench {
namespace {

std::vector<float> RandomBuffer(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (auto& x : v) x = d(g);
  return v;
}

// C rows [r0, r0 + rows) of the product, one single-threaded library call.
void Part(const GemmShape& s, GemmLibrary lib, const float* a, const float* b, float* c,
          int64_t r0, int64_t rows) {
  if (rows <= 0) return;
  const float* ap = s.ta == Trans::kNo ? a + r0 * s.lda : a + r0;
  CpuGemmSerial(lib, s.ta, s.tb, rows, s.n, s.k, 1.0f, ap, s.lda, b, s.ldb,
                s.accumulate ? 1.0f : 0.0f, c + r0 * s.ldc, s.ldc);
}

void Run(const GemmShape& s, GemmLibrary lib, const float* a, const float* b, float* c,
         int threads) {
  const int64_t per = (s.m + threads - 1) / threads;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int t = 0; t < threads; ++t) {
    const int64_t r0 = t * per;
    Part(s, lib, a, b, c, r0, std::min(per, s.m - r0));
  }
}

// The native bf16 kernel on dense, already rounded operands.
void RunBf16(const GemmShape& s, const bf16_t* a, const bf16_t* b, float* c, int threads) {
  const int64_t per = (s.m + threads - 1) / threads;
  const int64_t a_rs = s.ta == Trans::kNo ? s.k : s.m;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int t = 0; t < threads; ++t) {
    const int64_t r0 = t * per, rows = std::min(per, s.m - r0);
    if (rows <= 0) continue;
    const bf16_t* ap = s.ta == Trans::kNo ? a + r0 * a_rs : a + r0;
    Bf16GemmSerial(s.ta, s.tb, rows, s.n, s.k, 1.0f, ap, a_rs, b, s.accumulate ? 1.0f : 0.0f,
                   c + r0 * s.ldc, s.ldc);
  }
}

std::vector<bf16_t> RandomBf16(size_t n, uint32_t seed) {
  const std::vector<float> f = RandomBuffer(n, seed);
  std::vector<bf16_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = FloatToBf16(f[i]);
  return v;
}

template <typename F>
double MedianOf(int reps, F run) {
  run();  // warm-up
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return Median(times);
}

}  // namespace

double BareBf16GemmSeconds(const GemmShape& s, int threads, int reps) {
  DT_CHECK(threads >= 1 && reps >= 1 && Bf16GemmNative()) << "threads " << threads << " reps " << reps;
  const auto a = RandomBf16(static_cast<size_t>(s.m * s.k), 1);
  const auto b = RandomBf16(static_cast<size_t>(s.k * s.n), 2);
  auto c = RandomBuffer(static_cast<size_t>(s.m * s.ldc), 3);
  return MedianOf(reps, [&] { RunBf16(s, a.data(), b.data(), c.data(), threads); });
}

double BareGemmSeconds(const GemmShape& s, int threads, int reps, GemmLibrary lib) {
  DT_CHECK(threads >= 1 && reps >= 1) << "threads " << threads << " reps " << reps;
  const bool tra = s.ta == Trans::kYes, trb = s.tb == Trans::kYes;
  // Stored shapes: A is [m, k] or [k, m]; B is [k, n] or [n, k]; rows of ld floats.
  const auto a = RandomBuffer(static_cast<size_t>((tra ? s.k : s.m) * s.lda), 1);
  const auto b = RandomBuffer(static_cast<size_t>((trb ? s.n : s.k) * s.ldb), 2);
  auto c = RandomBuffer(static_cast<size_t>(s.m * s.ldc), 3);
  return MedianOf(reps, [&] { Run(s, lib, a.data(), b.data(), c.data(), threads); });
}

}  // namespace dt::rt::bench
