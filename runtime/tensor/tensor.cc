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

void Tensor::Release() {
  if (owning_) FreeFloats(data_, static_cast<size_t>(numel_));
  data_ = nullptr;
  owning_ = false;
  numel_ = 0;
  shape_.clear();
}

Tensor::Tensor(Tensor&& o) noexcept
    : data_(o.data_), shape_(std::move(o.shape_)), numel_(o.numel_), owning_(o.owning_) {
  o.data_ = nullptr;
  o.numel_ = 0;
  o.owning_ = false;
  o.shape_.clear();
}

Tensor& Tensor::operator=(Tensor&& o) noexcept {
  if (this != &o) {
    Release();
    data_ = o.data_;
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
  DT_CHECK(rank() >= 1 && 0 <= begin && begin <= end && end <= shape_[0])
      << "slice [" << begin << "," << end << ") of " << ShapeString();
  Shape s = shape_;
  int64_t row = shape_[0] == 0 ? 0 : numel_ / shape_[0];
  s[0] = end - begin;
  return View(data_ + begin * row, s);
}

Tensor Tensor::Reshaped(Shape shape) const {
  DT_CHECK_EQ(NumelOf(shape), numel_) << "reshape of " << ShapeString();
  return View(data_, std::move(shape));
}

Tensor Tensor::Clone() const {
  Tensor t = Uninitialized(shape_);
  if (numel_ > 0) std::memcpy(t.data_, data_, static_cast<size_t>(bytes()));
  return t;
}

int64_t Tensor::dim(int i) const {
  DT_CHECK(i >= 0 && i < rank()) << "dim " << i << " of " << ShapeString();
  return shape_[i];
}

void Tensor::Fill(float v) { std::fill(data_, data_ + numel_, v); }

std::string Tensor::ShapeString() const {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape_.size(); ++i) os << (i ? ", " : "") << shape_[i];
  os << "]";
  return os.str();
}

}  // namespace dt::rt
