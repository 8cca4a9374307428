#include "runtime/model/sharded_params.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "runtime/tensor/allocator.h"

namespace dt::rt {

ShardedParams::ShardedParams(ParamStore* store, Comm* dp, int stage, float grad_scale)
    : store_(store), dp_(dp), stage_(stage), scale_(grad_scale) {
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
  grad_shard_.assign(static_cast<size_t>(shard_numel_), 0.0f);
  if (stage == 3) {
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
  {
    TrackedFloats part(static_cast<size_t>(s.shard));
    dp_->ReduceScatter(it->second.data(), part.data(), static_cast<size_t>(s.shard));
    grads_.erase(it);  // the full gradient is freed before the shard is touched
    float* g = grad_shard_.data() + s.slot;
    for (int64_t i = 0; i < s.end - s.begin; ++i) g[i] += scale_ * part[i];
  }
}

float* ShardedParams::OwnedValues(int u) {
  const UnitShard& s = shards_.at(u);
  if (stage_ == 3) return value_shard_.data() + s.slot;
  return store_->values() + store_->units().at(u).offset + s.begin;
}

void ShardedParams::ZeroGradShards() { std::fill(grad_shard_.begin(), grad_shard_.end(), 0.0f); }

void ShardedParams::AllGatherValues() {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  if (stage_ != 2) return;
  const auto& units = store_->units();
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
  if (stage_ != 3) return;
  DT_CHECK(values_.empty()) << "MaterializeValues while units are gathered";
  store_->RestoreValues();
  AllGatherShardArray(value_shard_.data(), store_->values());
}

void ShardedParams::ShardValues() {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  if (stage_ != 3) return;
  TakeShardArray(store_->values(), value_shard_.data());
  store_->DropValues();
}

}  // namespace dt::rt
