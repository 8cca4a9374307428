#include "runtime/optim/sharded_adamw.h"

#include <algorithm>

#include "base/check.h"
#include "runtime/backend/lane_reduce.h"
#include "runtime/tensor/allocator.h"

namespace dt::rt {

ShardedAdamW::ShardedAdamW(ShardedParams* params, bool bf16_moments)
    : params_(params), moments_(params->shard_numel(), bf16_moments) {
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
  if (params->bf16()) {
    DT_CHECK(store.has_values()) << "ShardedAdamW: a bf16 store's fp32 values are gone before the master was taken";
    master_.assign(static_cast<size_t>(params->shard_numel()), 0.0f);
    params->TakeShardArray(store.values(), master_.data());
  }
}

void ShardedAdamW::Update(const AdamWConfig& cfg, int64_t t, float lr, float grad_scale) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  if (params_->bf16()) {
    const bool g16 = params_->bf16_grads();
    for (const Segment& seg : segments_) {
      const ShardedParams::UnitShard& s = params_->unit_shard(seg.unit);
      const int64_t at = s.slot + (seg.unit_begin - s.begin);
      moments_.ApplyToMaster(cfg, t, lr, grad_scale, seg.decay, at, seg.unit_end - seg.unit_begin,
                             master_.data() + at, g16 ? nullptr : params_->grad_shard() + at,
                             g16 ? params_->grad_shard16() + at : nullptr,
                             params_->OwnedValues16(seg.unit) + (seg.unit_begin - s.begin));
    }
    return;
  }
  const float* g = params_->grad_shard();
  for (const Segment& seg : segments_) {
    const ShardedParams::UnitShard& s = params_->unit_shard(seg.unit);
    const int64_t at = s.slot + (seg.unit_begin - s.begin);
    float* p = params_->OwnedValues(seg.unit) + (seg.unit_begin - s.begin);
    moments_.Apply(cfg, t, lr, grad_scale, seg.decay, at, seg.unit_end - seg.unit_begin, p, g + at);
  }
}

double ShardedAdamW::LocalGradSquares(bool count_tied) const {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  const ParamStore& store = params_->store();
  const bool g16 = params_->bf16_grads();
  const float* g = g16 ? nullptr : params_->grad_shard();
  const bf16_t* h = g16 ? params_->grad_shard16() : nullptr;
  double total = 0.0;
  for (const Segment& seg : segments_) {
    const Param& p = store.params()[seg.param];
    if (p.shard == ShardKind::kReplicated && p.tp_rank != 0) continue;
    if (p.replica != 0) continue;  // a TP-replicated shard counts once
    if (p.tied && !count_tied) continue;
    const ShardedParams::UnitShard& s = params_->unit_shard(seg.unit);
    const int64_t at = s.slot + (seg.unit_begin - s.begin);
    if (g16) {
      const bf16_t* x = h + at;
      total += LaneSum(seg.unit_end - seg.unit_begin, [x](int64_t i) {
        const double v = Bf16ToFloat(x[i]);
        return v * v;
      });
    } else {
      const float* x = g + at;
      total += LaneSum(seg.unit_end - seg.unit_begin, [x](int64_t i) { return static_cast<double>(x[i]) * x[i]; });
    }
  }
  return total;
}

int64_t ShardedAdamW::TiedSlot(int param, int64_t* n) const {
  const ParamStore& store = params_->store();
  const Param& p = store.params().at(param);
  const ParamUnit& u = store.units().at(p.unit);
  DT_CHECK(u.first_param == param && u.end_param == param + 1)
      << "tied param " << p.name << " must be alone in its unit under ZeRO-2/3";
  const ShardedParams::UnitShard& s = params_->unit_shard(p.unit);
  *n = s.shard;
  return s.slot;
}

float* ShardedAdamW::TiedGradSlot(int param, int64_t* n) { return params_->grad_shard() + TiedSlot(param, n); }

bf16_t* ShardedAdamW::TiedGradSlot16(int param, int64_t* n) { return params_->grad_shard16() + TiedSlot(param, n); }

}  // namespace dt::rt
