// The speed check (`dtplan profile --speed-check PROFILE`): re-measures the
// end checks a CPU profile recorded (whole-model training steps on the
// runtime, ComputeProfile::step_checks) with the same procedure and rank
// count, and reports how fast this machine runs them now against when the
// profile was taken. A shared VM's speed drifts by 10-20% within minutes;
// `validate --execute --speed-check` pairs every plan run with one of these
// so that the closed loop can tell the model's error from the machine's.
//
// Collective over `world` (every rank calls it). Rank 0 prints one JSON
// line on stdout:
//   {"speed_check": {"profile": P, "speed": s, "checks": [{"what", "recorded_s",
//    "measured_s"}, ...]}}
// with s = median over checks of recorded_s / measured_s (1 = as fast as when
// profiled, 0.8 = steps take 1.25x as long now). Only checks of at most 15 ms
// are re-run (a few seconds in all); on a machine with none that short, the
// cheapest one. Returns the exit code, the same on every
// rank: 2 (message on rank 0's stderr) when the profile cannot be read, has
// no step checks of the given models, or was measured with another number of
// ranks per node.
#pragma once

#include <vector>

#include "planner/profiler/profiler_options.h"
#include "planner/profiler/run_profiler.h"
#include "planner/spec/model_spec.h"

namespace dt {

int RunSpeedCheck(const ProfilerOptions& o, const ProfilerDevice& dev, rt::MpiComm& world,
                  const std::vector<ModelSpec>& models, int ranks_per_node);

}  // namespace dt
