// Lowering: turns one representative rank per pipeline stage's action list
// (planner/schedule) into tasks on the discrete-event engine (sim/), priced
// by PlanCosts. The simulator costs exactly the actions the runtime runs.
//
// Streams per stage: "compute" (kernels, blocking TP/CP collectives and the
// blocking per-unit ZeRO-2/3 gathers / reduce-scatters inside a forward or
// backward, in action order), "dp" (gradient/parameter sync, in issue
// order), "p2p-fwd"/"p2p-bwd" (activation and gradient transfers to the next
// / previous stage). Dependencies: a chunk's forward waits for its input
// transfer, a backward for its output-gradient transfer, the optimizer for
// its stage's gradient sync, parameter sync for the optimizer.
// The engine is supplied by the caller (one per thread) and cleared here.
#pragma once

#include <vector>

#include "planner/lower/plan_costs.h"
#include "planner/lower/prediction.h"
#include "planner/schedule/action.h"
#include "sim/engine.h"

namespace dt {

enum TaskCategory : int32_t {
  kCatCompute = 0,
  kCatRecompute,
  kCatTpComm,
  kCatP2p,
  kCatDpComm,
  kCatOptimizer,
  kNumCategories
};
const std::vector<std::string>& CategoryNames();

struct Lowered {
  std::vector<sim::StreamId> compute;  // per stage
  std::vector<sim::StreamId> dp;       // per stage
  std::vector<sim::TaskId> optimizer;  // per stage
  std::vector<sim::TaskId> dp_end;     // per stage: last parameter sync task, or -1
  // Per stage: tasks on the compute stream whose start may be held by a
  // transfer (pp) or a ZeRO gather (dp), with that dependency.
  struct Wait {
    sim::TaskId task;
    sim::TaskId dep;
    bool is_p2p;
  };
  std::vector<std::vector<Wait>> waits;
};

// Builds the graph; `trace` keeps task names. Returns the stream/task ids
// needed to read the breakdown after engine.Run().
Lowered LowerSchedule(const std::vector<ActionList>& schedule, const PlanSpec& p,
                      const PlanCosts& costs, bool trace, sim::Engine* engine);

// Reads the step-time breakdown of the critical stage after a run.
TimeBreakdown ReadBreakdown(const Lowered& l, const sim::Engine& engine);

}  // namespace dt
