#include "planner/profile/collective_series.h"

#include <algorithm>
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

LinkEntry LinkEntryFromSeries(const CollSeries& s) {
  LinkEntry e;
  e.key = s.group_size;
  const double f = sim::BusBwFactor(ToSimOp(s.kind), s.group_size);
  double prev_t = 0, first_t = 0;
  for (const CollSample& c : s.samples) {
    if (!(c.bytes > 0 && c.seconds > 0)) continue;
    if (first_t == 0) first_t = c.seconds;
    double t = std::max(c.seconds, prev_t);  // a larger message is never faster
    prev_t = t;
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
