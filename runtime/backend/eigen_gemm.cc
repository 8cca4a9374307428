// The Eigen kernel of CpuGemmSerial (cpu_gemm.h): one single-threaded Eigen
// product over row-major maps. Single-threaded Eigen's k-blocking depends on
// k only, so an element of C is accumulated in the same order whatever rows
// the call covers (as long as it covers more than one row: Eigen runs a
// one-row product as a GEMV).
#define EIGEN_DONT_PARALLELIZE
#include <Eigen/Core>

#include "runtime/backend/gemm_kernels.h"

namespace dt::rt {
namespace {
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using CMap = Eigen::Map<const RowMat, 0, Eigen::OuterStride<>>;
using MMap = Eigen::Map<RowMat, 0, Eigen::OuterStride<>>;
}  // namespace

void EigenGemmSerial(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
                     const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                     float* c, int64_t ldc) {
  MMap C(c, m, n, Eigen::OuterStride<>(ldc));
  if (beta == 0.0f) {
    C.setZero();
  } else if (beta != 1.0f) {
    C *= beta;
  }
  const bool trb = tb == Trans::kYes;
  CMap B(b, trb ? n : k, trb ? k : n, Eigen::OuterStride<>(ldb));
  if (ta == Trans::kNo) {
    CMap A(a, m, k, Eigen::OuterStride<>(lda));
    if (trb) C.noalias() += alpha * A * B.transpose();
    else C.noalias() += alpha * A * B;
  } else {
    CMap A(a, k, m, Eigen::OuterStride<>(lda));
    if (trb) C.noalias() += alpha * A.transpose() * B.transpose();
    else C.noalias() += alpha * A.transpose() * B;
  }
}

}  // namespace dt::rt
