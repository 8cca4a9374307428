#include "planner/cost/moe_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>

#include "base/check.h"

namespace dt {
namespace {

// Per-rank sizes of an MoE block (see the header for the layout).
struct MoeDims {
  double T;        // tokens of the TP region (b * s / cp)
  double T_r;      // tokens a rank routes: T / tp (sequence parallel) or T
  double rows;     // expert GEMM rows, balanced: T_r * top_k * etp (T * top_k when etp == tp)
  int64_t local_experts;  // E / ep: the batch of the grouped GEMMs
  int64_t h, E, k, f_local, fs_local;
  int tp, ep, etp;  // etp: expert tensor parallelism (PlanSpec::expert_tp)
  bool gated, shared_gate;
  double e;        // bytes per element
  double cf;       // load-imbalance allowance
  bool fp8;        // expert and shared-expert GEMMs in FP8 (Transformer Engine grouped linear)
  int nmb;         // microbatches per step: FP8 weight casts happen once per step
  double fp8_weight_cast_bytes;  // per weight: Fp8WeightCastBytes (layer_ops.h)
  const PlanSpec* plan;
  bool dedup;      // deduplicating dispatcher (PlanSpec::moe_dispatcher)
};

MoeDims MakeMoeDims(const ModelSpec& m, const PlanSpec& p, int bytes_per_element) {
  DT_CHECK(m.moe()) << "MoE ops of a dense model";
  DT_CHECK(p.ep >= 1 && m.num_experts % p.ep == 0) << "plan not validated";
  MoeDims d;
  d.T = static_cast<double>(p.micro_batch) * (p.seq_length / p.cp);
  d.T_r = p.tp > 1 ? d.T / p.tp : d.T;  // MoE with tp > 1 runs sequence parallel (Validate)
  d.k = m.moe_top_k;
  d.etp = p.expert_tp();
  d.rows = d.T_r * d.k * d.etp;
  d.local_experts = m.num_experts / p.ep;
  d.h = m.hidden;
  d.E = m.num_experts;
  d.f_local = (m.moe_ffn_hidden + d.etp - 1) / d.etp;
  d.fs_local = (m.shared_ffn_hidden + p.tp - 1) / p.tp;
  d.tp = p.tp;
  d.ep = p.ep;
  d.gated = m.gated_mlp();
  d.shared_gate = m.shared_expert_gate;
  d.e = bytes_per_element;
  d.cf = ExpertLoadImbalance(p);
  d.fp8 = p.precision == Precision::kFp8;
  d.nmb = std::max(1, p.num_microbatches);
  d.fp8_weight_cast_bytes = Fp8WeightCastBytes(p, bytes_per_element);
  d.plan = &p;
  d.dedup = p.moe_dispatcher == MoeDispatcher::kDeduplicated;
  return d;
}

// A GEMM of m x n x k (m may be fractional: rows per expert), `batch` times.
Op Gemm(const char* name, double m, double n, double k, double imbalance = 1.0, int64_t batch = 1) {
  Op op;
  op.kind = OpKind::kGemm;
  op.name = name;
  op.m = static_cast<int64_t>(std::ceil(m));
  op.n = static_cast<int64_t>(std::ceil(n));
  op.k = static_cast<int64_t>(std::ceil(k));
  op.batch = batch;
  op.flops = 2.0 * m * n * k * batch;
  op.imbalance = imbalance;
  return op;
}

// FP8 plans: the expert and shared-expert GEMMs run in FP8 (Transformer
// Engine's grouped linear, as Megatron-LM uses it for experts); the router
// GEMM stays bf16. Each GEMM operand is cast first, as for dense layers
// (layer_ops.cc): a fused cast-transpose reading e bytes and writing the
// FP8 copy and its transpose, 2 bytes, per element.
Op Fp8(Op op, const MoeDims& d) {
  op.fp8 = d.fp8;
  return op;
}
void Fp8Cast(const MoeDims& d, const char* name, double elements, double imbalance, std::vector<Op>* ops) {
  AppendFp8Quantize(*d.plan, d.fp8, d.e, name, elements, imbalance, 1, ops);
}

// The grouped GEMM of the E/ep local experts: per expert rows/(E/ep) rows
// (balanced), so its minimum bytes read every local expert's weights once.
Op ExpertGemm(const char* name, const MoeDims& d, int64_t n, int64_t k) {
  return Fp8(Gemm(name, d.rows / d.local_experts, n, k, d.cf, d.local_experts), d);
}
// Weight gradient of the grouped GEMM: [k x n] = X^T dY per expert.
Op ExpertWgrad(const char* name, const MoeDims& d, int64_t k, int64_t n) {
  return Fp8(Gemm(name, k, n, d.rows / d.local_experts, d.cf, d.local_experts), d);
}

// A collective only when its group has more than one rank.
void Coll(const char* name, CollKind c, GroupKind g, int size, double bytes, std::vector<Op>* ops) {
  if (size > 1) ops->push_back(CollectiveOp(name, c, g, size, bytes));
}

// Bytes of the routed token copies one rank sends into the EP all-to-all
// (its T_r * k rows of h), and of the T_r * k * etp rows gathered over the
// expert-TP group, both at the busiest rank's share.
double DispatchBytes(const MoeDims& d) { return d.cf * d.e * d.T_r * d.k * d.h; }
double GatheredBytes(const MoeDims& d) { return d.cf * d.e * d.rows * d.h; }

// The EP all-to-all of the routed copies (dispatch or combine, either
// direction); a deduplicating dispatcher sends a token once per destination
// rank / node (Op::dedup_top_k, comm_cost.h).
void EpAllToAll(const char* name, const MoeDims& d, std::vector<Op>* ops) {
  if (d.ep <= 1) return;
  Op op = CollectiveOp(name, CollKind::kAllToAll, GroupKind::kEp, d.ep, DispatchBytes(d));
  if (d.dedup) {
    op.dedup_top_k = static_cast<int>(d.k);
    op.dedup_experts = d.E;
  }
  ops->push_back(op);
}

// The shared experts' forward in three parts: the gathered input through
// fc1 and the activation, fc2 and its reduce-scatter, the gate and the add.
// `gathered`: the input gather was emitted apart (the overlapped order).
void SharedForwardFc1(const MoeDims& d, std::vector<Op>* f, bool gathered = false) {
  if (!gathered) Coll("shared_sp_allgather", CollKind::kAllGather, GroupKind::kTp, d.tp, d.e * d.T * d.h, f);
  Fp8Cast(d, "fp8_cast_shared_fc1_input", d.T * d.h, 1.0, f);
  if (d.gated) {
    f->push_back(Fp8(Gemm("shared_fc1_gate", d.T, d.fs_local, d.h), d));
    f->push_back(Fp8(Gemm("shared_fc1_up", d.T, d.fs_local, d.h), d));
    f->push_back(MemoryOp("shared_swiglu", 3 * d.e * d.T * d.fs_local));
  } else {
    f->push_back(Fp8(Gemm("shared_fc1", d.T, d.fs_local, d.h), d));
    f->push_back(MemoryOp("shared_gelu", 2 * d.e * d.T * d.fs_local));
  }
}
void SharedForwardFc2(const MoeDims& d, std::vector<Op>* f) {
  Fp8Cast(d, "fp8_cast_shared_fc2_input", d.T * d.fs_local, 1.0, f);
  f->push_back(Fp8(Gemm("shared_fc2", d.T, d.h, d.fs_local), d));
  Coll("shared_sp_reducescatter", CollKind::kReduceScatter, GroupKind::kTp, d.tp, d.e * d.T * d.h, f);
}
Op SharedGateGemm(const MoeDims& d) { return Gemm("shared_gate", d.T_r, 1, d.h); }
Op SharedAdd(const MoeDims& d) {
  return d.shared_gate ? MemoryOp("shared_gate_scale_add", 3 * d.e * d.T_r * d.h)
                       : MemoryOp("shared_add", 3 * d.e * d.T_r * d.h);
}

void SharedForward(const MoeDims& d, std::vector<Op>* f) {
  if (d.fs_local <= 0) return;
  SharedForwardFc1(d, f);
  SharedForwardFc2(d, f);
  if (d.shared_gate) f->push_back(SharedGateGemm(d));
  f->push_back(SharedAdd(d));
}

// The shared experts' backward in two parts: the gate and fc2 through the
// activation's backward, then fc1 and its input gradient's reduce-scatter.
void SharedBackwardFc2(const MoeDims& d, std::vector<Op>* g) {
  if (d.shared_gate) {
    g->push_back(MemoryOp("shared_gate_scale_bwd", 4 * d.e * d.T_r * d.h));
    g->push_back(Gemm("shared_gate_dgrad", d.T_r, d.h, 1));
    g->push_back(Gemm("shared_gate_wgrad", d.h, 1, d.T_r));
  }
  Coll("shared_sp_allgather_grad", CollKind::kAllGather, GroupKind::kTp, d.tp, d.e * d.T * d.h, g);
  Fp8Cast(d, "fp8_cast_shared_fc2_grad", d.T * d.h, 1.0, g);
  g->push_back(Fp8(Gemm("shared_fc2_dgrad", d.T, d.fs_local, d.h), d));
  g->push_back(Fp8(Gemm("shared_fc2_wgrad", d.fs_local, d.h, d.T), d));
  g->push_back(MemoryOp(d.gated ? "shared_swiglu_bwd" : "shared_gelu_bwd", (d.gated ? 5 : 3) * d.e * d.T * d.fs_local));
}
void SharedBackwardFc1(const MoeDims& d, std::vector<Op>* g) {
  Coll("shared_sp_allgather_input", CollKind::kAllGather, GroupKind::kTp, d.tp, d.e * d.T * d.h, g);
  Fp8Cast(d, "fp8_cast_shared_fc1_grad", (d.gated ? 2.0 : 1.0) * d.T * d.fs_local, 1.0, g);
  for (int i = 0; i < (d.gated ? 2 : 1); ++i) {
    g->push_back(Fp8(Gemm("shared_fc1_dgrad", d.T, d.h, d.fs_local), d));
    g->push_back(Fp8(Gemm("shared_fc1_wgrad", d.h, d.fs_local, d.T), d));
  }
  Coll("shared_sp_reducescatter_grad", CollKind::kReduceScatter, GroupKind::kTp, d.tp, d.e * d.T * d.h, g);
}

void SharedBackward(const MoeDims& d, std::vector<Op>* g) {
  if (d.fs_local <= 0) return;
  SharedBackwardFc2(d, g);
  SharedBackwardFc1(d, g);
}

// --moe-shared-expert-overlap with shared experts: the block's ops are
// ordered and tagged in overlap windows (Op::overlap_window).
bool SharedOverlap(const MoeDims& d) { return d.plan->moe_shared_expert_overlap && d.fs_local > 0; }
// Tags ops[from..] as one window's ops on the compute stream or the side stream.
void Tag(std::vector<Op>* ops, size_t from, int window, bool side) {
  for (size_t i = from; i < ops->size(); ++i) {
    (*ops)[i].overlap_window = window;
    (*ops)[i].side_stream = side;
  }
}

}  // namespace

// Marks the routed path's ops with their part of the eager MoE block's host
// time (Op::moe_host; the shared experts' ops are a dense MLP's and keep the
// per-op host time alone, as does the once-per-step FP8 weight cast), each
// op an equal share of its part, and the dropless dispatcher's host
// synchronisation after the first permutation (Megatron-LM's
// MoEAlltoAllTokenDispatcher: the token counts go to the host before the EP
// all-to-all, or before the second permutation without EP). Padded to
// capacity every count is known in advance, and there is none.
static void MarkMoeHost(const PlanSpec& p, bool forward, std::vector<Op>* ops) {
  using Part = Op::MoeHostPart;
  int count[4] = {0, 0, 0, 0};
  bool routed = false;  // forward: past the router's part
  for (Op& op : *ops) {
    const std::string_view name = op.name;
    if (name.substr(0, 7) == "shared_" || name == "fp8_cast_weights") continue;
    if (!forward) op.moe_host = Part::kBackward;
    else if (routed) op.moe_host = Part::kDispatch;
    else op.moe_host = Part::kRouter;
    if (forward && name == "moe_permute") {
      routed = true;
      op.host_sync = !(p.moe_capacity_factor > 0 && p.moe_pad_to_capacity);
    }
    ++count[static_cast<int>(op.moe_host)];
  }
  for (Op& op : *ops)
    if (op.moe_host != Part::kNone) op.moe_host_share = 1.0 / count[static_cast<int>(op.moe_host)];
}

double ExpertRowsPerRank(const ModelSpec& m, const PlanSpec& p) {
  const double T = static_cast<double>(p.micro_batch) * (p.seq_length / p.cp);
  const double T_r = p.tp > 1 ? T / p.tp : T;
  return T_r * m.moe_top_k * p.expert_tp();
}

std::vector<Op> MoeMlpForward(const ModelSpec& m, const PlanSpec& p, int bytes_per_element) {
  const MoeDims d = MakeMoeDims(m, p, bytes_per_element);
  // --moe-shared-expert-overlap (SharedOverlap): the shared experts run on a
  // stream of their own, each part launched right after the routed path's
  // op it is meant to hide behind (Megatron-LM's MoEAlltoAllTokenDispatcher
  // and SharedExpertMLP): their gate and input gather beside the
  // permutation, fc1 and the activation beside the dispatch all-to-all, fc2
  // and the reduce-scatter beside the combine all-to-all; their output is
  // added after the unpermutation. Each pair is an overlap window. The
  // window is no wider: under CUDA_DEVICE_MAX_CONNECTIONS=1 (Megatron-LM's
  // setting with tp > 1 on Hopper) kernels start in launch order, so the
  // routed path's next op waits behind the shared part.
  const bool overlap = SharedOverlap(d);
  std::vector<Op> f;
  // Router: logits h -> E, fp32 softmax and top-k over E per token.
  f.push_back(Gemm("router", d.T_r, d.E, d.h));
  f.push_back(MemoryOp("router_softmax_topk", 3 * 4.0 * d.T_r * d.E));
  // Dispatch: permute the T_r * k copies, all-to-all over EP, gather over TP.
  size_t at = f.size();
  f.push_back(MemoryOp("moe_permute", 2 * d.e * d.T_r * d.k * d.h));
  if (overlap) {
    Tag(&f, at, 1, false);
    at = f.size();
    if (d.shared_gate) f.push_back(SharedGateGemm(d));
    Coll("shared_sp_allgather", CollKind::kAllGather, GroupKind::kTp, d.tp, d.e * d.T * d.h, &f);
    Tag(&f, at, 1, true);
    at = f.size();
  }
  EpAllToAll("moe_dispatch_alltoall", d, &f);
  if (overlap) {
    Tag(&f, at, 2, false);
    at = f.size();
    SharedForwardFc1(d, &f, /*gathered=*/true);
    Tag(&f, at, 2, true);
  }
  Coll("moe_dispatch_allgather", CollKind::kAllGather, GroupKind::kEtp, d.etp, GatheredBytes(d), &f);
  // Experts: grouped GEMMs over all routed rows (E/ep experts, f/tp columns).
  if (d.fp8) {
    // The FP8 copies of the local experts' (and shared experts') weights and
    // their transposes, cast once per step (cached across microbatches).
    const double mats = d.gated ? 3.0 : 2.0;
    const double weights = mats * d.h * (static_cast<double>(d.local_experts) * d.f_local + d.fs_local);
    f.push_back(Fp8ScalingOp("fp8_cast_weights", d.fp8_weight_cast_bytes * weights / d.nmb));
  }
  Fp8Cast(d, "fp8_cast_expert_fc1_input", d.rows * d.h, d.cf, &f);
  if (d.gated) {
    f.push_back(ExpertGemm("expert_fc1_gate", d, d.f_local, d.h));
    f.push_back(ExpertGemm("expert_fc1_up", d, d.f_local, d.h));
    f.push_back(MemoryOp("expert_swiglu", 3 * d.e * d.rows * d.f_local, d.cf));
  } else {
    f.push_back(ExpertGemm("expert_fc1", d, d.f_local, d.h));
    f.push_back(MemoryOp("expert_gelu", 2 * d.e * d.rows * d.f_local, d.cf));
  }
  Fp8Cast(d, "fp8_cast_expert_fc2_input", d.rows * d.f_local, d.cf, &f);
  f.push_back(ExpertGemm("expert_fc2", d, d.h, d.f_local));
  // Combine: reduce-scatter over TP, all-to-all back, weighted sum of k.
  Coll("moe_combine_reducescatter", CollKind::kReduceScatter, GroupKind::kEtp, d.etp, GatheredBytes(d), &f);
  at = f.size();
  EpAllToAll("moe_combine_alltoall", d, &f);
  if (overlap) {
    Tag(&f, at, 1, false);
    at = f.size();
    SharedForwardFc2(d, &f);
    Tag(&f, at, 1, true);
  }
  f.push_back(MemoryOp("moe_unpermute_weighted_sum", (d.k + 1) * d.e * d.T_r * d.h));
  if (overlap) f.push_back(SharedAdd(d));
  else SharedForward(d, &f);
  MarkMoeHost(p, /*forward=*/true, &f);
  return f;
}

std::vector<Op> MoeMlpRecompute(const ModelSpec& m, const PlanSpec& p, int bytes_per_element) {
  std::vector<Op> r;
  if (!m.moe()) return r;
  if (p.Recomputes(kRecomputeMoe) || p.Recomputes(kRecomputeMoeAct)) {
    for (const Op& op : MoeMlpForward(m, p, bytes_per_element)) {
      if (std::strcmp(op.name, "fp8_cast_weights") == 0) continue;
      const bool act = std::strcmp(op.name, "expert_swiglu") == 0 || std::strcmp(op.name, "expert_gelu") == 0;
      if (p.Recomputes(kRecomputeMoe)) r.push_back(op);
      if (act && p.Recomputes(kRecomputeMoeAct)) r.push_back(op);
    }
  }
  if (p.Recomputes(kRecomputeSharedExperts)) {
    // The shared experts' module (gate and scaling included); adding its
    // output to the routed experts' is the MoE block's, not re-run.
    std::vector<Op> shared;
    SharedForward(MakeMoeDims(m, p, bytes_per_element), &shared);
    for (const Op& op : shared)
      if (std::strcmp(op.name, "shared_add") != 0) r.push_back(op);
  }
  return r;
}

std::vector<Op> MoeMlpBackward(const ModelSpec& m, const PlanSpec& p, int bytes_per_element) {
  const MoeDims d = MakeMoeDims(m, p, bytes_per_element);
  // --moe-shared-expert-overlap: the shared experts' gate and fc2 backward
  // beside the combine's backward all-to-all, their fc1 backward beside the
  // dispatch's (Megatron-LM orders these launches so), in two windows.
  const bool overlap = SharedOverlap(d);
  std::vector<Op> g;
  if (!overlap) SharedBackward(d, &g);
  // Combine backward: gradients of the k outputs and of the probabilities.
  g.push_back(MemoryOp("moe_unpermute_bwd", (2 * d.k + 1) * d.e * d.T_r * d.h));
  size_t at = g.size();
  EpAllToAll("moe_combine_alltoall_bwd", d, &g);
  if (overlap) {
    Tag(&g, at, 1, false);
    at = g.size();
    SharedBackwardFc2(d, &g);
    Tag(&g, at, 1, true);
  }
  Coll("moe_combine_allgather_bwd", CollKind::kAllGather, GroupKind::kEtp, d.etp, GatheredBytes(d), &g);
  // Experts backward: dgrad and wgrad of each GEMM. With
  // --overlap-dispatch-backward-with-experts-wgrad the weight gradients wait
  // for the data gradients and run beside the expert-TP reduce-scatter and
  // the dispatch's all-to-all (window 2, with the shared experts' fc1
  // backward when that overlap is on too).
  const bool wgrad_beside = p.overlap_dispatch_backward_wgrad;
  std::vector<Op> wgrads;
  std::vector<Op>* wg = wgrad_beside ? &wgrads : &g;
  Fp8Cast(d, "fp8_cast_expert_fc2_grad", d.rows * d.h, d.cf, &g);
  g.push_back(ExpertGemm("expert_fc2_dgrad", d, d.f_local, d.h));
  wg->push_back(ExpertWgrad("expert_fc2_wgrad", d, d.f_local, d.h));
  g.push_back(MemoryOp(d.gated ? "expert_swiglu_bwd" : "expert_gelu_bwd",
                  (d.gated ? 5 : 3) * d.e * d.rows * d.f_local, d.cf));
  Fp8Cast(d, "fp8_cast_expert_fc1_grad", (d.gated ? 2.0 : 1.0) * d.rows * d.f_local, d.cf, &g);
  for (int i = 0; i < (d.gated ? 2 : 1); ++i) {
    g.push_back(ExpertGemm("expert_fc1_dgrad", d, d.h, d.f_local));
    wg->push_back(ExpertWgrad("expert_fc1_wgrad", d, d.h, d.f_local));
  }
  at = g.size();
  Coll("moe_dispatch_reducescatter_bwd", CollKind::kReduceScatter, GroupKind::kEtp, d.etp, GatheredBytes(d), &g);
  if (!wgrad_beside) at = g.size();
  EpAllToAll("moe_dispatch_alltoall_bwd", d, &g);
  if (overlap || wgrad_beside) {
    Tag(&g, at, 2, false);
    at = g.size();
    g.insert(g.end(), wgrads.begin(), wgrads.end());
    if (overlap) SharedBackwardFc1(d, &g);
    Tag(&g, at, 2, true);
  }
  g.push_back(MemoryOp("moe_permute_bwd", 2 * d.e * d.T_r * d.k * d.h));
  // Router backward.
  g.push_back(MemoryOp("router_softmax_bwd", 3 * 4.0 * d.T_r * d.E));
  g.push_back(Gemm("router_dgrad", d.T_r, d.h, d.E));
  g.push_back(Gemm("router_wgrad", d.h, d.E, d.T_r));
  MarkMoeHost(p, /*forward=*/false, &g);
  return g;
}

}  // namespace dt
