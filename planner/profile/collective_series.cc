#include "planner/profile/collective_series.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "base/format.h"
#include "planner/cost/comm_cost.h"
#include "sim/collective_model.h"

namespace dt {
namespace {


}  // namespace

int CostLatencySteps(CollKind kind, int n) {
  int steps = sim::RingLatencySteps(ToSimOp(kind), n);
  if (kind == CollKind::kAllReduce) {
    int log2n = 0;
    for (long long reach = 1; reach < n; reach *= 2) ++log2n;
    steps = std::min(steps, 2 * log2n);
  }
  return std::max(1, steps);
}

constexpr double kChunkingSlack = 0.25;

LinkEntry LinkEntryFromSeries(const CollSeries& s) {
  LinkEntry e;
  e.key = s.group_size;
  const double f = sim::BusBwFactor(ToSimOp(s.kind), s.group_size);
  double prev_t = 0, prev_bytes = 0, first_t = 0;
  for (const CollSample& c : s.samples) {
    if (!(c.bytes > 0 && c.seconds > 0)) continue;
    if (first_t == 0) first_t = c.seconds;
    double t = std::max(c.seconds, prev_t);  // a larger message is never faster
    // ... nor much slower than the same bytes sent as ceil(S / S_prev)
    // smaller collectives one after another: a point far above that (by more
    // than kChunkingSlack) is noise, a busy moment of the machine, not the
    // link, and is brought down to the slack. Real logs stay within it
    // (nccl-tests on H100: at most 1% above, from timing noise).
    if (prev_bytes > 0 && c.bytes > prev_bytes)
      t = std::min(t, (1 + kChunkingSlack) * std::ceil(c.bytes / prev_bytes) * prev_t);
    prev_t = t;
    prev_bytes = c.bytes;
    if (!e.points.x.empty() && c.bytes <= e.points.x.back()) continue;
    e.points.x.push_back(c.bytes);
    e.points.y.push_back(c.bytes * f / t);
  }
  if (e.points.empty()) return e;
  const int steps = CostLatencySteps(s.kind, s.group_size);
  e.busbw_Bps = *std::max_element(e.points.y.begin(), e.points.y.end());
  e.latency_s = first_t / steps;
  e.note = "measured: " + std::to_string(e.points.size()) + " sizes " + ShortNumber(e.points.x.front()) + ".." +
           ShortNumber(e.points.x.back()) + " B; latency_s = smallest-message time / " + std::to_string(steps) + " steps";
  return e;
}

}  // namespace dt
