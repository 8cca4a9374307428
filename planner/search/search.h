// SearchPlans: exhaustive search over the plan space of a model on a
// cluster, returning the fastest plans that fit in memory.
//
// Pipeline: enumerate candidates (counting structural rejections), check
// memory (closed form, cheap), add beside each fitting full-recompute plan
// that needs recompute the same plan recomputing only the fewest layers per
// chunk that fit (when the recompute mode is searched and the framework can
// express it), compute a lower bound on step time for each
// survivor, then simulate in lower-bound order on all cores, skipping a plan
// only when its lower bound exceeds the N-th best simulated time so far —
// so pruning never drops a plan that could enter the top N. The returned top
// list is deterministic (ties broken by enumeration order); so are the
// counts, which are computed against the final threshold.
// Errors: InvalidArgument for impossible fixed dimensions. No plan fitting
// is not an error: `top` is empty and `closest` says by how much it missed.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "planner/lower/prediction.h"
#include "planner/profile/profile.h"
#include "planner/search/constraints.h"

namespace dt {

struct SearchOptions {
  int top = 10;     // plans returned
  int threads = 0;  // 0: all hardware threads
};

struct RankedPlan {
  PlanSpec plan;
  Prediction prediction;
};

struct SearchResult {
  int64_t grids_considered = 0;
  int64_t plans_considered = 0;
  std::map<std::string, int64_t> grid_rejects;
  std::map<std::string, int64_t> plan_rejects;  // includes "does not fit in memory"
  int64_t fitting = 0;      // plans passing the memory check
  int64_t simulated = 0;    // plans fully simulated
  int64_t pruned = 0;       // plans whose lower bound could not reach the top N
  std::vector<RankedPlan> top;
  // When nothing fits: the plan with the smallest peak / capacity.
  std::optional<RankedPlan> closest;
  double wall_seconds = 0;
  int threads_used = 1;
};

StatusOr<SearchResult> SearchPlans(const ModelSpec& m, const ClusterSpec& c,
                                   const HardwareProfile& hw, const SearchConstraints& k,
                                   const SearchOptions& opt = {});

}  // namespace dt
