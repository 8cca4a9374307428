#include "runtime/optim/grad_sync.h"

#include <algorithm>

#include "base/check.h"
#include "runtime/model/bf16_params.h"

namespace dt::rt {

GradSync::GradSync(Comm* dp, int64_t bucket_bytes, float scale)
    : dp_(dp), bucket_elems_(std::max<int64_t>(1, bucket_bytes / 4)), scale_(scale) {}

void GradSync::Start(ParamStore& store) {
  DT_CHECK(store_ == nullptr) << "GradSync::Start while a previous sync is pending";
  store_ = &store;
  last_buckets_ = 0;
  if (dp_ == nullptr || dp_->size() == 1) return;
  const int64_t n = store.numel();
  if (Bf16Params* b = store.bf16()) {
    const int64_t elems = bucket_elems_ * 2;  // same bucket bytes at 2 bytes per element
    for (int64_t i = 0; i < n; i += elems) {
      dp_->AllReduceBf16(b->grads() + i, static_cast<size_t>(std::min(elems, n - i)));
      ++last_buckets_;
    }
    return;
  }
  for (int64_t b = 0; b < n; b += bucket_elems_) {
    requests_.push_back(dp_->IAllReduce(store.grads() + b,
                                        static_cast<size_t>(std::min(bucket_elems_, n - b))));
    ++last_buckets_;
  }
}

void GradSync::Finish() {
  DT_CHECK(store_ != nullptr) << "GradSync::Finish without Start";
  for (auto& r : requests_) r->Wait();
  requests_.clear();
  if (dp_ != nullptr && dp_->size() > 1 && scale_ != 1.0f && store_->bf16() != nullptr) {
    ScaleBf16(store_->bf16()->grads(), scale_, store_->numel());
  } else if (dp_ != nullptr && dp_->size() > 1 && scale_ != 1.0f) {
    float* g = store_->grads();
    for (int64_t i = 0; i < store_->numel(); ++i) g[i] *= scale_;
  }
  store_ = nullptr;
}

}  // namespace dt::rt
