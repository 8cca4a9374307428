#include "runtime/ops/ring_attention.h"
#include "runtime/ops/host_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "base/check.h"
#include "runtime/backend/lane_reduce.h"
#include "runtime/backend/vec_exp.h"
#include "runtime/ops/cp_layout.h"
#include "runtime/tensor/allocator.h"
#include "runtime/tensor/tensor.h"

namespace dt::rt {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Tags on the CP comm; a step index is added. Every transfer is waited for
// inside the call, so tags may repeat from one call to the next.
constexpr int kTagKvForward = 1000;
constexpr int kTagKvBackward = 2000;
constexpr int kTagDkv = 3000;

struct Ring {
  int rank = 0, size = 1;
  int next() const { return (rank + 1) % size; }
  int prev() const { return (rank + size - 1) % size; }
  int Source(int step) const { return (rank - step % size + size) % size; }
};
Ring RingOf(Comm* cp) {
  Ring r;
  if (cp != nullptr) {
    r.rank = cp->rank();
    r.size = cp->size();
  }
  return r;
}

// Leading dimensions (floats between consecutive sequence positions).
struct Lds {
  int64_t qkv, kv, out;
};
Lds LdsOf(const AttentionDims& d) {
  const int64_t bh = d.batch * d.heads;
  return {bh * 3 * d.head_dim, bh * 2 * d.head_dim, bh * d.head_dim};
}
int64_t HeadIndex(const AttentionDims& d, int64_t b, int64_t h) { return b * d.heads + h; }

std::vector<int64_t> Positions(const AttentionDims& d, const Ring& ring, int owner) {
  std::vector<int64_t> pos(d.seq);
  for (int64_t t = 0; t < d.seq; ++t) pos[t] = CpGlobalPosition(t, owner, ring.size, d.seq);
  return pos;
}

// A K/V block [seq, batch, heads, 2, head_dim]: the K and V parts of qkv.
Tensor PackKv(const AttentionDims& d, const float* qkv) {
  DeviceSynchronize();  // qkv comes from kernels
  Tensor kv({d.seq, d.batch, d.heads, 2, d.head_dim});
  const int64_t hd = d.head_dim, n = d.seq * d.batch * d.heads;
  for (int64_t i = 0; i < n; ++i) std::memcpy(kv.data() + i * 2 * hd, qkv + i * 3 * hd + hd, sizeof(float) * 2 * hd);
  return kv;
}

// S = scale * Q K^T of one head against one block, masked by global positions.
void MaskedScores(Backend& be, const AttentionDims& d, const float* q, const float* k, const Lds& ld,
                  const std::vector<int64_t>& qpos, const std::vector<int64_t>& kpos, float* s) {
  const int64_t n = d.seq;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.head_dim));
  be.Gemm(Trans::kNo, Trans::kYes, n, n, d.head_dim, scale, q, ld.qkv, k, ld.kv, 0.0f, s, n);
  HostAccess(be, "ring attention (mask, online softmax)");
  for (int64_t t = 0; t < n; ++t)
    for (int64_t u = 0; u < n; ++u)
      if (kpos[u] > qpos[t]) s[t * n + u] = kNegInf;
}

// p = exp(s - lse_row) per row (masked entries 0); p may alias s.
void ProbsFromLse(const float* s, const float* lse, int64_t n, float* p) {
  for (int64_t t = 0; t < n; ++t)
    for (int64_t u0 = 0; u0 < n; u0 += kExpChunk) {  // vectorised exp; exp(-inf) = 0
      const int64_t len = std::min(kExpChunk, n - u0);
      alignas(64) float e[kExpChunk];
      ExpAffine(s + t * n + u0, len, 1.0f, lse[t], e);
      std::memcpy(p + t * n + u0, e, static_cast<size_t>(len) * sizeof(float));
    }
}

// The attention-dropout mask of one head's block: rows at global query
// positions qpos, columns at global key positions kpos (runs of
// consecutive positions drawn together).
void DrawBlockMask(const AttentionDropout& drop, int64_t b, int64_t h, const std::vector<int64_t>& qpos,
                   const std::vector<int64_t>& kpos, uint8_t* mask) {
  const int64_t n = static_cast<int64_t>(kpos.size());
  for (int64_t t = 0; t < static_cast<int64_t>(qpos.size()); ++t) {
    const uint64_t key =
        drop.rng->RowKey(DropoutSite::kAttentionProbs, drop.layer, (*drop.samples)[b], drop.head0 + h, qpos[t]);
    for (int64_t u0 = 0; u0 < n;) {
      int64_t u1 = u0 + 1;
      while (u1 < n && kpos[u1] == kpos[u1 - 1] + 1) ++u1;
      DrawMaskRow(*drop.rng, key, kpos[u0], u1 - u0, mask + t * n + u0);
      u0 = u1;
    }
  }
}

// Pending point-to-point transfers of one ring step.
struct Transfers {
  std::vector<std::unique_ptr<Request>> reqs;
  void WaitAll() {
    for (auto& r : reqs) r->Wait();
    reqs.clear();
  }
};

}  // namespace

void RingAttentionForward(Backend& be, Comm* cp, const AttentionDims& d, const float* qkv, float* probs,
                          float* lse, float* out, const AttentionDropout& drop, uint8_t* masks, float* dropped) {
  DT_CHECK(qkv && lse && out) << "ring attention: null pointer";
  DT_CHECK(!drop.on() || (drop.samples && static_cast<int64_t>(drop.samples->size()) == d.batch &&
                          (probs == nullptr || (masks && dropped))))
      << "ring attention: dropout needs a sample index per batch row, and kept probabilities their masks";
  const Ring ring = RingOf(cp);
  const Lds ld = LdsOf(d);
  const int64_t n = d.seq, hd = d.head_dim, heads = d.batch * d.heads;
  const std::vector<int64_t> qpos = Positions(d, ring, ring.rank);
  be.Fill(out, 0.0f, static_cast<size_t>(d.OutNumel()));
  Tensor row_max({heads, n}), row_sum({heads, n});
  row_max.Fill(kNegInf);
  Tensor scores({n, n}), p_scratch;
  if (probs == nullptr) p_scratch = Tensor({n, n});
  // Kept probabilities are stored as exp(S - m) with the running max m of
  // their step (block_max, per row), rescaled to exp(S - lse) at the end.
  Tensor block_max;
  if (probs != nullptr) block_max = Tensor({ring.size, heads, n});
  // Dropout: the dropped block the PV product reads, and (probabilities not
  // kept) a scratch mask.
  Tensor pd_scratch;
  DropoutMask mask_scratch;
  if (drop.on()) {
    pd_scratch = Tensor({n, n});
    if (masks == nullptr) mask_scratch = DropoutMask(n * n);
  }
  Tensor kv = PackKv(d, qkv), kv_next;
  for (int step = 0; step < ring.size; ++step) {
    const int src = ring.Source(step);
    Transfers xfer;
    if (step + 1 < ring.size) {  // pass the block on while computing on it
      kv_next = Tensor(kv.shape());
      const size_t count = static_cast<size_t>(kv.numel());
      xfer.reqs.push_back(cp->IRecv(kv_next.data(), count, ring.prev(), kTagKvForward + step));
      xfer.reqs.push_back(cp->ISend(kv.data(), count, ring.next(), kTagKvForward + step));
    }
    const std::vector<int64_t> kpos = Positions(d, ring, src);
    for (int64_t b = 0; b < d.batch; ++b) {
      for (int64_t h = 0; h < d.heads; ++h) {
        const int64_t hi = HeadIndex(d, b, h);
        const float* q = qkv + hi * 3 * hd;
        const float* k = kv.data() + hi * 2 * hd;
        const float* v = k + hd;
        float* o = out + hi * hd;
        const int64_t slot = static_cast<int64_t>(step) * heads + hi;
        float* s = scores.data();
        float* p = probs != nullptr ? probs + slot * n * n : p_scratch.data();
        MaskedScores(be, d, q, k, ld, qpos, kpos, s);
        float* m = row_max.data() + hi * n;
        float* l = row_sum.data() + hi * n;
        for (int64_t t = 0; t < n; ++t) {
          const float* st = s + t * n;
          float* pt = p + t * n;
          const float bmax = LaneMax(n, [st](int64_t u) { return st[u]; });
          if (bmax == kNegInf) {  // every key of this block is in the future
            std::fill(pt, pt + n, 0.0f);
            if (probs != nullptr) block_max[slot * n + t] = 0.0f;
            continue;
          }
          const float m_new = std::max(m[t], bmax);
          if (probs != nullptr) block_max[slot * n + t] = m_new;
          const float alpha = m[t] == kNegInf ? 0.0f : std::exp(m[t] - m_new);
          // Vectorised exp (masked keys: exp(-inf) = 0), through an aligned
          // buffer: the rounding depends on the column only.
          for (int64_t u0 = 0; u0 < n; u0 += kExpChunk) {
            const int64_t len = std::min(kExpChunk, n - u0);
            alignas(64) float e[kExpChunk];
            ExpAffine(st + u0, len, 1.0f, m_new, e);
            std::memcpy(pt + u0, e, static_cast<size_t>(len) * sizeof(float));
          }
          const double sum = LaneSum(n, [pt](int64_t u) { return static_cast<double>(pt[u]); });
          l[t] = l[t] * alpha + static_cast<float>(sum);
          m[t] = m_new;
          float* ot = o + t * ld.out;
          for (int64_t c = 0; c < hd; ++c) ot[c] *= alpha;
        }
        const float* pv = p;
        if (drop.on()) {
          uint8_t* mk = masks != nullptr ? masks + slot * n * n : mask_scratch.data();
          DrawBlockMask(drop, b, h, qpos, kpos, mk);
          ApplyMask(p, mk, drop.rng->scale(), n * n, pd_scratch.data());
          pv = pd_scratch.data();
        }
        be.Gemm(Trans::kNo, Trans::kNo, n, hd, n, 1.0f, pv, n, v, ld.kv, 1.0f, o, ld.out);
      }
    }
    xfer.WaitAll();
    if (step + 1 < ring.size) kv = std::move(kv_next);
  }
  HostAccess(be, "ring attention (normalisation)");
  for (int64_t hi = 0; hi < heads; ++hi) {
    const float* m = row_max.data() + hi * n;
    const float* l = row_sum.data() + hi * n;
    float* lh = lse + hi * n;
    for (int64_t t = 0; t < n; ++t) {
      DT_CHECK(l[t] > 0.0f) << "ring attention: query row " << t << " sees no key";
      lh[t] = m[t] + std::log(l[t]);
      float* ot = out + (t * heads + hi) * hd;
      const float inv = 1.0f / l[t];
      for (int64_t c = 0; c < hd; ++c) ot[c] *= inv;
    }
    if (probs != nullptr)
      for (int step = 0; step < ring.size; ++step) {
        const int64_t slot = static_cast<int64_t>(step) * heads + hi;
        float* p = probs + slot * n * n;
        for (int64_t t = 0; t < n; ++t) {
          const float f = std::exp(block_max[slot * n + t] - lh[t]);
          for (int64_t u = 0; u < n; ++u) p[t * n + u] *= f;
        }
        if (drop.on()) ApplyMask(p, masks + slot * n * n, drop.rng->scale(), n * n, dropped + slot * n * n);
      }
  }
}

void RingAttentionBackward(Backend& be, Comm* cp, const AttentionDims& d, const float* qkv, const float* probs,
                           const float* lse, const float* out, const float* dout, float* dqkv,
                           const AttentionDropout& drop, const uint8_t* masks, const float* dropped) {
  DT_CHECK(qkv && lse && out && dout && dqkv) << "ring attention backward: null pointer";
  DT_CHECK(!drop.on() || (drop.samples && (probs == nullptr || (masks && dropped))))
      << "ring attention backward: dropout without its masks";
  const Ring ring = RingOf(cp);
  const Lds ld = LdsOf(d);
  const int64_t n = d.seq, hd = d.head_dim, heads = d.batch * d.heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const std::vector<int64_t> qpos = Positions(d, ring, ring.rank);
  be.Fill(dqkv, 0.0f, static_cast<size_t>(d.QkvNumel()));
  // D[t] = rowsum(dO * O): the softmax backward's per-row term, block-free.
  Tensor dsum({heads, n});
  HostAccess(be, "ring attention backward (row sums)");
  for (int64_t t = 0; t < n; ++t)
    for (int64_t hi = 0; hi < heads; ++hi) {
      const float* o = out + t * ld.out + hi * hd;
      const float* g = dout + t * ld.out + hi * hd;
      dsum[hi * n + t] = static_cast<float>(LaneSum(hd, [o, g](int64_t c) { return static_cast<double>(o[c]) * g[c]; }));
    }
  Tensor p_scratch({n, n}), ds({n, n});
  Tensor pd_scratch;
  DropoutMask mask_scratch;
  if (drop.on() && probs == nullptr) {
    pd_scratch = Tensor({n, n});
    mask_scratch = DropoutMask(n * n);
  }
  Tensor kv = PackKv(d, qkv), kv_next;
  Tensor acc_in, acc_sending, final_acc;
  std::unique_ptr<Request> acc_send_req, final_req;
  for (int step = 0; step < ring.size; ++step) {
    const int src = ring.Source(step);
    Transfers xfer;
    if (step + 1 < ring.size) {
      kv_next = Tensor(kv.shape());
      const size_t count = static_cast<size_t>(kv.numel());
      xfer.reqs.push_back(cp->IRecv(kv_next.data(), count, ring.prev(), kTagKvBackward + step));
      xfer.reqs.push_back(cp->ISend(kv.data(), count, ring.next(), kTagKvBackward + step));
    }
    // The accumulator of block src, from the rank that processed it last step.
    std::unique_ptr<Request> acc_req;
    if (step >= 2) {
      acc_in = Tensor(kv.shape());
      acc_req = cp->IRecv(acc_in.data(), static_cast<size_t>(acc_in.numel()), ring.prev(), kTagDkv + step);
    }
    if (step == ring.size - 1 && ring.size > 1) {  // our own block's accumulator, home at the end
      final_acc = Tensor(kv.shape());
      final_req = cp->IRecv(final_acc.data(), static_cast<size_t>(final_acc.numel()), ring.prev(), kTagDkv + ring.size);
    }
    // Step 0 (own block) writes dK/dV straight into dqkv; later steps into
    // a contribution block that joins the travelling accumulator.
    Tensor contrib;
    if (step > 0) contrib = Tensor(kv.shape());
    const std::vector<int64_t> kpos = Positions(d, ring, src);
    for (int64_t b = 0; b < d.batch; ++b) {
      for (int64_t h = 0; h < d.heads; ++h) {
        const int64_t hi = HeadIndex(d, b, h);
        const float* q = qkv + hi * 3 * hd;
        const float* k = kv.data() + hi * 2 * hd;
        const float* v = k + hd;
        const float* g = dout + hi * hd;
        float* dq = dqkv + hi * 3 * hd;
        float* dk = step == 0 ? dq + hd : contrib.data() + hi * 2 * hd;
        float* dv = dk + hd;
        const int64_t ld_dkv = step == 0 ? ld.qkv : ld.kv;
        const float* lh = lse + hi * n;
        const int64_t slot = static_cast<int64_t>(step) * heads + hi;
        const float* p;
        const float* pd = nullptr;  // dropped probabilities (dropout)
        const uint8_t* mk = nullptr;
        if (probs != nullptr) {
          p = probs + slot * n * n;
          if (drop.on()) {
            pd = dropped + slot * n * n;
            mk = masks + slot * n * n;
          }
        } else {
          MaskedScores(be, d, q, k, ld, qpos, kpos, p_scratch.data());
          ProbsFromLse(p_scratch.data(), lh, n, p_scratch.data());
          p = p_scratch.data();
          if (drop.on()) {
            DrawBlockMask(drop, b, h, qpos, kpos, mask_scratch.data());
            ApplyMask(p, mask_scratch.data(), drop.rng->scale(), n * n, pd_scratch.data());
            pd = pd_scratch.data();
            mk = mask_scratch.data();
          }
        }
        // dV = Pd^T dO; dPd = dO V^T, dP = dPd * mask / (1 - rate) (Pd = P and
        // dP = dPd without dropout); dS = P * (dP - D); dQ += scale dS K; dK = scale dS^T Q.
        be.Gemm(Trans::kYes, Trans::kNo, n, hd, n, 1.0f, pd != nullptr ? pd : p, n, g, ld.out, 0.0f, dv, ld_dkv);
        be.Gemm(Trans::kNo, Trans::kYes, n, n, hd, 1.0f, g, ld.out, v, ld.kv, 0.0f, ds.data(), n);
        const float* dh = dsum.data() + hi * n;
        HostAccess(be, "ring attention backward (dS)");
        if (mk != nullptr) ApplyMask(ds.data(), mk, drop.rng->scale(), n * n, ds.data());
        for (int64_t t = 0; t < n; ++t)
          for (int64_t u = 0; u < n; ++u) ds[t * n + u] = p[t * n + u] * (ds[t * n + u] - dh[t]);
        be.Gemm(Trans::kNo, Trans::kNo, n, hd, n, scale, ds.data(), n, k, ld.kv, 1.0f, dq, ld.qkv);
        be.Gemm(Trans::kYes, Trans::kNo, n, hd, n, scale, ds.data(), n, q, ld.qkv, 0.0f, dk, ld_dkv);
      }
    }
    if (step > 0) {
      if (acc_req) {
        acc_req->Wait();
        be.Axpy(1.0f, acc_in.data(), contrib.data(), contrib.numel());
        acc_in = Tensor();
      }
      if (acc_send_req) acc_send_req->Wait();  // the previous accumulator has left
      acc_sending = std::move(contrib);
      acc_send_req = cp->ISend(acc_sending.data(), static_cast<size_t>(acc_sending.numel()), ring.next(),
                               kTagDkv + step + 1);
    }
    xfer.WaitAll();
    if (step + 1 < ring.size) kv = std::move(kv_next);
  }
  if (final_req) {
    final_req->Wait();
    const int64_t rows = n * heads;
    for (int64_t i = 0; i < rows; ++i) be.Axpy(1.0f, final_acc.data() + i * 2 * hd, dqkv + i * 3 * hd + hd, 2 * hd);
  }
  if (acc_send_req) acc_send_req->Wait();
}

}  // namespace dt::rt
