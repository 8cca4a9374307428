#include "runtime/model/moe_mlp.h"

#include <cstring>

#include "base/check.h"
#include "runtime/model/init.h"
#include "runtime/model/tp_ops.h"
#include "runtime/ops/linear.h"
#include "runtime/ops/moe_router.h"
#include "runtime/ops/swiglu.h"

namespace dt::rt {

MoeMlp::MoeMlp(LayerContext* ctx, const std::string& prefix) : ctx_(ctx) {
  const int64_t h = ctx->hidden, e = ctx->num_experts, f = ctx->expert_ffn_local * ctx->tp_size;
  DT_CHECK(e > 0 && ctx->top_k >= 1 && ctx->top_k <= e) << "MoE: top-k " << ctx->top_k << " of " << e;
  DT_CHECK(ctx->ep_size >= 1 && e % ctx->ep_size == 0) << "MoE: ep " << ctx->ep_size << " must divide " << e;
  DT_CHECK(ctx->ep_size == 1 || (ctx->ep != nullptr && ctx->ep->size() == ctx->ep_size)) << "MoE: ep comm size";
  router_w_ = DeclareParam(ctx, prefix + "mlp.router.weight", {e, h}, ShardKind::kReplicated, false);
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

void MoeMlp::ToExpertMajor(const MoeStash& s, const float* recv_order, int64_t width, float* expert_major) const {
  const int64_t el = local_experts(), ep = ctx_->ep_size;
  int64_t dst = 0;
  for (int64_t j = 0; j < el; ++j)
    for (int64_t src = 0; src < ep; ++src) {
      int64_t at = 0;  // rows before block (src, j) in received order
      for (int64_t q = 0; q < src * el + j; ++q) at += s.block_rows[q];
      const int64_t n = s.block_rows[src * el + j];
      if (n > 0) std::memcpy(expert_major + dst * width, recv_order + at * width, sizeof(float) * n * width);
      dst += n;
    }
}

void MoeMlp::ToRecvOrder(const MoeStash& s, const float* expert_major, int64_t width, float* recv_order) const {
  const int64_t el = local_experts(), ep = ctx_->ep_size;
  int64_t src_row = 0;
  for (int64_t j = 0; j < el; ++j)
    for (int64_t src = 0; src < ep; ++src) {
      int64_t at = 0;
      for (int64_t q = 0; q < src * el + j; ++q) at += s.block_rows[q];
      const int64_t n = s.block_rows[src * el + j];
      if (n > 0) std::memcpy(recv_order + at * width, expert_major + src_row * width, sizeof(float) * n * width);
      src_row += n;
    }
}

Tensor MoeMlp::Forward(const Tensor& in, MoeStash* s) {
  Backend& be = *ctx_->be;
  const int64_t rows = ctx_->rows, h = ctx_->hidden, e = ctx_->num_experts, k = ctx_->top_k;
  const int64_t el = local_experts(), ep = ctx_->ep_size, fl = ctx_->expert_ffn_local;
  DT_CHECK_EQ(in.numel(), rows * h) << "MoE input";

  // Route.
  Tensor logits({rows, e});
  LinearForward(be, in.data(), rows, h, ctx_->W(router_w_), nullptr, e, logits.data());
  s->experts.assign(rows * k, 0);
  s->weights = Tensor({rows * k});
  RouteTopK(logits.data(), rows, e, k, s->experts.data(), s->weights.data());

  // Sort the token copies by expert (stable: token, then slot order); the
  // experts of EP rank d are a contiguous block, so this groups by destination.
  std::vector<int64_t> count(e, 0), next(e, 0);
  for (int32_t x : s->experts) ++count[x];
  for (int64_t x = 1; x < e; ++x) next[x] = next[x - 1] + count[x - 1];
  s->slot_row.assign(rows * k, 0);
  Tensor send({rows * k, h});
  for (int64_t i = 0; i < rows * k; ++i) {
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
  s->block_rows.assign(ep * el, 0);
  s->recv_rows.assign(ep, 0);
  int64_t total = 0;
  for (int64_t q = 0; q < ep * el; ++q) {
    s->block_rows[q] = static_cast<int64_t>(counts_in[q]);
    s->recv_rows[q / el] += static_cast<size_t>(s->block_rows[q]);
    total += s->block_rows[q];
  }

  // Dispatch, run the local experts, combine.
  Tensor recv({total, h});
  Exchange(send.data(), s->send_rows, recv.data(), s->recv_rows);
  send = Tensor();
  s->x = Tensor({total, h});
  ToExpertMajor(*s, recv.data(), h, s->x.data());
  s->gate = Tensor({total, fl});
  s->up = Tensor({total, fl});
  s->act = Tensor({total, fl});
  Tensor y({total, h});
  int64_t r0 = 0;
  for (int64_t j = 0; j < el; ++j) {
    int64_t n = 0;
    for (int64_t src = 0; src < ep; ++src) n += s->block_rows[src * el + j];
    if (n == 0) continue;
    const float* x = s->x.data() + r0 * h;
    float *g = s->gate.data() + r0 * fl, *u = s->up.data() + r0 * fl, *a = s->act.data() + r0 * fl;
    LinearForward(be, x, n, h, ctx_->W(gate_w_[j]), nullptr, fl, g);
    LinearForward(be, x, n, h, ctx_->W(up_w_[j]), nullptr, fl, u);
    SwiGluForward(be, g, u, n * fl, a);
    LinearForward(be, a, n, fl, ctx_->W(down_w_[j]), nullptr, h, y.data() + r0 * h);
    r0 += n;
  }
  ToRecvOrder(*s, y.data(), h, recv.data());
  s->back = Tensor({rows * k, h});
  Exchange(recv.data(), s->recv_rows, s->back.data(), s->send_rows);

  Tensor out({rows, h});
  for (int64_t i = 0; i < rows * k; ++i)
    be.Axpy(s->weights[i], s->back.data() + s->slot_row[i] * h, out.data() + (i / k) * h, h);
  return out;
}

Tensor MoeMlp::Backward(const Tensor& in, const Tensor& dout, MoeStash* s) {
  Backend& be = *ctx_->be;
  const int64_t rows = ctx_->rows, h = ctx_->hidden, e = ctx_->num_experts, k = ctx_->top_k;
  const int64_t el = local_experts(), ep = ctx_->ep_size, fl = ctx_->expert_ffn_local;
  const int64_t total = s->x.dim(0);
  DT_CHECK_EQ(dout.numel(), rows * h) << "MoE output grad";

  // Combine backward: grads of the weights (summed over the TP partials of
  // the expert outputs) and of each token copy's expert output.
  Tensor dweights({rows * k});
  Tensor dsend({rows * k, h});
  for (int64_t i = 0; i < rows * k; ++i) {
    const float* d = dout.data() + (i / k) * h;
    const float* y = s->back.data() + s->slot_row[i] * h;
    float dot = 0.0f;
    for (int64_t c = 0; c < h; ++c) dot += y[c] * d[c];
    dweights[i] = dot;
    be.Axpy(s->weights[i], d, dsend.data() + s->slot_row[i] * h, h);
  }
  s->back = Tensor();
  TpAllReduce(ctx_->tp, dweights.data(), dweights.numel());

  // To the experts (the dispatch's direction), their backward, and back.
  Tensor recv({total, h});
  Exchange(dsend.data(), s->send_rows, recv.data(), s->recv_rows);
  Tensor dy({total, h});
  ToExpertMajor(*s, recv.data(), h, dy.data());
  Tensor dx({total, h});
  {
    Tensor dact({total, fl}), dgate({total, fl}), dup({total, fl}), dtmp({total, h});
    int64_t r0 = 0;
    for (int64_t j = 0; j < el; ++j) {
      int64_t n = 0;
      for (int64_t src = 0; src < ep; ++src) n += s->block_rows[src * el + j];
      if (n == 0) continue;
      const float* x = s->x.data() + r0 * h;
      const int64_t a = r0 * fl, b = r0 * h;
      LinearBackward(be, s->act.data() + a, n, fl, ctx_->W(down_w_[j]), h, dy.data() + b, dact.data() + a,
                     ctx_->G(down_w_[j]), nullptr);
      SwiGluBackward(be, s->gate.data() + a, s->up.data() + a, dact.data() + a, n * fl, dgate.data() + a,
                     dup.data() + a);
      LinearBackward(be, x, n, h, ctx_->W(gate_w_[j]), fl, dgate.data() + a, dx.data() + b, ctx_->G(gate_w_[j]),
                     nullptr);
      LinearBackward(be, x, n, h, ctx_->W(up_w_[j]), fl, dup.data() + a, dtmp.data() + b, ctx_->G(up_w_[j]),
                     nullptr);
      be.Axpy(1.0f, dtmp.data() + b, dx.data() + b, n * h);
      r0 += n;
    }
  }
  ToRecvOrder(*s, dx.data(), h, recv.data());
  Exchange(recv.data(), s->recv_rows, dsend.data(), s->send_rows);

  Tensor din({rows, h});
  for (int64_t i = 0; i < rows * k; ++i)
    be.Axpy(1.0f, dsend.data() + s->slot_row[i] * h, din.data() + (i / k) * h, h);

  // Router backward (the same on every TP rank: its input grad joins the
  // TP-partial sum on rank 0 only).
  Tensor dlogits({rows, e});
  RouteTopKBackward(s->experts.data(), s->weights.data(), dweights.data(), rows, e, k, dlogits.data());
  Tensor drouter({rows, h});
  LinearBackward(be, in.data(), rows, h, ctx_->W(router_w_), e, dlogits.data(), drouter.data(),
                 ctx_->G(router_w_), nullptr);
  if (ctx_->tp_rank == 0) be.Axpy(1.0f, drouter.data(), din.data(), rows * h);
  *s = MoeStash();
  return din;
}

}  // namespace dt::rt
