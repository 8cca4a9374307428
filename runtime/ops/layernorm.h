// LayerNorm op over the last dimension (eps = 1e-5, GPT-2's value):
// y = (x - mean) / sqrt(var + eps) * gamma + beta for each row of x [rows, cols].
//
// Forward writes y and the per-row statistics mean[rows], rstd[rows] that
// backward needs (the caller stashes them). Backward overwrites dx and
// accumulates dgamma, dbeta. Pointers in the backend's memory, owned by the
// caller. Not thread-safe. Misuse aborts.
#pragma once

#include <cstdint>

#include "runtime/backend/backend.h"

namespace dt::rt {

constexpr float kLayerNormEps = 1e-5f;

void LayerNormForward(Backend& be, const float* x, const float* gamma, const float* beta,
                      int64_t rows, int64_t cols, float* y, float* mean, float* rstd);
void LayerNormBackward(Backend& be, const float* x, const float* gamma, const float* mean,
                       const float* rstd, const float* dy, int64_t rows, int64_t cols, float* dx,
                       float* dgamma, float* dbeta);

}  // namespace dt::rt
