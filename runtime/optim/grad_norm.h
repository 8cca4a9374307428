// Global gradient norm over the FULL model, identical for every plan.
//
// Each rank sums squares of the gradient elements it is responsible for:
//   - its flat range (all of a chunk, or its ZeRO-1 shard of it),
//   - a TP-replicated Param counts only on tp rank 0 (held by every TP rank),
//   - a tied Param (embedding shared with the LM head on the last pipeline
//     stage) counts only in the chunk flagged count_tied (model chunk 0).
// The per-rank sums are then combined over TP, PP and, with ZeRO, DP. To keep
// the result independent of how the model is split, the partial sums travel
// as exact float triples (hi, mid, lo of a double) through AllGather and are
// added in double in member order, so the only plan dependence is double
// rounding (~1e-16 relative). CP and non-ZeRO DP ranks hold identical,
// already-reduced gradients and are not summed over. MoE expert Params
// (Param::expert) differ between the ranks of an EP group: their squares are
// summed separately (ParamSubset::kExperts) and combined over the EP group
// as well (the optimizer does it).
#pragma once

#include <cstdint>

#include "runtime/comm/comm.h"
#include "runtime/model/param_store.h"

namespace dt::rt {

enum class ParamSubset { kAll, kNonExperts, kExperts };

// Sum of squares of grads[begin, end) with the weighting above, over the
// Params in `subset`.
double LocalGradSquares(const ParamStore& store, int64_t begin, int64_t end, bool count_tied,
                        ParamSubset subset = ParamSubset::kAll);

// Sums `local` over the members of `comm` (null or size 1: returns local).
// Collective over comm; every member gets the same value.
double SumAcross(Comm* comm, double local);

}  // namespace dt::rt
