#include "runtime/optim/adamw.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "runtime/model/bf16_params.h"
#include "runtime/optim/adam_moments.h"

namespace dt::rt {

bool NoWeightDecay(const Param& p) {
  if (p.full_shape.size() <= 1) return true;
  if (p.name.find("norm") != std::string::npos) return true;
  const std::string bias = "bias";
  return p.name.size() >= bias.size() &&
         p.name.compare(p.name.size() - bias.size(), bias.size(), bias) == 0;
}

AdamWShard::AdamWShard(const ParamStore& store, int64_t begin, int64_t end, bool bf16_moments)
    : begin_(begin), end_(end) {
  DT_CHECK(0 <= begin && begin <= end && end <= store.numel())
      << "AdamWShard range [" << begin << ", " << end << ") outside store of " << store.numel();
  for (const Param& p : store.params()) {
    int64_t b = std::max(begin, p.offset), e = std::min(end, p.offset + p.numel);
    if (b < e) segments_.push_back({b, e, !NoWeightDecay(p)});
  }
  moments_ = std::make_unique<AdamMoments>(end - begin, bf16_moments);
  if (store.bf16() != nullptr) master_.assign(store.values() + begin, store.values() + end);
}

void AdamWApply(const AdamWConfig& cfg, int64_t t, float lr, float grad_scale, bool decay_on, int64_t n,
                float* p, const float* g, float* m, float* v) {
  DT_CHECK_GE(t, 1);
  const double bc1 = 1.0 - std::pow(static_cast<double>(cfg.beta1), static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(static_cast<double>(cfg.beta2), static_cast<double>(t));
  const float step_size = static_cast<float>(lr / bc1);
  const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  const float b1 = cfg.beta1, b2 = cfg.beta2;
  const float decay = decay_on ? 1.0f - lr * cfg.weight_decay : 1.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] * grad_scale;
    m[i] = b1 * m[i] + (1.0f - b1) * gi;
    v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
    const float denom = std::sqrt(v[i]) * inv_sqrt_bc2 + cfg.eps;
    p[i] = p[i] * decay - step_size * m[i] / denom;
  }
}

void AdamWShard::Update(ParamStore& store, const AdamWConfig& cfg, int64_t t, float lr,
                        float grad_scale) {
  if (Bf16Params* b = store.bf16()) {
    DT_CHECK_EQ(static_cast<int64_t>(master_.size()), end_ - begin_) << "bf16 store without master weights";
    const bool g32 = b->fp32_grads();  // fp32 main gradients
    for (const Segment& s : segments_)
      moments_->ApplyToMaster(cfg, t, lr, grad_scale, s.decay, s.begin - begin_, s.end - s.begin,
                              master_.data() + (s.begin - begin_), g32 ? store.grads() + s.begin : nullptr,
                              g32 ? nullptr : b->grads() + s.begin, b->values() + s.begin);
    return;
  }
  float* p = store.values();
  const float* g = store.grads();
  for (const Segment& s : segments_)
    moments_->Apply(cfg, t, lr, grad_scale, s.decay, s.begin - begin_, s.end - s.begin, p + s.begin, g + s.begin);
}

AdamWShard::~AdamWShard() = default;

}  // namespace dt::rt
