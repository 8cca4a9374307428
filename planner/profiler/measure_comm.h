// Collective measurements in the nccl-tests convention (doc/PERFORMANCE.md):
// for each operation and message size S (all-reduce: the buffer;
// all-gather: the whole output; reduce-scatter: the whole input;
// send/recv: the message), time = slowest rank's median seconds per op.
// send/recv is the nccl-tests pattern: every rank sends S to rank+1 and
// receives S from rank-1 at once (for 2 ranks, a bidirectional exchange,
// as pipeline stages trade activations and gradients).
//
// `data` is the group measured (any Comm: MpiComm, or an NCCL one); `sync`
// a host communicator over the same ranks for barriers and max-reductions
// (may be the same object for MPI). Buffers come from cfg.be. Every member
// calls with identical arguments (collective). Failures abort (DT_CHECK).
#pragma once

#include <cstdint>
#include <vector>

#include "planner/cost/layer_ops.h"
#include "planner/profile/collective_series.h"
#include "planner/profiler/measure_compute.h"

namespace dt {

// Per-rank element counts 1, 4, 16, ... while S <= max_bytes.
std::vector<int64_t> MessageCounts(CollKind kind, int group_size, int64_t max_bytes);

// Sweeps all four operations over `data`'s group.
std::vector<CollSeries> MeasureCollectives(const MeasureConfig& cfg, rt::Comm& data,
                                           int64_t max_bytes);

}  // namespace dt
