// Prediction: what the simulator says about one plan — step time with a
// breakdown and peak memory per pipeline stage with a breakdown.
//
// Produced by SimulatePlan (planner/lower/simulate.h); printed by the CLI and
// written into plan files. Plain data; thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "base/json_fields.h"
#include "planner/memory/stage_memory.h"

namespace dt {

struct TimeBreakdown {
  double compute = 0;      // forward + backward + recompute kernels on the critical stage
  double tp_exposed = 0;   // TP/CP/SP collectives (blocking on the compute stream)
  double pp_exposed = 0;   // compute-stream idle time spent waiting on p2p transfers
  double dp_exposed = 0;   // gradient / parameter sync not hidden behind compute
  double bubble = 0;       // remaining pipeline idle time (fill and drain)
  double optimizer = 0;    // optimizer step
};

struct StagePeak {
  int stage = 0;
  StageMemory memory;       // bytes per GPU, with breakdown
  int in_flight = 0;        // microbatches of activations held at the peak
};

struct Prediction {
  double step_time_s = 0;
  TimeBreakdown time;
  std::vector<StagePeak> stages;  // one per pipeline stage
  double peak_memory_bytes = 0;   // max over stages
  double capacity_bytes = 0;      // usable device memory
  bool fits = false;
  double tokens_per_s = 0;
  double model_flops_per_step = 0;  // Narayanan Eq. 3 style model FLOPs (no recompute)
  double mfu = 0;                   // model FLOPs / (step time * world * peak)
  double hardware_flops_per_step = 0;  // including recompute
  bool approximated_points = false;    // some cost came from outside measured profile points
  // The largest share, over pipeline stages, of a stage's kernel time that
  // is its device waiting for the host to launch them (ChunkCost::host_wait):
  // a launch-bound plan (eager kernels too small for their launches).
  double host_wait_share = 0;
};

json ToJson(const Prediction& p);

}  // namespace dt
