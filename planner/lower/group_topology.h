// GroupTopology: where the members of a TP / CP / DP / PP / EP group sit, given
// the plan's rank-grid order and the devices per node: the group size, how
// many of its members share a node, and whether it spans nodes.
//
// Closed form over the grid strides (no per-rank loops), valid when node
// size and strides are powers-of-two-friendly divisors of each other; when a
// stride does not divide the node size we fall back to "one member per
// node" (pessimistic). Pure; thread-safe.
#pragma once

#include "planner/cost/layer_ops.h"
#include "planner/spec/plan_spec.h"

namespace dt {

struct GroupTopology {
  int size = 1;
  int per_node = 1;        // members of the group on one node
  bool spans_nodes = false;
};

GroupTopology TopologyOf(const PlanSpec& p, GroupKind g, int gpus_per_node);

// The gradient-reduction group: DP x CP ranks holding the same parameters.
GroupTopology GradGroupTopology(const PlanSpec& p, int gpus_per_node);

// The expert-gradient group (MoE): the dp*cp/ep replicas of one expert
// shard, i.e. equal dp coordinate modulo ep (rank_grid.h). With cp > 1 its
// placement is approximated pessimistically (members at the larger stride).
// Folded plans (etp < tp): the tp*dp/(ep*etp) members at stride etp*ep.
GroupTopology ExpertGradGroupTopology(const PlanSpec& p, int gpus_per_node);

}  // namespace dt
