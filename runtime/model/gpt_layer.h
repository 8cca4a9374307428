// GptLayer: one GPT-2 transformer layer on one TP rank, forward and
// backward, following planner/cost/layer_ops.h:
//   x -> LN1 -> [SP all-gather | f] -> QKV (column-parallel) -> attention
//     -> proj (row-parallel) -> [SP reduce-scatter | g] -> +bias -> +x = x2
//   x2 -> LN2 -> [SP all-gather | f] -> fc1 (column) -> GeLU -> fc2 (row)
//     -> [SP reduce-scatter | g] -> +bias -> +x2 = out
// Activations are sequence-major [local_rows, hidden]. Dropout when
// ctx->dropout is on (Megatron's three GPT sites: the attention
// probabilities, and the attention and MLP outputs before their residual
// adds), with masks keyed by global indices (runtime/ops/dropout.h), so
// training stays deterministic and every plan draws the masks one rank does.
//
// What the forward keeps (LayerStash) depends on the recompute mode:
//   none      everything backward reads (incl. attention probabilities)
//   selective all but the attention probabilities, recomputed from QKV
//   full      only the layer input; backward reruns Forward first
// Under context parallelism (ctx->cp_size > 1) attention is the ring of
// runtime/ops/ring_attention.h over ctx->cp: probs are the local queries'
// probabilities against every K/V block ([cp, b, heads/tp, s/cp, s/cp]),
// and every mode but full also keeps lse (one float per query row and
// head); selective recomputes each block's probabilities inside the
// backward ring from Q K^T and lse (no extra ring, no [s/cp, s] matrix).
// Stash memory comes from the runtime allocator. Backward accumulates
// parameter grads (through LayerContext::G) and returns the input grad.
// Not thread-safe. Misuse (wrong shapes) aborts.
#pragma once

#include <memory>

#include <string>

#include "planner/spec/plan_spec.h"
#include "runtime/model/layer_context.h"
#include "runtime/model/transformer_layer.h"
#include "runtime/ops/dropout.h"
#include "runtime/tensor/tensor.h"

namespace dt::rt {

struct MoeStash;  // runtime/model/moe_mlp.h

struct LayerStash {
  Tensor x;                          // input [local_rows, h] (always)
  Tensor mean1, rstd1, ln1;          // LN1 stats and output (local rows)
  Tensor qkv, probs, attn;           // [rows, 3h/tp], [b, heads/tp, s, s], [rows, h/tp]
  DropoutMask probs_mask;            // dropout: the probabilities' mask and
  Tensor dropped;                    // their dropped values (kept with probs)
  DropoutMask attn_out_mask, mlp_out_mask;  // dropout: residual branches' masks [local_rows, h]
  Tensor lse;                        // CP only: [b, heads/tp, s] softmax log-sum-exp
  Tensor x2, mean2, rstd2, ln2;      // residual after attention; LN2
  Tensor fc1, act;                   // [rows, ffn/tp] pre- and post-GeLU
                                     // (Llama: fc1 = gate, act = SwiGLU output)
  Tensor up;                         // Llama: up projection [rows, ffn/tp]
  std::shared_ptr<MoeStash> moe;     // MoE layers: the MLP block's stash
                                     // (shared experts: fc1, up, act as Llama's MLP)
  Tensor shared_out, shared_g;       // gated shared experts: their output [local_rows, h]
                                     // and sigmoid gate [local_rows]
  bool complete = false;             // false: only x (full recompute)
};

class GptLayer : public TransformerLayer {
 public:
  // Declares this layer's parameters (global layer index `layer`) in the store.
  GptLayer(LayerContext* ctx, int layer, int num_layers);
  // Sets initial values (after the store is finalised).
  void Init(uint64_t seed) override;

  // Consumes x (moved into the stash); returns the layer output.
  Tensor Forward(Tensor x, Recompute mode, LayerStash* stash) override;
  // Returns the grad of the layer input; frees the stash contents.
  Tensor Backward(const Tensor& dout, LayerStash* stash) override;

 private:
  void ForwardInto(LayerStash* s, bool keep_probs, Tensor* out);

  LayerContext* ctx_;
  int layer_, num_layers_;
  int ln1_w_, ln1_b_, qkv_w_, qkv_b_, proj_w_, proj_b_;
  int ln2_w_, ln2_b_, fc1_w_, fc1_b_, fc2_w_, fc2_b_;
};

}  // namespace dt::rt
