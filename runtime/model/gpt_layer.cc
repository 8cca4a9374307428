#include "runtime/model/gpt_layer.h"

#include <cmath>

#include "base/check.h"
#include "runtime/model/init.h"
#include "runtime/model/tp_ops.h"
#include "runtime/ops/attention.h"
#include "runtime/ops/dropout.h"
#include "runtime/ops/gelu.h"
#include "runtime/ops/layernorm.h"
#include "runtime/ops/host_ops.h"
#include "runtime/ops/linear.h"
#include "runtime/ops/residual.h"
#include "runtime/ops/ring_attention.h"

namespace dt::rt {

GptLayer::GptLayer(LayerContext* ctx, int layer, int num_layers)
    : ctx_(ctx), layer_(layer), num_layers_(num_layers) {
  const std::string p = "layers." + std::to_string(layer) + ".";
  const int64_t h = ctx->hidden, f = ctx->ffn_local * ctx->tp_size;
  ln1_w_ = DeclareParam(ctx, p + "ln1.weight", {h}, ShardKind::kReplicated, true);
  ln1_b_ = DeclareParam(ctx, p + "ln1.bias", {h}, ShardKind::kReplicated, true);
  // QKV rows are ordered [head, {q,k,v}, head_dim] so a dim-0 shard is whole heads.
  qkv_w_ = DeclareParam(ctx, p + "attn.qkv.weight", {3 * h, h}, ShardKind::kSplitDim0, false);
  qkv_b_ = DeclareParam(ctx, p + "attn.qkv.bias", {3 * h}, ShardKind::kSplitDim0, false);
  proj_w_ = DeclareParam(ctx, p + "attn.proj.weight", {h, h}, ShardKind::kSplitDim1, false);
  proj_b_ = DeclareParam(ctx, p + "attn.proj.bias", {h}, ShardKind::kReplicated, true);
  ln2_w_ = DeclareParam(ctx, p + "ln2.weight", {h}, ShardKind::kReplicated, true);
  ln2_b_ = DeclareParam(ctx, p + "ln2.bias", {h}, ShardKind::kReplicated, true);
  fc1_w_ = DeclareParam(ctx, p + "mlp.fc1.weight", {f, h}, ShardKind::kSplitDim0, false);
  fc1_b_ = DeclareParam(ctx, p + "mlp.fc1.bias", {f}, ShardKind::kSplitDim0, false);
  fc2_w_ = DeclareParam(ctx, p + "mlp.fc2.weight", {h, f}, ShardKind::kSplitDim1, false);
  fc2_b_ = DeclareParam(ctx, p + "mlp.fc2.bias", {h}, ShardKind::kReplicated, true);
}

void GptLayer::Init(uint64_t seed) {
  const auto& ps = ctx_->store->params();
  auto normal = [&](int i, float std) { InitNormal(ps[i], seed, std, ctx_->W(i)); };
  auto constant = [&](int i, float v) { InitConstant(ps[i], v, ctx_->W(i)); };
  const float out_std = 0.02f / std::sqrt(2.0f * num_layers_);  // GPT-2 residual scaling
  constant(ln1_w_, 1.0f);
  constant(ln1_b_, 0.0f);
  normal(qkv_w_, 0.02f);
  constant(qkv_b_, 0.0f);
  normal(proj_w_, out_std);
  constant(proj_b_, 0.0f);
  constant(ln2_w_, 1.0f);
  constant(ln2_b_, 0.0f);
  normal(fc1_w_, 0.02f);
  constant(fc1_b_, 0.0f);
  normal(fc2_w_, out_std);
  constant(fc2_b_, 0.0f);
}

Tensor GptLayer::Forward(Tensor x, Recompute mode, LayerStash* s) {
  DT_CHECK_EQ(x.numel(), ctx_->local_rows * ctx_->hidden) << "layer " << layer_ << " input";
  s->x = std::move(x);
  Tensor out;
  ForwardInto(s, mode == Recompute::kNone, &out);
  if (mode == Recompute::kFull) {  // keep only the input
    Tensor keep = std::move(s->x);
    *s = LayerStash();
    s->x = std::move(keep);
  }
  return out;
}

namespace {
// Buffers below that the next op overwrites entirely (LayerNorm, GEMMs with
// beta 0, GeLU, softmax, residual adds, one attention head block each) skip
// the zero-fill; anything accumulated into stays Tensor(shape) (zeroed).
Tensor U(Shape shape) { return Tensor::Uninitialized(std::move(shape)); }

AttentionDropout AttentionDropoutOf(const LayerContext& ctx, int layer) {
  AttentionDropout d;
  if (!ctx.dropout.on()) return d;
  d.rng = &ctx.dropout;
  d.layer = layer;
  d.samples = &ctx.samples;
  d.head0 = static_cast<int64_t>(ctx.tp_rank) * ctx.heads_local;
  return d;
}

// Dropout of a residual branch [local_rows, h] in place, its mask kept.
void DropBranch(const LayerContext& ctx, DropoutSite site, int layer, Tensor* branch, DropoutMask* mask) {
  const int64_t n = branch->numel();
  *mask = DropoutMask(n);
  HostAccess(*ctx.be, "residual dropout");
  DrawTokenMask(ctx.dropout, site, layer, ctx.samples, ctx.ShardPositions(), ctx.local_rows, ctx.hidden,
                mask->data());
  ApplyMask(branch->data(), mask->data(), ctx.dropout.scale(), n, branch->data());
}

// The grad of a dropped-out residual branch: dout * mask / (1 - rate).
Tensor BranchGrad(const LayerContext& ctx, const Tensor& dout, const DropoutMask& mask) {
  if (mask.empty()) return dout.Reshaped(dout.shape());
  Tensor g = U(dout.shape());
  HostAccess(*ctx.be, "residual dropout backward");
  ApplyMask(dout.data(), mask.data(), ctx.dropout.scale(), dout.numel(), g.data());
  return g;
}
}  // namespace

void GptLayer::ForwardInto(LayerStash* s, bool keep_probs, Tensor* out) {
  Backend& be = *ctx_->be;
  const int64_t rl = ctx_->local_rows, rows = ctx_->rows, h = ctx_->hidden;
  const int64_t hl = ctx_->heads_local * ctx_->head_dim, fl = ctx_->ffn_local;
  const AttentionDims ad{ctx_->seq, ctx_->batch, ctx_->heads_local, ctx_->head_dim};
  const AttentionDropout drop = AttentionDropoutOf(*ctx_, layer_);

  s->mean1 = U({rl});
  s->rstd1 = U({rl});
  s->ln1 = U({rl, h});
  LayerNormForward(be, s->x.data(), ctx_->W(ln1_w_), ctx_->W(ln1_b_), rl, h, s->ln1.data(),
                   s->mean1.data(), s->rstd1.data());
  {
    Tensor ln1_full = GatherSeq(ctx_, s->ln1);
    s->qkv = U({rows, 3 * hl});
    LinearForward(be, ln1_full.data(), rows, h, ctx_->W(qkv_w_), ctx_->W(qkv_b_), 3 * hl, s->qkv.data());
  }
  s->attn = ctx_->cp_size > 1 ? Tensor({rows, hl}) : U({rows, hl});
  if (ctx_->cp_size > 1) {
    if (keep_probs) s->probs = Tensor({ctx_->cp_size, ad.batch, ad.heads, ad.seq, ad.seq});
    if (keep_probs && drop.on()) {
      s->probs_mask = DropoutMask(RingProbsNumel(ad, ctx_->cp_size));
      s->dropped = U({ctx_->cp_size, ad.batch, ad.heads, ad.seq, ad.seq});
    }
    s->lse = Tensor({ad.batch, ad.heads, ad.seq});
    RingAttentionForward(be, ctx_->cp, ad, s->qkv.data(), keep_probs ? s->probs.data() : nullptr, s->lse.data(),
                         s->attn.data(), drop, s->probs_mask.empty() ? nullptr : s->probs_mask.data(),
                         s->dropped.empty() ? nullptr : s->dropped.data());
  } else {
    Tensor probs = U({ad.batch, ad.heads, ad.seq, ad.seq});
    DropoutMask mask;
    Tensor dropped;
    if (drop.on()) {
      mask = DropoutMask(ad.ProbsNumel());
      dropped = U({ad.batch, ad.heads, ad.seq, ad.seq});
    }
    AttentionForward(be, ad, s->qkv.data(), probs.data(), s->attn.data(), drop, mask.empty() ? nullptr : mask.data(),
                     dropped.empty() ? nullptr : dropped.data());
    if (keep_probs) {
      s->probs = std::move(probs);
      s->probs_mask = std::move(mask);
      s->dropped = std::move(dropped);
    }
  }
  Tensor proj;
  {
    Tensor partial = U({rows, h});
    LinearForward(be, s->attn.data(), rows, hl, ctx_->W(proj_w_), nullptr, h, partial.data());
    proj = ReduceSeq(ctx_, &partial);
  }
  be.AddBias(proj.data(), ctx_->W(proj_b_), rl, h);
  if (drop.on()) DropBranch(*ctx_, DropoutSite::kAttentionOut, layer_, &proj, &s->attn_out_mask);
  s->x2 = U({rl, h});
  ResidualAddForward(be, s->x.data(), proj.data(), rl * h, s->x2.data());
  proj = Tensor();

  s->mean2 = U({rl});
  s->rstd2 = U({rl});
  s->ln2 = U({rl, h});
  LayerNormForward(be, s->x2.data(), ctx_->W(ln2_w_), ctx_->W(ln2_b_), rl, h, s->ln2.data(),
                   s->mean2.data(), s->rstd2.data());
  {
    Tensor ln2_full = GatherSeq(ctx_, s->ln2);
    s->fc1 = U({rows, fl});
    LinearForward(be, ln2_full.data(), rows, h, ctx_->W(fc1_w_), ctx_->W(fc1_b_), fl, s->fc1.data());
  }
  s->act = U({rows, fl});
  GeluForward(be, s->fc1.data(), rows * fl, s->act.data());
  Tensor mlp;
  {
    Tensor partial = U({rows, h});
    LinearForward(be, s->act.data(), rows, fl, ctx_->W(fc2_w_), nullptr, h, partial.data());
    mlp = ReduceSeq(ctx_, &partial);
  }
  be.AddBias(mlp.data(), ctx_->W(fc2_b_), rl, h);
  if (drop.on()) DropBranch(*ctx_, DropoutSite::kMlpOut, layer_, &mlp, &s->mlp_out_mask);
  *out = U({rl, h});
  ResidualAddForward(be, s->x2.data(), mlp.data(), rl * h, out->data());
  s->complete = true;
}

Tensor GptLayer::Backward(const Tensor& dout, LayerStash* s) {
  Backend& be = *ctx_->be;
  const int64_t rl = ctx_->local_rows, rows = ctx_->rows, h = ctx_->hidden;
  const int64_t hl = ctx_->heads_local * ctx_->head_dim, fl = ctx_->ffn_local;
  const AttentionDims ad{ctx_->seq, ctx_->batch, ctx_->heads_local, ctx_->head_dim};
  const AttentionDropout drop = AttentionDropoutOf(*ctx_, layer_);
  DT_CHECK_EQ(dout.numel(), rl * h) << "layer " << layer_ << " grad";
  if (!s->complete) {  // full recompute: rerun the forward from the stashed input
    Tensor discard;
    ForwardInto(s, true, &discard);
  }
  if (s->probs.empty() && ctx_->cp_size == 1) {  // selective recompute: only the attention probabilities
    s->probs = U({ad.batch, ad.heads, ad.seq, ad.seq});
    AttentionProbs(be, ad, s->qkv.data(), s->probs.data());
    if (drop.on()) {  // the same masks as the forward's (keyed by global indices)
      s->probs_mask = DropoutMask(ad.ProbsNumel());
      s->dropped = U({ad.batch, ad.heads, ad.seq, ad.seq});
      AttentionDropProbs(be, ad, drop, s->probs.data(), s->probs_mask.data(), s->dropped.data());
    }
  }

  // ---- MLP block: out = x2 + fc2(gelu(fc1(LN2(x2)))) + b2 ----
  Tensor dx2 = dout.Clone();
  Tensor dmlp = BranchGrad(*ctx_, dout, s->mlp_out_mask);  // dout itself without dropout
  be.BiasGrad(dmlp.data(), ctx_->G(fc2_b_), rl, h);
  Tensor dln2_full = U({rows, h});
  {
    Tensor dmlp_full = GatherSeq(ctx_, dmlp);
    Tensor dact = U({rows, fl});
    LinearBackward(be, s->act.data(), rows, fl, ctx_->W(fc2_w_), h, dmlp_full.data(), dact.data(),
                   ctx_->G(fc2_w_), nullptr);
    GeluBackward(be, s->fc1.data(), dact.data(), rows * fl, dact.data());
    Tensor ln2_full = GatherSeq(ctx_, s->ln2);
    LinearBackward(be, ln2_full.data(), rows, h, ctx_->W(fc1_w_), fl, dact.data(), dln2_full.data(),
                   ctx_->G(fc1_w_), ctx_->G(fc1_b_));
  }
  s->act = Tensor();
  s->fc1 = Tensor();
  {
    Tensor dln2 = ReduceSeq(ctx_, &dln2_full);
    Tensor dtmp = U({rl, h});
    LayerNormBackward(be, s->x2.data(), ctx_->W(ln2_w_), s->mean2.data(), s->rstd2.data(), dln2.data(),
                      rl, h, dtmp.data(), ctx_->G(ln2_w_), ctx_->G(ln2_b_));
    be.Axpy(1.0f, dtmp.data(), dx2.data(), rl * h);
  }

  // ---- attention block: x2 = x + proj(attn(QKV(LN1(x)))) + bp ----
  dmlp = Tensor();
  Tensor dx = dx2.Clone();
  Tensor dbranch = BranchGrad(*ctx_, dx2, s->attn_out_mask);
  be.BiasGrad(dbranch.data(), ctx_->G(proj_b_), rl, h);
  Tensor dln1_full = U({rows, h});
  {
    Tensor dproj_full = GatherSeq(ctx_, dbranch);
    Tensor dattn = U({rows, hl});
    LinearBackward(be, s->attn.data(), rows, hl, ctx_->W(proj_w_), h, dproj_full.data(), dattn.data(),
                   ctx_->G(proj_w_), nullptr);
    Tensor dqkv = ctx_->cp_size > 1 ? Tensor({rows, 3 * hl}) : U({rows, 3 * hl});
    if (ctx_->cp_size > 1) {
      RingAttentionBackward(be, ctx_->cp, ad, s->qkv.data(), s->probs.empty() ? nullptr : s->probs.data(),
                            s->lse.data(), s->attn.data(), dattn.data(), dqkv.data(), drop,
                            s->probs_mask.empty() ? nullptr : s->probs_mask.data(),
                            s->dropped.empty() ? nullptr : s->dropped.data());
    } else {
      Tensor scratch = U({ad.seq, ad.seq});
      AttentionBackward(be, ad, s->qkv.data(), s->probs.data(), dattn.data(), dqkv.data(), scratch.data(), drop,
                        s->probs_mask.empty() ? nullptr : s->probs_mask.data(),
                        s->dropped.empty() ? nullptr : s->dropped.data());
    }
    s->probs = Tensor();
    s->dropped = Tensor();
    s->probs_mask = DropoutMask();
    Tensor ln1_full = GatherSeq(ctx_, s->ln1);
    LinearBackward(be, ln1_full.data(), rows, h, ctx_->W(qkv_w_), 3 * hl, dqkv.data(),
                   dln1_full.data(), ctx_->G(qkv_w_), ctx_->G(qkv_b_));
  }
  {
    Tensor dln1 = ReduceSeq(ctx_, &dln1_full);
    Tensor dtmp = U({rl, h});
    LayerNormBackward(be, s->x.data(), ctx_->W(ln1_w_), s->mean1.data(), s->rstd1.data(), dln1.data(),
                      rl, h, dtmp.data(), ctx_->G(ln1_w_), ctx_->G(ln1_b_));
    be.Axpy(1.0f, dtmp.data(), dx.data(), rl * h);
  }
  *s = LayerStash();
  return dx;
}

}  // namespace dt::rt
