// ExpAffine: out[i] = exp(scale * x[i] - shift) for i < len <= kExpChunk,
// with Eigen's vectorised exp into an aligned buffer, so each element's
// rounding depends on its position in the chunk only (reproducible for a
// given layout). libm's scalar expf made softmax, cross entropy and SwiGLU
// several times their memory traffic. The one chunked exp of the CPU
// runtime (CpuBackend softmax, cross entropy, SwiGLU's sigmoid).
// Header-only; `out` must be 64-byte aligned and hold len floats.
#pragma once

#include <cstdint>

#include <Eigen/Core>

namespace dt::rt {

constexpr int64_t kExpChunk = 1024;

inline void ExpAffine(const float* x, int64_t len, float scale, float shift, float* out) {
  Eigen::Map<const Eigen::ArrayXf> X(x, len);
  Eigen::Map<Eigen::ArrayXf, Eigen::Aligned64> O(out, len);
  O = (X * scale - shift).exp();
}

}  // namespace dt::rt
