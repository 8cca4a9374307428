// The BLAS kernel of CpuGemmSerial (cpu_gemm.h), compiled when CMake found a
// BLAS (DT_HAVE_BLAS; DT_BLAS_OPENBLAS or DT_BLAS_BLIS says which, and
// DT_BLAS_PATH where). The library is dlopen()ed on first use rather than
// linked, because both libraries pick their kernels from the CPU they detect,
// and their releases in Debian 12 (OpenBLAS 0.3.21, BLIS 0.9) do not know
// AMD's AVX-512 cores (Zen 4/5): they fall back to AVX2 (OpenBLAS: Haswell,
// slower than Eigen here) or generic C kernels (BLIS). Their override is an
// environment variable read when the library initialises (OpenBLAS: at load
// time), so it is set here before loading: DT_BLAS_CORETYPE if given (copied
// to OPENBLAS_CORETYPE / BLIS_ARCH_TYPE), else, on an AMD CPU with AVX-512,
// the Skylake-X kernels (measured ~1.5-2x Eigen, docs/runtime.md "Speed").
// That replaces an inherited OPENBLAS_CORETYPE (this project's VMs export
// OPENBLAS_CORETYPE=Haswell machine-wide); the kernels in use are named by
// GemmLibraryDescription(). Elsewhere (Intel CPUs, which the libraries
// detect correctly) the libraries' own choice or the user's variable stands.
// The CBLAS entry point is called with its standard ABI (row-major = 101,
// no-trans = 111, trans = 112).
#ifdef DT_HAVE_BLAS
#include <dlfcn.h>

#include <climits>
#include <cstdlib>
#include <string>

#include "base/check.h"
#include "runtime/backend/gemm_kernels.h"

namespace dt::rt {
namespace {
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

using SgemmFn = void (*)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                         const float* a, int lda, const float* b, int ldb, float beta, float* c,
                         int ldc);

struct Blas {
  SgemmFn sgemm = nullptr;
  Status status;
  std::string description;
};

bool AmdWithAvx512() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  return __builtin_cpu_is("amd") && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl");
#else
  return false;
#endif
}

// Chooses the library's kernels (see the top of this file).
void ChooseKernels() {
#if defined(DT_BLAS_OPENBLAS)
  const char* library_variable = "OPENBLAS_CORETYPE";
  const char* avx512_kernels = "SkylakeX";
#elif defined(DT_BLAS_BLIS)
  const char* library_variable = "BLIS_ARCH_TYPE";
  const char* avx512_kernels = "skx";
#endif
  const char* ours = std::getenv("DT_BLAS_CORETYPE");
  if (ours != nullptr && *ours != '\0') setenv(library_variable, ours, /*overwrite=*/1);
  else if (AmdWithAvx512()) setenv(library_variable, avx512_kernels, /*overwrite=*/1);
}

// "OpenBLAS 0.3.21, SkylakeX kernels" from the library's own report.
std::string Describe(void* lib) {
  std::string d = DT_BLAS_NAME;
#if defined(DT_BLAS_OPENBLAS)
  if (auto config = reinterpret_cast<char* (*)()>(dlsym(lib, "openblas_get_config"))) {
    const std::string c = config();  // "OpenBLAS 0.3.21 DYNAMIC_ARCH ..."
    const size_t v = c.find(' '), e = c.find(' ', v + 1);
    if (v != std::string::npos) d += " " + c.substr(v + 1, e == std::string::npos ? e : e - v - 1);
  }
  if (auto core = reinterpret_cast<char* (*)()>(dlsym(lib, "openblas_get_corename")))
    d += std::string(", ") + core() + " kernels";
#elif defined(DT_BLAS_BLIS)
  if (const char* arch = std::getenv("BLIS_ARCH_TYPE")) d += std::string(", ") + arch + " kernels";
#endif
  return d;
}

// The backend parallelises over blocks of C itself (one call per OpenMP
// thread); the library's own threads would oversubscribe the cores and make
// the blocking depend on the load.
void PinThreads(void* lib) {
#if defined(DT_BLAS_OPENBLAS)
  if (auto set = reinterpret_cast<void (*)(int)>(dlsym(lib, "openblas_set_num_threads"))) set(1);
#elif defined(DT_BLAS_BLIS)
  // BLIS's dim_t is a 64-bit signed integer.
  if (auto set = reinterpret_cast<void (*)(int64_t)>(dlsym(lib, "bli_thread_set_num_threads")))
    set(1);
#endif
}

Blas Load() {
  Blas b;
  ChooseKernels();
  void* lib = dlopen(DT_BLAS_PATH, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    b.status = NotFound(std::string("cannot load ") + DT_BLAS_PATH + " (" + dlerror() +
                        "): run scripts/install-deps.sh, or DT_GEMM=eigen");
    return b;
  }
  b.sgemm = reinterpret_cast<SgemmFn>(dlsym(lib, "cblas_sgemm"));
  if (b.sgemm == nullptr) {
    b.status = NotFound(std::string(DT_BLAS_PATH) + " has no cblas_sgemm");
    return b;
  }
  PinThreads(lib);
  b.description = Describe(lib);
  return b;
}

const Blas& TheBlas() {
  static const Blas blas = Load();  // thread-safe initialisation
  return blas;
}

int AsInt(int64_t v, const char* what) {
  DT_CHECK(v >= 0 && v <= INT_MAX) << "gemm " << what << "=" << v << " exceeds the CBLAS int range";
  return static_cast<int>(v);
}
}  // namespace

Status LoadBlas() { return TheBlas().status; }
const std::string& BlasDescription() { return TheBlas().description; }

void BlasGemmSerial(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                    float* c, int64_t ldc) {
  const Blas& blas = TheBlas();
  DT_CHECK(blas.sgemm != nullptr) << blas.status.message();
  blas.sgemm(kRowMajor, ta == Trans::kYes ? kTrans : kNoTrans,
             tb == Trans::kYes ? kTrans : kNoTrans, AsInt(m, "m"), AsInt(n, "n"), AsInt(k, "k"),
             alpha, a, AsInt(lda, "lda"), b, AsInt(ldb, "ldb"), beta, c, AsInt(ldc, "ldc"));
}

}  // namespace dt::rt
#endif  // DT_HAVE_BLAS
