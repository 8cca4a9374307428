// Collectives timed inside training steps (CPU profiles). The isolated
// series (measure_comm.h) time each collective back to back on the same
// buffers, so its buffers and MPI's shared-memory segments stay in cache
// and the ranks arrive in step; inside a step a collective follows the
// kernels that produced its input, on buffers the step's other work has
// moved out of the caches, and the ranks arrive as their own compute
// allows. dtrun's in-step calls (DT_COMM_TIMES, docs/runtime.md) took
// 1.5-3x the series on the same VM. So the profiler runs the runtime's own
// steps over every rank of the node (tp = ranks with sequence parallelism,
// microbatch 1-8; dp = ranks with ZeRO-0, -1 and -3, microbatch 2) with
// each group wrapped in rt::TimedComm, and returns, per collective and
// size, the median call of the rank that spent least in it (the
// other ranks' excess is waiting for the slowest one, whose compute the
// profile's step timings already price), the median of three rounds of
// the plans (a few milliseconds each: one burst of a VM neighbour can
// cover a whole plan's window).
//
// Collective over `world` (every rank calls it with the same arguments);
// it builds the runtime's groups (MPI_COMM_WORLD split) and needs the whole
// world on one node. Returns no series when the model cannot be split over
// the ranks (heads or hidden size not divisible) or the world is one rank.
// Runtime failures abort (DT_CHECK), as in the rest of the profiler.
#pragma once

#include <vector>

#include "planner/profile/collective_series.h"
#include "planner/profiler/measure_compute.h"
#include "planner/spec/model_spec.h"

namespace dt {

// One series per (operation, group size) seen in the steps; samples at the
// sizes the steps moved, increasing.
std::vector<CollSeries> MeasureStepCollectives(const MeasureConfig& cfg, const ModelSpec& m, int seq,
                                               int world_size, int world_rank);

// Scales each isolated series point by the in-step / isolated ratio of the
// in-step sample of the same operation and group size nearest in size,
// when one lies within a factor 4 (the isolated time at the in-step size is
// interpolated log-log). Points farther from every in-step size keep their
// isolated time. Returns the ratios applied (for the profile's note).
std::vector<double> ApplyInStepCollectives(const std::vector<CollSeries>& in_step, std::vector<CollSeries>* series);

}  // namespace dt
