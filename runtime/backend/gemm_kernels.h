// Internal to runtime/backend: the per-library kernels behind CpuGemmSerial
// (cpu_gemm.h), same contract. The BLAS functions exist only when the build
// found a BLAS (DT_HAVE_BLAS): LoadBlas() loads it once (thread-safe) and
// says whether that worked; BlasGemmSerial aborts if it did not.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "runtime/backend/backend.h"

namespace dt::rt {

void EigenGemmSerial(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
                     const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                     float* c, int64_t ldc);

#ifdef DT_HAVE_BLAS
Status LoadBlas();
const std::string& BlasDescription();  // empty unless loaded
void BlasGemmSerial(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                    float* c, int64_t ldc);
#endif

}  // namespace dt::rt
