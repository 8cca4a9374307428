#include "runtime/ops/linear.h"

#include "base/check.h"

namespace dt::rt {

void LinearForward(Backend& be, const float* x, int64_t rows, int64_t in, const float* w,
                   const float* b, int64_t out, float* y) {
  DT_CHECK(x && w && y) << "linear forward: null pointer";
  be.Gemm(Trans::kNo, Trans::kYes, rows, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
  if (b != nullptr) be.AddBias(y, b, rows, out);
}

void LinearBackward(Backend& be, const float* x, int64_t rows, int64_t in, const float* w,
                    int64_t out, const float* dy, float* dx, float* dw, float* db) {
  DT_CHECK(x && w && dy) << "linear backward: null pointer";
  // dx[rows, in] = dy[rows, out] * W[out, in]
  if (dx != nullptr) be.Gemm(Trans::kNo, Trans::kNo, rows, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
  // dW[out, in] += dy^T[out, rows] * x[rows, in]
  if (dw != nullptr) be.Gemm(Trans::kYes, Trans::kNo, out, in, rows, 1.0f, dy, out, x, in, 1.0f, dw, in);
  if (db != nullptr) be.BiasGrad(dy, db, rows, out);
}

}  // namespace dt::rt
