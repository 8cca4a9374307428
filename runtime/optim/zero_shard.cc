#include "runtime/optim/zero_shard.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "runtime/model/bf16_params.h"
#include "runtime/tensor/allocator.h"

namespace dt::rt {

ShardRange ComputeShard(int64_t n, int dp_size, int dp_rank) {
  ShardRange r;
  r.shard = (n + dp_size - 1) / dp_size;
  r.padded = r.shard * dp_size;
  r.begin = std::min(n, dp_rank * r.shard);
  r.end = std::min(n, (dp_rank + 1) * r.shard);
  return r;
}

ZeroShard::ZeroShard(Comm* dp, int64_t numel, float scale, bool bf16)
    : dp_(dp), numel_(numel), scale_(scale), bf16_(bf16) {
  const int size = dp ? dp->size() : 1, rank = dp ? dp->rank() : 0;
  range_ = ComputeShard(numel, size, rank);
  if (size == 1) return;  // nothing to exchange: no scratch (the memory model counts none)
  if (bf16) {
    full16_ = Bf16Buffer(range_.padded);
    part16_ = Bf16Buffer(range_.shard);
    return;
  }
  full_.assign(static_cast<size_t>(range_.padded), 0.0f);
  part_.assign(static_cast<size_t>(range_.shard), 0.0f);
}

void ZeroShard::ReduceScatterGrads(ParamStore& store) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  DT_CHECK_EQ(store.numel(), numel_);
  const int64_t owned = range_.end - range_.begin;
  if (Bf16Params* b = store.bf16()) {
    DT_CHECK(bf16_) << "ZeroShard built for fp32 used on a bf16 store";
    if (dp_ == nullptr || dp_->size() == 1) {
      if (scale_ != 1.0f) ScaleBf16(b->grads(), scale_, numel_);
      return;
    }
    std::memcpy(full16_.data(), b->grads(), sizeof(bf16_t) * numel_);
    std::fill(full16_.data() + numel_, full16_.data() + range_.padded, bf16_t{0});
    dp_->ReduceScatterBf16(full16_.data(), part16_.data(), static_cast<size_t>(range_.shard));
    bf16_t* g = b->grads() + range_.begin;
    for (int64_t i = 0; i < owned; ++i) g[i] = FloatToBf16(Bf16ToFloat(part16_.data()[i]) * scale_);
    return;
  }
  if (dp_ == nullptr || dp_->size() == 1) {
    if (scale_ != 1.0f)
      for (int64_t i = 0; i < numel_; ++i) store.grads()[i] *= scale_;
    return;
  }
  std::memcpy(full_.data(), store.grads(), sizeof(float) * numel_);
  std::fill(full_.begin() + numel_, full_.end(), 0.0f);
  dp_->ReduceScatter(full_.data(), part_.data(), static_cast<size_t>(range_.shard));
  float* g = store.grads() + range_.begin;
  for (int64_t i = 0; i < owned; ++i) g[i] = part_[i] * scale_;
}

void ZeroShard::AllGatherShard(const float* shard, float* full) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  const int64_t owned = range_.end - range_.begin;
  if (dp_ == nullptr || dp_->size() == 1) {
    std::memcpy(full, shard, sizeof(float) * owned);
    return;
  }
  std::memcpy(part_.data(), shard, sizeof(float) * owned);
  std::fill(part_.begin() + owned, part_.end(), 0.0f);
  dp_->AllGather(part_.data(), full_.data(), static_cast<size_t>(range_.shard));
  std::memcpy(full, full_.data(), sizeof(float) * numel_);
}

void ZeroShard::AllGatherValues(ParamStore& store) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  DT_CHECK_EQ(store.numel(), numel_);
  if (dp_ == nullptr || dp_->size() == 1) return;
  if (Bf16Params* b = store.bf16()) {
    const int64_t owned = range_.end - range_.begin;
    std::memcpy(part16_.data(), b->values() + range_.begin, sizeof(bf16_t) * owned);
    std::fill(part16_.data() + owned, part16_.data() + range_.shard, bf16_t{0});
    dp_->AllGatherBf16(part16_.data(), full16_.data(), static_cast<size_t>(range_.shard));
    std::memcpy(b->values(), full16_.data(), sizeof(bf16_t) * numel_);
    return;
  }
  AllGatherShard(store.values() + range_.begin, store.values());
}

}  // namespace dt::rt
