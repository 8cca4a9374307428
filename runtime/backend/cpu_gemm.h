// CpuGemm: the single-threaded, row-major SGEMM kernels under the CPU
// backend, one per GEMM library this build has. Eigen is always compiled in
// (the reference); a CBLAS library (OpenBLAS or BLIS, chosen by CMake option
// DT_BLAS, see runtime/CMakeLists.txt) is added when it was found at
// configure time, and is then the default because it is faster on the
// runtime's shapes (docs/runtime.md, "Speed").
//
// The library is picked per process: the environment variable DT_GEMM
// (`eigen`, or the linked BLAS's name: `openblas` / `blis`) overrides the
// default; DT_BLAS_CORETYPE picks the BLAS's kernels (blas_gemm.cc). Each kernel call is single-threaded (the BLAS's own threads are
// pinned to 1 at first use) and deterministic: the same call gives the same
// bits. Eigen accumulates an element of C in an order that depends on k only,
// not on how many rows of C the call covers; OpenBLAS's edge kernels round
// differently by block height, so with it the backend's results (which split
// C's rows over OpenMP threads) are reproducible for a given thread count
// only. Different libraries round differently (within fp32 tolerance), so
// compare results bitwise only under one library and thread count.
//
// Thread-safety: the kernels may run concurrently on disjoint C blocks
// (the backend calls them from OpenMP threads) when GemmLibraryReentrant(). Errors: a DT_GEMM naming a
// library this build lacks is an InvalidArgument from GemmLibraryFromEnv();
// MakeCpuBackend() (backend.h) aborts on it with the same message.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "runtime/backend/backend.h"

namespace dt::rt {

enum class GemmLibrary { kEigen, kBlas };

// "Eigen" or the linked BLAS ("OpenBLAS", "BLIS"): the name profiles record.
const char* GemmLibraryName(GemmLibrary lib);
// The name plus version and kernels where the library says
// ("OpenBLAS 0.3.21, SkylakeX kernels"), for logs and profiles.
std::string GemmLibraryDescription(GemmLibrary lib);
// The lower-case names DT_GEMM accepts in this build, Eigen first.
std::vector<std::string> AvailableGemmLibraries();
// False for a BLAS build that must not be called from two threads at once
// (OpenBLAS's serial build, used only when the pthread build is absent).
bool GemmLibraryReentrant(GemmLibrary lib);
// Parses a DT_GEMM value (case-insensitive).
StatusOr<GemmLibrary> ParseGemmLibrary(const std::string& name);
// DT_GEMM if set and non-empty, else the build's default (the BLAS when linked).
StatusOr<GemmLibrary> GemmLibraryFromEnv();

// C[m,n] = alpha * op(A) op(B) + beta * C on one thread, row-major, with the
// conventions of Backend::Gemm (backend.h). Requires m, n, k > 0.
void CpuGemmSerial(GemmLibrary lib, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k,
                   float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                   float beta, float* c, int64_t ldc);

// The CPU backend with a given GEMM library (for parity tests and benchmarks).
// inputs = kBf16: every GEMM rounds its operands to bf16 and runs oneDNN's
// native bf16 kernel where this CPU has one, else the library's fp32 GEMM on
// the rounded values (runtime/backend/bf16_gemm.h); DT_GEMM=eigen (lib =
// kEigen) always takes the second way, as the reference.
std::unique_ptr<Backend> MakeCpuBackend(GemmLibrary lib, GemmInputs inputs = GemmInputs::kFp32);

}  // namespace dt::rt
