// Enumerates candidate plans for a model on a cluster under constraints,
// counting every combination it rejects, grouped by reason.
//
// Grid level (dp x tp x pp x cp) and plan level (microbatching, schedule,
// recompute, SP, ZeRO) are counted separately: a grid rejected because heads
// are not divisible by tp counts once, not once per plan beneath it.
// Pure; deterministic order; no I/O.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/huge_page_allocator.h"
#include "planner/search/constraints.h"

namespace dt {

struct Enumeration {
  // Structurally valid candidates, on huge pages where the kernel gives
  // them: the 1T search enumerates ~120k (20 MB), and page faults are slow
  // on virtual machines (base/huge_page_allocator.h).
  std::vector<PlanSpec, HugePageAllocator<PlanSpec>> plans;
  int64_t grids_considered = 0;
  std::map<std::string, int64_t> grid_rejects;  // reason -> count
  std::map<std::string, int64_t> plan_rejects;  // reason -> count
  int64_t plans_considered = 0;                 // valid + plan-level rejects
};

// Fails (InvalidArgument) when a fixed dimension is impossible on its own,
// e.g. --tp 3 with 32 heads, or dp*tp*pp*cp fixed to a product != world.
StatusOr<Enumeration> EnumeratePlans(const ModelSpec& m, const ClusterSpec& c,
                                     const SearchConstraints& k);

}  // namespace dt
