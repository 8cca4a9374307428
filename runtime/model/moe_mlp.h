// MoeMlp: the mixture-of-experts MLP block of one Llama-family layer on one
// rank (Mixtral's sparse MLP), forward and backward, with expert
// parallelism over LayerContext::ep and expert tensor parallelism over
// LayerContext::tp, in the layout planner/cost/moe_ops.h prices:
//
//   in [rows, h] (the norm output gathered over TP: identical on every TP
//   rank) -> router logits in * Wr^T [rows, E] -> top-k experts per token,
//   weights = softmax over the k chosen logits (runtime/ops/moe_router.h)
//   -> the rows*k token copies sorted by expert -> all-to-all over EP (each
//   EP rank holds experts [ep_rank*E/ep, (ep_rank+1)*E/ep)) -> per local
//   expert j: silu(x Wg_j^T) * (x Wu_j^T) Wd_j^T, with Wg, Wu column-split
//   and Wd row-split over TP (so the expert output is a partial sum over TP)
//   -> all-to-all back -> out[t] = sum_j w_tj * y_tj, a partial sum over TP
//   that the caller reduces (ReduceSeq), exactly like the dense MLP's
//   row-parallel output.
//
// Capacity: dropless. Every routed token copy is computed, whatever the
// load; the planner's 1.25 (kExpertLoadImbalance) is a pricing allowance for
// the busiest rank, not a capacity that drops tokens (Megatron-LM's default
// dropless MoE). Routing is a deterministic function of the logits (ties go
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
// Every member of ctx->ep must call Forward / Backward in the same order
// (the all-to-alls are collectives). The router's input grad is added on TP
// rank 0 only (it is the same on every TP rank; the caller's reduction over
// TP sums the partials). CPU backend only (host loops). Not thread-safe.
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
  std::vector<int64_t> slot_row;      // [rows * k] row of each token copy in the sorted send buffer
  std::vector<size_t> send_rows;      // per EP rank: rows sent to it
  std::vector<size_t> recv_rows;      // per EP rank: rows received from it
  std::vector<int64_t> block_rows;    // [ep * local experts]: rows from EP rank s for local expert j
  Tensor x, gate, up, act;            // expert-major inputs [R, h] and activations [R, f_local]
  Tensor back;                        // [rows * k, h] expert outputs returned, in send order
};

class MoeMlp {
 public:
  // Declares the router and this EP rank's experts under `prefix` ("layers.L.").
  MoeMlp(LayerContext* ctx, const std::string& prefix);
  void Init(uint64_t seed, float out_std);
  // in: [rows, h], the same on every TP rank. Returns the TP-partial output [rows, h].
  Tensor Forward(const Tensor& in, MoeStash* s);
  // in: the forward's input again; dout: [rows, h] grad of the (reduced)
  // output, the same on every TP rank. Returns the TP-partial grad of `in`;
  // accumulates parameter grads; clears the stash.
  Tensor Backward(const Tensor& in, const Tensor& dout, MoeStash* s);

 private:
  int64_t local_experts() const { return ctx_->num_experts / ctx_->ep_size; }
  // Sends rows (grouped by destination, send[d] rows to EP rank d) and
  // receives recv[s] rows from each EP rank s: one AllToAllV of rows of h.
  void Exchange(const float* in, const std::vector<size_t>& send, float* out, const std::vector<size_t>& recv);
  // Copies between the received order (by source, then local expert) and
  // the expert-major order (by local expert, then source).
  void ToExpertMajor(const MoeStash& s, const float* recv_order, int64_t width, float* expert_major) const;
  void ToRecvOrder(const MoeStash& s, const float* expert_major, int64_t width, float* recv_order) const;

  LayerContext* ctx_;
  int router_w_;
  std::vector<int> gate_w_, up_w_, down_w_;  // by local expert
};

}  // namespace dt::rt
