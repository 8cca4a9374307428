#include "planner/schedule/in_flight.h"

#include <algorithm>

#include "base/check.h"
#include "planner/schedule/build_schedule.h"

namespace dt {

InFlight PeakInFlight(const ActionList& rank_actions, const PlanSpec& p, int pipeline_rank) {
  InFlight out;
  out.per_chunk_peak.assign(p.vpp, 0);
  std::vector<int> live(p.vpp, 0);
  int total = 0;
  for (const Action& a : rank_actions) {
    if (a.kind != ActionKind::kForward && a.kind != ActionKind::kBackward) continue;
    DT_CHECK(a.chunk >= 0 && a.chunk < p.num_chunks() && a.chunk % p.pp == pipeline_rank)
        << ToString(a) << " is not on pipeline rank " << pipeline_rank;
    const int local = a.chunk / p.pp;
    const int delta = a.kind == ActionKind::kForward ? 1 : -1;
    live[local] += delta;
    total += delta;
    out.per_chunk_peak[local] = std::max(out.per_chunk_peak[local], live[local]);
    out.total_peak = std::max(out.total_peak, total);
  }
  return out;
}

int InFlightMicrobatches(const PlanSpec& p, int pipeline_rank) {
  // The warmup forwards plus the one of the first steady-state pair
  // (GPipe: all of them).
  return std::min(WarmupForwards(p, pipeline_rank) + 1, p.num_microbatches * p.vpp);
}

double PeakInFlightLayers(const PlanSpec& p, int pipeline_rank) {
  const int total = p.num_microbatches * p.vpp;
  const int warmup = WarmupForwards(p, pipeline_rank);
  const int group = p.pp * p.vpp;
  // Layers of the k-th forward's and backward's chunk (build_schedule.cc's
  // StepAt: pp consecutive steps per local chunk, forwards ascending,
  // backwards descending), stepped through in order: the local chunk of
  // step k is (k mod pp*vpp) / pp.
  struct Cursor {
    int step = 0, local = 0;  // step within the local chunk's pp, local chunk
    void Advance(int pp, int vpp) {
      if (++step < pp) return;
      step = 0;
      if (++local == vpp) local = 0;
    }
  };
  auto layers = [&](int local) { return static_cast<double>(p.layers_per_chunk[local * p.pp + pipeline_rank]); };
  Cursor f, b;
  double live = 0, peak = 0;
  for (int k = 0; k < warmup; ++k, f.Advance(p.pp, p.vpp)) peak = live += layers(f.local);
  const int steady = std::min(total - warmup, group);
  for (int i = 0; i < steady; ++i, f.Advance(p.pp, p.vpp), b.Advance(p.pp, p.vpp)) {
    live += layers(f.local);
    peak = std::max(peak, live);
    live -= layers(p.vpp - 1 - b.local);
  }
  return peak;
}

double BubbleOverIdeal(const PlanSpec& p) {
  const double x = static_cast<double>(p.pp - 1) / p.num_microbatches;
  return p.schedule == Schedule::kInterleaved ? x / p.vpp : x;
}

double BubbleFraction(const PlanSpec& p) {
  const double x = BubbleOverIdeal(p);
  return x / (1.0 + x);
}

}  // namespace dt
