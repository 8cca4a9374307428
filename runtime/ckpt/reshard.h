// Reshard: moves one Param between its full (plan-independent) tensor and
// this rank's tensor-parallel shard, using the Param's ShardKind, tp_rank,
// tp_size and full_shape (row-major). Pure functions; no communication.
//   kReplicated: local == full.
//   kSplitDim0:  local = rows [r*d0/tp, (r+1)*d0/tp) (any rank >= 1).
//   kSplitDim1:  local = columns [r*d1/tp, (r+1)*d1/tp) of a 2-D (or higher:
//                dims after 1 stay whole) tensor.
// A shape the Param cannot be split by (dimension not divisible) is an
// invariant break (DT_CHECK): the model builder validated it.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/model/param_store.h"

namespace dt::rt {

int64_t FullNumel(const Param& p);
// Copies this rank's shard of `full` (FullNumel(p) floats) into `local` (p.numel).
void SliceShard(const Param& p, const float* full, float* local);
// Writes this rank's shard `local` into its place in `full`.
void PlaceShard(const Param& p, const float* local, float* full);

}  // namespace dt::rt
