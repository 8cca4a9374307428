// BuildSchedule: the per-pipeline-rank action lists of one training step for
// GPipe, 1F1B (PipeDream-Flush) and interleaved 1F1B, in the Action format of
// planner/schedule/action.h. A pure, deterministic function of the plan; the
// simulator costs these lists and the runtime executes them unchanged.
//
// Compute order on pipeline rank r (m microbatches, v = vpp chunks per rank,
// T = m*v forward/backward steps): W warmup forwards, then T-W steady
// iterations of (forward, backward), then W cooldown backwards, with
//   GPipe        W = T  (all forwards, then backwards in ascending microbatch order)
//   1F1B         W = min(pp-r-1, m)
//   interleaved  W = min(2*(pp-r-1) + (v-1)*pp, T)   (Megatron-LM)
//   pp == 1      W = 0  (F, B per microbatch, whatever the schedule)
// and one more (capped at T) when the plan overlaps its MoE all-to-alls
// (PlanSpec::moe_a2a_overlap, Megatron-LM's combined 1F1B), so that each
// steady-state forward is independent of the backward it is paired with.
// The k-th forward on rank r runs local chunk (k mod pp*v) / pp (backwards
// count local chunks down from v-1) on microbatch (k / (pp*v))*pp + k mod pp:
// groups of pp microbatches per chunk; for v == 1 simply microbatch k.
//
// Communication: RA(mb,c) immediately before F(mb,c) when c > 0, SA(mb,c)
// immediately after it when c is not the last chunk; RG(mb,c) immediately
// before B(mb,c) when c is not last, SG(mb,c) immediately after it when
// c > 0. Receives are as late as possible, which is deadlock-free with
// buffered sends (CheckSchedule verifies it). GradSync(c) follows the last
// backward of chunk c (and its SG); then OptimizerStep; then, for
// zero_stage >= 1, ParamSync(c) per local chunk in ascending order.
//
// Errors: InvalidArgument naming the field (pp, vpp, num_microbatches,
// zero_stage, schedule) when the plan cannot be scheduled.
#pragma once

#include <vector>

#include "base/status.h"
#include "planner/schedule/action.h"
#include "planner/spec/plan_spec.h"

namespace dt {

// One ActionList per pipeline rank (index = pipeline rank 0..pp-1).
StatusOr<std::vector<ActionList>> BuildSchedule(const PlanSpec& p);

// W above: forwards rank `pipeline_rank` runs before its first backward.
// Requires a plan BuildSchedule accepts.
int WarmupForwards(const PlanSpec& p, int pipeline_rank);

}  // namespace dt
