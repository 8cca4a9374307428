// Stash precision: under bf16 mixed precision (LayerContext::bf16) the
// tensors a layer saves for its backward are kept in bf16 between the
// forward and the backward of a microbatch, and widened back to fp32 right
// before the layer's backward (every kernel computes in fp32).
//
// Narrowed: the layer input x, the norm outputs, QKV, the attention
// probabilities and output, the residual x2, the MLP pre-/post-activation
// (and Llama's up projection), and an MoE block's expert input, inner
// tensors and returned expert outputs. Kept fp32: the per-row norm statistics
// (mean, rstd) and ring attention's log-sum-exp, a few floats per row, as
// the planner's memory model assumes (planner/memory/activation_memory.cc).
// Called by ModelChunk around the layers, so the layers themselves are
// precision-agnostic. No-ops in fp32. Not thread-safe.
#pragma once

#include "runtime/model/layer_context.h"
#include "runtime/model/transformer_layer.h"

namespace dt::rt {

struct LayerStash;

// After a layer's Forward: fp32 stash tensors -> bf16 (when ctx.bf16).
void NarrowStash(const LayerContext& ctx, LayerStash* s);
// Before its Backward: bf16 stash tensors -> fp32.
void WidenStash(LayerStash* s);
// The same for single tensors (the LM head's saved input and norm output).
void NarrowTensor(const LayerContext& ctx, Tensor* t);
void WidenTensor(Tensor* t);

}  // namespace dt::rt
