// RMSNorm op (Llama) over the last dimension of x [rows, cols]:
//   y = x * rstd * gamma,  rstd = 1 / sqrt(mean_c(x^2) + eps).
//
// Forward writes y and the per-row rstd[rows] that backward needs (the
// caller stashes it with x). Backward overwrites dx and accumulates dgamma.
// Host-memory loops: host-accessible backends only (HostAccess checks and
// synchronises; the CUDA backend has no RMSNorm kernel yet and runs it on
// the host only with managed memory), checked.
// Pointers owned by the caller. Not thread-safe. Misuse aborts.
#pragma once

#include <cstdint>

#include "runtime/backend/backend.h"

namespace dt::rt {

void RmsNormForward(Backend& be, const float* x, const float* gamma, int64_t rows, int64_t cols,
                    float eps, float* y, float* rstd);
void RmsNormBackward(Backend& be, const float* x, const float* gamma, const float* rstd,
                     const float* dy, int64_t rows, int64_t cols, float* dx, float* dgamma);

}  // namespace dt::rt
