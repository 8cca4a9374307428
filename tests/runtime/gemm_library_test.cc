// The CPU backend's GEMM libraries (runtime/backend/cpu_gemm.h): every
// library compiled in against Eigen (the reference) for all four transpose
// combinations, sub-block leading dimensions, alpha/beta and odd sizes,
// within fp32 tolerance; every library is deterministic (repeated calls are
// bitwise equal); Eigen's result does not depend on how C's rows are split
// (so an Eigen run does not depend on the thread count; OpenBLAS's edge
// kernels round differently by block height, so its runs are deterministic
// per thread count only); DT_GEMM parsing.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "runtime/backend/bf16_gemm.h"
#include "runtime/backend/cpu_gemm.h"
#include "tests/runtime/test_util.h"

namespace dt::rt {
namespace {

using testing_util::Random;
using testing_util::Vec;

struct Case {
  Trans ta, tb;
  int64_t m, n, k;
  int64_t pad;  // extra floats per row of A, B and C (sub-block leading dimensions)
  float alpha, beta;
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  const Trans t[] = {Trans::kNo, Trans::kYes};
  for (Trans ta : t)
    for (Trans tb : t) {
      cases.push_back({ta, tb, 1, 7, 5, 0, 1.0f, 0.0f});
      cases.push_back({ta, tb, 33, 17, 9, 3, 0.5f, 1.0f});
      cases.push_back({ta, tb, 130, 96, 64, 0, 1.0f, 0.0f});     // attention-head-like
      cases.push_back({ta, tb, 200, 300, 257, 5, -1.5f, 0.25f});
      cases.push_back({ta, tb, 256, 768, 512, 64, 1.0f, 1.0f});  // linear, accumulate
    }
  return cases;
}

// Stored sizes: A is [m, k] or [k, m]; B is [k, n] or [n, k]; C is [m, n]; rows padded.
struct Operands {
  int64_t lda, ldb, ldc;
  Vec a, b, c;
};
Operands MakeOperands(const Case& cs, uint32_t seed) {
  Operands o;
  const bool tra = cs.ta == Trans::kYes, trb = cs.tb == Trans::kYes;
  o.lda = (tra ? cs.m : cs.k) + cs.pad;
  o.ldb = (trb ? cs.k : cs.n) + cs.pad;
  o.ldc = cs.n + cs.pad;
  o.a = Random(static_cast<size_t>((tra ? cs.k : cs.m) * o.lda), seed);
  o.b = Random(static_cast<size_t>((trb ? cs.n : cs.k) * o.ldb), seed + 1);
  o.c = Random(static_cast<size_t>(cs.m * o.ldc), seed + 2);
  return o;
}

Vec RunBackend(GemmLibrary lib, const Case& cs, const Operands& o,
               GemmInputs inputs = GemmInputs::kFp32) {
  Vec c = o.c;
  MakeCpuBackend(lib, inputs)->Gemm(cs.ta, cs.tb, cs.m, cs.n, cs.k, cs.alpha, o.a.data(), o.lda,
                            o.b.data(), o.ldb, cs.beta, c.data(), o.ldc);
  return c;
}

std::string Describe(const Case& cs) {
  return std::string(cs.ta == Trans::kYes ? "T" : "N") + (cs.tb == Trans::kYes ? "T" : "N") +
         " m=" + std::to_string(cs.m) + " n=" + std::to_string(cs.n) +
         " k=" + std::to_string(cs.k) + " pad=" + std::to_string(cs.pad);
}

std::vector<GemmLibrary> Libraries() {
  std::vector<GemmLibrary> libs;
  for (const auto& name : AvailableGemmLibraries()) libs.push_back(*ParseGemmLibrary(name));
  return libs;
}

TEST(GemmLibraryTest, EveryLibraryMatchesEigen) {
  const auto libs = Libraries();
  if (libs.size() == 1) GTEST_SKIP() << "this build has Eigen only (DT_BLAS found nothing)";
  for (GemmLibrary lib : libs) {
    if (lib == GemmLibrary::kEigen) continue;
    uint32_t seed = 10;
    for (const Case& cs : Cases()) {
      const Operands o = MakeOperands(cs, seed += 3);
      const Vec ref = RunBackend(GemmLibrary::kEigen, cs, o);
      const Vec got = RunBackend(lib, cs, o);
      // Rounding of a k-term fp32 dot product of N(0,1) terms: ~ sqrt(k) * eps * |terms|.
      const double tol = 1e-5 * std::sqrt(double(cs.k)) * std::fabs(cs.alpha) * 4.0 + 1e-5;
      for (int64_t r = 0; r < cs.m; ++r)
        for (int64_t j = 0; j < o.ldc; ++j) {
          const size_t i = static_cast<size_t>(r * o.ldc + j);
          if (j >= cs.n) {  // padding untouched
            ASSERT_EQ(got[i], o.c[i]) << GemmLibraryName(lib) << " wrote padding, " << Describe(cs);
            continue;
          }
          ASSERT_NEAR(got[i], ref[i], tol * (1.0 + std::fabs(ref[i])))
              << GemmLibraryName(lib) << " vs Eigen, " << Describe(cs) << " at (" << r << ","
              << j << ")";
        }
    }
  }
}

TEST(GemmLibraryTest, RepeatedCallsAreBitwiseEqual) {
  for (GemmLibrary lib : Libraries()) {
    uint32_t seed = 50;
    for (const Case& cs : Cases()) {
      const Operands o = MakeOperands(cs, seed += 3);
      ASSERT_EQ(RunBackend(lib, cs, o), RunBackend(lib, cs, o)) << GemmLibraryName(lib) << ", "
                                                                << Describe(cs);
    }
  }
}

// Eigen: C computed in one call equals C computed as row blocks [0, 64) and [64, m).
TEST(GemmLibraryTest, EigenResultDoesNotDependOnRowSplit) {
  for (GemmLibrary lib : {GemmLibrary::kEigen}) {
    uint32_t seed = 100;
    for (const Case& cs : Cases()) {
      if (cs.m < 128) continue;
      const Operands o = MakeOperands(cs, seed += 3);
      Vec whole = o.c, split = o.c;
      CpuGemmSerial(lib, cs.ta, cs.tb, cs.m, cs.n, cs.k, cs.alpha, o.a.data(), o.lda, o.b.data(),
                    o.ldb, cs.beta, whole.data(), o.ldc);
      for (int64_t r0 : {int64_t{0}, int64_t{64}}) {
        const int64_t rows = r0 == 0 ? 64 : cs.m - 64;
        const float* a = cs.ta == Trans::kNo ? o.a.data() + r0 * o.lda : o.a.data() + r0;
        CpuGemmSerial(lib, cs.ta, cs.tb, rows, cs.n, cs.k, cs.alpha, a, o.lda, o.b.data(), o.ldb,
                      cs.beta, split.data() + r0 * o.ldc, o.ldc);
      }
      ASSERT_EQ(whole, split) << GemmLibraryName(lib) << ", " << Describe(cs);
    }
  }
}

#ifdef _OPENMP
TEST(GemmLibraryTest, EigenBackendResultDoesNotDependOnThreadCount) {
  const int saved = omp_get_max_threads();
  for (GemmLibrary lib : {GemmLibrary::kEigen}) {
    const Case cs{Trans::kNo, Trans::kYes, 1000, 384, 256, 0, 1.0f, 1.0f};
    const Operands o = MakeOperands(cs, 7);
    omp_set_num_threads(1);
    const Vec one = RunBackend(lib, cs, o);
    omp_set_num_threads(3);
    const Vec three = RunBackend(lib, cs, o);
    omp_set_num_threads(saved);
    ASSERT_EQ(one, three) << GemmLibraryName(lib);
  }
}
#endif

// bf16 inputs: every library (Eigen emulates; the BLAS build takes oneDNN's
// native kernel where the CPU has one, for calls of m*n*k >= 2^19: the cases
// below take both paths) gives alpha * sum of the exact
// products of the bf16-rounded operands + beta * C, within fp32 summation
// error, leaves padding alone, and is not the fp32 product.
TEST(GemmLibraryTest, Bf16InputsRoundTheOperands) {
  for (GemmLibrary lib : Libraries()) {
    uint32_t seed = 200;
    double largest_rounding_effect = 0;
    for (const Case& cs : Cases()) {
      const Operands o = MakeOperands(cs, seed += 3);
      const Vec got = RunBackend(lib, cs, o, GemmInputs::kBf16);
      const Vec fp32 = RunBackend(lib, cs, o);
      const bool tra = cs.ta == Trans::kYes, trb = cs.tb == Trans::kYes;
      auto a = [&](int64_t r, int64_t p) {
        return double(Bf16ToFloat(FloatToBf16(o.a[size_t(tra ? p * o.lda + r : r * o.lda + p)])));
      };
      auto b = [&](int64_t p, int64_t j) {
        return double(Bf16ToFloat(FloatToBf16(o.b[size_t(trb ? j * o.ldb + p : p * o.ldb + j)])));
      };
      const double tol = 1e-5 * std::sqrt(double(cs.k)) * std::fabs(cs.alpha) * 4.0 + 1e-5;
      for (int64_t r = 0; r < cs.m; ++r)
        for (int64_t j = 0; j < o.ldc; ++j) {
          const size_t i = static_cast<size_t>(r * o.ldc + j);
          if (j >= cs.n) {
            ASSERT_EQ(got[i], o.c[i]) << GemmLibraryName(lib) << " wrote padding, " << Describe(cs);
            continue;
          }
          double sum = 0;
          for (int64_t p = 0; p < cs.k; ++p) sum += a(r, p) * b(p, j);
          const double want = cs.alpha * sum + (cs.beta == 0.0f ? 0.0 : cs.beta * double(o.c[i]));
          ASSERT_NEAR(got[i], want, tol * (1.0 + std::fabs(want)))
              << GemmLibraryName(lib) << " bf16 inputs, " << Describe(cs) << " at (" << r << "," << j << ")";
          largest_rounding_effect = std::max(largest_rounding_effect, std::fabs(double(fp32[i]) - want));
        }
      ASSERT_EQ(got, RunBackend(lib, cs, o, GemmInputs::kBf16)) << "bf16 inputs not deterministic, "
                                                                   << GemmLibraryName(lib) << ", " << Describe(cs);
    }
    // bf16 keeps 8 significant bits: on N(0,1) operands the fp32 product differs by ~1e-2.
    EXPECT_GT(largest_rounding_effect, 1e-3) << GemmLibraryName(lib) << ": bf16 inputs look unrounded";
  }
}

// A build with oneDNN on a CPU with AVX512-BF16 must not fall back to emulation.
TEST(GemmLibraryTest, Bf16GemmIsNativeWhereTheCpuCanBe) {
#if defined(DT_HAVE_DNNL) && defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512bf16"))
    GTEST_SKIP() << "this CPU has no AVX512-BF16: bf16 GEMM inputs are emulated (" << Bf16GemmDescription() << ")";
  EXPECT_TRUE(Bf16GemmNative()) << Bf16GemmDescription();
  EXPECT_NE(Bf16GemmDescription().find("oneDNN"), std::string::npos) << Bf16GemmDescription();
#else
  EXPECT_FALSE(Bf16GemmNative());
  GTEST_SKIP() << "built without oneDNN: " << Bf16GemmDescription();
#endif
}

TEST(GemmLibraryTest, ParsesNamesAndRejectsMissingOnes) {
  EXPECT_EQ(*ParseGemmLibrary("Eigen"), GemmLibrary::kEigen);
  EXPECT_STREQ(GemmLibraryName(GemmLibrary::kEigen), "Eigen");
  for (const auto& name : AvailableGemmLibraries()) EXPECT_TRUE(ParseGemmLibrary(name).ok()) << name;
  const auto bad = ParseGemmLibrary("mkl");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("DT_GEMM=mkl"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("eigen"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace dt::rt
