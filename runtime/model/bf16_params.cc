#include "runtime/model/bf16_params.h"

#include "base/check.h"
#include "runtime/tensor/allocator.h"

namespace dt::rt {

Bf16Params::Bf16Params(ParamStore* store, bool fp32_grads)
    : store_(store), fp32_grads_(fp32_grads), values_(store->numel()), grads_(fp32_grads ? 0 : store->numel()) {
  DT_CHECK(store->finalized() && store->has_values()) << "Bf16Params needs a finalised store with values";
  DT_CHECK(store->sharding() == nullptr) << "bf16 storage with ZeRO-2/3 sharding is not supported";
  NarrowToBf16(store->values(), values_.data(), store->numel());
  if (!fp32_grads) store->DropGrads();
  store->set_bf16(this);
}

bf16_t* Bf16Params::grads() {
  DT_CHECK(!fp32_grads_) << "bf16 gradients of a store with fp32 main gradients: read ParamStore::grads()";
  return grads_.data();
}

const bf16_t* Bf16Params::grads() const {
  DT_CHECK(!fp32_grads_) << "bf16 gradients of a store with fp32 main gradients: read ParamStore::grads()";
  return grads_.data();
}

Bf16Params::~Bf16Params() {
  if (store_->bf16() == this) store_->set_bf16(nullptr);
}

void Bf16Params::Gather(int u) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  DT_CHECK(unit_values_.find(u) == unit_values_.end()) << "unit " << u << " gathered twice";
  const ParamUnit& pu = store_->units().at(u);
  auto& buf = unit_values_[u];
  buf = Tensor::Uninitialized({pu.numel});  // overwritten whole: no zero-fill
  WidenFromBf16(values_.data() + pu.offset, buf.data(), pu.numel);
  store_->BindUnitValues(u, buf.data());
}

void Bf16Params::Release(int u) {
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  auto it = unit_values_.find(u);
  DT_CHECK(it != unit_values_.end()) << "unit " << u << " released without Gather";
  store_->BindUnitValues(u, nullptr);
  unit_values_.erase(it);
}

void Bf16Params::BeginGrads(int u) {
  if (fp32_grads_) return;  // the unit accumulates into its flat fp32 gradients
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  DT_CHECK(unit_grads_.find(u) == unit_grads_.end()) << "unit " << u << " gradients begun twice";
  const ParamUnit& pu = store_->units().at(u);
  auto& buf = unit_grads_[u];
  buf.assign(static_cast<size_t>(pu.numel), 0.0f);
  store_->BindUnitGrads(u, buf.data());
}

void Bf16Params::EndGrads(int u) {
  if (fp32_grads_) return;
  DeviceSynchronize();  // host code on tensor memory: queued kernels first
  auto it = unit_grads_.find(u);
  DT_CHECK(it != unit_grads_.end()) << "unit " << u << " gradients ended without BeginGrads";
  const ParamUnit& pu = store_->units().at(u);
  AccumulateIntoBf16(it->second.data(), grads_.data() + pu.offset, pu.numel);
  store_->BindUnitGrads(u, nullptr);
  unit_grads_.erase(it);
}

}  // namespace dt::rt
