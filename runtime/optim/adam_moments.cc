#include "runtime/optim/adam_moments.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"

namespace dt::rt {

AdamMoments::AdamMoments(int64_t n, bool bf16) : n_(n), bf16_(bf16) {
  DT_CHECK_GE(n, 0);
  if (bf16) {
    m16_ = Bf16Buffer(n);
    v16_ = Bf16Buffer(n);
  } else {
    m_.assign(static_cast<size_t>(n), 0.0f);
    v_.assign(static_cast<size_t>(n), 0.0f);
  }
}

void AdamMoments::Apply(const AdamWConfig& cfg, int64_t t, float lr, float grad_scale, bool decay, int64_t at,
                        int64_t n, float* p, const float* g) {
  DT_CHECK(at >= 0 && n >= 0 && at + n <= n_) << "AdamMoments: [" << at << ", +" << n << ") outside " << n_;
  if (!bf16_) {
    AdamWApply(cfg, t, lr, grad_scale, decay, n, p, g, m_.data() + at, v_.data() + at);
    return;
  }
  constexpr int64_t kBlock = 1024;
  float m[kBlock], v[kBlock];
  for (int64_t i = 0; i < n; i += kBlock) {
    const int64_t k = std::min(kBlock, n - i);
    WidenFromBf16(m16_.data() + at + i, m, k);
    WidenFromBf16(v16_.data() + at + i, v, k);
    AdamWApply(cfg, t, lr, grad_scale, decay, k, p + i, g + i, m, v);
    NarrowToBf16(m, m16_.data() + at + i, k);
    NarrowToBf16(v, v16_.data() + at + i, k);
  }
}

void AdamMoments::ApplyToMaster(const AdamWConfig& cfg, int64_t t, float lr, float grad_scale, bool decay,
                                int64_t at, int64_t n, float* master, const float* g32, const bf16_t* g16,
                                bf16_t* values16) {
  DT_CHECK((g32 == nullptr) != (g16 == nullptr)) << "ApplyToMaster takes fp32 or bf16 gradients";
  constexpr int64_t kBlock = 1024;
  float widened[kBlock];
  for (int64_t i = 0; i < n; i += kBlock) {
    const int64_t k = std::min(kBlock, n - i);
    const float* g = g32 != nullptr ? g32 + i : widened;
    if (g16 != nullptr) WidenFromBf16(g16 + i, widened, k);
    Apply(cfg, t, lr, grad_scale, decay, at + i, k, master + i, g);
    NarrowToBf16(master + i, values16 + i, k);
  }
}

void AdamMoments::ReadM(float* out) const {
  if (bf16_) WidenFromBf16(m16_.data(), out, n_);
  else std::memcpy(out, m_.data(), sizeof(float) * n_);
}

void AdamMoments::ReadV(float* out) const {
  if (bf16_) WidenFromBf16(v16_.data(), out, n_);
  else std::memcpy(out, v_.data(), sizeof(float) * n_);
}

void AdamMoments::Write(const float* m, const float* v) {
  if (bf16_) {
    NarrowToBf16(m, m16_.data(), n_);
    NarrowToBf16(v, v16_.data(), n_);
    return;
  }
  std::memcpy(m_.data(), m, sizeof(float) * n_);
  std::memcpy(v_.data(), v, sizeof(float) * n_);
}

}  // namespace dt::rt
