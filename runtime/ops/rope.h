// Rotary position embedding (RoPE), HF Llama's rotate-half convention, in
// place on x [seq, batch, heads, head_dim] (sequence-major activations):
// for pair i < head_dim/2 at global position p,
//   angle = p * theta^(-2i / head_dim)
//   x'[i]        = x[i] cos - x[i + d/2] sin
//   x'[i + d/2]  = x[i + d/2] cos + x[i] sin
// `positions[t]` is the global position of local sequence index t (from
// LayerContext::Position; never assumed to be t). Backward applies the
// inverse rotation to the incoming grad, in place (RoPE is linear and
// orthogonal, so it needs no stash).
// Host-memory loops: host-accessible backends only (HostAccess checks and synchronises). head_dim must be even.
// Pointers owned by the caller. Not thread-safe. Misuse aborts.
#pragma once

#include <cstdint>

#include "runtime/backend/backend.h"

namespace dt::rt {

struct RopeDims {
  int64_t seq = 0, batch = 0, heads = 0, head_dim = 0;
  double theta = 10000.0;
};

void RopeForward(Backend& be, const RopeDims& d, const int64_t* positions, float* x);
void RopeBackward(Backend& be, const RopeDims& d, const int64_t* positions, float* dx);

}  // namespace dt::rt
