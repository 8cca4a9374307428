// Residual add: out = a + b. Backward: the output grad flows unchanged to
// both inputs (accumulated into da and db, which may be the same buffer
// only if the caller wants 2x). Pointers in backend memory, owned by the
// caller; out may alias a or b. Not thread-safe.
#pragma once

#include <cstdint>

#include "runtime/backend/backend.h"

namespace dt::rt {

inline void ResidualAddForward(Backend& be, const float* a, const float* b, int64_t n, float* out) {
  be.Add(a, b, out, n);
}
inline void ResidualAddBackward(Backend& be, const float* dout, int64_t n, float* da, float* db) {
  if (da != nullptr) be.Axpy(1.0f, dout, da, n);
  if (db != nullptr) be.Axpy(1.0f, dout, db, n);
}

}  // namespace dt::rt
