#include "runtime/tensor/bf16.h"

#include "base/check.h"
#include "runtime/tensor/allocator.h"

namespace dt::rt {

void NarrowToBf16(const float* src, bf16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = FloatToBf16(src[i]);
}

void WidenFromBf16(const bf16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToFloat(src[i]);
}

void AccumulateIntoBf16(const float* add, bf16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = FloatToBf16(Bf16ToFloat(dst[i]) + add[i]);
}

void ScaleBf16(bf16_t* x, float alpha, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = FloatToBf16(Bf16ToFloat(x[i]) * alpha);
}

namespace {
// The allocator hands out floats: a bf16 array of n elements takes ceil(n/2).
size_t Floats(int64_t n) { return static_cast<size_t>((n + 1) / 2); }
}  // namespace

Bf16Buffer::Bf16Buffer(int64_t n) : Bf16Buffer(n, /*zero=*/true) {}

Bf16Buffer::Bf16Buffer(int64_t n, bool zero) : n_(n) {
  DT_CHECK_GE(n, 0);
  data_ = reinterpret_cast<bf16_t*>(zero ? AllocFloats(Floats(n)) : AllocFloatsUninitialized(Floats(n)));
}

Bf16Buffer::~Bf16Buffer() { Release(); }

void Bf16Buffer::Release() {
  if (data_ != nullptr) FreeFloats(reinterpret_cast<float*>(data_), Floats(n_));
  data_ = nullptr;
  n_ = 0;
}

Bf16Buffer::Bf16Buffer(Bf16Buffer&& o) noexcept : data_(o.data_), n_(o.n_) {
  o.data_ = nullptr;
  o.n_ = 0;
}

Bf16Buffer& Bf16Buffer::operator=(Bf16Buffer&& o) noexcept {
  if (this != &o) {
    Release();
    data_ = o.data_;
    n_ = o.n_;
    o.data_ = nullptr;
    o.n_ = 0;
  }
  return *this;
}

void Bf16Buffer::Zero() {
  for (int64_t i = 0; i < n_; ++i) data_[i] = 0;
}

}  // namespace dt::rt
