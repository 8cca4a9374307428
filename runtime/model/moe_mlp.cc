#include "runtime/model/moe_mlp.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "runtime/model/init.h"
#include "runtime/model/tp_ops.h"
#include "runtime/ops/host_ops.h"
#include "runtime/ops/linear.h"
#include "runtime/ops/moe_router.h"
#include "runtime/ops/swiglu.h"

namespace dt::rt {

MoeMlp::MoeMlp(LayerContext* ctx, const std::string& prefix) : ctx_(ctx) {
  const int64_t h = ctx->hidden, e = ctx->num_experts, f = ctx->expert_ffn_local * ctx->tp_size;
  DT_CHECK(e > 0 && ctx->top_k >= 1 && ctx->top_k <= e) << "MoE: top-k " << ctx->top_k << " of " << e;
  DT_CHECK(ctx->ep_size >= 1 && e % ctx->ep_size == 0) << "MoE: ep " << ctx->ep_size << " must divide " << e;
  DT_CHECK(ctx->ep_size == 1 || (ctx->ep != nullptr && ctx->ep->size() == ctx->ep_size)) << "MoE: ep comm size";
  // Replicated over TP; each TP rank routes its own sequence shard, so its
  // gradient is a partial sum over TP (sp_partial).
  router_w_ = DeclareParam(ctx, prefix + "mlp.router.weight", {e, h}, ShardKind::kReplicated, true);
  const int64_t el = local_experts();
  for (int64_t j = 0; j < el; ++j) {
    const std::string p = prefix + "mlp.experts." + std::to_string(ctx->ep_rank * el + j) + ".";
    gate_w_.push_back(DeclareParam(ctx, p + "gate.weight", {f, h}, ShardKind::kSplitDim0, false));
    up_w_.push_back(DeclareParam(ctx, p + "up.weight", {f, h}, ShardKind::kSplitDim0, false));
    down_w_.push_back(DeclareParam(ctx, p + "down.weight", {h, f}, ShardKind::kSplitDim1, false));
    for (int i : {gate_w_.back(), up_w_.back(), down_w_.back()}) ctx->store->params()[i].expert = true;
  }
}

void MoeMlp::Init(uint64_t seed, float out_std) {
  const auto& ps = ctx_->store->params();
  InitNormal(ps[router_w_], seed, 0.02f, ctx_->W(router_w_));
  for (size_t j = 0; j < gate_w_.size(); ++j) {
    InitNormal(ps[gate_w_[j]], seed, 0.02f, ctx_->W(gate_w_[j]));
    InitNormal(ps[up_w_[j]], seed, 0.02f, ctx_->W(up_w_[j]));
    InitNormal(ps[down_w_[j]], seed, out_std, ctx_->W(down_w_[j]));
  }
}

void MoeMlp::Exchange(const float* in, const std::vector<size_t>& send, float* out,
                      const std::vector<size_t>& recv) {
  const size_t h = static_cast<size_t>(ctx_->hidden);
  if (ctx_->ep_size == 1) {
    HostAccess(*ctx_->be, "MoE dispatch (one EP rank)");
    if (send[0] > 0) std::memcpy(out, in, send[0] * h * sizeof(float));
    return;
  }
  std::vector<size_t> sc(send.size()), rc(recv.size());
  for (size_t p = 0; p < send.size(); ++p) {
    sc[p] = send[p] * h;
    rc[p] = recv[p] * h;
  }
  ctx_->ep->AllToAllV(in, sc.data(), out, rc.data());
}

void MoeMlp::Reorder(const MoeStash& s, const float* from, int64_t width, float* to, bool to_expert_major) const {
  const int64_t el = local_experts(), ep = ctx_->ep_size, tp = ctx_->tp_size;
  int64_t row = 0;  // in expert-major order: by local expert, then TP rank, then EP source
  for (int64_t j = 0; j < el; ++j)
    for (int64_t q = 0; q < tp * ep; ++q) {
      const int64_t b = q * el + j, n = s.block_rows[b];
      if (n > 0) {
        float* dst = to_expert_major ? to + row * width : to + s.block_at[b] * width;
        const float* src = to_expert_major ? from + s.block_at[b] * width : from + row * width;
        std::memcpy(dst, src, sizeof(float) * n * width);
      }
      row += n;
    }
}

Tensor MoeMlp::GatherOverTp(const MoeStash& s, Tensor own) const {
  const int64_t h = ctx_->hidden, tp = ctx_->tp_size;
  if (tp == 1) return own;
  Tensor padded({s.tp_pad, h});
  if (s.own_rows > 0) std::memcpy(padded.data(), own.data(), sizeof(float) * s.own_rows * h);
  Tensor all({tp * s.tp_pad, h});
  ctx_->tp->AllGather(padded.data(), all.data(), static_cast<size_t>(s.tp_pad * h));
  return all;
}

Tensor MoeMlp::ReduceScatterOverTp(const MoeStash& s, Tensor* gathered) const {
  const int64_t h = ctx_->hidden, tp = ctx_->tp_size;
  if (tp == 1) return std::move(*gathered);
  Tensor own({s.tp_pad, h});
  ctx_->tp->ReduceScatter(gathered->data(), own.data(), static_cast<size_t>(s.tp_pad * h));
  return own;
}

Tensor MoeMlp::Forward(const Tensor& in, MoeStash* s) {
  Backend& be = *ctx_->be;
  const int64_t rows = ctx_->local_rows, h = ctx_->hidden, e = ctx_->num_experts, k = ctx_->top_k;
  const int64_t el = local_experts(), ep = ctx_->ep_size, tp = ctx_->tp_size, fl = ctx_->expert_ffn_local;
  DT_CHECK(tp == 1 || ctx_->sp) << "MoE with tp > 1 needs sequence parallelism";
  DT_CHECK_EQ(in.numel(), rows * h) << "MoE input";

  // Route this rank's sequence shard.
  Tensor logits = Tensor::Uninitialized({rows, e});  // overwritten by the GEMM
  LinearForward(be, in.data(), rows, h, ctx_->W(router_w_), nullptr, e, logits.data());
  s->experts.assign(rows * k, 0);
  s->weights = Tensor({rows * k});
  RouteTopK(logits.data(), rows, e, k, s->experts.data(), s->weights.data());

  // Expert capacity: each expert keeps at most `cap` of this rank's copies
  // (the largest weights); padded, it receives exactly `cap` rows, zero
  // rows after the kept copies. Dropped copies have no row (slot -1).
  std::vector<uint8_t> kept(rows * k, 1);
  int64_t cap = 0;
  if (ctx_->moe_capacity_factor > 0) {
    cap = ExpertCapacity(rows * k, e, ctx_->moe_capacity_factor);
    KeepWithinCapacity(s->experts.data(), s->weights.data(), rows * k, e, cap, kept.data());
  }

  // Sort the token copies by expert (stable: token, then slot order); the
  // experts of EP rank d are a contiguous block, so this groups by destination.
  const bool padded = ctx_->moe_pad_to_capacity && cap > 0;
  std::vector<int64_t> count(e, 0), next(e, 0);
  for (int64_t i = 0; i < rows * k; ++i)
    if (kept[i]) ++count[s->experts[i]];
  if (padded) std::fill(count.begin(), count.end(), cap);
  for (int64_t x = 1; x < e; ++x) next[x] = next[x - 1] + count[x - 1];
  s->send_total = next[e - 1] + count[e - 1];
  s->slot_row.assign(rows * k, -1);
  // Every row is copied below, unless padding leaves zero rows.
  Tensor send = padded ? Tensor({s->send_total, h}) : Tensor::Uninitialized({std::max<int64_t>(s->send_total, 1), h});
  for (int64_t i = 0; i < rows * k; ++i) {
    if (!kept[i]) continue;
    s->slot_row[i] = next[s->experts[i]]++;
    std::memcpy(send.data() + s->slot_row[i] * h, in.data() + (i / k) * h, sizeof(float) * h);
  }
  s->send_rows.assign(ep, 0);
  std::vector<float> counts_out(e), counts_in(e);
  for (int64_t x = 0; x < e; ++x) {
    s->send_rows[x / el] += static_cast<size_t>(count[x]);
    counts_out[x] = static_cast<float>(count[x]);  // exact below 2^24 rows
  }
  if (ep > 1) ctx_->ep->AllToAll(counts_out.data(), counts_in.data(), static_cast<size_t>(el));
  else counts_in = counts_out;
  // Every TP rank's received counts (the expert-TP group shares the local
  // experts and gathers the rows it received; the padded gather needs them).
  std::vector<float> counts_tp(tp * ep * el);
  if (tp > 1) ctx_->tp->AllGather(counts_in.data(), counts_tp.data(), static_cast<size_t>(ep * el));
  else counts_tp = counts_in;
  s->block_rows.assign(tp * ep * el, 0);
  s->recv_rows.assign(ep, 0);
  s->own_rows = 0;
  s->tp_pad = 0;
  int64_t all_rows = 0;
  for (int64_t t = 0; t < tp; ++t) {
    int64_t rows_t = 0;
    for (int64_t q = 0; q < ep * el; ++q) {
      const int64_t n = static_cast<int64_t>(counts_tp[t * ep * el + q]);
      s->block_rows[t * ep * el + q] = n;
      rows_t += n;
      if (t == ctx_->tp_rank) s->recv_rows[q / el] += static_cast<size_t>(n);
    }
    if (t == ctx_->tp_rank) s->own_rows = rows_t;
    s->tp_pad = std::max(s->tp_pad, std::max<int64_t>(rows_t, 1));
    all_rows += rows_t;
  }
  // Row of each block in the TP-gathered buffer: TP rank t's padded slot,
  // then by EP source, then local expert (the order an all-to-all receives).
  s->block_at.assign(tp * ep * el, 0);
  for (int64_t t = 0; t < tp; ++t) {
    int64_t at = t * s->tp_pad;
    for (int64_t q = 0; q < ep * el; ++q) {
      s->block_at[t * ep * el + q] = at;
      at += s->block_rows[t * ep * el + q];
    }
  }

  // Dispatch over EP, gather over TP, run the local experts on every
  // gathered row (each expert column-split over TP), reduce-scatter the
  // partial outputs back over TP, combine over EP.
  Tensor own({std::max<int64_t>(s->own_rows, 1), h});
  Exchange(send.data(), s->send_rows, own.data(), s->recv_rows);
  send = Tensor();
  Tensor gathered = GatherOverTp(*s, std::move(own));
  // Every row of these is written (by the reorder, the GEMMs, SwiGLU).
  s->x = Tensor::Uninitialized({all_rows, h});
  Reorder(*s, gathered.data(), h, s->x.data(), /*to_expert_major=*/true);
  s->gate = Tensor::Uninitialized({all_rows, fl});
  s->up = Tensor::Uninitialized({all_rows, fl});
  s->act = Tensor::Uninitialized({all_rows, fl});
  Tensor y = Tensor::Uninitialized({all_rows, h});
  int64_t r0 = 0;
  for (int64_t j = 0; j < el; ++j) {
    int64_t n = 0;
    for (int64_t q = 0; q < tp * ep; ++q) n += s->block_rows[q * el + j];
    if (n == 0) continue;
    const float* x = s->x.data() + r0 * h;
    float *g = s->gate.data() + r0 * fl, *u = s->up.data() + r0 * fl, *a = s->act.data() + r0 * fl;
    LinearForward(be, x, n, h, ctx_->W(gate_w_[j]), nullptr, fl, g);
    LinearForward(be, x, n, h, ctx_->W(up_w_[j]), nullptr, fl, u);
    SwiGluForward(be, g, u, n * fl, a);
    LinearForward(be, a, n, fl, ctx_->W(down_w_[j]), nullptr, h, y.data() + r0 * h);
    r0 += n;
  }
  HostAccess(be, "MoE expert outputs (reorder)");
  gathered.Fill(0.0f);  // padding rows stay zero through the reduce-scatter
  Reorder(*s, y.data(), h, gathered.data(), /*to_expert_major=*/false);
  y = Tensor();
  Tensor back_own = ReduceScatterOverTp(*s, &gathered);
  s->back = Tensor::Uninitialized({std::max<int64_t>(s->send_total, 1), h});  // every row received
  Exchange(back_own.data(), s->recv_rows, s->back.data(), s->send_rows);

  Tensor out({rows, h});
  for (int64_t i = 0; i < rows * k; ++i)
    if (s->slot_row[i] >= 0) be.Axpy(s->weights[i], s->back.data() + s->slot_row[i] * h, out.data() + (i / k) * h, h);
  return out;
}

Tensor MoeMlp::Backward(const Tensor& in, const Tensor& dout, MoeStash* s) {
  Backend& be = *ctx_->be;
  const int64_t rows = ctx_->local_rows, h = ctx_->hidden, e = ctx_->num_experts, k = ctx_->top_k;
  const int64_t el = local_experts(), ep = ctx_->ep_size, tp = ctx_->tp_size, fl = ctx_->expert_ffn_local;
  const int64_t all_rows = s->x.dim(0);
  DT_CHECK_EQ(dout.numel(), rows * h) << "MoE output grad";

  // Combine backward: grads of the router weights and of each token copy's
  // expert output (this rank's tokens, complete values: no TP reduction).
  Tensor dweights({rows * k});  // 0 for dropped copies: the output does not depend on them
  Tensor dsend({std::max<int64_t>(s->send_total, 1), h});  // padding rows stay zero
  HostAccess(be, "MoE combine backward");
  for (int64_t i = 0; i < rows * k; ++i) {
    if (s->slot_row[i] < 0) continue;
    const float* d = dout.data() + (i / k) * h;
    const float* y = s->back.data() + s->slot_row[i] * h;
    float dot = 0.0f;
    for (int64_t c = 0; c < h; ++c) dot += y[c] * d[c];
    dweights[i] = dot;
    be.Axpy(s->weights[i], d, dsend.data() + s->slot_row[i] * h, h);
  }
  s->back = Tensor();

  // To the experts (the dispatch's direction, then the TP gather), their
  // backward on every gathered row, the TP reduce-scatter, and back. Each
  // buffer is freed as soon as its rows have moved on (as autograd frees a
  // framework's), so the expert loop holds only the output and input
  // gradients of the gathered rows, the three gated-MLP gradients and one
  // expert's partial input gradient (planner/memory/stage_memory.cc).
  Tensor own({std::max<int64_t>(s->own_rows, 1), h});
  Exchange(dsend.data(), s->send_rows, own.data(), s->recv_rows);
  dsend = Tensor();
  Tensor gathered = GatherOverTp(*s, std::move(own));
  Tensor dy = Tensor::Uninitialized({all_rows, h});  // every row reordered into
  Reorder(*s, gathered.data(), h, dy.data(), /*to_expert_major=*/true);
  const int64_t gathered_rows = gathered.dim(0);
  gathered = Tensor();
  Tensor dx({all_rows, h});
  {
    int64_t most = 0;  // the largest expert's rows: the up branch's input grad
    for (int64_t j = 0; j < el; ++j) {
      int64_t n = 0;
      for (int64_t q = 0; q < tp * ep; ++q) n += s->block_rows[q * el + j];
      most = std::max(most, n);
    }
    Tensor dact({all_rows, fl}), dgate({all_rows, fl}), dup({all_rows, fl}), dtmp({std::max<int64_t>(most, 1), h});
    int64_t r0 = 0;
    for (int64_t j = 0; j < el; ++j) {
      int64_t n = 0;
      for (int64_t q = 0; q < tp * ep; ++q) n += s->block_rows[q * el + j];
      if (n == 0) continue;
      const float* x = s->x.data() + r0 * h;
      const int64_t a = r0 * fl, b = r0 * h;
      LinearBackward(be, s->act.data() + a, n, fl, ctx_->W(down_w_[j]), h, dy.data() + b, dact.data() + a,
                     ctx_->G(down_w_[j]), nullptr);
      SwiGluBackward(be, s->gate.data() + a, s->up.data() + a, dact.data() + a, n * fl, dgate.data() + a,
                     dup.data() + a);
      LinearBackward(be, x, n, h, ctx_->W(gate_w_[j]), fl, dgate.data() + a, dx.data() + b, ctx_->G(gate_w_[j]),
                     nullptr);
      LinearBackward(be, x, n, h, ctx_->W(up_w_[j]), fl, dup.data() + a, dtmp.data(), ctx_->G(up_w_[j]), nullptr);
      be.Axpy(1.0f, dtmp.data(), dx.data() + b, n * h);
      r0 += n;
    }
  }
  dy = Tensor();
  s->x = Tensor();
  s->gate = Tensor();
  s->up = Tensor();
  s->act = Tensor();
  HostAccess(be, "MoE expert input grads (reorder)");
  gathered = Tensor({gathered_rows, h});  // padding rows stay zero through the reduce-scatter
  Reorder(*s, dx.data(), h, gathered.data(), /*to_expert_major=*/false);
  dx = Tensor();
  Tensor dx_own = ReduceScatterOverTp(*s, &gathered);
  gathered = Tensor();
  Tensor dback = Tensor::Uninitialized({std::max<int64_t>(s->send_total, 1), h});  // every row received
  Exchange(dx_own.data(), s->recv_rows, dback.data(), s->send_rows);
  dx_own = Tensor();

  Tensor din({rows, h});
  for (int64_t i = 0; i < rows * k; ++i)
    if (s->slot_row[i] >= 0) be.Axpy(1.0f, dback.data() + s->slot_row[i] * h, din.data() + (i / k) * h, h);

  // Router backward on this rank's tokens: the input grad is complete; the
  // weight grad is this shard's share (sp_partial: summed over TP by
  // FlushSpGrads).
  Tensor dlogits({rows, e});
  RouteTopKBackward(s->experts.data(), s->weights.data(), dweights.data(), rows, e, k, dlogits.data());
  Tensor drouter({rows, h});
  LinearBackward(be, in.data(), rows, h, ctx_->W(router_w_), e, dlogits.data(), drouter.data(),
                 ctx_->G(router_w_), nullptr);
  be.Axpy(1.0f, drouter.data(), din.data(), rows * h);
  *s = MoeStash();
  return din;
}

}  // namespace dt::rt
