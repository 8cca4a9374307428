// LayerContext: what the pieces of a model chunk (embedding, transformer
// layers, head) share on one rank: the backend, the TP and CP comms, per-rank
// dimensions, the parameter store and where gradients of sequence-parallel
// partial parameters go. Owned by ModelChunk; pieces hold a pointer to it.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/comm/comm.h"
#include "runtime/model/param_store.h"
#include "runtime/ops/cp_layout.h"
#include "runtime/ops/dropout.h"
#include "runtime/tensor/allocator.h"
#include "runtime/tensor/tensor.h"

namespace dt::rt {

struct LayerContext {
  Backend* be = nullptr;
  Comm* tp = nullptr;       // null or size 1: no tensor parallelism
  int tp_rank = 0, tp_size = 1;
  bool sp = false;          // Megatron sequence parallelism (tp_size > 1)
  Comm* cp = nullptr;       // null or size 1: no context parallelism
  int cp_rank = 0, cp_size = 1;
  int64_t seq = 0, batch = 0;  // seq: this rank's LOCAL sequence, seq_length / cp
  int64_t rows = 0;         // seq * batch
  int64_t local_rows = 0;   // rows / tp under SP, else rows
  int64_t hidden = 0, heads_local = 0, head_dim = 0, ffn_local = 0;
  // GQA (Llama): KV heads on this rank (kv_heads / tp, or 1 when tp >
  // kv_heads and each KV head is replicated on tp / kv_heads ranks).
  int64_t kv_heads = 0, kv_heads_local = 0;
  double rope_theta = 10000.0, norm_eps = 1e-5;
  // Mixture of experts (num_experts > 0, runtime/model/moe_mlp.h): experts
  // sharded over the EP group `ep` (null or size 1: all experts here), each
  // expert's FFN split over TP (expert_ffn_local = moe_ffn_hidden / tp).
  int64_t num_experts = 0, top_k = 0, expert_ffn_local = 0;
  // Expert capacity (PlanSpec::moe_capacity_factor; 0: dropless) and
  // padding every expert's input to it (moe_pad_to_capacity): each rank
  // drops among its own routed copies, as Megatron-LM does.
  double moe_capacity_factor = 0;
  bool moe_pad_to_capacity = false;
  // Shared experts of an MoE layer (Qwen2-MoE, DeepSeek): one dense SwiGLU
  // MLP of width shared_ffn_local * tp every token uses, split over TP like
  // the dense MLP; its output scaled by sigmoid(norm output . w) when
  // shared_expert_gate (Qwen2-MoE). 0: none (Mixtral).
  int64_t shared_ffn_local = 0;
  bool shared_expert_gate = false;
  Comm* ep = nullptr;
  int ep_rank = 0, ep_size = 1;
  ParamStore* store = nullptr;
  // bf16 mixed precision: stashes are kept in bf16 between forward and
  // backward (stash_precision.h), parameters in bf16 (bf16_params.h).
  bool bf16 = false;
  // Under SP, parameters applied to sequence shards (LayerNorms, the biases
  // added after a reduce-scatter) get only this shard's share of the
  // gradient: it goes to sp_grads (sp_offset[i] >= 0) and is all-reduced
  // over TP once per microbatch backward, then added to the store.
  std::vector<int64_t> sp_offset;
  std::vector<float, TrackingAllocator<float>> sp_grads;
  // GPT dropout (runtime/ops/dropout.h; rate 0: off) and the global sample
  // index of each batch row of the microbatch being computed (set by the
  // chunk before every forward and backward; the masks' keys).
  DropoutRng dropout;
  std::vector<int64_t> samples;

  // Global sequence position of this rank's local sequence index t
  // (0 <= t < seq). The identity without context parallelism; under CP the
  // rank's tokens are two non-adjacent chunks of the sequence, and RoPE and
  // learned position embeddings must read positions through this
  // (cp_layout.h: chunks cp_rank and 2*cp-1-cp_rank of 2*cp).
  int64_t Position(int64_t t) const { return CpGlobalPosition(t, cp_rank, cp_size, seq); }
  // Global positions of the local_rows / batch sequence indices this rank's
  // [local_rows, h] activations hold (its SP shard of the local sequence).
  std::vector<int64_t> ShardPositions() const {
    const int64_t n = local_rows / batch, t0 = sp ? tp_rank * n : 0;
    std::vector<int64_t> pos(n);
    for (int64_t t = 0; t < n; ++t) pos[t] = Position(t0 + t);
    return pos;
  }

  float* W(int i) const { return store->value(i); }
  float* G(int i) {
    if (sp && sp_offset[i] >= 0) return sp_grads.data() + sp_offset[i];
    return store->grad(i);
  }
};

}  // namespace dt::rt

namespace dt::rt {

// Adds a parameter to ctx->store with its TP shard of `full_shape`; if
// sp_partial, reserves room for it in ctx->sp_grads. Returns its index.
int DeclareParam(LayerContext* ctx, const std::string& name, std::vector<int64_t> full_shape,
                 ShardKind shard, bool sp_partial, bool tied = false);

// A dim-0-split parameter with `shards` distinct shards (GQA K/V weights:
// shards = kv_heads). shards >= tp (a multiple of tp): as kSplitDim0. shards
// < tp (tp a multiple of shards): TP rank r holds shard r / (tp / shards),
// replicated on tp / shards consecutive ranks (Param::tp_replicas).
int DeclareReplicatedShardParam(LayerContext* ctx, const std::string& name, std::vector<int64_t> full_shape,
                                int shards);

// Before a column-parallel linear: under SP the all-gather of the sequence
// shard [local_rows, h] into [rows, h]; otherwise a view of `local` (f: identity).
Tensor GatherSeq(LayerContext* ctx, const Tensor& local);
// Conjugate of GatherSeq in backward, and the row-parallel output reduction
// in forward: [rows, h] partial sums -> under SP the reduce-scatter to
// [local_rows, h]; otherwise the in-place all-reduce (moves `full` out).
Tensor ReduceSeq(LayerContext* ctx, Tensor* full);

// Under SP: all-reduces ctx->sp_grads over TP, adds them into the store's
// grads and zeroes them. No-op without SP.
void FlushSpGrads(LayerContext* ctx);
// The same for Params [param_begin, param_end) only (one ZeRO-2/3 unit, whose
// gradients are reduce-scattered right after its backward).
void FlushSpGrads(LayerContext* ctx, int param_begin, int param_end);

}  // namespace dt::rt
