// OutsideProfile: does pricing an op need a point outside what a measured
// profile covers? The cost models (compute_cost.h, comm_cost.h) clamp or
// scale at the ends of measured curves; this unit says when they did, so
// PlanCosts::outside_profile (and the report's "outside the measured range"
// note) can be set instead of extrapolating silently.
//
//  * GEMM with compute.gemm_points: outside when its FLOPs lie outside the
//    measured FLOP range (an identical measured shape is never outside);
//    without gemm_points: when gemm_efficiency was clamped.
//  * Collective: when ChooseLink clamped (message size outside the measured
//    points of its entry, or a group size outside the listed ones).
//  * Attention and memory-bound ops use scalar efficiencies: never outside.
// Pure, thread-safe; same preconditions as OpTime / CollectiveTime.
#pragma once

#include "planner/cost/layer_ops.h"
#include "planner/profile/profile.h"

namespace dt {

bool GemmOutsideProfile(const Op& gemm, const HardwareProfile& profile);

bool CollectiveOutsideProfile(CollKind kind, double bytes, int group_size, int ranks_per_node_in_group,
                              bool spans_nodes, const HardwareProfile& profile);

// Any op: GEMMs and collectives as above (a collective's group placement is
// passed by the caller), false for other kinds.
bool OpOutsideProfile(const Op& op, int ranks_per_node_in_group, bool spans_nodes,
                      const HardwareProfile& profile);

}  // namespace dt
