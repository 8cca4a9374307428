// ParamStore: the parameters of one model chunk on one rank, stored in two
// flat fp32 buffers (values and gradients) so that DP gradient buckets,
// ZeRO sharding and checkpoints work on contiguous memory.
//
// Each Param is a view (offset, numel) into the buffers plus the metadata
// needed to save it in a plan-independent layout: its global name (e.g.
// "layers.3.mlp.fc1.weight"), its full (unsharded) shape, and how tensor
// parallelism slices it (which dimension, this rank's index, the TP size).
// The store owns the buffers; Param views stay valid for the store's
// lifetime (buffers are sized once by Finalize and never reallocated).
//
// Units: consecutive Params are grouped into units (one per transformer
// layer, one per embedding / head tensor: BeginUnit) — the granularity at
// which ZeRO-2/3 (runtime/model/sharded_params.h) reduce-scatters gradients
// and gathers parameters. value(i) / grad(i) read through the unit's bound
// buffer: after Finalize every unit is bound into the flat buffers; a
// ShardedParams may drop the flat buffers (DropValues / DropGrads) and bind
// a unit to a temporary buffer only while it is in use. Reading an unbound
// unit's value or grad aborts (DT_CHECK). Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/tensor/allocator.h"

namespace dt::rt {

class ShardedParams;
class Bf16Params;

enum class ShardKind {
  kReplicated,  // every TP rank holds the full tensor (norms, row-parallel bias)
  kSplitDim0,   // TP rank r holds rows [r*d0/tp, (r+1)*d0/tp) (column-parallel weight stored [out, in])
  kSplitDim1,   // TP rank r holds columns [r*d1/tp, (r+1)*d1/tp) (row-parallel weight)
};

struct Param {
  std::string name;                 // global, plan-independent
  std::vector<int64_t> full_shape;  // unsharded shape
  std::vector<int64_t> local_shape; // this rank's shape
  ShardKind shard = ShardKind::kReplicated;
  int tp_rank = 0, tp_size = 1;
  int64_t offset = 0;  // into ParamStore buffers
  int64_t numel = 0;   // local elements
  // Tied parameters (the input embedding reused by the LM head on another
  // pipeline stage): gradients must also be summed over `tied_group` ranks.
  bool tied = false;
  // Shards held by several TP ranks (GQA K/V weights when tp > kv_heads):
  // tp_size counts the distinct shards and tp_replicas consecutive TP ranks
  // hold each (tp_size * tp_replicas == TP group size); `replica` is this
  // rank's index among them. Their grads are summed over the replicas by
  // the layer; only replica 0 counts in norms.
  int tp_replicas = 1, replica = 0;
  int unit = 0;        // index into ParamStore::units()
  // A routed expert's weight (MoE): replicated only over the
  // expert-data-parallel group (the ranks holding the same experts), so its
  // gradient is reduced there, and the EP ranks' distinct experts all count
  // in the gradient norm.
  bool expert = false;
};

// A run of consecutive Params: [first_param, end_param), elements
// [offset, offset + numel) of the flat buffers.
struct ParamUnit {
  std::string name;
  int first_param = 0, end_param = 0;
  int64_t offset = 0, numel = 0;
};

class ParamStore {
 public:
  // Starts a new unit; Params added next belong to it. Only before
  // Finalize(). Params added before any BeginUnit form one unnamed unit.
  int BeginUnit(std::string name);
  // Declares a parameter; returns its index. Only before Finalize().
  int Add(Param p);
  // Allocates value and gradient buffers (gradients zeroed).
  void Finalize();
  bool finalized() const { return finalized_; }

  std::vector<Param>& params() { return params_; }
  const std::vector<Param>& params() const { return params_; }
  const std::vector<ParamUnit>& units() const { return units_; }
  // The flat buffers; abort once dropped (see has_values / has_grads).
  float* values();
  float* grads();
  const float* values() const;
  const float* grads() const;
  int64_t numel() const { return total_; }
  float* value(int i);
  float* grad(int i);
  // Zeroes the flat gradients, or (when sharded) the gradient shards.
  void ZeroGrads();

  // ZeRO-2/3 residency (called by ShardedParams). Drop* free a flat buffer
  // and unbind every unit from it; RestoreValues reallocates the flat value
  // buffer (zeros) and binds every unit to it. Bind* point a unit at a
  // buffer of at least its numel floats (nullptr: unbound).
  bool has_values() const { return !values_.empty() || total_ == 0; }
  bool has_grads() const { return !grads_.empty() || total_ == 0; }
  void DropValues();
  void DropGrads();
  void RestoreValues();
  void BindUnitValues(int unit, float* v) { unit_values_.at(unit) = v; }
  void BindUnitGrads(int unit, float* g) { unit_grads_.at(unit) = g; }
  bool unit_values_bound(int unit) const { return unit_values_.at(unit) != nullptr; }
  bool unit_grads_bound(int unit) const { return unit_grads_.at(unit) != nullptr; }
  // The ZeRO-2/3 manager of this store (owned by the model chunk), or null.
  ShardedParams* sharding() const { return sharding_; }
  void set_sharding(ShardedParams* s) { sharding_ = s; }
  // The bf16 storage of this store (bf16_params.h: bf16 values and grads,
  // fp32 only around a unit's use), or null in fp32.
  Bf16Params* bf16() const { return bf16_; }
  void set_bf16(Bf16Params* b) { bf16_ = b; }
  // The gradients are bf16 (Bf16Params::grads()); false in fp32 and for a
  // bf16 store with fp32 main gradients (the flat grads() above).
  bool bf16_grads() const;

 private:
  std::vector<Param> params_;
  std::vector<ParamUnit> units_;
  // Allocated through the runtime allocator so they count in its peak bytes.
  std::vector<float, TrackingAllocator<float>> values_, grads_;
  std::vector<float*> unit_values_, unit_grads_;
  int64_t total_ = 0;
  bool finalized_ = false;
  ShardedParams* sharding_ = nullptr;
  Bf16Params* bf16_ = nullptr;
};

}  // namespace dt::rt
