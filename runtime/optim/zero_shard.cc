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

namespace {
int64_t Total(const std::vector<StoreSpan>& spans) {
  int64_t n = 0;
  for (const StoreSpan& s : spans) {
    DT_CHECK(s.offset >= 0 && s.size >= 0) << "ZeroShard span [" << s.offset << ", +" << s.size << ")";
    n += s.size;
  }
  return n;
}

// Walks the store pieces of flat [begin, end): f(store offset, flat offset, length).
template <typename F>
void ForPieces(const std::vector<StoreSpan>& spans, int64_t begin, int64_t end, F&& f) {
  int64_t at = 0;  // flat offset of the current span
  for (const StoreSpan& s : spans) {
    const int64_t b = std::max(begin, at), e = std::min(end, at + s.size);
    if (b < e) f(s.offset + (b - at), b, e - b);
    at += s.size;
  }
}
}  // namespace

ZeroShard::ZeroShard(Comm* dp, int64_t numel, float scale, bool bf16_values, bool bf16_grads)
    : ZeroShard(dp, std::vector<StoreSpan>{{0, numel}}, scale, bf16_values, bf16_grads) {}

ZeroShard::ZeroShard(Comm* dp, std::vector<StoreSpan> spans, float scale, bool bf16_values, bool bf16_grads)
    : dp_(dp), spans_(std::move(spans)), numel_(Total(spans_)), scale_(scale), bf16_values_(bf16_values),
      bf16_grads_(bf16_grads) {
  DT_CHECK(bf16_values || !bf16_grads) << "ZeroShard: bf16 gradients need bf16 values";
  const int size = dp ? dp->size() : 1, rank = dp ? dp->rank() : 0;
  range_ = ComputeShard(numel_, size, rank);
  ForPieces(spans_, range_.begin, range_.end,
            [&](int64_t off, int64_t, int64_t len) { owned_.push_back({off, len}); });
  if (size == 1) return;  // nothing to exchange: no scratch (the memory model counts none)
  if (bf16_grads) {
    full16_ = Bf16Buffer(range_.padded);
    part16_ = Bf16Buffer(range_.shard);
    return;
  }
  full_.assign(static_cast<size_t>(range_.padded), 0.0f);
  part_.assign(static_cast<size_t>(range_.shard), 0.0f);
}

template <typename T>
void ZeroShard::Pack(const T* store_sized, T* flat) const {
  ForPieces(spans_, 0, numel_,
            [&](int64_t off, int64_t at, int64_t len) { std::memcpy(flat + at, store_sized + off, sizeof(T) * len); });
}

template <typename T>
void ZeroShard::Unpack(const T* flat, T* store_sized) const {
  ForPieces(spans_, 0, numel_,
            [&](int64_t off, int64_t at, int64_t len) { std::memcpy(store_sized + off, flat + at, sizeof(T) * len); });
}

void ZeroShard::ScatterFlat(const float* flat, float* store_sized) const { Unpack(flat, store_sized); }

void ZeroShard::ReduceScatterGrads(ParamStore& store) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  DT_CHECK(spans_.empty() || spans_.back().offset + spans_.back().size <= store.numel()) << "ZeroShard spans";
  const bool alone = dp_ == nullptr || dp_->size() == 1;
  DT_CHECK(store.bf16_grads() == bf16_grads_ && (store.bf16() != nullptr) == bf16_values_)
      << "ZeroShard built for other element types than its store's";
  if (store.bf16_grads()) {
    Bf16Params* b = store.bf16();
    if (alone) {
      if (scale_ != 1.0f)
        for (const StoreSpan& s : spans_) ScaleBf16(b->grads() + s.offset, scale_, s.size);
      return;
    }
    Pack(b->grads(), full16_.data());
    std::fill(full16_.data() + numel_, full16_.data() + range_.padded, bf16_t{0});
    dp_->ReduceScatterBf16(full16_.data(), part16_.data(), static_cast<size_t>(range_.shard));
    ForPieces(spans_, range_.begin, range_.end, [&](int64_t off, int64_t at, int64_t len) {
      const bf16_t* in = part16_.data() + (at - range_.begin);
      bf16_t* g = b->grads() + off;
      for (int64_t i = 0; i < len; ++i) g[i] = FloatToBf16(Bf16ToFloat(in[i]) * scale_);
    });
    return;
  }
  if (alone) {
    if (scale_ != 1.0f)
      for (const StoreSpan& s : spans_)
        for (int64_t i = 0; i < s.size; ++i) store.grads()[s.offset + i] *= scale_;
    return;
  }
  Pack(store.grads(), full_.data());
  std::fill(full_.begin() + numel_, full_.end(), 0.0f);
  dp_->ReduceScatter(full_.data(), part_.data(), static_cast<size_t>(range_.shard));
  ForPieces(spans_, range_.begin, range_.end, [&](int64_t off, int64_t at, int64_t len) {
    const float* in = part_.data() + (at - range_.begin);
    float* g = store.grads() + off;
    for (int64_t i = 0; i < len; ++i) g[i] = in[i] * scale_;
  });
}

void ZeroShard::AllGatherShard(const float* shard, float* full) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  const int64_t owned = range_.end - range_.begin;
  if (dp_ == nullptr || dp_->size() == 1) {
    std::memcpy(full, shard, sizeof(float) * owned);
    return;
  }
  // A bf16 shard's scratch is bf16: fp32 arrays (checkpoints' moments and
  // master weights, outside the steps) go through untracked temporaries.
  std::vector<float> part_tmp, full_tmp;
  if (bf16_grads_) {
    part_tmp.resize(static_cast<size_t>(range_.shard));
    full_tmp.resize(static_cast<size_t>(range_.padded));
  }
  float* part = bf16_grads_ ? part_tmp.data() : part_.data();
  float* flat = bf16_grads_ ? full_tmp.data() : full_.data();
  std::memcpy(part, shard, sizeof(float) * owned);
  std::fill(part + owned, part + range_.shard, 0.0f);
  dp_->AllGather(part, flat, static_cast<size_t>(range_.shard));
  std::memcpy(full, flat, sizeof(float) * numel_);
}

void ZeroShard::AllGatherValues(ParamStore& store) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  if (dp_ == nullptr || dp_->size() == 1) return;
  const int64_t owned = range_.end - range_.begin;
  if (Bf16Params* b = store.bf16()) {
    DT_CHECK(bf16_values_) << "ZeroShard built for fp32 used on a bf16 store";
    bf16_t* part = part16();
    ForPieces(spans_, range_.begin, range_.end, [&](int64_t off, int64_t at, int64_t len) {
      std::memcpy(part + (at - range_.begin), b->values() + off, sizeof(bf16_t) * len);
    });
    std::fill(part + owned, part + range_.shard, bf16_t{0});
    dp_->AllGatherBf16(part, full16(), static_cast<size_t>(range_.shard));
    Unpack(full16(), b->values());
    return;
  }
  ForPieces(spans_, range_.begin, range_.end, [&](int64_t off, int64_t at, int64_t len) {
    std::memcpy(part_.data() + (at - range_.begin), store.values() + off, sizeof(float) * len);
  });
  std::fill(part_.begin() + owned, part_.end(), 0.0f);
  dp_->AllGather(part_.data(), full_.data(), static_cast<size_t>(range_.shard));
  Unpack(full_.data(), store.values());
}

}  // namespace dt::rt
