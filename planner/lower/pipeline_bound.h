// PipelineLowerBound: a lower bound on a pipelined plan's simulated step
// time that sees what StepTimeLowerBound (simulate.h) cannot: the stalls of
// a schedule whose chunks differ in size. Interleaving 8 layers per stage
// over 3, 5, 6 or 7 virtual stages leaves chunks of 1 and 2 layers, and the
// interleaved steady state then waits on its heavy chunks: Megatron 1T's
// pp 16 plans simulate 8% slower than the per-stage busy-time bound says,
// which made the search simulate seven such plans in vain (docs/simulator.md
// "Search speed").
//
// What it computes: the longest path of a relaxation of the simulated step.
// Each pipeline stage runs its schedule's forwards and backwards in list
// order on one stream; a forward of chunk c waits for the same
// microbatch's forward of chunk c - 1, a backward of chunk c for the
// backward of chunk c + 1. Durations are exactly the compute-stream tasks
// LowerSchedule adds for that action (ZeRO-3 gathers, compute, recompute,
// blocking TP collectives, ZeRO-2/3 per-microbatch reduce-scatters); every
// pipeline transfer is free, everything off the compute stream (DP
// reductions, non-blocking sends) is left out, and each stage ends with its
// optimizer step.
// With the MoE all-to-all overlap (PlanSpec::moe_a2a_overlap) the TP / EP
// collectives are left out too (their pairing is priced per pair). The
// simulated step is this graph with tasks added and none shortened, so
// its makespan is at least this one (the result is lowered by 1e-9
// relative against summation-order rounding; tested over many plans).
//
// The second form takes the plan's schedule already built (BuildSchedule(p));
// the search builds it once for this bound and the simulation.
//
// Cost: one pass over the schedule (O(actions), no event queue): a few
// milliseconds for 1024 microbatches x 128 chunks. Pure apart from a
// per-thread scratch buffer; thread-safe. Plans with pp == 1 return 0 (the
// per-stage bound is exact enough there). Errors: those of BuildSchedule.
#pragma once

#include <vector>

#include "base/status.h"
#include "planner/lower/plan_costs.h"
#include "planner/schedule/action.h"
#include "planner/spec/plan_spec.h"

namespace dt {

StatusOr<double> PipelineLowerBound(const PlanSpec& p, const PlanCosts& costs);
StatusOr<double> PipelineLowerBound(const PlanSpec& p, const PlanCosts& costs,
                                    const std::vector<ActionList>& schedule);

}  // namespace dt
