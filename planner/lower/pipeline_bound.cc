#include "planner/lower/pipeline_bound.h"

#include <algorithm>
#include <string>
#include <vector>

#include "planner/schedule/build_schedule.h"

namespace dt {
namespace {

// The compute-stream time LowerSchedule gives a forward / backward of a
// chunk, without what the relaxation leaves out (see the header).
double ForwardTime(const ChunkCost& k, bool with_comm) {
  double t = std::max(0.0, k.zero3_gather) + k.fwd_compute;
  if (with_comm && k.fwd_comm > 0) t += k.fwd_comm;
  return t;
}

double BackwardTime(const ChunkCost& k, bool with_comm) {
  double t = std::max(0.0, k.zero3_gather) + std::max(0.0, k.recompute) + std::max(0.0, k.bwd_compute - k.recompute);
  if (with_comm && k.bwd_comm > 0) t += k.bwd_comm;
  return t + std::max(0.0, k.grad_sync_per_microbatch);
}

}  // namespace

StatusOr<double> PipelineLowerBound(const PlanSpec& p, const PlanCosts& costs) {
  if (p.pp < 2) return 0.0;
  DT_ASSIGN_OR_RETURN(std::vector<ActionList> schedule, BuildSchedule(p));
  return PipelineLowerBound(p, costs, schedule);
}

StatusOr<double> PipelineLowerBound(const PlanSpec& p, const PlanCosts& costs,
                                    const std::vector<ActionList>& schedule) {
  if (p.pp < 2) return 0.0;
  if (static_cast<int>(schedule.size()) != p.pp)
    return InvalidArgument("pipeline bound: " + std::to_string(schedule.size()) + " action lists for pp " +
                           std::to_string(p.pp));
  const int chunks = p.num_chunks();
  const int m = p.num_microbatches;
  if (static_cast<int>(costs.chunks.size()) != chunks)
    return InvalidArgument("pipeline bound: " + std::to_string(costs.chunks.size()) + " chunk costs for " +
                           std::to_string(chunks) + " chunks");
  const bool with_comm = !p.moe_a2a_overlap;
  std::vector<double> fwd(chunks), bwd(chunks);
  for (int c = 0; c < chunks; ++c) {
    fwd[c] = ForwardTime(costs.chunks[c], with_comm);
    bwd[c] = BackwardTime(costs.chunks[c], with_comm);
  }
  // End times of each (microbatch, chunk) forward and backward; -1: not yet.
  thread_local std::vector<double> fwd_end, bwd_end;
  const size_t cells = static_cast<size_t>(m) * chunks;
  fwd_end.assign(cells, -1.0);
  bwd_end.assign(cells, -1.0);

  // Each stage runs its list in order as far as its dependencies allow;
  // sweep the stages until none moves (the schedule is deadlock-free and
  // this graph has fewer constraints, so every action runs).
  const int pp = p.pp;
  std::vector<size_t> next(pp, 0);
  std::vector<double> clock(pp, 0.0);
  bool moved = true;
  while (moved) {
    moved = false;
    for (int s = 0; s < pp; ++s) {
      const ActionList& list = schedule[s];
      size_t& i = next[s];
      for (; i < list.size(); ++i) {
        const Action& a = list[i];
        if (a.kind != ActionKind::kForward && a.kind != ActionKind::kBackward) continue;
        const size_t cell = static_cast<size_t>(a.microbatch) * chunks + a.chunk;
        double ready = 0;
        if (a.kind == ActionKind::kForward) {
          if (a.chunk > 0) {
            ready = fwd_end[cell - 1];
            if (ready < 0) break;
          }
          clock[s] = std::max(clock[s], ready) + fwd[a.chunk];
          fwd_end[cell] = clock[s];
        } else {
          ready = a.chunk + 1 < chunks ? bwd_end[cell + 1] : fwd_end[cell];
          if (ready < 0) break;
          clock[s] = std::max(clock[s], ready) + bwd[a.chunk];
          bwd_end[cell] = clock[s];
        }
        moved = true;
      }
    }
  }
  for (int s = 0; s < pp; ++s) {
    if (next[s] != schedule[s].size())
      return Internal("pipeline bound: stage " + std::to_string(s) + " stuck at action " + std::to_string(next[s]) +
                      " of " + std::to_string(schedule[s].size()));
  }
  // Each stage's optimizer step follows everything on its compute stream.
  double makespan = 0;
  for (int s = 0; s < pp; ++s)
    makespan = std::max(makespan, clock[s] + (s < static_cast<int>(costs.optimizer.size()) ? costs.optimizer[s] : 0.0));
  return makespan * (1 - 1e-9);
}

}  // namespace dt
