#include "runtime/optim/sharded_adamw.h"

#include <algorithm>

#include "base/check.h"
#include "runtime/backend/lane_reduce.h"
#include "runtime/tensor/allocator.h"

namespace dt::rt {

ShardedAdamW::ShardedAdamW(ShardedParams* params) : params_(params) {
  const ParamStore& store = params->store();
  const auto& units = store.units();
  for (size_t u = 0; u < units.size(); ++u) {
    const ShardedParams::UnitShard& s = params->unit_shard(static_cast<int>(u));
    for (int i = units[u].first_param; i < units[u].end_param; ++i) {
      const Param& p = store.params()[i];
      const int64_t pb = p.offset - units[u].offset;
      const int64_t b = std::max(s.begin, pb), e = std::min(s.end, pb + p.numel);
      if (b < e) segments_.push_back({static_cast<int>(u), i, b, e, !NoWeightDecay(p)});
    }
  }
  m_.assign(static_cast<size_t>(params->shard_numel()), 0.0f);
  v_.assign(static_cast<size_t>(params->shard_numel()), 0.0f);
}

void ShardedAdamW::Update(const AdamWConfig& cfg, int64_t t, float lr, float grad_scale) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  const float* g = params_->grad_shard();
  for (const Segment& seg : segments_) {
    const ShardedParams::UnitShard& s = params_->unit_shard(seg.unit);
    const int64_t at = s.slot + (seg.unit_begin - s.begin);
    float* p = params_->OwnedValues(seg.unit) + (seg.unit_begin - s.begin);
    AdamWApply(cfg, t, lr, grad_scale, seg.decay, seg.unit_end - seg.unit_begin, p, g + at, m_.data() + at,
               v_.data() + at);
  }
}

double ShardedAdamW::LocalGradSquares(bool count_tied) const {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  const ParamStore& store = params_->store();
  const float* g = params_->grad_shard();
  double total = 0.0;
  for (const Segment& seg : segments_) {
    const Param& p = store.params()[seg.param];
    if (p.shard == ShardKind::kReplicated && p.tp_rank != 0) continue;
    if (p.replica != 0) continue;  // a TP-replicated shard counts once
    if (p.tied && !count_tied) continue;
    const ShardedParams::UnitShard& s = params_->unit_shard(seg.unit);
    const float* x = g + s.slot + (seg.unit_begin - s.begin);
    total += LaneSum(seg.unit_end - seg.unit_begin, [x](int64_t i) { return static_cast<double>(x[i]) * x[i]; });
  }
  return total;
}

float* ShardedAdamW::TiedGradSlot(int param, int64_t* n) {
  const ParamStore& store = params_->store();
  const Param& p = store.params().at(param);
  const ParamUnit& u = store.units().at(p.unit);
  DT_CHECK(u.first_param == param && u.end_param == param + 1)
      << "tied param " << p.name << " must be alone in its unit under ZeRO-2/3";
  const ShardedParams::UnitShard& s = params_->unit_shard(p.unit);
  *n = s.shard;
  return params_->grad_shard() + s.slot;
}

}  // namespace dt::rt
