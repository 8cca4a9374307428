#include "runtime/model/param_store.h"

#include <algorithm>

#include "base/check.h"

namespace dt::rt {

int ParamStore::Add(Param p) {
  DT_CHECK(!finalized_) << "ParamStore::Add after Finalize: " << p.name;
  int64_t n = 1;
  for (int64_t d : p.local_shape) n *= d;
  p.numel = n;
  p.offset = total_;
  total_ += n;
  params_.push_back(std::move(p));
  return static_cast<int>(params_.size()) - 1;
}

void ParamStore::Finalize() {
  DT_CHECK(!finalized_) << "ParamStore::Finalize twice";
  values_.assign(static_cast<size_t>(total_), 0.0f);
  grads_.assign(static_cast<size_t>(total_), 0.0f);
  finalized_ = true;
}

void ParamStore::ZeroGrads() { std::fill(grads_.begin(), grads_.end(), 0.0f); }

}  // namespace dt::rt
