// Tensor: a row-major fp32 array with a shape, either owning its buffer
// (allocated through runtime/tensor/allocator.h, zero-filled) or a view of
// someone else's memory (View / Slice; the viewed memory must outlive it).
// A tensor may instead hold bf16 storage (NarrowedToBf16: 2 bytes per
// element, owning only; bf16.h): kernels never read it, data() aborts on it;
// WidenedToFp32 gives the fp32 copy to compute with (mixed precision keeps
// the activations saved for backward this way, runtime/model/stash_precision.h).
//
// Move-only: copying an activation by accident would double memory; use
// Clone() to copy. An empty Tensor (default-constructed) has no data and
// numel() == 0. Memory is host memory (the CPU backend's memory space).
// Not thread-safe; distinct tensors may be used from distinct threads.
// Shape misuse (negative dims, out-of-range slice) aborts via DT_CHECK.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/tensor/bf16.h"

namespace dt::rt {

enum class DType { kF32, kBF16 };

using Shape = std::vector<int64_t>;

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Shape shape);  // owning, zero-filled
  ~Tensor();
  Tensor(Tensor&& o) noexcept;
  Tensor& operator=(Tensor&& o) noexcept;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  static Tensor Zeros(Shape shape) { return Tensor(std::move(shape)); }
  // Owning, contents unspecified: only for outputs an op overwrites entirely
  // before anything reads them (no zero-fill pass over the memory).
  static Tensor Uninitialized(Shape shape);
  // Non-owning view of data[0 .. prod(shape)).
  static Tensor View(float* data, Shape shape);
  // View of rows [begin, end) of the first dimension.
  Tensor Slice(int64_t begin, int64_t end) const;
  // View with the same data and a new shape of equal numel.
  Tensor Reshaped(Shape shape) const;
  Tensor Clone() const;  // owning deep copy (same dtype)
  // Owning copies in the other storage type (round to nearest even / exact).
  Tensor NarrowedToBf16() const;  // from fp32
  Tensor WidenedToFp32() const;   // from bf16

  DType dtype() const { return dtype_; }
  bool is_bf16() const { return dtype_ == DType::kBF16; }

  float* data() { return Fp32(); }
  const float* data() const { return const_cast<Tensor*>(this)->Fp32(); }
  const bf16_t* bf16_data() const;
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const;
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return numel_; }
  int64_t bytes() const { return numel_ * (is_bf16() ? 2 : static_cast<int64_t>(sizeof(float))); }
  bool empty() const { return data_ == nullptr; }
  bool owning() const { return owning_; }
  void Fill(float v);
  float& operator[](int64_t i) { return data_[i]; }
  float operator[](int64_t i) const { return data_[i]; }
  std::string ShapeString() const;  // "[2, 3, 4]"

 private:
  void Release();
  float* Fp32();  // data_, checked to be fp32 storage
  float* data_ = nullptr;  // bf16 storage: reinterpreted, ceil(numel/2) floats
  DType dtype_ = DType::kF32;
  Shape shape_;
  int64_t numel_ = 0;
  bool owning_ = false;
};

int64_t NumelOf(const Shape& shape);

}  // namespace dt::rt
