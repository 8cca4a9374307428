#include "runtime/tensor/tensor.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "base/check.h"
#include "runtime/tensor/allocator.h"

namespace dt::rt {

int64_t NumelOf(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    DT_CHECK_GE(d, 0) << "negative tensor dimension";
    n *= d;
  }
  return n;
}

Tensor::Tensor(Shape shape) : shape_(std::move(shape)), numel_(NumelOf(shape_)), owning_(true) {
  data_ = AllocFloats(static_cast<size_t>(numel_));
}

Tensor Tensor::Uninitialized(Shape shape) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.numel_ = NumelOf(t.shape_);
  t.owning_ = true;
  t.data_ = AllocFloatsUninitialized(static_cast<size_t>(t.numel_));
  return t;
}

Tensor::~Tensor() { Release(); }

namespace {
size_t AllocatedFloats(int64_t numel, DType t) {
  return static_cast<size_t>(t == DType::kBF16 ? (numel + 1) / 2 : numel);
}
}  // namespace

void Tensor::Release() {
  if (owning_) FreeFloats(data_, AllocatedFloats(numel_, dtype_));
  data_ = nullptr;
  dtype_ = DType::kF32;
  owning_ = false;
  numel_ = 0;
  shape_.clear();
}

Tensor::Tensor(Tensor&& o) noexcept
    : data_(o.data_), dtype_(o.dtype_), shape_(std::move(o.shape_)), numel_(o.numel_), owning_(o.owning_) {
  o.data_ = nullptr;
  o.dtype_ = DType::kF32;
  o.numel_ = 0;
  o.owning_ = false;
  o.shape_.clear();
}

Tensor& Tensor::operator=(Tensor&& o) noexcept {
  if (this != &o) {
    Release();
    data_ = o.data_;
    dtype_ = o.dtype_;
    o.dtype_ = DType::kF32;
    shape_ = std::move(o.shape_);
    numel_ = o.numel_;
    owning_ = o.owning_;
    o.data_ = nullptr;
    o.numel_ = 0;
    o.owning_ = false;
    o.shape_.clear();
  }
  return *this;
}

Tensor Tensor::View(float* data, Shape shape) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.numel_ = NumelOf(t.shape_);
  t.data_ = data;
  t.owning_ = false;
  return t;
}

Tensor Tensor::Slice(int64_t begin, int64_t end) const {
  DT_CHECK(!is_bf16()) << "Slice of a bf16 tensor " << ShapeString();
  DT_CHECK(rank() >= 1 && 0 <= begin && begin <= end && end <= shape_[0])
      << "slice [" << begin << "," << end << ") of " << ShapeString();
  Shape s = shape_;
  int64_t row = shape_[0] == 0 ? 0 : numel_ / shape_[0];
  s[0] = end - begin;
  return View(data_ + begin * row, s);
}

Tensor Tensor::Reshaped(Shape shape) const {
  DT_CHECK_EQ(NumelOf(shape), numel_) << "reshape of " << ShapeString();
  DT_CHECK(!is_bf16()) << "Reshaped view of a bf16 tensor " << ShapeString();
  return View(data_, std::move(shape));
}

Tensor Tensor::Clone() const {
  if (is_bf16()) {
    Tensor w = WidenedToFp32();
    return w.NarrowedToBf16();
  }
  Tensor t = Uninitialized(shape_);
  if (numel_ > 0) std::memcpy(t.data_, data_, static_cast<size_t>(bytes()));
  return t;
}

Tensor Tensor::NarrowedToBf16() const {
  DT_CHECK(!is_bf16()) << "NarrowedToBf16 of a bf16 tensor " << ShapeString();
  Tensor t;
  t.shape_ = shape_;
  t.numel_ = numel_;
  t.owning_ = true;
  t.dtype_ = DType::kBF16;
  t.data_ = AllocFloatsUninitialized(AllocatedFloats(numel_, DType::kBF16));
  if (numel_ > 0) NarrowToBf16(data_, reinterpret_cast<bf16_t*>(t.data_), numel_);
  return t;
}

Tensor Tensor::WidenedToFp32() const {
  DT_CHECK(is_bf16()) << "WidenedToFp32 of an fp32 tensor " << ShapeString();
  Tensor t = Uninitialized(shape_);
  if (numel_ > 0) WidenFromBf16(reinterpret_cast<const bf16_t*>(data_), t.data_, numel_);
  return t;
}

float* Tensor::Fp32() {
  DT_CHECK(!is_bf16()) << "fp32 access to bf16 storage " << ShapeString() << ": widen it first";
  return data_;
}

const bf16_t* Tensor::bf16_data() const {
  DT_CHECK(is_bf16()) << "bf16 access to fp32 storage " << ShapeString();
  return reinterpret_cast<const bf16_t*>(data_);
}

int64_t Tensor::dim(int i) const {
  DT_CHECK(i >= 0 && i < rank()) << "dim " << i << " of " << ShapeString();
  return shape_[i];
}

void Tensor::Fill(float v) { std::fill(data(), data() + numel_, v); }

std::string Tensor::ShapeString() const {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape_.size(); ++i) os << (i ? ", " : "") << shape_[i];
  os << "]";
  return os.str();
}

}  // namespace dt::rt
