#include "runtime/model/sharded_params.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "runtime/tensor/allocator.h"

namespace dt::rt {

ShardedParams::ShardedParams(ParamStore* store, Comm* dp, int stage, float grad_scale, Precision precision)
    : store_(store), dp_(dp), stage_(stage), scale_(grad_scale), precision_(precision) {
  DT_CHECK(store != nullptr && store->finalized()) << "ShardedParams needs a finalized store";
  DT_CHECK(stage == 2 || stage == 3) << "ShardedParams implements ZeRO-2 and ZeRO-3, got " << stage;
  DT_CHECK(dp != nullptr && dp->size() > 1) << "ShardedParams needs a DP group of size > 1";
  DT_CHECK(store->has_values() && store->has_grads()) << "ShardedParams: store already sharded";
  const int size = dp->size(), rank = dp->rank();
  for (const ParamUnit& u : store->units()) {
    UnitShard s;
    s.shard = (u.numel + size - 1) / size;
    s.padded = s.shard * size;
    s.begin = std::min(u.numel, rank * s.shard);
    s.end = std::min(u.numel, (rank + 1) * s.shard);
    s.slot = shard_numel_;
    shard_numel_ += s.shard;
    shards_.push_back(s);
  }
  if (bf16_grads()) grad_shard16_ = Bf16Buffer(shard_numel_);
  else grad_shard_.assign(static_cast<size_t>(shard_numel_), 0.0f);
  if (bf16()) {
    // The flat fp32 values stay until the optimizer has its master slots
    // (DropFp32Values); units are bound to fp32 working copies only in use.
    values16_ = Bf16Buffer(stage == 3 ? shard_numel_ : store->numel());
    SetValues16(store->values());
  } else if (stage == 3) {
    value_shard_.assign(static_cast<size_t>(shard_numel_), 0.0f);
    TakeShardArray(store->values(), value_shard_.data());
    store->DropValues();
  }
  store->DropGrads();
  store->set_sharding(this);
}

ShardedParams::~ShardedParams() {
  if (store_->sharding() == this) store_->set_sharding(nullptr);
}

void ShardedParams::Gather(int u) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  if (bf16()) {
    DT_CHECK(work_.find(u) == work_.end()) << "unit " << store_->units().at(u).name << " gathered twice";
    const ParamUnit& pu = store_->units().at(u);
    Tensor& buf = work_[u];
    buf = Tensor::Uninitialized({pu.numel});  // overwritten whole: no zero-fill
    if (stage_ == 3) {
      const UnitShard& s = shards_.at(u);
      Bf16Buffer gathered(s.padded, /*zero=*/false);  // freed once widened
      dp_->AllGatherBf16(values16_.data() + s.slot, gathered.data(), static_cast<size_t>(s.shard));
      WidenFromBf16(gathered.data(), buf.data(), pu.numel);
    } else {
      WidenFromBf16(values16_.data() + pu.offset, buf.data(), pu.numel);
    }
    store_->BindUnitValues(u, buf.data());
    return;
  }
  if (stage_ != 3) return;
  DT_CHECK(values_.find(u) == values_.end()) << "unit " << store_->units().at(u).name << " gathered twice";
  const UnitShard& s = shards_.at(u);
  TrackedFloats& buf = values_[u];
  buf.resize(static_cast<size_t>(s.padded));
  dp_->AllGather(value_shard_.data() + s.slot, buf.data(), static_cast<size_t>(s.shard));
  store_->BindUnitValues(u, buf.data());
}

void ShardedParams::Release(int u) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  if (bf16()) {
    auto it = work_.find(u);
    DT_CHECK(it != work_.end()) << "unit " << store_->units().at(u).name << " released but not gathered";
    store_->BindUnitValues(u, nullptr);
    work_.erase(it);
    return;
  }
  if (stage_ != 3) return;
  auto it = values_.find(u);
  DT_CHECK(it != values_.end()) << "unit " << store_->units().at(u).name << " released but not gathered";
  store_->BindUnitValues(u, nullptr);
  values_.erase(it);
}

void ShardedParams::BeginGrads(int u) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  DT_CHECK(grads_.find(u) == grads_.end()) << "unit " << store_->units().at(u).name << " gradients begun twice";
  TrackedFloats& buf = grads_[u];
  buf.assign(static_cast<size_t>(shards_.at(u).padded), 0.0f);
  store_->BindUnitGrads(u, buf.data());
}

void ShardedParams::ReduceGrads(int u) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  auto it = grads_.find(u);
  DT_CHECK(it != grads_.end()) << "unit " << store_->units().at(u).name << " reduced without BeginGrads";
  store_->BindUnitGrads(u, nullptr);
  const UnitShard& s = shards_.at(u);
  if (bf16_grads()) {
    // Narrow in place, block by block: bf16 element i lands on bytes
    // [2i, 2i + 2), inside fp32 elements already read.
    float* full = it->second.data();
    constexpr int64_t kBlock = 1024;
    bf16_t block[kBlock];
    for (int64_t i = 0; i < s.padded; i += kBlock) {
      const int64_t n = std::min(kBlock, s.padded - i);
      NarrowToBf16(full + i, block, n);
      std::memcpy(reinterpret_cast<char*>(full) + 2 * i, block, sizeof(bf16_t) * n);
    }
    Bf16Buffer part(s.shard, /*zero=*/false);
    dp_->ReduceScatterBf16(reinterpret_cast<const bf16_t*>(full), part.data(), static_cast<size_t>(s.shard));
    grads_.erase(it);  // the full gradient is freed before the shard is touched
    bf16_t* g = grad_shard16_.data() + s.slot;
    for (int64_t i = 0; i < s.end - s.begin; ++i)
      g[i] = FloatToBf16(Bf16ToFloat(g[i]) + scale_ * Bf16ToFloat(part.data()[i]));
    return;
  }
  {
    TrackedFloats part(static_cast<size_t>(s.shard));
    dp_->ReduceScatter(it->second.data(), part.data(), static_cast<size_t>(s.shard));
    grads_.erase(it);  // the full gradient is freed before the shard is touched
    float* g = grad_shard_.data() + s.slot;
    for (int64_t i = 0; i < s.end - s.begin; ++i) g[i] += scale_ * part[i];
  }
}

float* ShardedParams::OwnedValues(int u) {
  DT_CHECK(!bf16()) << "fp32 values of a bf16 sharded store: use OwnedValues16";
  const UnitShard& s = shards_.at(u);
  if (stage_ == 3) return value_shard_.data() + s.slot;
  return store_->values() + store_->units().at(u).offset + s.begin;
}

bf16_t* ShardedParams::OwnedValues16(int u) {
  DT_CHECK(bf16()) << "bf16 values of an fp32 sharded store: use OwnedValues";
  const UnitShard& s = shards_.at(u);
  if (stage_ == 3) return values16_.data() + s.slot;
  return values16_.data() + store_->units().at(u).offset + s.begin;
}

float* ShardedParams::grad_shard() {
  DT_CHECK(!bf16_grads()) << "fp32 gradient shard of a store with bf16 gradients: use grad_shard16";
  return grad_shard_.data();
}

const float* ShardedParams::grad_shard() const {
  DT_CHECK(!bf16_grads()) << "fp32 gradient shard of a store with bf16 gradients: use grad_shard16";
  return grad_shard_.data();
}

bf16_t* ShardedParams::grad_shard16() {
  DT_CHECK(bf16_grads()) << "bf16 gradient shard of a store with fp32 gradients: use grad_shard";
  return grad_shard16_.data();
}

const bf16_t* ShardedParams::grad_shard16() const {
  DT_CHECK(bf16_grads()) << "bf16 gradient shard of a store with fp32 gradients: use grad_shard";
  return grad_shard16_.data();
}

void ShardedParams::DropFp32Values() {
  DT_CHECK(bf16()) << "DropFp32Values of an fp32 sharded store";
  DT_CHECK(work_.empty()) << "DropFp32Values while units are gathered";
  store_->DropValues();
}

void ShardedParams::SetValues16(const float* full) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  DT_CHECK(bf16()) << "SetValues16 of an fp32 sharded store";
  if (stage_ == 2) {
    NarrowToBf16(full, values16_.data(), store_->numel());
    return;
  }
  const auto& units = store_->units();
  for (size_t u = 0; u < units.size(); ++u) {
    const UnitShard& s = shards_[u];
    const int64_t owned = s.end - s.begin;
    NarrowToBf16(full + units[u].offset + s.begin, values16_.data() + s.slot, owned);
    std::fill(values16_.data() + s.slot + owned, values16_.data() + s.slot + s.shard, bf16_t{0});
  }
}

void ShardedParams::ZeroGradShards() {
  if (bf16_grads()) grad_shard16_.Zero();
  else std::fill(grad_shard_.begin(), grad_shard_.end(), 0.0f);
}

void ShardedParams::AllGatherValues() {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  if (stage_ != 2) return;
  const auto& units = store_->units();
  if (bf16()) {  // the bf16 values, 2 bytes per element on the wire
    for (size_t u = 0; u < units.size(); ++u) {
      const UnitShard& s = shards_[u];
      Bf16Buffer mine(s.shard), full(s.padded, /*zero=*/false);
      bf16_t* v = values16_.data() + units[u].offset;
      std::memcpy(mine.data(), v + s.begin, sizeof(bf16_t) * (s.end - s.begin));
      dp_->AllGatherBf16(mine.data(), full.data(), static_cast<size_t>(s.shard));
      std::memcpy(v, full.data(), sizeof(bf16_t) * units[u].numel);
    }
    return;
  }
  for (size_t u = 0; u < units.size(); ++u) {
    const UnitShard& s = shards_[u];
    TrackedFloats mine(static_cast<size_t>(s.shard), 0.0f), full(static_cast<size_t>(s.padded));
    float* v = store_->values() + units[u].offset;
    std::memcpy(mine.data(), v + s.begin, sizeof(float) * (s.end - s.begin));
    dp_->AllGather(mine.data(), full.data(), static_cast<size_t>(s.shard));
    std::memcpy(v, full.data(), sizeof(float) * units[u].numel);
  }
}

void ShardedParams::AllGatherShardArray(const float* shard_array, float* full) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  const auto& units = store_->units();
  for (size_t u = 0; u < units.size(); ++u) {
    const UnitShard& s = shards_[u];
    TrackedFloats buf(static_cast<size_t>(s.padded));
    dp_->AllGather(shard_array + s.slot, buf.data(), static_cast<size_t>(s.shard));
    std::memcpy(full + units[u].offset, buf.data(), sizeof(float) * units[u].numel);
  }
}

void ShardedParams::TakeShardArray(const float* full, float* shard_array) const {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  const auto& units = store_->units();
  for (size_t u = 0; u < units.size(); ++u) {
    const UnitShard& s = shards_[u];
    const int64_t owned = s.end - s.begin;
    std::memcpy(shard_array + s.slot, full + units[u].offset + s.begin, sizeof(float) * owned);
    std::fill(shard_array + s.slot + owned, shard_array + s.slot + s.shard, 0.0f);
  }
}

void ShardedParams::MaterializeValues() {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  if (stage_ != 3 || bf16()) return;
  DT_CHECK(values_.empty()) << "MaterializeValues while units are gathered";
  store_->RestoreValues();
  AllGatherShardArray(value_shard_.data(), store_->values());
}

void ShardedParams::ShardValues() {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  if (stage_ != 3 || bf16()) return;
  TakeShardArray(store_->values(), value_shard_.data());
  store_->DropValues();
}

}  // namespace dt::rt
