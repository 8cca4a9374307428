// ShardedParams: ZeRO-2 / ZeRO-3 (FSDP-style) storage of one model chunk's
// parameters over a data-parallel group, one ParamUnit (param_store.h: a
// transformer layer, or one embedding / head tensor) at a time.
//
// Layout: unit u of n_u elements is padded to P_u = ceil(n_u / dp) * dp and
// split into dp slots of S_u = P_u / dp; DP rank r owns unit elements
// [r*S_u, min((r+1)*S_u, n_u)). This rank's slots of all units, concatenated,
// form the "shard arrays" (shard_numel() floats): the gradient shard, Adam
// m / v (runtime/optim/sharded_adamw.h) and, for ZeRO-3, the value shard.
// Padding elements stay zero.
//
// What each stage keeps between uses:
//   ZeRO-2: full values (flat buffer), gradient shard. No flat gradients.
//   ZeRO-3: value shard, gradient shard. No flat values nor gradients.
// Use protocol (ModelChunk, around each use of a unit; every DP member makes
// the same calls in the same order, they are collectives over dp):
//   Gather(u)      ZeRO-3: all-gather u's values into a P_u buffer and bind
//                  it (ZeRO-2: no-op, values are resident).
//   Release(u)     ZeRO-3: unbind and free it.
//   BeginGrads(u)  allocate a zeroed P_u gradient buffer for u and bind it.
//   ReduceGrads(u) reduce-scatter it over dp, add grad_scale * (this rank's
//                  slot) to the gradient shard, unbind and free it.
// So a microbatch's backward reduce-scatters every unit right after its
// backward (gradients are accumulated across microbatches in the shard).
// Construction takes the store with its flat buffers (parameters already
// initialised), keeps this rank's slots, drops what the stage does not
// keep, and registers itself as store->sharding(). The store must outlive
// this object; this object must outlive the store's use. Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "runtime/comm/comm.h"
#include "runtime/model/param_store.h"

namespace dt::rt {

using TrackedFloats = std::vector<float, TrackingAllocator<float>>;

class ShardedParams {
 public:
  struct UnitShard {
    int64_t slot = 0;          // offset of this unit's slot in the shard arrays
    int64_t shard = 0;         // S_u
    int64_t padded = 0;        // P_u
    int64_t begin = 0, end = 0;  // owned unit elements [begin, end)
  };

  // stage 2 or 3; dp non-null with size > 1; grad_scale multiplies the
  // reduce-scattered sums (1/dp: mean over DP ranks).
  ShardedParams(ParamStore* store, Comm* dp, int stage, float grad_scale);
  ~ShardedParams();
  ShardedParams(const ShardedParams&) = delete;
  ShardedParams& operator=(const ShardedParams&) = delete;

  int stage() const { return stage_; }
  Comm* dp() const { return dp_; }
  ParamStore& store() { return *store_; }
  const UnitShard& unit_shard(int u) const { return shards_.at(u); }
  int64_t shard_numel() const { return shard_numel_; }

  void Gather(int u);
  void Release(int u);
  void BeginGrads(int u);
  void ReduceGrads(int u);

  // Optimizer side.
  float* grad_shard() { return grad_shard_.data(); }
  // This rank's owned values of unit u (end - begin floats): the value
  // shard (ZeRO-3) or the owned range of the resident values (ZeRO-2).
  float* OwnedValues(int u);
  void ZeroGradShards();
  // ZeRO-2 parameter sync: all-gathers every unit's owned values into the
  // full values. ZeRO-3: no-op (the next Gather reads the shard).
  void AllGatherValues();
  // Collective: a shard array -> the full flat array in store layout
  // (store.numel() floats) on every member.
  void AllGatherShardArray(const float* shard_array, float* full);
  // Local: this rank's slots of a full flat array (padding zeroed).
  void TakeShardArray(const float* full, float* shard_array) const;
  // Checkpoints under ZeRO-3: MaterializeValues re-creates the flat values
  // from the shards (collective); ShardValues copies the flat values' owned
  // slots into the value shard and drops the flat buffer again (local).
  // No-ops under ZeRO-2.
  void MaterializeValues();
  void ShardValues();

 private:
  ParamStore* store_;
  Comm* dp_;
  int stage_;
  float scale_;
  std::vector<UnitShard> shards_;
  int64_t shard_numel_ = 0;
  TrackedFloats value_shard_, grad_shard_;     // ZeRO-3 values; gradients
  std::map<int, TrackedFloats> values_, grads_;  // units in use: gathered values, full grads
};

}  // namespace dt::rt
