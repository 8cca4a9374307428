#include "runtime/optim/grad_norm.h"

#include <algorithm>
#include <vector>

#include "runtime/backend/lane_reduce.h"
#include "runtime/model/bf16_params.h"

namespace dt::rt {

namespace {
// Sum of x(i)^2 over [lo, hi) in double, in LaneSum's fixed order.
template <typename X>
double SumOfSquares(int64_t lo, int64_t hi, X x) {
  return LaneSum(hi - lo, [&](int64_t i) {
    const double v = x(lo + i);
    return v * v;
  });
}
}  // namespace

double LocalGradSquares(const ParamStore& store, int64_t begin, int64_t end, bool count_tied,
                        ParamSubset subset) {
  double total = 0.0;
  const Bf16Params* b = store.bf16_grads() ? store.bf16() : nullptr;
  const float* g = b ? nullptr : store.grads();
  const bf16_t* g16 = b ? b->grads() : nullptr;
  for (const Param& p : store.params()) {
    if (p.shard == ShardKind::kReplicated && p.tp_rank != 0) continue;
    if (p.replica != 0) continue;  // a TP-replicated shard counts once
    if (p.tied && !count_tied) continue;
    if (subset != ParamSubset::kAll && p.expert != (subset == ParamSubset::kExperts)) continue;
    int64_t lo = std::max(begin, p.offset), hi = std::min(end, p.offset + p.numel);
    total += g16 != nullptr ? SumOfSquares(lo, hi, [&](int64_t i) { return Bf16ToFloat(g16[i]); })
                            : SumOfSquares(lo, hi, [&](int64_t i) { return g[i]; });
  }
  return total;
}

double SumAcross(Comm* comm, double local) {
  if (comm == nullptr || comm->size() == 1) return local;
  // Exact split of the double into three floats (24 + 24 + 24 >= 53 bits).
  float mine[3];
  mine[0] = static_cast<float>(local);
  double rest = local - mine[0];
  mine[1] = static_cast<float>(rest);
  mine[2] = static_cast<float>(rest - mine[1]);
  std::vector<float> all(3 * static_cast<size_t>(comm->size()));
  comm->AllGather(mine, all.data(), 3);
  double sum = 0.0;
  for (int r = 0; r < comm->size(); ++r)
    sum += (static_cast<double>(all[3 * r]) + all[3 * r + 1]) + all[3 * r + 2];
  return sum;
}

}  // namespace dt::rt
