// TransformerLayer: the interface ModelChunk drives for one transformer
// layer on one TP rank, whatever the family (GptLayer, LlamaLayer).
//
// The constructor of an implementation declares the layer's parameters in
// the LayerContext's store; Init sets their values after the store is
// finalised (a pure function of seed, global name and global index).
// Forward consumes the layer input [local_rows, hidden] and fills the
// stash according to the recompute mode; Backward returns the input grad,
// accumulates parameter grads and frees the stash. Not thread-safe.
// Misuse (wrong shapes) aborts.
#pragma once

#include <cstdint>

#include "planner/spec/plan_spec.h"
#include "runtime/tensor/tensor.h"

namespace dt::rt {

struct LayerStash;

class TransformerLayer {
 public:
  virtual ~TransformerLayer() = default;
  virtual void Init(uint64_t seed) = 0;
  virtual Tensor Forward(Tensor x, Recompute mode, LayerStash* stash) = 0;
  virtual Tensor Backward(const Tensor& dout, LayerStash* stash) = 0;
};

}  // namespace dt::rt
