// MoeOps: the kernels and collectives of a mixture-of-experts MLP block on
// one rank for one microbatch, in the form of planner/cost/layer_ops.h (the
// transformer layer splices them in place of the dense MLP, between its
// second norm and residual add).
//
// Layout priced (Megatron-LM's MoE layer with the all-to-all token
// dispatcher, expert tensor parallelism etp (= tp by default, or a divisor
// of it: MoE parallel folding), sequence parallelism when tp > 1): each rank
// routes its T_r = b*s/(cp*tp) tokens (router GEMM h x E, softmax + top-k),
// permutes its T_r*k token copies into expert order, all-to-alls them over
// the EP group, all-gathers them over the etp ranks of its expert-TP group
// (part of its TP group), runs its E/ep experts' MLPs (one grouped GEMM per
// matrix: batch E/ep of T_r*k*etp/(E/ep) rows each, every expert column- and
// row-split over etp; the
// time model prices it as E/ep GEMM calls, each at the efficiency of one
// expert's size, as Transformer Engine's grouped linear and dtrun run it,
// and reads the bytes of all local experts' weights) on T*k rows (balanced
// routing), reduce-scatters
// over TP, all-to-alls back, and sums each token's k outputs weighted by
// its router probabilities; with etp == tp the rows are T*k, as before
// folding existed. Shared experts run as a dense MLP of width
// shared_ffn_hidden on every token (all-gather / reduce-scatter over TP),
// scaled by a sigmoid gate (h -> 1) when the model has one.
//
// Load imbalance: routing is never perfectly even, and the busiest rank
// sets the pace. Every op whose size follows the tokens a rank's experts
// receive (the all-to-alls and TP collectives of routed tokens, the expert
// GEMMs and their elementwise ops) is priced at kExpertLoadImbalance x the
// balanced share (Op::imbalance for kernels, bytes for collectives). FLOP
// counts stay the balanced (= active-parameter) ones, so MFU is from active
// FLOPs. The allowance also sizes the expert activations (memory).
//
// Pure functions of validated (model, plan) with m.moe(); no failure modes.
// Formulas: docs/simulator.md and docs/flops.md, "Mixture of experts".
#pragma once

#include <vector>

#include "planner/cost/layer_ops.h"

namespace dt {

// The busiest EP rank's routed tokens over the balanced share: 1.25, the
// capacity factor Fedus et al. ("Switch Transformers", JMLR 2022, Sec. 2.2
// and Table 1) train with; Megatron-LM's --moe-expert-capacity-factor, when
// set, drops tokens beyond such a bound instead (its default is dropless).
constexpr double kExpertLoadImbalance = 1.25;

// The allowance a plan is priced at: kExpertLoadImbalance with expert
// parallelism; 1 when the plan forces balanced routing
// (PlanSpec::force_balanced_routing) or has ep 1 (every rank computes all
// of its own routed copies, however they spread over the experts: the same
// rows in total, so no rank is busier than another). A capacity factor
// (PlanSpec::moe_capacity_factor) bounds it: no expert takes more than
// capacity x its balanced share, the rest is dropped; padded to capacity
// (moe_pad_to_capacity) every expert takes exactly that many rows, real or
// padding, so the allowance is the capacity factor itself.
inline double ExpertLoadImbalance(const PlanSpec& p) {
  const double cap = p.moe_capacity_factor;
  if (cap > 0 && p.moe_pad_to_capacity) return cap;
  const double routed = p.force_balanced_routing || p.ep == 1 ? 1.0 : kExpertLoadImbalance;
  return cap > 0 && cap < routed ? cap : routed;
}

// MLP-block ops of an MoE layer (forward / backward), to splice into a
// layer's op lists; recompute follows the layer's (full: the forward again).
std::vector<Op> MoeMlpForward(const ModelSpec& m, const PlanSpec& p, int bytes_per_element);
std::vector<Op> MoeMlpBackward(const ModelSpec& m, const PlanSpec& p, int bytes_per_element);

// The MoE block's part of selective recompute (PlanSpec::recompute_modules;
// empty unless the plan recomputes selectively): "moe" the whole block's
// forward again, dispatch and combine collectives included (the FP8 weight
// copies stay cached); "moe_act" the experts' activation pass; and
// "shared_experts" the shared experts' forward, collectives included. Inside
// a recomputed "moe" block the other two checkpoint again, so they re-run
// once more.
std::vector<Op> MoeMlpRecompute(const ModelSpec& m, const PlanSpec& p, int bytes_per_element);

// Rows of expert GEMMs on one rank per microbatch, balanced: T_r * top_k *
// etp (T_r = micro_batch * seq / (cp * tp) tokens routed per rank, gathered
// over the etp ranks of the expert-TP group; T * top_k when etp == tp).
double ExpertRowsPerRank(const ModelSpec& m, const PlanSpec& p);

}  // namespace dt
