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
// Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/tensor/allocator.h"

namespace dt::rt {

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
};

class ParamStore {
 public:
  // Declares a parameter; returns its index. Only before Finalize().
  int Add(Param p);
  // Allocates value and gradient buffers (gradients zeroed).
  void Finalize();
  bool finalized() const { return finalized_; }

  std::vector<Param>& params() { return params_; }
  const std::vector<Param>& params() const { return params_; }
  float* values() { return values_.data(); }
  float* grads() { return grads_.data(); }
  const float* values() const { return values_.data(); }
  const float* grads() const { return grads_.data(); }
  int64_t numel() const { return static_cast<int64_t>(values_.size()); }
  float* value(int i) { return values_.data() + params_[i].offset; }
  float* grad(int i) { return grads_.data() + params_[i].offset; }
  void ZeroGrads();

 private:
  std::vector<Param> params_;
  // Allocated through the runtime allocator so they count in its peak bytes.
  std::vector<float, TrackingAllocator<float>> values_, grads_;
  int64_t total_ = 0;
  bool finalized_ = false;
};

}  // namespace dt::rt
