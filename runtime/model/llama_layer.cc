#include "runtime/model/llama_layer.h"

#include <cmath>
#include <cstring>

#include "base/check.h"
#include "runtime/model/init.h"
#include "runtime/model/tp_ops.h"
#include "runtime/ops/attention.h"
#include "runtime/ops/host_ops.h"
#include "runtime/ops/linear.h"
#include "runtime/ops/residual.h"
#include "runtime/ops/ring_attention.h"
#include "runtime/ops/rmsnorm.h"
#include "runtime/ops/rope.h"
#include "runtime/ops/swiglu.h"

namespace dt::rt {

LlamaLayer::LlamaLayer(LayerContext* ctx, int layer, int num_layers, bool dense_mlp)
    : ctx_(ctx), layer_(layer), num_layers_(num_layers) {
  const int64_t h = ctx->hidden, hd = ctx->head_dim, f = ctx->ffn_local * ctx->tp_size;
  const int64_t heads = ctx->heads_local * ctx->tp_size, kv = ctx->kv_heads;
  DT_CHECK(kv > 0 && heads % kv == 0) << "kv_heads " << kv << " must divide heads " << heads;
  group_ = heads / kv;
  kv_replicated_ = ctx->tp_size > kv;
  kv_first_ = kv_replicated_ ? ctx->tp_rank / (ctx->tp_size / kv) : ctx->tp_rank * (kv / ctx->tp_size);
  DT_CHECK_EQ(ctx->kv_heads_local, kv_replicated_ ? 1 : kv / ctx->tp_size) << "kv_heads_local";
  const std::string p = "layers." + std::to_string(layer) + ".";
  norm1_w_ = DeclareParam(ctx, p + "attn_norm.weight", {h}, ShardKind::kReplicated, true);
  q_w_ = DeclareParam(ctx, p + "attn.q.weight", {heads * hd, h}, ShardKind::kSplitDim0, false);
  k_w_ = DeclareReplicatedShardParam(ctx, p + "attn.k.weight", {kv * hd, h}, static_cast<int>(kv));
  v_w_ = DeclareReplicatedShardParam(ctx, p + "attn.v.weight", {kv * hd, h}, static_cast<int>(kv));
  o_w_ = DeclareParam(ctx, p + "attn.o.weight", {h, heads * hd}, ShardKind::kSplitDim1, false);
  norm2_w_ = DeclareParam(ctx, p + "mlp_norm.weight", {h}, ShardKind::kReplicated, true);
  if (ctx->num_experts > 0 && !dense_mlp) {
    moe_ = std::make_unique<MoeMlp>(ctx, p);
    if (ctx->shared_ffn_local > 0) {
      const int64_t fs = ctx->shared_ffn_local * ctx->tp_size;
      shared_gate_w_ = DeclareParam(ctx, p + "mlp.shared.gate.weight", {fs, h}, ShardKind::kSplitDim0, false);
      shared_up_w_ = DeclareParam(ctx, p + "mlp.shared.up.weight", {fs, h}, ShardKind::kSplitDim0, false);
      shared_down_w_ = DeclareParam(ctx, p + "mlp.shared.down.weight", {h, fs}, ShardKind::kSplitDim1, false);
      if (ctx->shared_expert_gate)
        shared_scale_w_ = DeclareParam(ctx, p + "mlp.shared_expert_gate.weight", {1, h}, ShardKind::kReplicated, true);
    }
    return;
  }
  gate_w_ = DeclareParam(ctx, p + "mlp.gate.weight", {f, h}, ShardKind::kSplitDim0, false);
  up_w_ = DeclareParam(ctx, p + "mlp.up.weight", {f, h}, ShardKind::kSplitDim0, false);
  down_w_ = DeclareParam(ctx, p + "mlp.down.weight", {h, f}, ShardKind::kSplitDim1, false);
}

void LlamaLayer::Init(uint64_t seed) {
  const auto& ps = ctx_->store->params();
  auto normal = [&](int i, float std) { InitNormal(ps[i], seed, std, ctx_->W(i)); };
  const float out_std = 0.02f / std::sqrt(2.0f * num_layers_);
  InitConstant(ps[norm1_w_], 1.0f, ctx_->W(norm1_w_));
  normal(q_w_, 0.02f);
  normal(k_w_, 0.02f);
  normal(v_w_, 0.02f);
  normal(o_w_, out_std);
  InitConstant(ps[norm2_w_], 1.0f, ctx_->W(norm2_w_));
  if (moe_) {
    moe_->Init(seed, out_std);
    if (shared_gate_w_ >= 0) {
      normal(shared_gate_w_, 0.02f);
      normal(shared_up_w_, 0.02f);
      normal(shared_down_w_, out_std);
    }
    if (shared_scale_w_ >= 0) normal(shared_scale_w_, 0.02f);
    return;
  }
  normal(gate_w_, 0.02f);
  normal(up_w_, 0.02f);
  normal(down_w_, out_std);
}

std::vector<int64_t> LlamaLayer::Positions() const {
  std::vector<int64_t> pos(ctx_->seq);
  for (int64_t t = 0; t < ctx_->seq; ++t) pos[t] = ctx_->Position(t);
  return pos;
}

int64_t LlamaLayer::KvOf(int64_t i) const {
  const int64_t global_q = ctx_->tp_rank * ctx_->heads_local + i;
  const int64_t local = global_q / group_ - kv_first_;
  DT_CHECK(local >= 0 && local < ctx_->kv_heads_local) << "query head " << global_q << " has no local KV head";
  return local;
}

Tensor LlamaLayer::Forward(Tensor x, Recompute mode, LayerStash* s) {
  DT_CHECK_EQ(x.numel(), ctx_->local_rows * ctx_->hidden) << "layer " << layer_ << " input";
  s->x = std::move(x);
  Tensor out;
  ForwardInto(s, mode == Recompute::kNone, &out);
  if (mode == Recompute::kFull) {
    Tensor keep = std::move(s->x);
    *s = LayerStash();
    s->x = std::move(keep);
  }
  return out;
}

void LlamaLayer::ForwardInto(LayerStash* s, bool keep_probs, Tensor* out) {
  Backend& be = *ctx_->be;
  const int64_t rl = ctx_->local_rows, rows = ctx_->rows, h = ctx_->hidden, hd = ctx_->head_dim;
  const int64_t hq = ctx_->heads_local, kvl = ctx_->kv_heads_local, fl = ctx_->ffn_local;
  const int64_t qd = hq * hd, kvd = kvl * hd;
  const float eps = static_cast<float>(ctx_->norm_eps);
  const AttentionDims ad{ctx_->seq, ctx_->batch, hq, hd};

  s->rstd1 = Tensor({rl});
  s->ln1 = Tensor({rl, h});
  RmsNormForward(be, s->x.data(), ctx_->W(norm1_w_), rl, h, eps, s->ln1.data(), s->rstd1.data());
  {
    Tensor full = GatherSeq(ctx_, s->ln1);
    Tensor q({rows, qd}), k({rows, kvd}), v({rows, kvd});
    LinearForward(be, full.data(), rows, h, ctx_->W(q_w_), nullptr, qd, q.data());
    LinearForward(be, full.data(), rows, h, ctx_->W(k_w_), nullptr, kvd, k.data());
    LinearForward(be, full.data(), rows, h, ctx_->W(v_w_), nullptr, kvd, v.data());
    const std::vector<int64_t> pos = Positions();
    RopeForward(be, {ctx_->seq, ctx_->batch, hq, hd, ctx_->rope_theta}, pos.data(), q.data());
    RopeForward(be, {ctx_->seq, ctx_->batch, kvl, hd, ctx_->rope_theta}, pos.data(), k.data());
    // Expand into the attention core's [rows, hq, {q,k,v}, hd] layout.
    s->qkv = Tensor({rows, 3 * qd});
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < hq; ++i) {
        float* dst = s->qkv.data() + (r * hq + i) * 3 * hd;
        const int64_t j = KvOf(i);
        std::memcpy(dst, q.data() + r * qd + i * hd, sizeof(float) * hd);
        std::memcpy(dst + hd, k.data() + r * kvd + j * hd, sizeof(float) * hd);
        std::memcpy(dst + 2 * hd, v.data() + r * kvd + j * hd, sizeof(float) * hd);
      }
  }
  s->attn = Tensor({rows, qd});
  if (ctx_->cp_size > 1) {  // ring attention over the CP group, as GptLayer
    if (keep_probs) s->probs = Tensor({ctx_->cp_size, ad.batch, ad.heads, ad.seq, ad.seq});
    s->lse = Tensor({ad.batch, ad.heads, ad.seq});
    RingAttentionForward(be, ctx_->cp, ad, s->qkv.data(), keep_probs ? s->probs.data() : nullptr, s->lse.data(),
                         s->attn.data());
  } else {
    Tensor probs({ad.batch, ad.heads, ad.seq, ad.seq});
    AttentionForward(be, ad, s->qkv.data(), probs.data(), s->attn.data());
    if (keep_probs) s->probs = std::move(probs);
  }
  Tensor proj;
  {
    Tensor partial({rows, h});
    LinearForward(be, s->attn.data(), rows, qd, ctx_->W(o_w_), nullptr, h, partial.data());
    proj = ReduceSeq(ctx_, &partial);
  }
  s->x2 = Tensor({rl, h});
  ResidualAddForward(be, s->x.data(), proj.data(), rl * h, s->x2.data());
  proj = Tensor();

  s->rstd2 = Tensor({rl});
  s->ln2 = Tensor({rl, h});
  RmsNormForward(be, s->x2.data(), ctx_->W(norm2_w_), rl, h, eps, s->ln2.data(), s->rstd2.data());
  if (moe_) {  // on the sequence shard itself (Megatron's MoE layer: no TP gather / reduce around it)
    s->moe = std::make_shared<MoeStash>();
    Tensor mlp = moe_->Forward(s->ln2, s->moe.get());
    if (shared_gate_w_ >= 0) AddSharedForward(s, &mlp);
    *out = Tensor({rl, h});
    ResidualAddForward(be, s->x2.data(), mlp.data(), rl * h, out->data());
    s->complete = true;
    return;
  }
  Tensor mlp = SwiGluMlpForward(s, {gate_w_, up_w_, down_w_, fl});
  *out = Tensor({rl, h});
  ResidualAddForward(be, s->x2.data(), mlp.data(), rl * h, out->data());
  s->complete = true;
}

Tensor LlamaLayer::SwiGluMlpForward(LayerStash* s, const MlpWeights& w) {
  Backend& be = *ctx_->be;
  const int64_t rows = ctx_->rows, h = ctx_->hidden, fl = w.f_local;
  {
    Tensor full = GatherSeq(ctx_, s->ln2);
    s->fc1 = Tensor({rows, fl});
    s->up = Tensor({rows, fl});
    LinearForward(be, full.data(), rows, h, ctx_->W(w.gate), nullptr, fl, s->fc1.data());
    LinearForward(be, full.data(), rows, h, ctx_->W(w.up), nullptr, fl, s->up.data());
  }
  s->act = Tensor({rows, fl});
  SwiGluForward(be, s->fc1.data(), s->up.data(), rows * fl, s->act.data());
  Tensor partial({rows, h});
  LinearForward(be, s->act.data(), rows, fl, ctx_->W(w.down), nullptr, h, partial.data());
  return ReduceSeq(ctx_, &partial);
}

Tensor LlamaLayer::SwiGluMlpBackward(const Tensor& dout, LayerStash* s, const MlpWeights& w) {
  Backend& be = *ctx_->be;
  const int64_t rows = ctx_->rows, h = ctx_->hidden, fl = w.f_local;
  Tensor dln2_full({rows, h});
  // (Without SP GatherSeq returns a view of dout: the caller keeps dout alive.)
  Tensor dmlp_full = GatherSeq(ctx_, dout);
  Tensor dact({rows, fl});
  LinearBackward(be, s->act.data(), rows, fl, ctx_->W(w.down), h, dmlp_full.data(), dact.data(), ctx_->G(w.down),
                 nullptr);
  Tensor dgate({rows, fl}), dup({rows, fl});
  SwiGluBackward(be, s->fc1.data(), s->up.data(), dact.data(), rows * fl, dgate.data(), dup.data());
  Tensor ln2_full = GatherSeq(ctx_, s->ln2);
  LinearBackward(be, ln2_full.data(), rows, h, ctx_->W(w.gate), fl, dgate.data(), dln2_full.data(),
                 ctx_->G(w.gate), nullptr);
  Tensor dtmp({rows, h});
  LinearBackward(be, ln2_full.data(), rows, h, ctx_->W(w.up), fl, dup.data(), dtmp.data(), ctx_->G(w.up), nullptr);
  be.Axpy(1.0f, dtmp.data(), dln2_full.data(), rows * h);
  return dln2_full;
}

void LlamaLayer::AddReplicatedKvGrads(const Tensor& dk_w, const Tensor& dv_w) {
  // Each rank writes its shard's grad into the slot of its KV head in a
  // zeroed full-size buffer; the TP all-reduce sums the ranks sharing a slot.
  const int64_t n = dk_w.numel(), kv = ctx_->kv_heads;
  Tensor all({2 * kv * n});
  std::memcpy(all.data() + kv_first_ * n, dk_w.data(), sizeof(float) * n);
  std::memcpy(all.data() + (kv + kv_first_) * n, dv_w.data(), sizeof(float) * n);
  TpAllReduce(ctx_->tp, all.data(), all.numel());
  ctx_->be->Axpy(1.0f, all.data() + kv_first_ * n, ctx_->G(k_w_), n);
  ctx_->be->Axpy(1.0f, all.data() + (kv + kv_first_) * n, ctx_->G(v_w_), n);
}

Tensor LlamaLayer::Backward(const Tensor& dout, LayerStash* s) {
  Backend& be = *ctx_->be;
  const int64_t rl = ctx_->local_rows, rows = ctx_->rows, h = ctx_->hidden, hd = ctx_->head_dim;
  const int64_t hq = ctx_->heads_local, kvl = ctx_->kv_heads_local, fl = ctx_->ffn_local;
  const int64_t qd = hq * hd, kvd = kvl * hd;
  const AttentionDims ad{ctx_->seq, ctx_->batch, hq, hd};
  DT_CHECK_EQ(dout.numel(), rl * h) << "layer " << layer_ << " grad";
  if (!s->complete) {
    Tensor discard;
    ForwardInto(s, true, &discard);
  }
  if (s->probs.empty() && ctx_->cp_size == 1) {  // selective recompute (CP: the ring recomputes from lse)
    s->probs = Tensor({ad.batch, ad.heads, ad.seq, ad.seq});
    AttentionProbs(be, ad, s->qkv.data(), s->probs.data());
  }

  // ---- MLP block: out = x2 + down(silu(gate(n2)) * up(n2)), n2 = RMSNorm(x2) ----
  Tensor dx2 = dout.Clone();
  Tensor dln2_full;  // dense MLP: the TP-partial input grad of all rows
  Tensor dln2_moe;   // MoE block: the shard's input grad, complete
  if (moe_) {
    dln2_moe = moe_->Backward(s->ln2, dout, s->moe.get());
    s->moe.reset();
    if (shared_gate_w_ >= 0) {
      Tensor dshared = SharedBackward(dout, s);
      be.Axpy(1.0f, dshared.data(), dln2_moe.data(), rl * h);
    }
  } else {
    dln2_full = SwiGluMlpBackward(dout, s, {gate_w_, up_w_, down_w_, fl});
  }
  s->act = Tensor();
  s->fc1 = Tensor();
  s->up = Tensor();
  {
    Tensor dln2 = moe_ ? std::move(dln2_moe) : ReduceSeq(ctx_, &dln2_full);
    Tensor dtmp({rl, h});
    RmsNormBackward(be, s->x2.data(), ctx_->W(norm2_w_), s->rstd2.data(), dln2.data(), rl, h, dtmp.data(),
                    ctx_->G(norm2_w_));
    be.Axpy(1.0f, dtmp.data(), dx2.data(), rl * h);
  }

  // ---- attention block: x2 = x + o(attn(rope(q), rope(k), v)), on n1 = RMSNorm(x) ----
  Tensor dx = dx2.Clone();
  Tensor dln1_full({rows, h});
  {
    Tensor dproj_full = GatherSeq(ctx_, dx2);
    Tensor dattn({rows, qd});
    LinearBackward(be, s->attn.data(), rows, qd, ctx_->W(o_w_), h, dproj_full.data(), dattn.data(),
                   ctx_->G(o_w_), nullptr);
    Tensor dqkv({rows, 3 * qd});
    if (ctx_->cp_size > 1) {
      RingAttentionBackward(be, ctx_->cp, ad, s->qkv.data(), s->probs.empty() ? nullptr : s->probs.data(),
                            s->lse.data(), s->attn.data(), dattn.data(), dqkv.data());
    } else {
      Tensor scratch({ad.seq, ad.seq});
      AttentionBackward(be, ad, s->qkv.data(), s->probs.data(), dattn.data(), dqkv.data(), scratch.data());
    }
    s->probs = Tensor();
    // Un-expand: dq per query head; dk, dv summed over the query heads of each KV head.
    Tensor dq({rows, qd}), dk({rows, kvd}), dv({rows, kvd});
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < hq; ++i) {
        const float* src = dqkv.data() + (r * hq + i) * 3 * hd;
        const int64_t j = KvOf(i);
        std::memcpy(dq.data() + r * qd + i * hd, src, sizeof(float) * hd);
        float* dkr = dk.data() + r * kvd + j * hd;
        float* dvr = dv.data() + r * kvd + j * hd;
        for (int64_t e = 0; e < hd; ++e) {
          dkr[e] += src[hd + e];
          dvr[e] += src[2 * hd + e];
        }
      }
    dqkv = Tensor();
    const std::vector<int64_t> pos = Positions();
    RopeBackward(be, {ctx_->seq, ctx_->batch, hq, hd, ctx_->rope_theta}, pos.data(), dq.data());
    RopeBackward(be, {ctx_->seq, ctx_->batch, kvl, hd, ctx_->rope_theta}, pos.data(), dk.data());
    Tensor ln1_full = GatherSeq(ctx_, s->ln1);
    LinearBackward(be, ln1_full.data(), rows, h, ctx_->W(q_w_), qd, dq.data(), dln1_full.data(), ctx_->G(q_w_),
                   nullptr);
    Tensor dtmp({rows, h});
    if (kv_replicated_) {
      Tensor dk_w({kvd, h}), dv_w({kvd, h});
      LinearBackward(be, ln1_full.data(), rows, h, ctx_->W(k_w_), kvd, dk.data(), dtmp.data(), dk_w.data(), nullptr);
      be.Axpy(1.0f, dtmp.data(), dln1_full.data(), rows * h);
      LinearBackward(be, ln1_full.data(), rows, h, ctx_->W(v_w_), kvd, dv.data(), dtmp.data(), dv_w.data(), nullptr);
      be.Axpy(1.0f, dtmp.data(), dln1_full.data(), rows * h);
      AddReplicatedKvGrads(dk_w, dv_w);
    } else {
      LinearBackward(be, ln1_full.data(), rows, h, ctx_->W(k_w_), kvd, dk.data(), dtmp.data(), ctx_->G(k_w_),
                     nullptr);
      be.Axpy(1.0f, dtmp.data(), dln1_full.data(), rows * h);
      LinearBackward(be, ln1_full.data(), rows, h, ctx_->W(v_w_), kvd, dv.data(), dtmp.data(), ctx_->G(v_w_),
                     nullptr);
      be.Axpy(1.0f, dtmp.data(), dln1_full.data(), rows * h);
    }
  }
  {
    Tensor dln1 = ReduceSeq(ctx_, &dln1_full);
    Tensor dtmp({rl, h});
    RmsNormBackward(be, s->x.data(), ctx_->W(norm1_w_), s->rstd1.data(), dln1.data(), rl, h, dtmp.data(),
                    ctx_->G(norm1_w_));
    be.Axpy(1.0f, dtmp.data(), dx.data(), rl * h);
  }
  *s = LayerStash();
  return dx;
}


void LlamaLayer::AddSharedForward(LayerStash* s, Tensor* mlp) {
  Backend& be = *ctx_->be;
  const int64_t rl = ctx_->local_rows, h = ctx_->hidden;
  Tensor out = SwiGluMlpForward(s, {shared_gate_w_, shared_up_w_, shared_down_w_, ctx_->shared_ffn_local});
  if (shared_scale_w_ < 0) {
    be.Axpy(1.0f, out.data(), mlp->data(), rl * h);
    return;
  }
  // Qwen2-MoE's gate: g = sigmoid(n2 . w) per token of this rank's shard.
  s->shared_g = Tensor({rl});
  LinearForward(be, s->ln2.data(), rl, h, ctx_->W(shared_scale_w_), nullptr, 1, s->shared_g.data());
  HostAccess(be, "shared expert gate");
  for (int64_t r = 0; r < rl; ++r) {
    const float g = 1.0f / (1.0f + std::exp(-s->shared_g[r]));
    s->shared_g[r] = g;
    be.Axpy(g, out.data() + r * h, mlp->data() + r * h, h);
  }
  s->shared_out = std::move(out);  // the gate's backward reads it
}

Tensor LlamaLayer::SharedBackward(const Tensor& dout, LayerStash* s) {
  Backend& be = *ctx_->be;
  const int64_t rl = ctx_->local_rows, h = ctx_->hidden;
  // Through the gate: d(out) = g dout; d(logit) = (dout . out) g (1 - g).
  Tensor dshared_out;
  Tensor dln2_gate;
  if (shared_scale_w_ >= 0) {
    HostAccess(be, "shared expert gate backward");
    dshared_out = Tensor({rl, h});
    Tensor dlogit({rl});
    for (int64_t r = 0; r < rl; ++r) {
      const float g = s->shared_g[r];
      const float* d = dout.data() + r * h;
      const float* o = s->shared_out.data() + r * h;
      float* dy = dshared_out.data() + r * h;
      float dot = 0.0f;
      for (int64_t c = 0; c < h; ++c) {
        dot += d[c] * o[c];
        dy[c] = g * d[c];
      }
      dlogit[r] = dot * g * (1.0f - g);
    }
    s->shared_out = Tensor();
    s->shared_g = Tensor();
    dln2_gate = Tensor({rl, h});
    LinearBackward(be, s->ln2.data(), rl, h, ctx_->W(shared_scale_w_), 1, dlogit.data(), dln2_gate.data(),
                   ctx_->G(shared_scale_w_), nullptr);
  }
  Tensor dln2_full = SwiGluMlpBackward(shared_scale_w_ >= 0 ? dshared_out : dout, s,
                                       {shared_gate_w_, shared_up_w_, shared_down_w_, ctx_->shared_ffn_local});
  dshared_out = Tensor();
  Tensor dln2 = ReduceSeq(ctx_, &dln2_full);
  if (!dln2_gate.empty()) be.Axpy(1.0f, dln2_gate.data(), dln2.data(), rl * h);
  return dln2;
}

}  // namespace dt::rt
