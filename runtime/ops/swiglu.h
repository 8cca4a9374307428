// SwiGLU op (Llama's gated MLP activation), elementwise over n values:
//   y = silu(gate) * up,  silu(g) = g * sigmoid(g).
// The gate and up projections are separate column-parallel linears, so
// their TP shards line up element for element. Backward needs gate and up
// (the caller stashes both); it overwrites dgate and dup.
// Host-memory loops: host-accessible backends only (HostAccess checks and synchronises). Pointers owned by the
// caller. Not thread-safe.
#pragma once

#include <cstdint>

#include "runtime/backend/backend.h"

namespace dt::rt {

void SwiGluForward(Backend& be, const float* gate, const float* up, int64_t n, float* y);
void SwiGluBackward(Backend& be, const float* gate, const float* up, const float* dy, int64_t n,
                    float* dgate, float* dup);

}  // namespace dt::rt
