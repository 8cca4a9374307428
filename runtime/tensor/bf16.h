// bf16: the runtime's 16-bit storage type (bfloat16: the top half of an
// IEEE fp32, 8 exponent and 7 mantissa bits) and its conversions.
//
// bf16 is a storage format only: every kernel computes in fp32 on values
// widened from bf16 (exact) and narrows results back with round-to-nearest-
// even (NaN stays NaN, quietened). Bf16Buffer is an owning, move-only array
// allocated through runtime/tensor/allocator.h, so bf16 bytes count in the
// measured peak at 2 bytes per element. Functions are pure and thread-safe;
// a Bf16Buffer is not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace dt::rt {

using bf16_t = uint16_t;

inline float Bf16ToFloat(bf16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Round to nearest, ties to even; NaN stays NaN (quietened). Written without
// a branch (a select), so loops over it vectorise.
inline bf16_t FloatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const uint32_t nan = (bits >> 16) | 0x40u;
  return static_cast<bf16_t>((bits & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

// Array forms (n elements; src and dst must not overlap).
void NarrowToBf16(const float* src, bf16_t* dst, int64_t n);
void WidenFromBf16(const bf16_t* src, float* dst, int64_t n);
// dst[i] = bf16(float(dst[i]) + add[i]): accumulation into bf16 storage.
void AccumulateIntoBf16(const float* add, bf16_t* dst, int64_t n);
// x[i] = bf16(float(x[i]) * alpha).
void ScaleBf16(bf16_t* x, float alpha, int64_t n);

class Bf16Buffer {
 public:
  Bf16Buffer() = default;
  explicit Bf16Buffer(int64_t n);  // zero-filled
  Bf16Buffer(int64_t n, bool zero);  // zero = false: contents unspecified (to be overwritten)
  ~Bf16Buffer();
  Bf16Buffer(Bf16Buffer&& o) noexcept;
  Bf16Buffer& operator=(Bf16Buffer&& o) noexcept;
  Bf16Buffer(const Bf16Buffer&) = delete;
  Bf16Buffer& operator=(const Bf16Buffer&) = delete;

  bf16_t* data() { return data_; }
  const bf16_t* data() const { return data_; }
  int64_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  void Zero();

 private:
  void Release();
  bf16_t* data_ = nullptr;
  int64_t n_ = 0;
};

}  // namespace dt::rt
