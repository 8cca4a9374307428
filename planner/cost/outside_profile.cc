#include "planner/cost/outside_profile.h"

#include "planner/cost/comm_cost.h"
#include "planner/cost/compute_cost.h"

namespace dt {

bool GemmOutsideProfile(const Op& op, const HardwareProfile& p) {
  const double flops = GemmCallFlops(op);  // priced per call (compute_cost.h)
  if (flops <= 0) return false;
  const ComputeProfile& c = p.compute;
  if (c.gemm_points.empty()) {
    bool clamped = false;
    GemmEfficiency(flops, p, &clamped);
    return clamped;
  }
  for (const GemmPoint& g : c.gemm_points)
    if (g.m == op.m && g.n == op.n && g.k == op.k && g.batch == op.batch) return false;
  const Curve& t = c.measured_gemm_seconds;
  return t.empty() || flops < t.x.front() || flops > t.x.back();
}

bool CollectiveOutsideProfile(CollKind kind, double bytes, int n, int g, bool spans_nodes,
                              const HardwareProfile& p) {
  if (n <= 1 || bytes <= 0) return false;
  return ChooseLink(kind, bytes, n, g, spans_nodes, p).clamped;
}

bool OpOutsideProfile(const Op& op, int g, bool spans_nodes, const HardwareProfile& p) {
  switch (op.kind) {
    case OpKind::kGemm: return GemmOutsideProfile(op, p);
    case OpKind::kCollective:
      return CollectiveOutsideProfile(op.coll, op.bytes, op.group_size, g, spans_nodes, p);
    case OpKind::kAttention:  // cuDNN's rate asked for, the profile has none: priced with its default
      return op.cudnn_attention && p.compute.attention_efficiency_by_keys_cudnn.empty();
    default: return false;
  }
}

}  // namespace dt
