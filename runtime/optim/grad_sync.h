// GradSync: data-parallel gradient averaging of one chunk's flat gradient
// buffer, in buckets of bucket_bytes, with non-blocking all-reduces so the
// interpreter can overlap them with other work.
//
//   Start(store): issues one IAllReduce per bucket (in buffer order);
//                 with blocking, one AllReduce per bucket instead, done on
//                 return: for a sync nothing can overlap (the interpreter's
//                 last ones before the optimizer step), since a non-blocking
//                 all-reduce costs about twice a blocking one on Open MPI 4.1
//                 (libnbc against the tuned component, 2 ranks: 0.22 / 0.11
//                 ms at 0.9 MB, 47 / 21 ms at 42 MB; docs/runtime.md).
//   Finish():     waits for all of them and multiplies by `scale`
//                 (1/dp for averaging over a DP group of size dp).
// The store's grads must not be touched between Start and Finish. Members of
// the comm must call Start for the same stores in the same order. Not
// thread-safe. ZeRo-1 uses ZeroShard (zero_shard.h) instead.
//
// MoE: when split_experts and the store holds expert Params
// (Param::expert), each maximal run of consecutive expert Params is
// all-reduced over expert_dp (the ranks holding the same experts; null: a
// group of one, nothing to reduce) and every
// other run over dp, bucketed within runs. Both use the same `scale`: an
// expert's gradient already sums the tokens of the EP group, so the sum over
// expert_dp covers every DP replica's tokens once.
// A bf16 store with bf16 gradients (ParamStore::bf16_grads()) has them
// all-reduced in bf16 (2 bytes per element on the wire, the planner's
// grad_bytes = 2), blocking inside Start (no overlap), and scaled in place
// in Finish; with fp32 main gradients (grad_bytes 4) they go as fp32 above.
#pragma once

#include <memory>
#include <vector>

#include "runtime/comm/comm.h"
#include "runtime/model/param_store.h"

namespace dt::rt {

class GradSync {
 public:
  GradSync(Comm* dp, int64_t bucket_bytes, float scale, bool split_experts = false, Comm* expert_dp = nullptr);
  void Start(ParamStore& store, bool blocking = false);
  void Finish();
  bool pending() const { return store_ != nullptr; }
  int num_buckets_last() const { return last_buckets_; }

 private:
  Comm* dp_;
  bool split_experts_;
  Comm* expert_dp_;
  int64_t bucket_elems_;
  float scale_;
  ParamStore* store_ = nullptr;
  std::vector<std::unique_ptr<Request>> requests_;
  int last_buckets_ = 0;
};

}  // namespace dt::rt
