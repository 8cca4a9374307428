// CpuBackend: GEMMs from the selected library (cpu_gemm.h: a BLAS or Eigen),
// OpenMP loops elsewhere. Reductions run in a fixed order so results do not
// depend on thread count (recompute and parity tests compare bitwise). The
// GEMM libraries' own threading picks its blocking from the thread count it
// gets (which varies under load), so it is disabled; a GEMM is split instead
// into one block of C's rows per OpenMP thread, each a single-threaded
// library call, so results are reproducible for a given thread count. Block
// boundaries are multiples of 64 rows and every block has >= 64 rows (or is
// all of C): Eigen accumulates each element of C in an order that depends on
// k only, so with Eigen the result does not depend on the thread count at all
// (with OpenBLAS it does, in the last bits: cpu_gemm.h). One block per thread
// (not many small ones) matters for speed: every product repacks all of B.
// With bf16 GEMM inputs (precision: bf16 plans) A and B are first rounded
// into dense bf16 copies (tracked temporaries, parallel over rows), then the
// same row blocks run oneDNN's bf16 kernel, or the library's fp32 GEMM on
// the rounded values widened back (bf16_gemm.h says when).
#define EIGEN_DONT_PARALLELIZE
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstring>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "base/check.h"
#include "runtime/backend/backend.h"
#include "runtime/backend/bf16_gemm.h"
#include "runtime/backend/cpu_gemm.h"
#include "runtime/backend/gelu_math.h"
#include "runtime/backend/lane_reduce.h"
#include "runtime/backend/parallel_for.h"
#include "runtime/backend/vec_exp.h"
#include "runtime/tensor/allocator.h"

namespace dt::rt {
namespace {

constexpr int64_t kParallelMin = 1 << 14;  // elements below which threads cost more than they save
constexpr int64_t kGeluChunk = 1024;        // elements per vectorised GeLU chunk
// bf16-input GEMMs with m*n*k below this run the library's fp32 GEMM on the
// rounded operands instead of oneDNN's bf16 kernel (the same arithmetic:
// exact products of bf16 values, fp32 sums). oneDNN's per-call cost (memory
// objects, argument map, stream) dominates small calls: on an AMD EPYC
// (Zen 5) a 64x16x64 attention-head GEMM took 4.6 us per call native
// against 1.0 us in fp32, and the native kernel wins only from about
// 64x64x256 (2 MFLOP, 12 vs 14 us) up.
constexpr int64_t kNativeBf16MinVolume = 1 << 19;

// Copies the stored rows x cols matrix x (row stride ld) into dense rows.
template <typename T, typename F>
void DenseCopy(const float* x, int64_t rows, int64_t cols, int64_t ld, T* out, F convert) {
  ForRange(rows, rows * cols > kParallelMin, [&](int64_t r) {
    const float* xr = x + r * ld;
    T* o = out + r * cols;
    for (int64_t j = 0; j < cols; ++j) o[j] = convert(xr[j]);
  });
}

class CpuBackend final : public Backend {
 public:
  CpuBackend(GemmLibrary gemm, GemmInputs inputs)
      : gemm_(gemm), inputs_(inputs),
        native_bf16_(inputs == GemmInputs::kBf16 && gemm != GemmLibrary::kEigen && Bf16GemmNative()) {}
  const char* name() const override { return "cpu"; }
  GemmInputs gemm_inputs() const override { return inputs_; }
  bool host_accessible() const override { return true; }

  float* Alloc(size_t n) override { return AllocFloats(n); }
  void Free(float* p, size_t n) override { FreeFloats(p, n); }
  void CopyToDevice(float* dst, const float* src, size_t n) override { Copy(dst, src, n); }
  void CopyToHost(float* dst, const float* src, size_t n) override { Copy(dst, src, n); }
  void Copy(float* dst, const float* src, size_t n) override {
    if (n > 0 && dst != src) std::memmove(dst, src, n * sizeof(float));
  }
  void Fill(float* x, float v, size_t n) override {
    for (size_t i = 0; i < n; ++i) x[i] = v;
  }

  void Gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
            int64_t lda, const float* b, int64_t ldb, float beta, float* c,
            int64_t ldc) override {
    DT_CHECK(c != nullptr && m >= 0 && n >= 0 && k >= 0) << "gemm m=" << m << " n=" << n;
    if (m == 0 || n == 0) return;
    if (k == 0) {  // C = beta * C
      for (int64_t r = 0; r < m; ++r) {
        float* cr = c + r * ldc;
        for (int64_t j = 0; j < n; ++j) cr[j] = beta == 0.0f ? 0.0f : beta * cr[j];
      }
      return;
    }
    DT_CHECK(a != nullptr && b != nullptr) << "gemm null input";
    if (inputs_ == GemmInputs::kBf16) return GemmBf16(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    Blocks(m, n, k, [&](int64_t r0, int64_t rows) {
      // op(A) rows r0.. are A's rows r0.. (no transpose) or its columns r0.. (transpose).
      const float* ab = ta == Trans::kNo ? a + r0 * lda : a + r0;
      CpuGemmSerial(gemm_, ta, tb, rows, n, k, alpha, ab, lda, b, ldb, beta, c + r0 * ldc, ldc);
    });
  }

  // Runs gemm(r0, rows) over the row blocks of C described at the top.
  template <typename F>
  void Blocks(int64_t m, int64_t n, int64_t k, F gemm) {
    // Block b of `blocks` covers 64-row units [units*b/blocks, units*(b+1)/blocks);
    // the last block also takes the m % 64 leftover rows.
    constexpr int64_t kRowUnit = 64;
    const int64_t units = std::max<int64_t>(1, m / kRowUnit);
    int64_t blocks = 1;
#ifdef _OPENMP
    if (m * n * k > (1 << 18) && !omp_in_parallel() && GemmLibraryReentrant(gemm_))
      blocks = std::min<int64_t>(units, omp_get_max_threads());
#endif
    auto block_start = [&](int64_t blk) {
      return blk == blocks ? m : kRowUnit * (units * blk / blocks);
    };
    ForRange(blocks, blocks > 1, [&](int64_t blk) {
      const int64_t r0 = block_start(blk);
      gemm(r0, block_start(blk + 1) - r0);
    });
  }

  // bf16 inputs: dense rounded copies of A and B (same orientation), then the
  // row blocks on them. Stored shapes: A [m, k] or [k, m]; B [k, n] or [n, k].
  void GemmBf16(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
    const bool tra = ta == Trans::kYes, trb = tb == Trans::kYes;
    const int64_t a_rows = tra ? k : m, a_cols = tra ? m : k;
    const int64_t b_rows = trb ? n : k, b_cols = trb ? k : n;
    if (native_bf16_ && m * n * k >= kNativeBf16MinVolume) {
      Bf16Buffer a16(a_rows * a_cols, /*zero=*/false), b16(b_rows * b_cols, /*zero=*/false);
      auto round = [](float f) { return FloatToBf16(f); };  // a lambda, so it inlines
      DenseCopy(a, a_rows, a_cols, lda, a16.data(), round);
      DenseCopy(b, b_rows, b_cols, ldb, b16.data(), round);
      Blocks(m, n, k, [&](int64_t r0, int64_t rows) {
        const bf16_t* ab = tra ? a16.data() + r0 : a16.data() + r0 * a_cols;
        Bf16GemmSerial(ta, tb, rows, n, k, alpha, ab, a_cols, b16.data(), beta, c + r0 * ldc, ldc);
      });
      return;
    }
    auto rounded = [](float f) { return Bf16ToFloat(FloatToBf16(f)); };
    float* a32 = AllocFloatsUninitialized(static_cast<size_t>(a_rows * a_cols));
    float* b32 = AllocFloatsUninitialized(static_cast<size_t>(b_rows * b_cols));
    DenseCopy(a, a_rows, a_cols, lda, a32, rounded);
    DenseCopy(b, b_rows, b_cols, ldb, b32, rounded);
    Blocks(m, n, k, [&](int64_t r0, int64_t rows) {
      const float* ab = tra ? a32 + r0 : a32 + r0 * a_cols;
      CpuGemmSerial(gemm_, ta, tb, rows, n, k, alpha, ab, a_cols, b32, b_cols, beta, c + r0 * ldc, ldc);
    });
    FreeFloats(a32, static_cast<size_t>(a_rows * a_cols));
    FreeFloats(b32, static_cast<size_t>(b_rows * b_cols));
  }

  void Add(const float* a, const float* b, float* out, int64_t n) override {
    ForRange(n, n > kParallelMin, [&](int64_t i) { out[i] = a[i] + b[i]; });
  }
  void Axpy(float alpha, const float* x, float* y, int64_t n) override {
    ForRange(n, n > kParallelMin, [&](int64_t i) { y[i] += alpha * x[i]; });
  }
  void Scale(float* x, float alpha, int64_t n) override {
    ForRange(n, n > kParallelMin, [&](int64_t i) { x[i] *= alpha; });
  }
  void AddBias(float* y, const float* bias, int64_t rows, int64_t cols) override {
    ForRange(rows, rows * cols > kParallelMin, [&](int64_t r) {
      float* yr = y + r * cols;
      for (int64_t c = 0; c < cols; ++c) yr[c] += bias[c];
    });
  }
  void BiasGrad(const float* dy, float* db, int64_t rows, int64_t cols) override {
    // Parallel over columns; each column summed over rows in order.
    ForRange((cols + 63) / 64, rows * cols > kParallelMin, [&](int64_t blk) {
      const int64_t c0 = blk * 64, c1 = std::min(cols, c0 + 64);
      for (int64_t r = 0; r < rows; ++r) {
        const float* d = dy + r * cols;
        for (int64_t c = c0; c < c1; ++c) db[c] += d[c];
      }
    });
  }
  // GeLU in chunks with Eigen's vectorised tanh (libm's scalar tanhf made
  // GeLU cost as much as a tenth of the layer's GEMMs). Same formulas as
  // gelu_math.h; tanh differs from std::tanh by a few ulp. Elementwise, so
  // the result does not depend on the thread count.
  void GeluForward(const float* x, float* y, int64_t n) override {
    const int64_t chunks = (n + kGeluChunk - 1) / kGeluChunk;
    ForRange(chunks, n > kParallelMin, [&](int64_t ch) {
      const int64_t i0 = ch * kGeluChunk, len = std::min(kGeluChunk, n - i0);
      Eigen::Map<const Eigen::ArrayXf> X(x + i0, len);
      Eigen::Map<Eigen::ArrayXf> Y(y + i0, len);
      Y = 0.5f * X * (1.0f + (kGeluC * (X + kGeluA * X * X * X)).tanh());
    });
  }
  void GeluBackward(const float* x, const float* dy, float* dx, int64_t n) override {
    const int64_t chunks = (n + kGeluChunk - 1) / kGeluChunk;
    ForRange(chunks, n > kParallelMin, [&](int64_t ch) {
      const int64_t i0 = ch * kGeluChunk, len = std::min(kGeluChunk, n - i0);
      alignas(64) float tbuf[kGeluChunk];
      Eigen::Map<const Eigen::ArrayXf> X(x + i0, len), DY(dy + i0, len);
      Eigen::Map<Eigen::ArrayXf> T(tbuf, len), DX(dx + i0, len);  // dx may alias dy
      T = (kGeluC * (X + kGeluA * X * X * X)).tanh();
      DX = DY * (0.5f * (1.0f + T) +
                 0.5f * X * (1.0f - T * T) * (kGeluC * (1.0f + 3.0f * kGeluA * X * X)));
    });
  }

  void LayerNormForward(const float* x, const float* gamma, const float* beta, float* y,
                        float* mean, float* rstd, int64_t rows, int64_t cols,
                        float eps) override {
    ForRange(rows, rows * cols > kParallelMin, [&](int64_t r) {
      const float* xr = x + r * cols;
      const double s = LaneSum(cols, [&](int64_t c) { return double(xr[c]); });
      const float mu = static_cast<float>(s / cols);
      const double v = LaneSum(cols, [&](int64_t c) {
        const double d = double(xr[c] - mu);
        return d * d;
      });
      const float rs = static_cast<float>(1.0 / std::sqrt(v / cols + eps));
      mean[r] = mu;
      rstd[r] = rs;
      float* yr = y + r * cols;
      for (int64_t c = 0; c < cols; ++c) yr[c] = (xr[c] - mu) * rs * gamma[c] + beta[c];
    });
  }

  void LayerNormBackward(const float* x, const float* gamma, const float* mean,
                         const float* rstd, const float* dy, float* dx, float* dgamma,
                         float* dbeta, int64_t rows, int64_t cols) override {
    ForRange(rows, rows * cols > kParallelMin, [&](int64_t r) {
      const float* xr = x + r * cols;
      const float* dyr = dy + r * cols;
      const float mu = mean[r], rs = rstd[r];
      // sums of g = dy*gamma and g*xhat
      const double sum_g = LaneSum(cols, [&](int64_t c) { return double(dyr[c] * gamma[c]); });
      const double sum_gx = LaneSum(cols, [&](int64_t c) {
        return double(dyr[c] * gamma[c]) * double((xr[c] - mu) * rs);
      });
      const float mg = static_cast<float>(sum_g / cols), mgx = static_cast<float>(sum_gx / cols);
      float* dxr = dx + r * cols;
      for (int64_t c = 0; c < cols; ++c) {
        const float xhat = (xr[c] - mu) * rs;
        dxr[c] = rs * (dyr[c] * gamma[c] - mg - xhat * mgx);
      }
    });
    for (int64_t r = 0; r < rows; ++r) {  // in row order: deterministic
      const float* xr = x + r * cols;
      const float* dyr = dy + r * cols;
      const float mu = mean[r], rs = rstd[r];
      for (int64_t c = 0; c < cols; ++c) {
        dgamma[c] += dyr[c] * (xr[c] - mu) * rs;
        dbeta[c] += dyr[c];
      }
    }
  }

  void SoftmaxForward(const float* x, float* y, int64_t rows, int64_t cols, float scale,
                      int64_t causal_period) override {
    ForRange(rows, rows * cols > kParallelMin, [&](int64_t r) {
      const float* xr = x + r * cols;
      float* yr = y + r * cols;
      const int64_t valid = causal_period > 0 ? std::min(cols, r % causal_period + 1) : cols;
      const float mx = LaneMax(valid, [&](int64_t c) { return scale * xr[c]; });
      // exp with Eigen's vectorised kernel, through an aligned buffer so each
      // element's rounding depends on its column only (libm's scalar expf made
      // the softmax a tenth of the attention time). y may alias x.
      for (int64_t c0 = 0; c0 < valid; c0 += kExpChunk) {
        const int64_t len = std::min(kExpChunk, valid - c0);
        alignas(64) float tbuf[kExpChunk];
        ExpAffine(xr + c0, len, scale, mx, tbuf);
        std::memcpy(yr + c0, tbuf, static_cast<size_t>(len) * sizeof(float));
      }
      const double sum = LaneSum(valid, [&](int64_t c) { return double(yr[c]); });
      const float inv = static_cast<float>(1.0 / sum);
      for (int64_t c = 0; c < valid; ++c) yr[c] *= inv;
      for (int64_t c = valid; c < cols; ++c) yr[c] = 0.0f;
    });
  }

  void SoftmaxBackward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                       float scale) override {
    ForRange(rows, rows * cols > kParallelMin, [&](int64_t r) {
      const float* yr = y + r * cols;
      const float* dyr = dy + r * cols;
      float* dxr = dx + r * cols;
      const float d =
          static_cast<float>(LaneSum(cols, [&](int64_t c) { return double(dyr[c]) * yr[c]; }));
      for (int64_t c = 0; c < cols; ++c) dxr[c] = scale * yr[c] * (dyr[c] - d);
    });
  }

 private:
  const GemmLibrary gemm_;
  const GemmInputs inputs_;
  const bool native_bf16_;
};

}  // namespace

std::unique_ptr<Backend> MakeCpuBackend(GemmLibrary lib, GemmInputs inputs) {
#ifndef DT_HAVE_BLAS
  DT_CHECK(lib == GemmLibrary::kEigen) << "this build has no BLAS (DT_BLAS=none at configure time)";
#endif
  return std::make_unique<CpuBackend>(lib, inputs);
}

std::unique_ptr<Backend> MakeCpuBackend() {
  StatusOr<GemmLibrary> lib = GemmLibraryFromEnv();
  DT_CHECK(lib.ok()) << lib.status().message();
  return MakeCpuBackend(*lib);
}

}  // namespace dt::rt
