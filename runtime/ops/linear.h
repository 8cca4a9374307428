// Linear op: y[rows, out] = x[rows, in] * W^T + b, with W stored [out, in]
// (PyTorch layout, so a column-parallel shard is a block of W's rows and a
// row-parallel shard a block of its columns).
//
// Pointers are in the backend's memory; the caller owns all of them.
// Backward overwrites dx (if non-null) and accumulates into dw and db (if
// non-null), so gradients of several microbatches add up. Not thread-safe
// (uses the backend's stream). Shape misuse aborts (DT_CHECK).
#pragma once

#include <cstdint>

#include "runtime/backend/backend.h"

namespace dt::rt {

void LinearForward(Backend& be, const float* x, int64_t rows, int64_t in, const float* w,
                   const float* b, int64_t out, float* y);

void LinearBackward(Backend& be, const float* x, int64_t rows, int64_t in, const float* w,
                    int64_t out, const float* dy, float* dx, float* dw, float* db);

}  // namespace dt::rt
