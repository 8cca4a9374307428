// LlamaLayer: one Llama transformer layer on one TP rank, forward and
// backward, following planner/cost/layer_ops.h (family kLlama):
//   x -> RMSNorm -> [SP all-gather | f] -> q, k, v (column-parallel, no
//     biases) -> RoPE(q, k) -> causal GQA attention -> o (row-parallel)
//     -> [SP reduce-scatter | g] -> +x = x2
//   x2 -> RMSNorm -> [SP all-gather | f] -> gate, up (column-parallel)
//     -> silu(gate) * up -> down (row-parallel) -> [SP reduce-scatter | g]
//     -> +x2 = out
// Activations are sequence-major [local_rows, hidden]; no dropout.
//
// GQA: TP splits the query heads (heads / tp per rank) and the KV heads
// (kv_heads / tp per rank; when tp > kv_heads each KV head is replicated on
// the tp / kv_heads ranks whose query heads use it, as Megatron does). The
// attention core (runtime/ops/attention.h) is MHA-shaped, so each KV head
// is expanded to its query heads into the core's qkv layout, and backward
// sums the core's K/V grads back per KV head. Replicated K/V weights start
// equal (init is a function of the global index) and stay equal: their
// grads are all-reduced over the TP ranks sharing them in every Backward.
// RoPE reads positions through LayerContext::Position, so context
// parallelism (ring attention over ctx->cp, as GptLayer) needs nothing more;
// the ring carries the expanded (per-query-head) K/V.
//
// Parameters (global, plan-independent names): layers.L.attn_norm.weight,
// attn.{q,k,v,o}.weight, mlp_norm.weight, mlp.{gate,up,down}.weight.
// Init: norms 1; q, k, v, gate, up N(0, 0.02); o, down N(0, 0.02 /
// sqrt(2 * num_layers)) (the same scheme as GptLayer).
//
// Mixture of experts (ctx->num_experts > 0, Mixtral): the MLP block is a
// MoeMlp (moe_mlp.h) on the gathered norm output instead of gate/up/down;
// its TP-partial output is reduced by the same ReduceSeq, and its
// parameters are named layers.L.mlp.router.weight and
// layers.L.mlp.experts.J.{gate,up,down}.weight.
//
// Shared experts (ctx->shared_ffn_local > 0: Qwen2-MoE, DeepSeek): beside
// the MoeMlp, a dense SwiGLU MLP every token uses, exactly the dense MLP's
// path above (SP all-gather of the norm output, gate / up column-parallel,
// down row-parallel, SP reduce-scatter), stashed in the same fields (fc1,
// up, act); with ctx->shared_expert_gate its output is scaled per token by
// sigmoid(n2 . w) (Qwen2-MoE's shared_expert_gate, computed on the sequence
// shard, w replicated and sequence-parallel partial like the norms). The
// block's output is routed + shared. Parameters: layers.L.mlp.shared.{gate,
// up,down}.weight ([fs, h], [fs, h], [h, fs]) and
// layers.L.mlp.shared_expert_gate.weight ([1, h]); init as the dense MLP's,
// the gate N(0, 0.02).
//
// Recompute modes as GptLayer (none / selective: attention probabilities
// recomputed / full: only the input kept). Stash memory comes from the
// runtime allocator. Host-memory ops (RMSNorm, SwiGLU, RoPE): CPU backend
// only. Not thread-safe. Misuse (wrong shapes) aborts.
#pragma once

#include <memory>
#include <vector>

#include "runtime/model/gpt_layer.h"
#include "runtime/model/layer_context.h"
#include "runtime/model/moe_mlp.h"
#include "runtime/model/transformer_layer.h"

namespace dt::rt {

class LlamaLayer : public TransformerLayer {
 public:
  // Declares this layer's parameters (global layer index `layer`) in the
  // store. ctx->kv_heads and kv_heads_local must be set. In an MoE model
  // (ctx->num_experts > 0) the MLP is the mixture of experts unless
  // `dense_mlp` (a dense-MLP layer of the model, ModelSpec::DenseLayer:
  // DeepSeek's leading ones, Llama 4's interleaved ones): then it is the
  // SwiGLU of ctx->ffn_local, as in a dense model.
  LlamaLayer(LayerContext* ctx, int layer, int num_layers, bool dense_mlp = false);
  void Init(uint64_t seed) override;
  Tensor Forward(Tensor x, Recompute mode, LayerStash* stash) override;
  Tensor Backward(const Tensor& dout, LayerStash* stash) override;

 private:
  void ForwardInto(LayerStash* s, bool keep_probs, Tensor* out);
  std::vector<int64_t> Positions() const;
  // Local KV head of local query head i.
  int64_t KvOf(int64_t i) const;
  // Sums the K and V weight grads of this microbatch (dk_w, dv_w: this
  // rank's shard) over the TP ranks holding the same KV head and adds them
  // into the store's grads.
  void AddReplicatedKvGrads(const Tensor& dk_w, const Tensor& dv_w);
  // Shared experts: forward on s->ln2 (adds their gated output for this
  // rank's rows, complete, into *mlp, the routed experts' output) and
  // backward (dout: the block output's grad for those rows; returns the
  // grad of s->ln2 they contribute, complete).
  void AddSharedForward(LayerStash* s, Tensor* mlp);
  // One SwiGLU MLP on s->ln2 (the dense MLP or the shared experts): SP
  // all-gather, gate / up column-parallel, down row-parallel, SP
  // reduce-scatter; stashes fc1 (gate), up, act in s. Forward returns the
  // output for this rank's rows; Backward (dout: their grad) accumulates the
  // weights' grads and returns the TP-partial grad of the gathered input
  // [rows, h] (the caller reduces it).
  struct MlpWeights {
    int gate, up, down;
    int64_t f_local;
  };
  Tensor SwiGluMlpForward(LayerStash* s, const MlpWeights& w);
  Tensor SwiGluMlpBackward(const Tensor& dout, LayerStash* s, const MlpWeights& w);
  Tensor SharedBackward(const Tensor& dout, LayerStash* s);

  LayerContext* ctx_;
  int layer_, num_layers_;
  int64_t group_;          // query heads per KV head
  int64_t kv_first_;       // first global KV head on this rank
  bool kv_replicated_;     // tp > kv_heads
  int norm1_w_, q_w_, k_w_, v_w_, o_w_, norm2_w_, gate_w_ = -1, up_w_ = -1, down_w_ = -1;
  std::unique_ptr<MoeMlp> moe_;  // MoE layers only
  // MoE layers with shared experts only (-1 otherwise).
  int shared_gate_w_ = -1, shared_up_w_ = -1, shared_down_w_ = -1, shared_scale_w_ = -1;
};

}  // namespace dt::rt
