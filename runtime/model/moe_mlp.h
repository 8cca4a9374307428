// MoeMlp: the mixture-of-experts MLP block of one Llama-family layer on one
// rank (Mixtral's sparse MLP), forward and backward, with expert
// parallelism over LayerContext::ep and expert tensor parallelism over
// LayerContext::tp, in Megatron-LM's layout, the one planner/cost/moe_ops.h
// prices (expert TP = tp, sequence parallel when tp > 1):
//
//   in [local_rows, h] (this rank's sequence shard of the norm output; no
//   TP gather before the block) -> router logits in * Wr^T -> top-k experts
//   per token, weights = softmax over the k chosen logits
//   (runtime/ops/moe_router.h) -> the local_rows*k token copies sorted by
//   expert -> all-to-all over EP (each EP rank holds experts
//   [ep_rank*E/ep, (ep_rank+1)*E/ep); the TP ranks of one DP replica share
//   the EP position, hence the local experts) -> all-gather over TP of the
//   rows each TP rank received (padded to the largest, counts exchanged
//   first) -> per local expert j, on every gathered row: silu(x Wg_j^T) *
//   (x Wu_j^T) Wd_j^T, Wg, Wu column-split and Wd row-split over TP (a
//   partial sum over TP) -> reduce-scatter over TP (each rank gets its own
//   received rows, complete) -> all-to-all back -> out[t] = sum_j w_tj *
//   y_tj for this rank's tokens, complete (the caller adds it to the
//   residual shard directly: no TP reduction after the block either).
//
// Capacity: dropless by default. Every routed token copy is computed,
// whatever the load; the planner's 1.25 (kExpertLoadImbalance) is a pricing
// allowance for the busiest rank, not a capacity that drops tokens
// (Megatron-LM's default dropless MoE). With LayerContext::
// moe_capacity_factor F > 0 (Megatron-LM's --moe-expert-capacity-factor,
// its "probs" drop policy) each expert keeps at most C = ceil(rows*k/E * F)
// of this rank's copies, those with the largest router weights (ties: the
// earlier copy); a dropped copy adds nothing to its token's output (the
// other weights are not renormalised) and gets no gradient. With
// moe_pad_to_capacity every expert receives exactly C rows from each rank,
// zero rows after the kept copies: the same result, C*E rows of work and
// traffic. Each rank drops among its own copies, so only tp = cp = 1 plans
// drop the same copies as one rank (ModelChunk checks it). Routing is a deterministic function of the logits (ties go
// to the lower expert index), so every plan routes the same tokens to the
// same experts up to floating-point differences in the logits.
// No load-balancing auxiliary loss and no router jitter (Mixtral's HF
// training default output_router_logits=false adds no aux loss either).
//
// Parameters (global names, the same on every plan): prefix +
// "mlp.router.weight" [E, h] (replicated over TP, reduced over DP like the
// attention weights) and, for each expert J held here, prefix +
// "mlp.experts.J.{gate,up,down}.weight" ([f, h], [f, h], [h, f]; Param::
// expert set: their grads are reduced over the expert-data-parallel group).
// Init: router and gate/up N(0, 0.02), down N(0, out_std), a function of
// (seed, name, index) as everywhere.
//
// Every member of ctx->ep and ctx->tp must call Forward / Backward in the
// same order (the all-to-alls, gathers and reduce-scatters are
// collectives). The router weight is replicated over TP and declared
// sequence-parallel partial: each TP rank's gradient covers its own tokens
// and FlushSpGrads sums them. Host loops: host-accessible backends only
// (HostAccess, runtime/ops/host_ops.h). Not thread-safe. tp > 1 requires
// ctx->sp (as Megatron-LM and the planner do).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/model/layer_context.h"
#include "runtime/tensor/tensor.h"

namespace dt::rt {

// What Backward needs from Forward of one microbatch.
struct MoeStash {
  std::vector<int32_t> experts;       // [rows * k] chosen experts
  Tensor weights;                     // [rows * k] their weights
  std::vector<int64_t> slot_row;      // [rows * k] row of each token copy in the sorted send buffer (-1: dropped)
  int64_t send_total = 0;             // rows sent: the kept copies, plus padding up to capacity
  std::vector<size_t> send_rows;      // per EP rank: rows sent to it
  std::vector<size_t> recv_rows;      // per EP rank: rows this rank received from it
  // [tp][ep][local experts]: rows TP rank t received from EP rank s for local expert j.
  std::vector<int64_t> block_rows;
  int64_t own_rows = 0;               // rows this rank received over EP
  int64_t tp_pad = 0;                 // rows per TP rank in the padded TP gather (>= 1)
  std::vector<int64_t> block_at;      // [tp][ep][local experts]: first row of each block in the TP gather
  Tensor x, gate, up, act;            // expert-major inputs [R, h] and activations [R, f_local], R = gathered rows
  Tensor back;                        // [rows * k, h] expert outputs returned, in send order
};

class MoeMlp {
 public:
  // Declares the router and this EP rank's experts under `prefix` ("layers.L.").
  MoeMlp(LayerContext* ctx, const std::string& prefix);
  void Init(uint64_t seed, float out_std);
  // in: [local_rows, h], this rank's sequence shard. Returns the block's
  // output for those rows [local_rows, h], complete.
  Tensor Forward(const Tensor& in, MoeStash* s);
  // in: the forward's input again; dout: [local_rows, h] grad of the output.
  // Returns the grad of `in`, complete; accumulates parameter grads; clears
  // the stash.
  Tensor Backward(const Tensor& in, const Tensor& dout, MoeStash* s);

 private:
  int64_t local_experts() const { return ctx_->num_experts / ctx_->ep_size; }
  // Sends rows (grouped by destination, send[d] rows to EP rank d) and
  // receives recv[s] rows from each EP rank s: one AllToAllV of rows of h.
  void Exchange(const float* in, const std::vector<size_t>& send, float* out, const std::vector<size_t>& recv);
  // Copies rows of `width` between the TP-gathered order (s.block_at) and
  // the expert-major order (by local expert, then TP rank, then EP source),
  // in the direction `to_expert_major` says.
  void Reorder(const MoeStash& s, const float* from, int64_t width, float* to, bool to_expert_major) const;
  // The padded all-gather over TP of each rank's received rows [own_rows, h]
  // -> [tp * tp_pad, h], and its conjugate reduce-scatter (-> [tp_pad, h]).
  // With tp 1 both hand their buffer through (no copy).
  Tensor GatherOverTp(const MoeStash& s, Tensor own) const;
  Tensor ReduceScatterOverTp(const MoeStash& s, Tensor* gathered) const;

  LayerContext* ctx_;
  int router_w_;
  std::vector<int> gate_w_, up_w_, down_w_;  // by local expert
};

}  // namespace dt::rt
