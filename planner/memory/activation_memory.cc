#include "planner/memory/activation_memory.h"

#include "base/check.h"
#include "planner/cost/layer_ops.h"
#include "planner/cost/moe_ops.h"

namespace dt {

namespace {

struct Local {
  double T, T_r, h, d, a, kv, f, b, s_local, s_full, e;
  bool gpt, gated;
  int norms;     // norms per layer (1: parallel attention + MLP block; 4: pre + post norms)
  // MoE (0 for a dense model): routed rows on the busiest rank (the
  // load-imbalance allowance applied), the expert FFN width per expert-TP
  // rank and the shared experts' width per TP rank.
  double rows = 0, f_exp = 0, f_sh = 0;
  // Qwen2-MoE's gated shared experts: the ungated shared output (e per
  // element) and the fp32 sigmoid per token of the sequence shard, both
  // read by the gate's backward.
  double shared_gate_bytes = 0;
  bool dropout;  // GPT with dropout: masks and dropped-out probabilities stored
  bool torch_softmax = false;  // Megatron's PyTorch softmax fallback (UsesMegatronTorchSoftmax)
};

Local MakeLocal(const ModelSpec& m, const PlanSpec& p, int bytes_per_element, AttentionKernels kernels) {
  DT_CHECK(bytes_per_element == 2 || bytes_per_element == 4) << bytes_per_element;
  Local l;
  l.torch_softmax = UsesMegatronTorchSoftmax(m, p, bytes_per_element, kernels);
  l.b = p.micro_batch;
  l.s_local = static_cast<double>(p.seq_length / p.cp);
  l.s_full = p.seq_length;
  l.T = l.b * l.s_local;
  const bool sp = p.sequence_parallel && p.tp > 1;
  l.T_r = sp ? l.T / p.tp : l.T;
  l.h = m.hidden;
  l.d = m.head_dim();
  l.a = m.heads / p.tp;
  l.kv = m.kv_heads >= p.tp ? m.kv_heads / p.tp : 1;
  l.f = (m.ffn_hidden + p.tp - 1) / p.tp;
  l.e = bytes_per_element;
  l.gpt = m.family == ModelFamily::kGpt;
  l.gated = m.gated_mlp();
  l.norms = m.norms_per_layer;
  l.dropout = m.uses_dropout() && p.dropout;
  if (m.moe()) {
    l.rows = ExpertLoadImbalance(p) * ExpertRowsPerRank(m, p);
    l.f_exp = (m.moe_ffn_hidden + p.expert_tp() - 1) / p.expert_tp();
    l.f_sh = (m.shared_ffn_hidden + p.tp - 1) / p.tp;
    if (m.shared_expert_gate && m.shared_ffn_hidden > 0) l.shared_gate_bytes = (l.e * l.h + 4.0) * l.T_r;
  }
  return l;
}

double ScoreBytes(const Local& l) {
  const double scores = l.b * l.a * l.s_local * l.s_full;
  // Megatron's PyTorch fallback keeps the fp32 softmax output for the
  // softmax backward and its half-precision copy (the dropout's mask and
  // output, or the AV input without dropout) instead of the fused kernel's
  // one e-byte output.
  if (l.torch_softmax) return l.dropout ? scores * (4 + 1 + l.e) : scores * (4 + l.e);
  // GPT: softmax output (e) + dropout mask (1 byte) + dropout output (e);
  // Llama trains without attention dropout: softmax output only.
  return l.dropout ? scores * (2 * l.e + 1) : scores * l.e;
}

// Bytes one selective-recompute module drops from a layer's stored tensors
// (PlanSpec::recompute_modules; docs/memory.md "Selective recompute of
// chosen modules"), in the terms of ActivationBytesPerLayerFor below. A
// checkpointed block keeps its input and drops what it stores inside;
// Megatron-LM's output-discarding checkpoints (layernorm, moe_act,
// mla_up_proj) drop their output, which the next operation had stored.
double ModuleBytes(const Local& l, const ModelSpec& m, const PlanSpec& p, RecomputeModule mod) {
  const double e = l.e;
  const bool fp8 = p.precision == Precision::kFp8;
  const double in = fp8 ? 1.0 : e;  // a linear input (FP8: its 1-byte transpose)
  const double inner = l.gated ? 3 : 2;
  switch (mod) {
    case kRecomputeCoreAttn:
      return p.flash_attention ? 0.0 : ScoreBytes(l);
    case kRecomputeLayernorm:
      // The norms that are modules of their own in Megatron's Transformer
      // Engine layer: MLA's input_layernorm (its output feeds the down
      // projections) and an MoE layer's pre_mlp_layernorm (router, dispatch
      // and shared experts read it). Attention's input norm and a dense
      // layer's MLP norm are fused into the next linear layer (TE
      // LayerNormLinear, an IdentityOp norm that Megatron skips), which keeps
      // its normalized input: nothing to drop.
      return e * l.T_r * l.h * ((m.mla() ? 1 : 0) + (m.moe() && l.norms >= 2 ? 1 : 0));
    case kRecomputeMlaUpProj:
      // Q, K and V of every local head (the up projections' and RoPE's
      // outputs); the latent inputs stay (the checkpoint's inputs).
      return m.mla() ? e * l.T * l.a * (2.0 * m.head_dim() + m.v_head_dim) : 0.0;
    case kRecomputeMlp: {
      // The dense MLP (TE: with its fused norm) keeps its input, the
      // residual stream (norm 2's input); drops the fc1 input (norm 2's
      // output; a parallel block's MLP reads norm 1's output, kept for QKV)
      // and the MLP's own tensors.
      if (m.moe()) return 0.0;
      const double fc1_in = l.norms >= 2 ? in * l.T_r * l.h : 0.0;
      return fc1_in + inner * e * l.T * l.f - (fp8 ? (e - 1) * l.T * l.f : 0.0);
    }
    case kRecomputeMoe:
    case kRecomputeMoeAct:
    case kRecomputeSharedExperts: {
      if (!m.moe()) return 0.0;
      const double rows = l.rows, f_exp = l.f_exp, f_sh = l.f_sh;
      const double shared =
          inner * e * l.T * f_sh - (fp8 ? (e - 1) * l.T * f_sh : 0.0) + l.shared_gate_bytes;
      // moe_act: the activation's output, the expert fc2 input.
      if (mod == kRecomputeMoeAct) return in * rows * f_exp;
      if (mod == kRecomputeSharedExperts) return shared;
      // moe: everything the MoE block stores (its input, the pre-MLP norm's
      // output, stays): router probabilities, expert input, inner tensors
      // and outputs, shared experts.
      return 4.0 * l.T_r * m.num_experts + in * rows * l.h + inner * e * rows * f_exp -
             (fp8 ? (e - 1) * rows * f_exp : 0.0) + e * rows / p.expert_tp() * l.h + shared;
    }
  }
  return 0.0;
}

// Everything but the attention core that the plan's modules drop: "moe"
// contains "moe_act" and "shared_experts".
double OtherModulesBytes(const Local& l, const ModelSpec& m, const PlanSpec& p) {
  double bytes = 0;
  for (RecomputeModule mod : {kRecomputeLayernorm, kRecomputeMlaUpProj, kRecomputeMlp, kRecomputeMoe,
                              kRecomputeMoeAct, kRecomputeSharedExperts}) {
    if (!(p.recompute_modules & mod)) continue;
    if ((mod == kRecomputeMoeAct || mod == kRecomputeSharedExperts) && (p.recompute_modules & kRecomputeMoe))
      continue;
    bytes += ModuleBytes(l, m, p, mod);
  }
  return bytes;
}

}  // namespace

double RecomputeModuleBytesPerLayer(const ModelSpec& m, const PlanSpec& p, int bytes_per_element,
                                    RecomputeModule module, AttentionKernels kernels) {
  return ModuleBytes(MakeLocal(m, p, bytes_per_element, kernels), m, p, module);
}

double RecomputedModuleBytesPerLayer(const ModelSpec& m, const PlanSpec& p, int bytes_per_element,
                                     AttentionKernels kernels) {
  if (p.recompute != Recompute::kSelective) return 0.0;
  return OtherModulesBytes(MakeLocal(m, p, bytes_per_element, kernels), m, p);
}

double AttentionScoreBytesPerLayer(const ModelSpec& m, const PlanSpec& p, int bytes_per_element,
                                   AttentionKernels kernels) {
  return ScoreBytes(MakeLocal(m, p, bytes_per_element, kernels));
}

double StoredBytesPerLayer(const ModelSpec& m, const PlanSpec& p, int bytes_per_element, double recomputed_share,
                           AttentionKernels kernels) {
  if (p.recompute != Recompute::kFull || recomputed_share >= 1.0)
    return ActivationBytesPerLayer(m, p, bytes_per_element, kernels);
  return recomputed_share * ActivationBytesPerLayerFor(m, p, bytes_per_element, Recompute::kFull, kernels) +
         (1.0 - recomputed_share) * ActivationBytesPerLayerFor(m, p, bytes_per_element, Recompute::kNone, kernels);
}

double ActivationBytesPerLayerFor(const ModelSpec& m, const PlanSpec& p, int bytes_per_element,
                                  Recompute mode, AttentionKernels kernels) {
  const Local l = MakeLocal(m, p, bytes_per_element, kernels);
  const double e = l.e;
  if (mode == Recompute::kFull) return e * l.T_r * l.h;  // the layer input only
  // Replicated region (sharded over TP only under SP): inputs of norm 1,
  // QKV, norm 2 and fc1, plus GPT's two 1-byte dropout masks. GPT 16-bit:
  // 4*2 + 2*1 = 10 sbh (Korthikanti Table 2).
  // Falcon's parallel block (one norm) feeds attention and MLP from the same
  // normed input: norm 1 and QKV inputs only. Gemma-2's post-norms store
  // their inputs too.
  double bytes = (l.norms == 1 ? 2 : l.norms == 4 ? 6 : 4) * e * l.T_r * l.h;
  if (l.dropout) bytes += 2 * l.T_r * l.h;
  // TP region: Q, K, V (the QK^T and AV inputs) and the proj input. MHA
  // 16-bit: 4 * 2 sbh/t = 8 sbh/t. GQA: fused attention reads K and V at
  // kv_heads; the unfused core multiplies per query head, so K and V are
  // stored expanded to the query heads (Megatron's repeat_interleave before
  // its baddbmm, the CPU runtime's MHA-shaped attention core).
  const double kv_stored = p.flash_attention ? l.kv : l.a;
  if (!m.mla()) {
    bytes += e * l.T * l.d * (2 * l.a + 2 * kv_stored);
  } else {
    // MLA: Q and K of qk_nope + qk_rope, V and the projection input of
    // v_head_dim, for every local head; plus the latent path's stored inputs
    // (replicated over TP): the q and kv RMSNorm inputs and the up-projection
    // inputs (q_lora_rank, kv_lora_rank each).
    const double dqk = m.head_dim(), dv = m.v_head_dim;
    bytes += e * l.T * l.a * (2 * dqk + 2 * dv);
    bytes += 2 * e * l.T * (m.q_lora_rank + m.kv_lora_rank);
  }
  // MLP: GPT stores the GeLU input and the fc2 input (2 * 4h each in
  // 16-bit: 16 sbh/t); Llama stores gate, up and the fc2 input.
  if (!m.moe()) {
    bytes += (l.gated ? 3 : 2) * e * l.T * l.f;
  } else {
    // MoE (moe_ops.h layout): fp32 router probabilities of the routed
    // tokens; at the busiest rank's share, the gathered expert input, the
    // gate / up outputs and the fc2 input (or GeLU input and fc2 input) per
    // routed row, and the expert outputs the weighted sum reads back; the
    // shared experts as a dense MLP.
    const double rows = l.rows, f_exp = l.f_exp, f_sh = l.f_sh;
    bytes += 4.0 * l.T_r * m.num_experts;
    bytes += e * rows * l.h + (l.gated ? 3 : 2) * e * rows * f_exp + e * rows / p.expert_tp() * l.h;
    bytes += (l.gated ? 3 : 2) * e * l.T * f_sh + l.shared_gate_bytes;
  }
  // FP8 (Transformer Engine on Hopper): a linear layer keeps only the FP8
  // transpose of its input for the weight gradient, 1 byte per element
  // instead of e (TE issue 1764; docs/fp8.md): the QKV and fc1 inputs (one
  // shared input in a parallel block), the projection input and the fc2
  // input. MoE: the attention's two, and per routed row (at the busiest
  // rank's share) the expert fc1 and fc2 inputs, and the shared experts'.
  // MLA: the down projections read the normed input (as QKV does), the
  // projection input is v_head_dim wide, and the two up projections keep
  // their latent inputs (q_lora_rank, kv_lora_rank) in FP8 too.
  const double proj_in = l.T * l.a * m.v_dim();
  const double mla_up_in = m.mla() ? l.T * (m.q_lora_rank + m.kv_lora_rank) : 0.0;
  if (p.precision == Precision::kFp8 && !m.moe())
    bytes -= (e - 1) * ((l.norms == 1 ? 1 : 2) * l.T_r * l.h + proj_in + l.T * l.f + mla_up_in);
  if (p.precision == Precision::kFp8 && m.moe()) {
    const double rows = l.rows, f_exp = l.f_exp, f_sh = l.f_sh;
    bytes -= (e - 1) * (l.T_r * l.h + proj_in + rows * l.h + rows * f_exp + l.T * f_sh + mla_up_in);
  }
  // Selective recompute: the attention core when the plan's modules have it
  // (by default they do), and what the other chosen modules drop.
  const bool core_attn = mode == Recompute::kSelective && (p.recompute_modules & kRecomputeCoreAttn);
  if (mode == Recompute::kSelective) bytes -= OtherModulesBytes(l, m, p);
  if (!p.flash_attention) {
    if (!core_attn) bytes += ScoreBytes(l);
    // Ring attention (cp > 1, runtime/ops/ring_attention.h) also keeps the
    // fp32 log-sum-exp per query row and head: selective recompute rebuilds
    // each K/V block's probabilities from it inside the backward ring.
    if (p.cp > 1) bytes += 4.0 * l.b * l.a * l.s_local;
  } else {
    // Fused attention keeps its output and the fp32 softmax statistics
    // (log-sum-exp per query row and head) instead of the score matrix.
    bytes += 4.0 * l.b * l.a * l.s_local;
  }
  return bytes;
}

double ActivationBytesPerLayer(const ModelSpec& m, const PlanSpec& p, int bytes_per_element,
                               AttentionKernels kernels) {
  return ActivationBytesPerLayerFor(m, p, bytes_per_element, p.recompute, kernels);
}

}  // namespace dt
