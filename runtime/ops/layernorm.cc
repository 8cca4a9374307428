#include "runtime/ops/layernorm.h"

#include "base/check.h"

namespace dt::rt {

void LayerNormForward(Backend& be, const float* x, const float* gamma, const float* beta,
                      int64_t rows, int64_t cols, float* y, float* mean, float* rstd) {
  DT_CHECK(x && gamma && beta && y && mean && rstd) << "layernorm forward: null pointer";
  be.LayerNormForward(x, gamma, beta, y, mean, rstd, rows, cols, kLayerNormEps);
}

void LayerNormBackward(Backend& be, const float* x, const float* gamma, const float* mean,
                       const float* rstd, const float* dy, int64_t rows, int64_t cols, float* dx,
                       float* dgamma, float* dbeta) {
  DT_CHECK(x && gamma && mean && rstd && dy && dx && dgamma && dbeta)
      << "layernorm backward: null pointer";
  be.LayerNormBackward(x, gamma, mean, rstd, dy, dx, dgamma, dbeta, rows, cols);
}

}  // namespace dt::rt
