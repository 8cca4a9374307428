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
//
// bf16 mixed precision (Precision::kBf16; the CPU runtime's, as
// bf16_params.h does without sharding): the values kept are bf16 (ZeRO-2
// the full values, ZeRO-3 the value shard; 2 bytes each) and the fp32
// master weights of the owned slots live in the optimizer
// (runtime/optim/sharded_adamw.h), which takes them from the flat fp32
// values still held at construction and then drops those (DropFp32Values).
// The gradient shard is bf16, or fp32 with fp32_grads (a plan's grad_bytes
// 4). Around a use:
//   Gather(u)      ZeRO-3 all-gathers u's bf16 values, widens them into an
//                  fp32 working copy and frees the bf16 gather at once
//                  (ZeRO-2 widens its resident bf16 values); binds the copy.
//   Release(u)     frees the fp32 copy.
//   BeginGrads(u)  as in fp32: a zeroed fp32 P_u buffer.
//   ReduceGrads(u) bf16 gradients: narrows the buffer in place and
//                  reduce-scatters it in bf16 (2 bytes on the wire), adding
//                  grad_scale * slot into the bf16 shard (rounded); fp32
//                  main gradients: reduce-scatters the fp32 buffer as in fp32.
// So the unit in backward holds its fp32 values (4 B per element) and its
// fp32 gradient buffer (4 B per padded element), the planner's count
// (docs/memory.md, "bf16 on CPU").
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "runtime/comm/comm.h"
#include "runtime/model/param_store.h"
#include "runtime/tensor/bf16.h"
#include "runtime/tensor/tensor.h"

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

  enum class Precision { kFp32, kBf16, kBf16Fp32Grads };
  // stage 2 or 3; dp non-null with size > 1; grad_scale multiplies the
  // reduce-scattered sums (1/dp: mean over DP ranks).
  ShardedParams(ParamStore* store, Comm* dp, int stage, float grad_scale, Precision precision = Precision::kFp32);
  ~ShardedParams();
  ShardedParams(const ShardedParams&) = delete;
  ShardedParams& operator=(const ShardedParams&) = delete;

  int stage() const { return stage_; }
  bool bf16() const { return precision_ != Precision::kFp32; }
  bool bf16_grads() const { return precision_ == Precision::kBf16; }
  Comm* dp() const { return dp_; }
  ParamStore& store() { return *store_; }
  const UnitShard& unit_shard(int u) const { return shards_.at(u); }
  int64_t shard_numel() const { return shard_numel_; }

  void Gather(int u);
  void Release(int u);
  void BeginGrads(int u);
  void ReduceGrads(int u);

  // Optimizer side.
  // The fp32 gradient shard (fp32, or bf16 with fp32 main gradients).
  float* grad_shard();
  const float* grad_shard() const;
  // The bf16 gradient shard (bf16_grads()).
  bf16_t* grad_shard16();
  const bf16_t* grad_shard16() const;
  // This rank's owned values of unit u (end - begin elements): the value
  // shard (ZeRO-3) or the owned range of the resident values (ZeRO-2);
  // fp32 stores: OwnedValues, bf16 stores: OwnedValues16.
  float* OwnedValues(int u);
  bf16_t* OwnedValues16(int u);
  // bf16: the optimizer has taken its master weights from the flat fp32
  // values; they go.
  void DropFp32Values();
  // bf16: rounds full flat fp32 values (store layout) into the bf16 values
  // kept (ZeRO-2 all of them, ZeRO-3 this rank's slots); a checkpoint's
  // resume, after the optimizer took its master slots.
  void SetValues16(const float* full);
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
  // No-ops under ZeRO-2 and in bf16 (checkpoints then save the optimizer's
  // master weights, runtime/optim/optimizer.h GatherMaster).
  void MaterializeValues();
  void ShardValues();

 private:
  ParamStore* store_;
  Comm* dp_;
  int stage_;
  float scale_;
  Precision precision_;
  std::vector<UnitShard> shards_;
  int64_t shard_numel_ = 0;
  TrackedFloats value_shard_, grad_shard_;     // ZeRO-3 values; gradients (fp32)
  Bf16Buffer values16_, grad_shard16_;         // bf16: ZeRO-2 full values or ZeRO-3 shard; bf16 gradients
  std::map<int, TrackedFloats> values_, grads_;  // units in use: gathered values, full grads
  std::map<int, Tensor> work_;                 // bf16: units in use, fp32 working copies
};

}  // namespace dt::rt
