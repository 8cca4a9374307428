#include "runtime/backend/cpu_gemm.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "runtime/backend/gemm_kernels.h"

namespace dt::rt {
namespace {
std::string Lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}
}  // namespace

const char* GemmLibraryName(GemmLibrary lib) {
#ifdef DT_BLAS_NAME
  if (lib == GemmLibrary::kBlas) return DT_BLAS_NAME;
#endif
  return lib == GemmLibrary::kEigen ? "Eigen" : "none";
}

std::string GemmLibraryDescription(GemmLibrary lib) {
#ifdef DT_HAVE_BLAS
  if (lib == GemmLibrary::kBlas && LoadBlas().ok()) return BlasDescription();
#endif
  return GemmLibraryName(lib);
}

std::vector<std::string> AvailableGemmLibraries() {
  std::vector<std::string> names = {"eigen"};
#ifdef DT_HAVE_BLAS
  if (LoadBlas().ok()) names.push_back(Lower(GemmLibraryName(GemmLibrary::kBlas)));
#endif
  return names;
}

bool GemmLibraryReentrant(GemmLibrary lib) {
#ifdef DT_BLAS_SINGLE_CALLER
  return lib != GemmLibrary::kBlas;
#else
  return true;
#endif
}

StatusOr<GemmLibrary> ParseGemmLibrary(const std::string& name) {
  const std::string n = Lower(name);
  if (n == "eigen") return GemmLibrary::kEigen;
#ifdef DT_HAVE_BLAS
  if (n == Lower(GemmLibraryName(GemmLibrary::kBlas))) {
    if (Status s = LoadBlas(); !s.ok()) return InvalidArgument("DT_GEMM=" + name + ": " + s.message());
    return GemmLibrary::kBlas;
  }
#endif
  const std::vector<std::string> libs = AvailableGemmLibraries();
  std::string list;
  for (const auto& a : libs) list += (list.empty() ? "" : ", ") + a;
  return InvalidArgument("DT_GEMM=" + name + ": this build has the GEMM libraries " + list +
                         (libs.size() == 1 ? " (for OpenBLAS: apt-get install libopenblas-pthread-dev,"
                                             " then rebuild)"
                                           : ""));
}

StatusOr<GemmLibrary> GemmLibraryFromEnv() {
  const char* env = std::getenv("DT_GEMM");
  if (env != nullptr && *env != '\0') return ParseGemmLibrary(env);
#ifdef DT_HAVE_BLAS
  if (Status s = LoadBlas(); s.ok()) return GemmLibrary::kBlas;
  else {
    static std::once_flag warned;
    std::call_once(warned, [&] { std::fprintf(stderr, "warning: %s; using Eigen\n", s.message().c_str()); });
  }
#endif
  return GemmLibrary::kEigen;
}

void CpuGemmSerial(GemmLibrary lib, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k,
                   float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                   float beta, float* c, int64_t ldc) {
#ifdef DT_HAVE_BLAS
  if (lib == GemmLibrary::kBlas) {
    BlasGemmSerial(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
#endif
  EigenGemmSerial(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace dt::rt
