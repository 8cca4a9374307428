#include "runtime/optim/grad_sync.h"

#include <algorithm>

#include "base/check.h"
#include "runtime/model/bf16_params.h"
#include "runtime/tensor/allocator.h"

namespace dt::rt {

GradSync::GradSync(Comm* dp, int64_t bucket_bytes, float scale, bool split_experts, Comm* expert_dp)
    : dp_(dp), split_experts_(split_experts), expert_dp_(expert_dp), bucket_elems_(std::max<int64_t>(1, bucket_bytes / 4)), scale_(scale) {}

void GradSync::Start(ParamStore& store, bool blocking) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  DT_CHECK(store_ == nullptr) << "GradSync::Start while a previous sync is pending";
  store_ = &store;
  last_buckets_ = 0;
  if (dp_ == nullptr || dp_->size() == 1) return;
  // Runs [begin, end) of the flat buffer reduced over one group: fp32
  // buckets in flight (waited in Finish), or a bf16 store's gradients in
  // bf16 on the wire, blocking, with the same bucket bytes.
  Bf16Params* b16 = store.bf16_grads() ? store.bf16() : nullptr;
  auto reduce = [&](Comm* group, int64_t begin, int64_t end) {
    if (group == nullptr || group->size() == 1) return;
    if (b16 != nullptr) {
      const int64_t elems = bucket_elems_ * 2;
      for (int64_t i = begin; i < end; i += elems) {
        group->AllReduceBf16(b16->grads() + i, static_cast<size_t>(std::min(elems, end - i)));
        ++last_buckets_;
      }
      return;
    }
    for (int64_t b = begin; b < end; b += bucket_elems_) {
      const size_t n = static_cast<size_t>(std::min(bucket_elems_, end - b));
      if (blocking) group->AllReduce(store.grads() + b, n);
      else requests_.push_back(group->IAllReduce(store.grads() + b, n));
      ++last_buckets_;
    }
  };
  const auto& ps = store.params();
  if (!split_experts_) {
    reduce(dp_, 0, store.numel());
    return;
  }
  size_t i = 0;
  while (i < ps.size()) {
    size_t j = i;
    while (j < ps.size() && ps[j].expert == ps[i].expert) ++j;
    const int64_t end = j < ps.size() ? ps[j].offset : store.numel();
    reduce(ps[i].expert ? expert_dp_ : dp_, ps[i].offset, end);
    i = j;
  }
}

void GradSync::Finish() {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  DT_CHECK(store_ != nullptr) << "GradSync::Finish without Start";
  for (auto& r : requests_) r->Wait();
  requests_.clear();
  if (dp_ != nullptr && dp_->size() > 1 && scale_ != 1.0f && store_->bf16_grads()) {
    ScaleBf16(store_->bf16()->grads(), scale_, store_->numel());
  } else if (dp_ != nullptr && dp_->size() > 1 && scale_ != 1.0f) {
    float* g = store_->grads();
    for (int64_t i = 0; i < store_->numel(); ++i) g[i] *= scale_;
  }
  store_ = nullptr;
}

}  // namespace dt::rt
