#include "runtime/model/param_store.h"

#include <algorithm>

#include "base/check.h"
#include "runtime/model/bf16_params.h"
#include "runtime/model/sharded_params.h"

namespace dt::rt {

int ParamStore::BeginUnit(std::string name) {
  DT_CHECK(!finalized_) << "ParamStore::BeginUnit after Finalize: " << name;
  if (!units_.empty() && units_.back().first_param == static_cast<int>(params_.size())) units_.pop_back();
  ParamUnit u;
  u.name = std::move(name);
  u.first_param = u.end_param = static_cast<int>(params_.size());
  u.offset = total_;
  units_.push_back(std::move(u));
  return static_cast<int>(units_.size()) - 1;
}

int ParamStore::Add(Param p) {
  DT_CHECK(!finalized_) << "ParamStore::Add after Finalize: " << p.name;
  if (units_.empty()) BeginUnit("");
  int64_t n = 1;
  for (int64_t d : p.local_shape) n *= d;
  p.numel = n;
  p.offset = total_;
  p.unit = static_cast<int>(units_.size()) - 1;
  total_ += n;
  units_.back().end_param = static_cast<int>(params_.size()) + 1;
  units_.back().numel += n;
  params_.push_back(std::move(p));
  return static_cast<int>(params_.size()) - 1;
}

void ParamStore::Finalize() {
  DT_CHECK(!finalized_) << "ParamStore::Finalize twice";
  if (!units_.empty() && units_.back().first_param == units_.back().end_param) units_.pop_back();
  values_.assign(static_cast<size_t>(total_), 0.0f);
  grads_.assign(static_cast<size_t>(total_), 0.0f);
  unit_values_.resize(units_.size());
  unit_grads_.resize(units_.size());
  for (size_t u = 0; u < units_.size(); ++u) {
    unit_values_[u] = values_.data() + units_[u].offset;
    unit_grads_[u] = grads_.data() + units_[u].offset;
  }
  finalized_ = true;
}

float* ParamStore::values() {
  DT_CHECK(has_values()) << "ParamStore: flat values dropped (ZeRO-3 shards them)";
  return values_.data();
}
float* ParamStore::grads() {
  DT_CHECK(has_grads()) << "ParamStore: flat gradients dropped (ZeRO-2/3 shard them)";
  return grads_.data();
}
const float* ParamStore::values() const {
  DT_CHECK(has_values()) << "ParamStore: flat values dropped (ZeRO-3 shards them)";
  return values_.data();
}
const float* ParamStore::grads() const {
  DT_CHECK(has_grads()) << "ParamStore: flat gradients dropped (ZeRO-2/3 shard them)";
  return grads_.data();
}

float* ParamStore::value(int i) {
  const Param& p = params_[i];
  float* base = unit_values_[p.unit];
  DT_CHECK(base != nullptr) << "value of " << p.name << " read while its unit '" << units_[p.unit].name
                            << "' is not gathered";
  return base + (p.offset - units_[p.unit].offset);
}

float* ParamStore::grad(int i) {
  const Param& p = params_[i];
  float* base = unit_grads_[p.unit];
  DT_CHECK(base != nullptr) << "grad of " << p.name << " used outside its unit's backward ('"
                            << units_[p.unit].name << "')";
  return base + (p.offset - units_[p.unit].offset);
}

void ParamStore::ZeroGrads() {
  std::fill(grads_.begin(), grads_.end(), 0.0f);
  if (sharding_ != nullptr) sharding_->ZeroGradShards();
  if (bf16_grads()) bf16_->ZeroGrads();
}

bool ParamStore::bf16_grads() const { return bf16_ != nullptr && !bf16_->fp32_grads(); }

void ParamStore::DropValues() {
  decltype(values_)().swap(values_);
  std::fill(unit_values_.begin(), unit_values_.end(), nullptr);
}

void ParamStore::DropGrads() {
  decltype(grads_)().swap(grads_);
  std::fill(unit_grads_.begin(), unit_grads_.end(), nullptr);
}

void ParamStore::RestoreValues() {
  values_.assign(static_cast<size_t>(total_), 0.0f);
  for (size_t u = 0; u < units_.size(); ++u) unit_values_[u] = values_.data() + units_[u].offset;
}

}  // namespace dt::rt
