#include "planner/cost/layer_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "planner/cost/moe_ops.h"

// Per-rank op lists of one transformer layer, the embedding and the LM head.
// Formulas and sources: docs/flops.md. Conventions:
//  * T = micro_batch * seq/cp tokens enter the TP region of a rank; T_r is
//    the token count of the replicated regions (norms, dropout, residual):
//    T without sequence parallelism, T/tp with it (Korthikanti et al. 2022).
//  * Memory-bound ops carry bytes and no flops; FLOP totals (and so MFU) are
//    GEMM and attention FLOPs only, as in Narayanan et al. SC21 Eq. 3.
//  * Backward GEMMs: dgrad dX[m,k] = dY[m,n] W^T and wgrad dW[k,n] = X^T dY,
//    each with the forward's 2*m*n*k flops.

namespace dt {

const char* ToString(CollKind k) {
  switch (k) {
    case CollKind::kAllReduce: return "all_reduce";
    case CollKind::kReduceScatter: return "reduce_scatter";
    case CollKind::kAllGather: return "all_gather";
    case CollKind::kSendRecv: return "send_recv";
    case CollKind::kAllToAll: return "all_to_all";
  }
  return "?";
}

const char* ToString(GroupKind g) {
  switch (g) {
    case GroupKind::kTp: return "tp";
    case GroupKind::kCp: return "cp";
    case GroupKind::kDp: return "dp";
    case GroupKind::kPp: return "pp";
    case GroupKind::kEp: return "ep";
    case GroupKind::kEtp: return "etp";
  }
  return "?";
}

Op MemoryOp(const char* name, double bytes, double imbalance) {
  Op op;
  op.kind = OpKind::kMemoryBound;
  op.name = name;
  op.bytes = bytes;
  op.imbalance = imbalance;
  return op;
}

Op GradZeroingOp(double gradient_bytes) { return MemoryOp("zero_grads", gradient_bytes); }

double ActivationMessageBytes(const ModelSpec& m, const PlanSpec& p, int bytes_per_element) {
  return static_cast<double>(p.micro_batch) * (p.seq_length / p.cp) * m.hidden * bytes_per_element / p.tp;
}

Op CollectiveOp(const char* name, CollKind c, GroupKind g, int size, double bytes) {
  Op op;
  op.kind = OpKind::kCollective;
  op.name = name;
  op.coll = c;
  op.group = g;
  op.group_size = size;
  op.bytes = bytes;
  return op;
}

double Fp8WeightCastBytes(const PlanSpec& p, int bytes_per_element) {
  if (p.fp8_param_gather) return 2.0;
  const double e = bytes_per_element;
  return (p.fp8_recipe == Fp8Recipe::kTensorwise ? 2.0 * e : e) + 2.0;
}

Op Fp8ScalingOp(const char* name, double bytes, double imbalance) {
  Op op = MemoryOp(name, bytes, imbalance);
  op.fp8_scaling = true;
  return op;
}

void AppendFp8Quantize(const PlanSpec& p, bool fp8, double e, const char* name, double elements, double imbalance,
                       int tp_gather, std::vector<Op>* ops) {
  if (!fp8) return;
  if (p.fp8_recipe == Fp8Recipe::kTensorwise) {
    ops->push_back(Fp8ScalingOp("fp8_amax", e * elements, imbalance));
    if (tp_gather > 1)
      ops->push_back(CollectiveOp("fp8_amax_allreduce", CollKind::kAllReduce, GroupKind::kTp, tp_gather, 4.0));
  }
  ops->push_back(Fp8ScalingOp(name, (e + 2.0) * elements, imbalance));
}

double SumFlops(const std::vector<Op>& ops) {
  double f = 0;
  for (const Op& op : ops) f += op.flops;
  return f;
}

namespace {

// Per-rank sizes under the plan.
struct Dims {
  int64_t b, s_local, s_full, h, d, a_local, kv_local, f_local, v_local;
  int64_t kv_heads;  // global KV heads
  int64_t T, T_r;  // tokens in the TP region / in the replicated region
  int tp, cp;
  bool sp, gpt;
  bool ln;        // LayerNorm (else RMSNorm)
  bool bias;      // biases on every linear layer
  bool qkv_bias;  // biases on Q, K, V only
  bool rope;      // rotary positions applied to Q and K
  bool gated;     // gated MLP (SwiGLU / GeGLU)
  int norms;      // norms per layer: 1 (parallel block), 2, or 4 (pre + post)
  bool flash;  // fused attention: no score-matrix traffic
  bool dropout;  // GPT dropout on attention probabilities
  double e;  // bytes per element
  const ModelSpec* model;  // MoE: the MLP block is moe_ops.h's
  const PlanSpec* plan;
  bool moe;
  bool qk_norm;
  int64_t dqk, dv;  // per-head widths of Q/K and of V (== d unless MLA)
  bool mla;         // multi-head latent attention (DeepSeek)
  int64_t q_lora, kv_lora, rope_dim, nope_dim;
  bool fp8;              // the layer's linear GEMMs in FP8 (Transformer Engine)
  int num_microbatches;  // FP8 weight casts happen once per step
  // Bytes moved per weight by that cast: read bf16, write FP8 and its
  // transpose (e + 2); with --fp8-param-gather the weight is already FP8
  // and only its transpose is written (1 + 1).
  double fp8_weight_cast_bytes;
  // Share of the causal attention core's tiles a fused kernel visits (1, or
  // less on a sliding-window layer: WindowTileFraction).
  double key_fraction = 1.0;
  // The unfused core's softmax runs as PyTorch ops (Megatron's fallback
  // when its fused kernel does not take the shape: MegatronFusedSoftmaxTakes).
  bool torch_softmax = false;
};

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

Dims MakeDims(const ModelSpec& m, const PlanSpec& p, int bytes_per_element) {
  DT_CHECK(bytes_per_element == 2 || bytes_per_element == 4) << bytes_per_element;
  DT_CHECK(p.tp >= 1 && p.cp >= 1 && m.heads % p.tp == 0) << "plan not validated";
  Dims d;
  d.b = p.micro_batch;
  d.s_full = p.seq_length;
  d.s_local = p.seq_length / p.cp;
  d.h = m.hidden;
  d.d = m.head_dim();
  d.a_local = m.heads / p.tp;
  // KV heads: split over TP when tp divides them; replicated (one per rank)
  // when tp exceeds them, as Megatron-LM does for GQA.
  d.kv_local = m.kv_heads >= p.tp ? m.kv_heads / p.tp : 1;
  d.kv_heads = m.kv_heads;
  d.f_local = CeilDiv(m.ffn_hidden, p.tp);
  d.v_local = CeilDiv(m.vocab, p.tp);  // Megatron pads the vocabulary to a tp multiple
  d.T = d.b * d.s_local;
  d.sp = p.sequence_parallel && p.tp > 1;
  d.T_r = d.sp ? d.T / p.tp : d.T;
  d.tp = p.tp;
  d.cp = p.cp;
  d.gpt = m.family == ModelFamily::kGpt;
  d.ln = m.layer_norm();
  d.bias = m.linear_bias();
  d.qkv_bias = m.qkv_bias;
  d.rope = !m.learned_positions();
  d.gated = m.gated_mlp();
  d.norms = m.norms_per_layer;
  d.flash = p.flash_attention;
  d.dropout = m.uses_dropout() && p.dropout;
  d.e = bytes_per_element;
  d.model = &m;
  d.plan = &p;
  d.moe = m.moe();
  d.qk_norm = m.qk_norm;
  d.mla = m.mla();
  d.dqk = d.d;
  d.dv = m.v_dim();
  d.q_lora = m.q_lora_rank;
  d.kv_lora = m.kv_lora_rank;
  d.rope_dim = m.qk_rope_head_dim;
  d.nope_dim = m.qk_nope_head_dim;
  if (d.mla) d.kv_local = d.a_local;  // K and V are up-projected for every (local) head
  d.fp8 = p.precision == Precision::kFp8;
  d.num_microbatches = std::max(1, p.num_microbatches);
  d.fp8_weight_cast_bytes = Fp8WeightCastBytes(p, bytes_per_element);
  return d;
}

Op Gemm(const char* name, int64_t m, int64_t n, int64_t k) {
  Op op;
  op.kind = OpKind::kGemm;
  op.name = name;
  op.m = m;
  op.n = n;
  op.k = k;
  op.flops = 2.0 * m * n * k;
  return op;
}

// A linear layer's GEMM: FP8 under an FP8 plan (Transformer Engine's
// Linear / LayerNormLinear / LayerNormMLP; docs/fp8.md).
Op Linear(const Dims& d, const char* name, int64_t m, int64_t n, int64_t k) {
  Op op = Gemm(name, m, n, k);
  op.fp8 = d.fp8;
  return op;
}

// FP8 plans: Transformer Engine's fused cast-transpose of a GEMM operand of
// `elements` bf16 values into FP8 (the amax for delayed scaling is taken in
// the same pass): read e bytes, write the FP8 copy and its FP8 transpose
// (the other GEMM of the pair needs the transposed layout on Hopper).
// `gathered`: the input sequence parallelism all-gathers over TP (the QKV
// and fc1 inputs forward, the proj and fc2 output gradients backward).
void Fp8Cast(const Dims& d, const char* name, double elements, std::vector<Op>* ops, bool gathered = false) {
  AppendFp8Quantize(*d.plan, d.fp8, d.e, name, elements, 1.0, gathered && d.sp ? d.tp : 1, ops);
}

// Score elements of the local heads' attention core: queries x keys per
// head (keys scaled by Dims::key_fraction on a windowed layer).
double ScoreElements(const Dims& d) {
  return static_cast<double>(d.b) * d.a_local * d.s_local * d.s_full * d.key_fraction;
}

// Attention core softmax(QK^T)V of the local heads: queries = local
// sequence, keys = full sequence (under CP every query block meets every
// key block over the ring). Causal masking is NOT discounted: the flops are
// those of the full square, as Narayanan et al. SC21 Eq. 3 counts them.
// Bytes: Q, K, V read, O written, plus the score-matrix traffic of the
// unfused core (scores written, softmax r/w, dropout r/w + 1-byte mask for
// GPT, probabilities read by AV) that Korthikanti et al. analyse.
// Sliding-window layers (flash attention only: an unfused core builds the
// whole masked score matrix) scale the keys by Dims::key_fraction.
Op AttentionCore(const Dims& d, const char* name, double scale) {
  Op op;
  op.kind = OpKind::kAttention;
  op.name = name;
  op.m = d.s_local;
  op.n = std::max<int64_t>(1, std::llround(d.key_fraction * d.s_full));
  op.k = d.d;
  op.batch = d.b * d.a_local;
  const double score = ScoreElements(d);
  op.flops = scale * 2.0 * score * (d.dqk + d.dv);  // QK^T and AV
  const double io = d.e * d.b * d.s_local * (d.a_local + d.kv_local) * (d.dqk + d.dv);  // Q, O and K, V
  double score_bytes = d.flash ? 0.0 : d.dropout ? score * (6 * d.e + 1) : score * (4 * d.e);
  // TorchSoftmax's ops instead of the fused softmax (reads the scores and
  // writes the probabilities, e bytes each).
  if (d.torch_softmax) score_bytes -= score * 2 * d.e;
  op.bytes = scale * (io + score_bytes);
  op.cudnn_attention = d.plan->cudnn_attention;
  if (d.flash) op.cp_ring = d.cp;
  return op;
}

// Megatron's unfused core when its fused softmax kernel does not take the
// shape (MegatronFusedSoftmaxTakes): forward_torch_softmax runs five PyTorch
// ops over the score matrix, each its own kernel and autograd node, in
// place of the one fused kernel (and five backward kernels in place of
// one). Bytes per score element with half-precision scores (e = 2) and the
// softmax in fp32 (Megatron's setting whenever query-key layer scaling is
// on, its default before Megatron-core): cast to fp32 (e + 4), scale
// (4 + 4), masked_fill_ in place (4 + 4; the broadcast [s, s] mask stays in
// cache), softmax (4 + 4), cast back (4 + e). Backward, in reverse: cast
// (e + 4), softmax backward (reads grad and output, writes: 12), masked
// fill (8), scale (8), cast (4 + e).
void TorchSoftmax(const Dims& d, bool backward, std::vector<Op>* ops) {
  if (!d.torch_softmax) return;
  const double score = ScoreElements(d);  // unfused: key_fraction is 1
  const double e = d.e;
  if (!backward) {
    ops->push_back(MemoryOp("softmax_to_fp32", (e + 4) * score));
    ops->push_back(MemoryOp("softmax_scale", 8 * score));
    ops->push_back(MemoryOp("softmax_mask", 8 * score));
    ops->push_back(MemoryOp("softmax_fp32", 8 * score));
    ops->push_back(MemoryOp("softmax_to_half", (4 + e) * score));
  } else {
    ops->push_back(MemoryOp("softmax_to_half_bwd", (e + 4) * score));
    ops->push_back(MemoryOp("softmax_fp32_bwd", 12 * score));
    ops->push_back(MemoryOp("softmax_mask_bwd", 8 * score));
    ops->push_back(MemoryOp("softmax_scale_bwd", 8 * score));
    ops->push_back(MemoryOp("softmax_to_fp32_bwd", (4 + e) * score));
  }
}

// Ring exchange of K/V blocks over the CP group, as the runtime's ring
// attention (runtime/ops/ring_attention.h) does it: cp-1 steps, each sending
// the K/V block in hand (2 T kv_l d elements) to the next rank while the
// core computes on it. Backward passes the K/V blocks again and, one hop
// behind, the dK/dV accumulator of each block back to its owner: cp-1 steps
// of twice the bytes.
// Unfused attention rings K/V already expanded to the query heads (GQA: the
// runtime's MHA-shaped core), so its blocks are 2 T a_l d elements.
void CpRing(const Dims& d, std::vector<Op>* ops, bool backward) {
  if (d.cp <= 1) return;
  const double kv_bytes = d.e * d.T * (d.flash ? d.kv_local : d.a_local) * (d.dqk + d.dv);
  for (int step = 0; step + 1 < d.cp; ++step)
    ops->push_back(CollectiveOp(backward ? "cp_kv_dkv_ring" : "cp_kv_ring", CollKind::kSendRecv,
                        GroupKind::kCp, d.cp, backward ? 2 * kv_bytes : kv_bytes));
}

// Entry of a column-parallel block: all-gather the sequence shards (SP).
void TpEnterForward(const Dims& d, const char* name, std::vector<Op>* ops) {
  if (d.sp) ops->push_back(CollectiveOp(name, CollKind::kAllGather, GroupKind::kTp, d.tp, d.e * d.T * d.h));
}
// Exit of a row-parallel block: all-reduce, or reduce-scatter under SP.
void TpExitForward(const Dims& d, const char* name, std::vector<Op>* ops) {
  if (d.tp <= 1) return;
  ops->push_back(CollectiveOp(name, d.sp ? CollKind::kReduceScatter : CollKind::kAllReduce, GroupKind::kTp,
                      d.tp, d.e * d.T * d.h));
}
// Backward conjugates: the exit's backward is identity (or all-gather of the
// gradient under SP); the entry's backward all-reduces (or reduce-scatters)
// the input gradient.
void TpExitBackward(const Dims& d, const char* name, std::vector<Op>* ops) {
  if (d.sp) ops->push_back(CollectiveOp(name, CollKind::kAllGather, GroupKind::kTp, d.tp, d.e * d.T * d.h));
}
void TpEnterBackward(const Dims& d, const char* name, std::vector<Op>* ops) {
  TpExitForward(d, name, ops);
}

void GemmBackward(const Op& fwd, const char* dgrad, const char* wgrad, std::vector<Op>* ops);

// Multi-head latent attention (DeepSeek-V2/V3) up to the attention core:
// the down-projections (and their RMSNorms) are replicated over TP, as
// Megatron-LM's MLA builds them; the up-projections are column-parallel.
// Q = W_uq norm(W_dq x) (or W_q x), [c_kv, k_rope] = W_dkv x, [K_nope, V]
// = W_ukv norm(c_kv); RoPE on q's rope part and the one shared k_rope, then
// K = [K_nope, k_rope] assembled per head.
void MlaForward(const Dims& d, std::vector<Op>* f) {
  const double e = d.e;
  // FP8 plans: every projection is a Transformer Engine linear, each
  // quantizing its own input (the down projections each cast x).
  if (d.q_lora > 0) {
    Fp8Cast(d, "fp8_cast_mla_q_down_input", static_cast<double>(d.T) * d.h, f);
    f->push_back(Linear(d, "mla_q_down", d.T, d.q_lora, d.h));
    f->push_back(MemoryOp("mla_q_norm", 2 * e * d.T * d.q_lora));
    Fp8Cast(d, "fp8_cast_mla_q_up_input", static_cast<double>(d.T) * d.q_lora, f);
    f->push_back(Linear(d, "mla_q_up", d.T, d.a_local * d.dqk, d.q_lora));
  } else {
    Fp8Cast(d, "fp8_cast_mla_q_input", static_cast<double>(d.T) * d.h, f);
    f->push_back(Linear(d, "mla_q", d.T, d.a_local * d.dqk, d.h));
  }
  Fp8Cast(d, "fp8_cast_mla_kv_down_input", static_cast<double>(d.T) * d.h, f);
  f->push_back(Linear(d, "mla_kv_down", d.T, d.kv_lora + d.rope_dim, d.h));
  f->push_back(MemoryOp("mla_kv_norm", 2 * e * d.T * d.kv_lora));
  Fp8Cast(d, "fp8_cast_mla_kv_up_input", static_cast<double>(d.T) * d.kv_lora, f);
  f->push_back(Linear(d, "mla_kv_up", d.T, d.a_local * (d.nope_dim + d.dv), d.kv_lora));
  f->push_back(MemoryOp("rope", 2 * e * d.T * (d.a_local + 1) * d.rope_dim));
  f->push_back(MemoryOp("mla_k_assemble", 2 * e * d.T * d.a_local * d.dqk));
}

// FP8: each projection's output gradient is cast before its two GEMMs.
void MlaBackward(const Dims& d, std::vector<Op>* g) {
  const double e = d.e;
  g->push_back(MemoryOp("mla_k_assemble_bwd", 2 * e * d.T * d.a_local * d.dqk));
  g->push_back(MemoryOp("rope_bwd", 2 * e * d.T * (d.a_local + 1) * d.rope_dim));
  Fp8Cast(d, "fp8_cast_mla_kv_up_grad", static_cast<double>(d.T) * d.a_local * (d.nope_dim + d.dv), g);
  GemmBackward(Linear(d, "mla_kv_up", d.T, d.a_local * (d.nope_dim + d.dv), d.kv_lora), "mla_kv_up_dgrad",
               "mla_kv_up_wgrad", g);
  g->push_back(MemoryOp("mla_kv_norm_bwd", 3 * e * d.T * d.kv_lora));
  Fp8Cast(d, "fp8_cast_mla_kv_down_grad", static_cast<double>(d.T) * (d.kv_lora + d.rope_dim), g);
  GemmBackward(Linear(d, "mla_kv_down", d.T, d.kv_lora + d.rope_dim, d.h), "mla_kv_down_dgrad",
               "mla_kv_down_wgrad", g);
  if (d.q_lora > 0) {
    Fp8Cast(d, "fp8_cast_mla_q_up_grad", static_cast<double>(d.T) * d.a_local * d.dqk, g);
    GemmBackward(Linear(d, "mla_q_up", d.T, d.a_local * d.dqk, d.q_lora), "mla_q_up_dgrad", "mla_q_up_wgrad", g);
    g->push_back(MemoryOp("mla_q_norm_bwd", 3 * e * d.T * d.q_lora));
    Fp8Cast(d, "fp8_cast_mla_q_down_grad", static_cast<double>(d.T) * d.q_lora, g);
    GemmBackward(Linear(d, "mla_q_down", d.T, d.q_lora, d.h), "mla_q_down_dgrad", "mla_q_down_wgrad", g);
  } else {
    Fp8Cast(d, "fp8_cast_mla_q_grad", static_cast<double>(d.T) * d.a_local * d.dqk, g);
    GemmBackward(Linear(d, "mla_q", d.T, d.a_local * d.dqk, d.h), "mla_q_dgrad", "mla_q_wgrad", g);
  }
}

// Norm 2 of a layer (none in a parallel block, which reads norm 1's output).
void Norm2Forward(const Dims& d, std::vector<Op>* f) {
  if (d.norms >= 2) f->push_back(MemoryOp(d.ln ? "ln2" : "rmsnorm2", 2 * d.e * d.T_r * d.h));
}

// The dense MLP after norm 2: SP all-gather, fc1, activation, fc2, exit.
void DenseMlpForward(const Dims& d, std::vector<Op>* f) {
  const double e = d.e;
  TpEnterForward(d, "sp_allgather_mlp", f);
  Fp8Cast(d, "fp8_cast_fc1_input", static_cast<double>(d.T) * d.h, f, /*gathered=*/true);
  if (!d.gated) {
    f->push_back(Linear(d, "fc1", d.T, d.f_local, d.h));
    f->push_back(MemoryOp("bias_gelu", 2 * e * d.T * d.f_local));
  } else {
    f->push_back(Linear(d, "fc1_gate", d.T, d.f_local, d.h));
    f->push_back(Linear(d, "fc1_up", d.T, d.f_local, d.h));
    f->push_back(MemoryOp("swiglu", 3 * e * d.T * d.f_local));
  }
  Fp8Cast(d, "fp8_cast_fc2_input", static_cast<double>(d.T) * d.f_local, f);
  f->push_back(Linear(d, "fc2", d.T, d.h, d.f_local));
  TpExitForward(d, d.sp ? "sp_reducescatter_mlp" : "tp_allreduce_mlp", f);
}

std::vector<Op> LayerForward(const Dims& d) {
  std::vector<Op> f;
  const double e = d.e;
  const int64_t n_qkv = (d.a_local + 2 * d.kv_local) * d.d;
  // Attention block.
  if (d.fp8) {
    // The FP8 copies of the layer's weights and their transposes, cast once
    // per step (first microbatch) and cached: spread over the microbatches.
    // MLA: W_dq (or W_q), W_uq, W_dkv, W_ukv and W_o of the local heads.
    const double attention =
        d.mla ? (d.q_lora > 0 ? static_cast<double>(d.h) * d.q_lora + static_cast<double>(d.q_lora) * d.a_local * d.dqk
                              : static_cast<double>(d.h) * d.a_local * d.dqk) +
                    static_cast<double>(d.h) * (d.kv_lora + d.rope_dim) +
                    static_cast<double>(d.kv_lora) * d.a_local * (d.nope_dim + d.dv) +
                    static_cast<double>(d.a_local) * d.dv * d.h
              : static_cast<double>(d.h) * n_qkv + static_cast<double>(d.a_local) * d.d * d.h;
    const double weights = attention + (d.moe ? 0.0 : (d.gated ? 3.0 : 2.0) * d.h * d.f_local);
    f.push_back(Fp8ScalingOp("fp8_cast_weights", d.fp8_weight_cast_bytes * weights / d.num_microbatches));
  }
  f.push_back(MemoryOp(d.ln ? "ln1" : "rmsnorm1", 2 * e * d.T_r * d.h));
  TpEnterForward(d, "sp_allgather_attn", &f);
  if (d.mla) {
    MlaForward(d, &f);
  } else {
    Fp8Cast(d, "fp8_cast_qkv_input", static_cast<double>(d.T) * d.h, &f, /*gathered=*/true);
    f.push_back(Linear(d, "qkv", d.T, n_qkv, d.h));
    if (d.bias || d.qkv_bias) f.push_back(MemoryOp("qkv_bias", 2 * e * d.T * n_qkv));
    if (d.qk_norm) f.push_back(MemoryOp("qk_rmsnorm", 2 * e * d.T * (d.a_local + d.kv_local) * d.d));
    if (d.rope) f.push_back(MemoryOp("rope", 2 * e * d.T * (d.a_local + d.kv_local) * d.d));
  }
  CpRing(d, &f, /*backward=*/false);
  f.push_back(AttentionCore(d, "attn_core", 1.0));
  TorchSoftmax(d, /*backward=*/false, &f);
  Fp8Cast(d, "fp8_cast_proj_input", static_cast<double>(d.T) * d.a_local * d.dv, &f);
  f.push_back(Linear(d, "proj", d.T, d.h, d.a_local * d.dv));
  TpExitForward(d, d.sp ? "sp_reducescatter_attn" : "tp_allreduce_attn", &f);
  if (d.norms == 4) f.push_back(MemoryOp("post_attn_rmsnorm", 2 * e * d.T_r * d.h));
  if (d.bias)
    f.push_back(MemoryOp("bias_dropout_add_attn", (3 * e + 1) * d.T_r * d.h));
  else
    f.push_back(MemoryOp("residual_add_attn", 3 * e * d.T_r * d.h));
  // MLP block (a parallel block, norms == 1, reads norm 1's output).
  Norm2Forward(d, &f);
  if (d.moe) {
    const std::vector<Op> moe = MoeMlpForward(*d.model, *d.plan, static_cast<int>(d.e));
    f.insert(f.end(), moe.begin(), moe.end());
  } else {
    DenseMlpForward(d, &f);
  }
  if (d.norms == 4) f.push_back(MemoryOp("post_mlp_rmsnorm", 2 * e * d.T_r * d.h));
  if (d.bias)
    f.push_back(MemoryOp("bias_dropout_add_mlp", (3 * e + 1) * d.T_r * d.h));
  else
    f.push_back(MemoryOp("residual_add_mlp", 3 * e * d.T_r * d.h));
  return f;
}

void GemmBackward(const Op& fwd, const char* dgrad, const char* wgrad, std::vector<Op>* ops) {
  ops->push_back(Gemm(dgrad, fwd.m, fwd.k, fwd.n));
  ops->back().fp8 = fwd.fp8;
  ops->push_back(Gemm(wgrad, fwd.k, fwd.n, fwd.m));
  ops->back().fp8 = fwd.fp8;
}

std::vector<Op> LayerBackward(const Dims& d) {
  std::vector<Op> g;
  const double e = d.e;
  const int64_t n_qkv = (d.a_local + 2 * d.kv_local) * d.d;
  // MLP block, in reverse.
  if (d.bias)
    g.push_back(MemoryOp("bias_dropout_add_mlp_bwd", (2 * e + 1) * d.T_r * d.h));
  else
    g.push_back(MemoryOp("residual_add_mlp_bwd", 3 * e * d.T_r * d.h));
  if (d.norms == 4) g.push_back(MemoryOp("post_mlp_rmsnorm_bwd", 3 * e * d.T_r * d.h));
  if (d.moe) {
    const std::vector<Op> moe = MoeMlpBackward(*d.model, *d.plan, static_cast<int>(d.e));
    g.insert(g.end(), moe.begin(), moe.end());
  } else {
    TpExitBackward(d, "sp_allgather_mlp_grad", &g);
    Fp8Cast(d, "fp8_cast_fc2_grad", static_cast<double>(d.T) * d.h, &g, /*gathered=*/true);
    GemmBackward(Linear(d, "fc2", d.T, d.h, d.f_local), "fc2_dgrad", "fc2_wgrad", &g);
    if (!d.gated) {
      g.push_back(MemoryOp("bias_gelu_bwd", 3 * e * d.T * d.f_local));
    } else {
      g.push_back(MemoryOp("swiglu_bwd", 5 * e * d.T * d.f_local));
    }
    // Under SP only the sequence shard of the fc1 input is stored; Megatron
    // all-gathers it again for the weight gradient.
    TpEnterForward(d, "sp_allgather_mlp_input", &g);
    Fp8Cast(d, "fp8_cast_fc1_grad", (d.gated ? 2.0 : 1.0) * d.T * d.f_local, &g);
    if (!d.gated) {
      GemmBackward(Linear(d, "fc1", d.T, d.f_local, d.h), "fc1_dgrad", "fc1_wgrad", &g);
    } else {
      GemmBackward(Linear(d, "fc1_up", d.T, d.f_local, d.h), "fc1_up_dgrad", "fc1_up_wgrad", &g);
      GemmBackward(Linear(d, "fc1_gate", d.T, d.f_local, d.h), "fc1_gate_dgrad", "fc1_gate_wgrad", &g);
    }
    TpEnterBackward(d, d.sp ? "sp_reducescatter_mlp_grad" : "tp_allreduce_mlp_grad", &g);
  }
  if (d.norms >= 2) g.push_back(MemoryOp(d.ln ? "ln2_bwd" : "rmsnorm2_bwd", 3 * e * d.T_r * d.h));
  // Attention block, in reverse.
  if (d.bias)
    g.push_back(MemoryOp("bias_dropout_add_attn_bwd", (2 * e + 1) * d.T_r * d.h));
  else
    g.push_back(MemoryOp("residual_add_attn_bwd", 3 * e * d.T_r * d.h));
  if (d.norms == 4) g.push_back(MemoryOp("post_attn_rmsnorm_bwd", 3 * e * d.T_r * d.h));
  TpExitBackward(d, "sp_allgather_attn_grad", &g);
  Fp8Cast(d, "fp8_cast_proj_grad", static_cast<double>(d.T) * d.h, &g, /*gathered=*/true);
  GemmBackward(Linear(d, "proj", d.T, d.h, d.a_local * d.dv), "proj_dgrad", "proj_wgrad", &g);
  CpRing(d, &g, /*backward=*/true);
  g.push_back(AttentionCore(d, "attn_core_bwd", 2.0));
  TorchSoftmax(d, /*backward=*/true, &g);
  if (d.mla) {
    TpEnterForward(d, "sp_allgather_attn_input", &g);
    MlaBackward(d, &g);
  } else {
    if (d.bias || d.qkv_bias) g.push_back(MemoryOp("qkv_bias_bwd", e * d.T * n_qkv));
    if (d.rope) g.push_back(MemoryOp("rope_bwd", 2 * e * d.T * (d.a_local + d.kv_local) * d.d));
    if (d.qk_norm) g.push_back(MemoryOp("qk_rmsnorm_bwd", 3 * e * d.T * (d.a_local + d.kv_local) * d.d));
    TpEnterForward(d, "sp_allgather_attn_input", &g);
    Fp8Cast(d, "fp8_cast_qkv_grad", static_cast<double>(d.T) * n_qkv, &g);
    GemmBackward(Linear(d, "qkv", d.T, n_qkv, d.h), "qkv_dgrad", "qkv_wgrad", &g);
  }
  // tp > kv_heads: each KV head's K/V weights live on tp / kv_heads ranks;
  // the runtime (LlamaLayer) sums their fp32 weight grads over TP in every
  // backward, as one all-reduce of the full K and V weight grads.
  if (!d.mla && d.tp > d.kv_heads)
    g.push_back(CollectiveOp("tp_allreduce_kv_replica_grads", CollKind::kAllReduce, GroupKind::kTp, d.tp,
                     4.0 * 2 * d.kv_heads * d.d * d.h));
  TpEnterBackward(d, d.sp ? "sp_reducescatter_attn_grad" : "tp_allreduce_attn_grad", &g);
  g.push_back(MemoryOp(d.ln ? "ln1_bwd" : "rmsnorm1_bwd", 3 * e * d.T_r * d.h));
  return g;
}

// What selective recompute re-runs in a layer's backward, module by module
// (PlanSpec::recompute_modules, Megatron-LM's names; docs/memory.md).
std::vector<Op> SelectiveRecompute(const Dims& d) {
  const PlanSpec& p = *d.plan;
  std::vector<Op> r;
  if (p.Recomputes(kRecomputeCoreAttn)) {
    // Korthikanti et al. 2022: recompute only the attention core (QK^T,
    // softmax, dropout, AV). Under CP there is no extra ring: each block's
    // probabilities are rebuilt from Q K^T and the stored log-sum-exp inside
    // the backward ring, whose K/V transfers are already in the backward.
    r.push_back(AttentionCore(d, "attn_core", 1.0));
    TorchSoftmax(d, /*backward=*/false, &r);
  }
  if (p.Recomputes(kRecomputeLayernorm)) {
    // The norms that are modules of their own in Megatron's TE layer (the
    // others are fused into the next linear layer): MLA's input norm, an
    // MoE layer's pre-MLP norm.
    if (d.mla) r.push_back(MemoryOp(d.ln ? "ln1" : "rmsnorm1", 2 * d.e * d.T_r * d.h));
    if (d.moe) Norm2Forward(d, &r);
  }
  if (p.Recomputes(kRecomputeMlaUpProj) && d.mla) {
    // The up projections and RoPE from the stored latents (no collective:
    // the latents are already gathered over TP), with their FP8 input casts
    // under an FP8 plan.
    std::vector<Op> mla;
    MlaForward(d, &mla);
    for (const Op& op : mla)
      for (const char* name : {"fp8_cast_mla_q_up_input", "mla_q_up", "mla_q", "fp8_cast_mla_kv_up_input", "mla_kv_up",
                               "rope", "mla_k_assemble"})
        if (std::strcmp(op.name, name) == 0) r.push_back(op);
  }
  if (p.Recomputes(kRecomputeMlp) && !d.moe) {
    // The dense MLP block again from its input, its TE-fused norm, SP
    // all-gather and exit collective included (a checkpoint re-runs all).
    Norm2Forward(d, &r);
    DenseMlpForward(d, &r);
  }
  if (d.moe) {
    const std::vector<Op> moe = MoeMlpRecompute(*d.model, p, static_cast<int>(d.e));
    r.insert(r.end(), moe.begin(), moe.end());
  }
  return r;
}

}  // namespace

double WindowTileFraction(int64_t seq, int64_t window) {
  if (window <= 0 || seq <= window) return 1.0;
  const int64_t tiles = (seq + kAttentionTile - 1) / kAttentionTile;
  double causal = 0, windowed = 0;
  for (int64_t i = 0; i < tiles; ++i) {
    // Query rows [i*B, (i+1)*B) need keys from i*B - window + 1 up to the diagonal.
    const int64_t first_key_tile = std::max<int64_t>(0, i * kAttentionTile - window + 1) / kAttentionTile;
    causal += static_cast<double>(i + 1);
    windowed += static_cast<double>(i - first_key_tile + 1);
  }
  return windowed / causal;
}

double ChunkTileFraction(int64_t seq, int64_t chunk) {
  if (chunk <= 0 || seq <= chunk) return 1.0;
  const int64_t tiles = (seq + kAttentionTile - 1) / kAttentionTile;
  double causal = 0, chunked = 0;
  for (int64_t i = 0; i < tiles; ++i) {
    const int64_t first_key_tile = (i * kAttentionTile / chunk) * chunk / kAttentionTile;
    causal += static_cast<double>(i + 1);
    chunked += static_cast<double>(i - first_key_tile + 1);
  }
  return chunked / causal;
}

bool MegatronFusedSoftmaxTakes(int64_t micro_batch, int64_t local_heads, int64_t sq, int64_t sk) {
  const int64_t batches = micro_batch * local_heads;
  if (!(sk > 16 && sk <= 4096 && sq % 4 == 0 && sk % 4 == 0 && batches % 4 == 0)) return false;
  // Rows per thread block of the causal kernel: 128 threads, one warp of
  // min(32, next power of two of sk) lanes per row, two rows per warp when
  // that power is <= 128.
  int64_t pow2 = 1;
  while (pow2 < sk) pow2 *= 2;
  const int64_t warp = std::min<int64_t>(pow2, 32);
  const int64_t per_block = (128 / warp) * (pow2 <= 128 ? 2 : 1);
  return batches % per_block == 0;
}

bool UsesMegatronTorchSoftmax(const ModelSpec& m, const PlanSpec& p, int bytes_per_element,
                              AttentionKernels kernels) {
  return kernels == AttentionKernels::kMegatron && !p.flash_attention && bytes_per_element == 2 && p.cp == 1 &&
         p.tp >= 1 && m.heads % p.tp == 0 &&
         !MegatronFusedSoftmaxTakes(p.micro_batch, m.heads / p.tp, p.seq_length, p.seq_length);
}

LayerOps TransformerLayerOps(const ModelSpec& m, const PlanSpec& p, int bytes_per_element, bool windowed,
                             AttentionKernels kernels) {
  Dims d = MakeDims(m, p, bytes_per_element);
  d.torch_softmax = UsesMegatronTorchSoftmax(m, p, bytes_per_element, kernels);
  if (windowed && p.flash_attention && m.WindowApplies(p.seq_length))
    d.key_fraction = m.window_chunked ? ChunkTileFraction(p.seq_length, m.sliding_window)
                                      : WindowTileFraction(p.seq_length, m.sliding_window);
  LayerOps ops;
  ops.forward = LayerForward(d);
  ops.backward = LayerBackward(d);
  if (p.recompute == Recompute::kFull) {
    // The FP8 weight copies are cached: the recompute forward does not recast them.
    for (const Op& op : ops.forward)
      if (std::strcmp(op.name, "fp8_cast_weights") != 0) ops.recompute.push_back(op);
  } else if (p.recompute == Recompute::kSelective) {
    ops.recompute = SelectiveRecompute(d);
  }
  return ops;
}

LayerOps EmbeddingOps(const ModelSpec& m, const PlanSpec& p, int bytes_per_element) {
  const Dims d = MakeDims(m, p, bytes_per_element);
  const double e = d.e;
  LayerOps ops;
  // Vocab-parallel lookup: each TP rank writes its rows (zeros elsewhere);
  // GPT adds the learned position embedding.
  ops.forward.push_back(MemoryOp("embedding_lookup", (d.rope ? 2 : 4) * e * d.T * d.h));
  if (d.tp > 1)
    ops.forward.push_back(CollectiveOp(d.sp ? "embedding_reducescatter" : "embedding_allreduce",
                               d.sp ? CollKind::kReduceScatter : CollKind::kAllReduce, GroupKind::kTp,
                               d.tp, e * d.T * d.h));
  if (d.gpt && m.uses_dropout() && p.dropout) ops.forward.push_back(MemoryOp("embedding_dropout", (2 * e + 1) * d.T_r * d.h));

  if (d.gpt && m.uses_dropout() && p.dropout) ops.backward.push_back(MemoryOp("embedding_dropout_bwd", (2 * e + 1) * d.T_r * d.h));
  TpExitBackward(d, "embedding_grad_allgather", &ops.backward);
  ops.backward.push_back(MemoryOp("embedding_grad_scatter_add", (d.rope ? 3 : 5) * e * d.T * d.h));
  return ops;
}

LayerOps MtpOps(const ModelSpec& m, const PlanSpec& p, int bytes_per_element) {
  if (m.mtp_layers <= 0) return LayerOps{};
  return MtpOps(m, p, bytes_per_element, EmbeddingOps(m, p, bytes_per_element),
                TransformerLayerOps(m, p, bytes_per_element), HeadOps(m, p, bytes_per_element));
}

LayerOps MtpOps(const ModelSpec& m, const PlanSpec& p, int bytes_per_element, const LayerOps& emb,
                const LayerOps& layer, const LayerOps& head) {
  LayerOps ops;
  if (m.mtp_layers <= 0) return ops;
  const Dims d = MakeDims(m, p, bytes_per_element);
  const double e = d.e;
  auto append = [](std::vector<Op>* to, const std::vector<Op>& from) { to->insert(to->end(), from.begin(), from.end()); };
  // eh_proj: [enorm(embedding), hnorm(hidden)] (T x 2h) -> T x h/tp, whose
  // columns are all-gathered for the layer (Megatron-LM's MTP layer).
  const Op proj = Gemm("mtp_eh_proj", d.T, CeilDiv(d.h, d.tp), 2 * d.h);
  for (int k = 0; k < m.mtp_layers; ++k) {
    auto& f = ops.forward;
    append(&f, emb.forward);
    f.push_back(MemoryOp(d.ln ? "mtp_enorm_hnorm" : "mtp_enorm_hnorm_rms", 2 * 2 * e * d.T_r * d.h));
    if (d.sp) f.push_back(CollectiveOp("mtp_sp_allgather", CollKind::kAllGather, GroupKind::kTp, d.tp, 2 * e * d.T * d.h));
    f.push_back(proj);
    if (d.tp > 1) f.push_back(CollectiveOp("mtp_eh_proj_allgather", CollKind::kAllGather, GroupKind::kTp, d.tp, e * d.T * d.h));
    append(&f, layer.forward);
    append(&f, head.forward);
    auto& g = ops.backward;
    append(&g, head.backward);
    append(&g, layer.backward);
    if (d.tp > 1)
      g.push_back(CollectiveOp("mtp_eh_proj_grad_reducescatter", CollKind::kReduceScatter, GroupKind::kTp, d.tp, e * d.T * d.h));
    GemmBackward(proj, "mtp_eh_proj_dgrad", "mtp_eh_proj_wgrad", &g);
    if (d.tp > 1)
      g.push_back(CollectiveOp(d.sp ? "mtp_sp_reducescatter_grad" : "mtp_allreduce_grad",
                               d.sp ? CollKind::kReduceScatter : CollKind::kAllReduce, GroupKind::kTp, d.tp,
                               2 * e * d.T * d.h));
    g.push_back(MemoryOp("mtp_enorm_hnorm_bwd", 2 * 3 * e * d.T_r * d.h));
    append(&g, emb.backward);
    append(&ops.recompute, layer.recompute);
  }
  return ops;
}

LayerOps HeadOps(const ModelSpec& m, const PlanSpec& p, int bytes_per_element) {
  const Dims d = MakeDims(m, p, bytes_per_element);
  const double e = d.e;
  LayerOps ops;
  auto& f = ops.forward;
  f.push_back(MemoryOp(d.ln ? "final_ln" : "final_rmsnorm", 2 * e * d.T_r * d.h));
  TpEnterForward(d, "sp_allgather_head", &f);
  const Op head = Gemm("lm_head", d.T, d.v_local, d.h);
  f.push_back(head);
  // Vocab-parallel cross-entropy (Megatron): fp32 logits, a max, the target
  // logit and the sum of exponentials, each all-reduced over TP ([b,s] fp32).
  const double logits = static_cast<double>(d.T) * d.v_local;
  if (p.cross_entropy_fusion) {
    // One fused kernel (--cross-entropy-loss-fusion): reads the logits,
    // writes and rereads the fp32 softmax it stores for backward.
    f.push_back(MemoryOp("cross_entropy", logits * (e + 2 * 4.0)));
  } else {
    // Megatron-LM's _VocabParallelCrossEntropy as PyTorch ops
    // (megatron/core/tensor_parallel/cross_entropy.py; mpu/cross_entropy.py
    // before 2022): logits.float(), max, sub_ of the max, exp (in place),
    // sum, div_ by the sum (the stored softmax); the target logit's gather
    // and masking are a few [b, s] kernels.
    if (e < 4) f.push_back(MemoryOp("ce_logits_to_fp32", logits * (e + 4)));
    f.push_back(MemoryOp("ce_max", logits * 4));
    f.push_back(MemoryOp("ce_subtract_max", logits * 8));
    f.push_back(MemoryOp("ce_target_logit", d.T * 16.0));
    f.push_back(MemoryOp("ce_exp", logits * 8));
    f.push_back(MemoryOp("ce_sum_exp", logits * 4));
    f.push_back(MemoryOp("ce_softmax_divide", logits * 8));
  }
  if (d.tp > 1) {
    for (const char* name : {"ce_max_allreduce", "ce_target_allreduce", "ce_sumexp_allreduce"})
      f.push_back(CollectiveOp(name, CollKind::kAllReduce, GroupKind::kTp, d.tp, 4.0 * d.T));
  }
  // CP: the microbatch loss is the mean of the CP ranks' local means (one
  // fp32 scalar all-reduced; the gradient needs no communication).
  if (d.cp > 1) f.push_back(CollectiveOp("cp_loss_allreduce", CollKind::kAllReduce, GroupKind::kCp, d.cp, 4.0));
  auto& g = ops.backward;
  if (p.cross_entropy_fusion) {
    g.push_back(MemoryOp("cross_entropy_bwd", logits * (4.0 + e)));
  } else {
    // softmax minus the one-hot target (in place), times the loss gradient
    // (mul_), then the fp32 gradient cast back for the head's GEMMs.
    g.push_back(MemoryOp("ce_bwd_subtract_target", d.T * 16.0));
    g.push_back(MemoryOp("ce_bwd_scale", logits * 8));
    if (e < 4) g.push_back(MemoryOp("ce_bwd_to_half", logits * (4 + e)));
  }
  GemmBackward(head, "lm_head_dgrad", "lm_head_wgrad", &g);
  TpEnterBackward(d, d.sp ? "sp_reducescatter_head_grad" : "tp_allreduce_head_grad", &g);
  g.push_back(MemoryOp(d.ln ? "final_ln_bwd" : "final_rmsnorm_bwd", 3 * e * d.T_r * d.h));
  return ops;
}

}  // namespace dt
