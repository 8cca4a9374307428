// CollSeries -> LinkEntry: one measured collective (an operation over one
// group, at increasing message sizes) turned into a row of a profile's
// collective table. Shared by the profiler (planner/profiler, which measures
// the series with the runtime's communicator) and the nccl-tests importer
// (planner/profile/nccl_tests_profile.h, which reads them from logs).
//
// Convention (nccl-tests doc/PERFORMANCE.md): `bytes` is S, the full buffer
// (all-reduce: the buffer; all-gather: the whole output; reduce-scatter: the
// whole input; send/recv: the message); busbw = S / t x factor(op, n)
// (sim::BusBwFactor). The entry is fitted so that planner/cost/comm_cost.h
// reproduces the series: points [S, busbw(S)] with time made non-decreasing
// in S (a larger message is never faster) and at most 1.25 x ceil(S / S_prev)
// times the previous point's (sending it in pieces would be faster: a point
// far above that is measurement noise), busbw_Bps = the largest busbw,
// latency_s = the smallest-message time / the cost model's latency steps.
// Pure functions; samples with a non-positive size or time are skipped.
#pragma once

#include <vector>

#include "planner/cost/layer_ops.h"
#include "planner/profile/profile.h"

namespace dt {

struct CollSample {
  double bytes = 0;    // S as nccl-tests counts it
  double seconds = 0;  // per operation
};

struct CollSeries {
  CollKind kind = CollKind::kAllReduce;
  int group_size = 2;               // ranks in the collective (n)
  std::vector<CollSample> samples;  // increasing bytes
};

// Sequential latency steps the cost model pays for `kind` over n ranks
// (ring steps; all-reduce the fewer of ring and tree); at least 1.
int CostLatencySteps(CollKind kind, int n);

// The entry of `s`, keyed by s.group_size (the caller re-keys inter-node
// entries by ranks per node). Empty `points` when no sample was usable.
LinkEntry LinkEntryFromSeries(const CollSeries& s);

}  // namespace dt
