// SimulatePlan: predicts one plan's step time and memory.
//
// Steps: price each model chunk from its layer ops and the hardware profile
// (PlanCosts), build the schedule's per-rank action lists, lower them onto
// the discrete-event engine (one representative rank per pipeline stage:
// all TP/CP/DP ranks of a stage run identical lists), run it, and combine
// with the memory model. Errors: an invalid plan returns InvalidArgument;
// nothing aborts on user input. Thread-safe: callers may simulate distinct
// plans on distinct threads (no shared mutable state).
#pragma once

#include <string>
#include <vector>

#include "planner/lower/plan_costs.h"
#include "planner/lower/prediction.h"
#include "planner/profile/profile.h"
#include "planner/schedule/action.h"
#include "planner/spec/plan_spec.h"

namespace dt {

struct SimulateOptions {
  std::string trace_path;  // write a Chrome trace of the step when non-empty
  // Test hooks: price every communication at zero / every chunk uniformly.
  bool free_communication = false;
};

StatusOr<Prediction> SimulatePlan(const ModelSpec& m, const ClusterSpec& c, const PlanSpec& p,
                                  const HardwareProfile& hw, const SimulateOptions& opt = {});

// SimulatePlan in two halves, for a caller that needs a plan's costs and
// schedule before deciding to simulate it (the search's schedule-aware
// bound, pipeline_bound.h): PricePlan validates the plan against the model,
// cluster and profile and builds both; SimulatePriced simulates from them.
// SimulatePlan(m, c, p, hw, opt) == SimulatePriced(m, c, p, hw, *PricePlan(m,
// c, p, hw), opt). `hw` is the same profile in both calls (the precision's
// view of it is taken inside). Errors: those of SimulatePlan.
struct PricedPlan {
  PlanCosts costs;                    // ComputePlanCosts, outside-profile points tracked
  std::vector<ActionList> schedule;   // BuildSchedule
};
StatusOr<PricedPlan> PricePlan(const ModelSpec& m, const ClusterSpec& c, const PlanSpec& p,
                               const HardwareProfile& hw);
StatusOr<Prediction> SimulatePriced(const ModelSpec& m, const ClusterSpec& c, const PlanSpec& p,
                                    const HardwareProfile& hw, PricedPlan priced,
                                    const SimulateOptions& opt = {});

// Memory only (fast path of the search): per-stage peaks, capacity, fits.
Prediction PredictMemory(const ModelSpec& m, const PlanSpec& p, const HardwareProfile& hw);

// A lower bound on the simulated step time from chunk costs alone, never
// above what SimulatePlan returns for the same plan (tested).
double StepTimeLowerBound(const PlanSpec& p, const PlanCosts& costs);

}  // namespace dt
