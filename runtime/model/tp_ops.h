// Tensor- and sequence-parallel communication operators of Megatron-LM, on
// sequence-major activations [rows, hidden] (row = t * batch + b, so a
// sequence shard is a contiguous block of rows).
//
//   f  (before a column-parallel linear, no SP): forward identity, backward all-reduce
//   g  (after a row-parallel linear, no SP):     forward all-reduce, backward identity
//   SP before column-parallel: forward all-gather,     backward reduce-scatter
//   SP after row-parallel:     forward reduce-scatter, backward all-gather
//
// Each helper is the one collective of one direction; the layer code calls
// the right one in forward and its conjugate in backward. A null or size-1
// comm means no tensor parallelism: the collective becomes a copy (or
// nothing, when in place). Buffers are caller-owned host memory. Not
// thread-safe (one thread per Comm). Transport failures abort in the Comm.
#pragma once

#include <cstdint>

#include "runtime/comm/comm.h"

namespace dt::rt {

inline bool HasTp(const Comm* tp) { return tp != nullptr && tp->size() > 1; }

// In place over n floats (g forward, f backward).
void TpAllReduce(Comm* tp, float* buf, int64_t n);
// in: local_rows x hidden; out: (local_rows * tp) x hidden.
void SpAllGather(Comm* tp, const float* in, int64_t local_rows, int64_t hidden, float* out);
// in: (local_rows * tp) x hidden partial sums; out: local_rows x hidden block of the sum.
void SpReduceScatter(Comm* tp, const float* in, int64_t local_rows, int64_t hidden, float* out);

}  // namespace dt::rt
