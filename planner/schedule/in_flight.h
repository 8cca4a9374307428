// In-flight microbatches and analytic pipeline bubbles: what the memory
// model multiplies per-microbatch activations by, and the textbook bubble
// the simulator's results can be compared with.
//
// "In flight" on a rank = (microbatch, chunk) pairs whose forward has run
// but whose backward has not; activations of each such pair are live.
// Counts are in microbatches of one model chunk (a rank with v chunks holds
// 1/v of its layers' activations per pair when chunks are equal).
// Pure functions; inputs are assumed valid (CheckSchedule / BuildSchedule).
#pragma once

#include <vector>

#include "planner/schedule/action.h"
#include "planner/spec/plan_spec.h"

namespace dt {

struct InFlight {
  std::vector<int> per_chunk_peak;  // index = local chunk (model chunk / pp), size vpp
  int total_peak = 0;               // peak of the sum over the rank's chunks
};

// Counts by walking the list (F adds one, B removes one). Aborts (DT_CHECK)
// on an F/B of a chunk that does not live on `pipeline_rank`.
InFlight PeakInFlight(const ActionList& rank_actions, const PlanSpec& p, int pipeline_rank);

// Closed form of PeakInFlight(...).total_peak for the schedule BuildSchedule
// builds (m = num_microbatches, r = pipeline_rank, v = vpp):
//   pp == 1      1
//   GPipe        m
//   1F1B         min(pp - r, m)                         (Narayanan et al. 2021)
//   interleaved  min(2*(pp-r-1) + (v-1)*pp + 1, m*v)    (Megatron-LM)
// i.e. WarmupForwards + 1 capped at m*v, which also covers the one more
// warmup forward of combined 1F1B (PlanSpec::moe_a2a_overlap).
// On rank 0 of the interleaved schedule that is pp*v + pp - 1 chunk-
// microbatches = pp + (pp-1)/v microbatches of the whole stage.
int InFlightMicrobatches(const PlanSpec& p, int pipeline_rank);

// Peak over the step of the layers whose activations are stored on the
// rank: the sum of layers_per_chunk[chunk] over its in-flight (microbatch,
// chunk) pairs. With equal chunks that is InFlightMicrobatches x the
// chunk's layers; with unequal ones (an uneven or accounted split under
// the interleaved schedule) the peak falls where the rank holds the most
// pairs of its heavier chunks. Closed form of walking BuildSchedule's list:
// right after steady forward W+i the live pairs are forwards 0..W+i less
// backwards 0..i-1, and that sum repeats with period pp*vpp, so one period
// is enough (O(W + pp*vpp)).
double PeakInFlightLayers(const PlanSpec& p, int pipeline_rank);

// Analytic pipeline bubble with equal per-chunk F and B times and free
// communication. Bubble time over ideal compute time (m microbatches' work):
//   GPipe, 1F1B  (pp-1)/m;   interleaved (1/v)*(pp-1)/m   (Narayanan et al. SC21)
double BubbleOverIdeal(const PlanSpec& p);
// Bubble as a fraction of the whole step: x/(1+x) for x = BubbleOverIdeal,
// i.e. (pp-1)/(m+pp-1) and (pp-1)/(v*m+pp-1).
double BubbleFraction(const PlanSpec& p);

}  // namespace dt
