// Ring attention (runtime/ops/ring_attention.h) on cp = 1, 2, 4 in-process
// ranks (LocalComm threads): every rank's outputs and dQ/dK/dV equal the
// 1-rank attention (attention.h, itself finite-difference checked in
// ops_test.cc) on the full sequence at the rank's global positions, with
// and without kept probabilities; plus a direct finite-difference check of
// the whole CP=2 ring (forward of all ranks, then one scalar).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/comm/local_comm.h"
#include "runtime/ops/attention.h"
#include "runtime/ops/cp_layout.h"
#include "runtime/ops/ring_attention.h"
#include "tests/runtime/test_util.h"

namespace dt::rt {
namespace {

using testing_util::Random;
using testing_util::Vec;

// Rows (sequence positions) of a sequence-major buffer with `width` floats
// per position: the local buffer of CP rank r gathers its global positions.
Vec LocalRows(const Vec& full, int64_t width, int r, int cp, int64_t seq_local) {
  Vec out(seq_local * width);
  for (int64_t t = 0; t < seq_local; ++t) {
    const int64_t g = CpGlobalPosition(t, r, cp, seq_local);
    std::copy(full.begin() + g * width, full.begin() + (g + 1) * width, out.begin() + t * width);
  }
  return out;
}

struct RankResult {
  Vec out, dqkv;
};

// Runs forward + backward of the ring on `cp` threads; rank r gets local
// rows of qkv and dout.
// drop: attention dropout (its samples one per batch row), or none.
std::vector<RankResult> RunRing(const AttentionDims& full, int cp, const Vec& qkv, const Vec& dout, bool keep_probs,
                                const AttentionDropout& drop = {}) {
  AttentionDims d = full;
  d.seq = full.seq / cp;
  const int64_t qkv_w = d.batch * d.heads * 3 * d.head_dim, out_w = d.batch * d.heads * d.head_dim;
  LocalGroupHandle group(cp);
  std::vector<RankResult> res(cp);
  RunRanks(cp, [&](int r) {
    auto comm = group.Member(r);
    auto be = MakeCpuBackend();
    Vec q = LocalRows(qkv, qkv_w, r, cp, d.seq), g = LocalRows(dout, out_w, r, cp, d.seq);
    Vec probs(keep_probs ? RingProbsNumel(d, cp) : 0), lse(RingLseNumel(d)), out(d.OutNumel()), dq(d.QkvNumel());
    const bool kept_masks = keep_probs && drop.on();
    std::vector<uint8_t> masks(kept_masks ? RingProbsNumel(d, cp) : 0);
    Vec dropped(kept_masks ? RingProbsNumel(d, cp) : 0);
    RingAttentionForward(*be, comm.get(), d, q.data(), keep_probs ? probs.data() : nullptr, lse.data(), out.data(),
                         drop, kept_masks ? masks.data() : nullptr, kept_masks ? dropped.data() : nullptr);
    RingAttentionBackward(*be, comm.get(), d, q.data(), keep_probs ? probs.data() : nullptr, lse.data(), out.data(),
                          g.data(), dq.data(), drop, kept_masks ? masks.data() : nullptr,
                          kept_masks ? dropped.data() : nullptr);
    res[r] = {out, dq};
  });
  return res;
}

void ExpectRingMatchesOneRank(const AttentionDims& d, int cp, bool keep_probs, const AttentionDropout& drop = {}) {
  auto be = MakeCpuBackend();
  Vec qkv = Random(d.QkvNumel(), 21), dout = Random(d.OutNumel(), 22);
  Vec probs(d.ProbsNumel()), out(d.OutNumel()), dqkv(d.QkvNumel()), scratch(d.seq * d.seq);
  std::vector<uint8_t> mask(drop.on() ? d.ProbsNumel() : 0);
  Vec dropped(drop.on() ? d.ProbsNumel() : 0);
  AttentionForward(*be, d, qkv.data(), probs.data(), out.data(), drop, mask.data(), dropped.data());
  AttentionBackward(*be, d, qkv.data(), probs.data(), dout.data(), dqkv.data(), scratch.data(), drop, mask.data(),
                    dropped.data());
  if (drop.on()) {  // the masks drop something, or the comparison below proves little
    int64_t dropped_count = 0;
    for (uint8_t k : mask) dropped_count += k == 0;
    ASSERT_GT(dropped_count, d.ProbsNumel() / 10);
  }
  const std::vector<RankResult> res = RunRing(d, cp, qkv, dout, keep_probs, drop);
  const int64_t seq_local = d.seq / cp;
  const int64_t qkv_w = d.batch * d.heads * 3 * d.head_dim, out_w = d.batch * d.heads * d.head_dim;
  for (int r = 0; r < cp; ++r) {
    const Vec ref_out = LocalRows(out, out_w, r, cp, seq_local), ref_d = LocalRows(dqkv, qkv_w, r, cp, seq_local);
    ASSERT_EQ(res[r].out.size(), ref_out.size());
    for (size_t i = 0; i < ref_out.size(); ++i)
      ASSERT_NEAR(res[r].out[i], ref_out[i], 1e-5 + 1e-5 * std::fabs(ref_out[i])) << "cp " << cp << " rank " << r << " out[" << i << "]";
    for (size_t i = 0; i < ref_d.size(); ++i)
      ASSERT_NEAR(res[r].dqkv[i], ref_d[i], 1e-5 + 1e-4 * std::fabs(ref_d[i])) << "cp " << cp << " rank " << r << " dqkv[" << i << "]";
  }
}

TEST(RingAttentionTest, LayoutIsLoadBalancedAndCoversTheSequence) {
  // cp = 2, seq 8: chunks of 2; rank 0 holds chunks 0 and 3, rank 1 chunks 1 and 2.
  EXPECT_EQ(CpGlobalPosition(0, 0, 2, 4), 0);
  EXPECT_EQ(CpGlobalPosition(2, 0, 2, 4), 6);
  EXPECT_EQ(CpGlobalPosition(3, 0, 2, 4), 7);
  EXPECT_EQ(CpGlobalPosition(0, 1, 2, 4), 2);
  EXPECT_EQ(CpGlobalPosition(2, 1, 2, 4), 4);
  std::vector<int> seen(16, 0);
  for (int r = 0; r < 4; ++r)
    for (int64_t t = 0; t < 4; ++t) ++seen[CpGlobalPosition(t, r, 4, 4)];
  for (int c : seen) EXPECT_EQ(c, 1);
  EXPECT_EQ(CpGlobalPosition(5, 0, 1, 7), 5);
}

TEST(RingAttentionTest, OneBlockEqualsOneRankAttention) {
  ExpectRingMatchesOneRank({6, 2, 2, 4}, 1, true);
  ExpectRingMatchesOneRank({6, 2, 2, 4}, 1, false);
}

TEST(RingAttentionTest, Cp2EqualsOneRankAttention) {
  ExpectRingMatchesOneRank({8, 2, 3, 4}, 2, true);
  ExpectRingMatchesOneRank({8, 2, 3, 4}, 2, false);
}

TEST(RingAttentionTest, Cp4EqualsOneRankAttention) {
  ExpectRingMatchesOneRank({16, 2, 2, 5}, 4, true);
  ExpectRingMatchesOneRank({16, 1, 2, 3}, 4, false);
}

// Attention dropout: masks keyed by (sample, global head, global query and
// key positions), so the ring's blocks draw the 1-rank mask; with the
// probabilities kept (masks and dropped values stored) and recomputed.
TEST(RingAttentionTest, DropoutMasksEqualOneRankAttention) {
  DropoutRng rng;
  rng.rate = 0.3f;
  rng.seed = 7;
  const std::vector<int64_t> samples = {11, 4};
  AttentionDropout drop;
  drop.rng = &rng;
  drop.layer = 3;
  drop.samples = &samples;
  drop.head0 = 2;
  for (bool keep : {true, false}) {
    ExpectRingMatchesOneRank({8, 2, 3, 4}, 1, keep, drop);
    ExpectRingMatchesOneRank({8, 2, 3, 4}, 2, keep, drop);
    ExpectRingMatchesOneRank({16, 2, 2, 5}, 4, keep, drop);
  }
}

TEST(RingAttentionTest, Cp2FiniteDifferences) {
  const AttentionDims d{8, 1, 2, 3};
  const int cp = 2;
  Vec qkv = Random(d.QkvNumel(), 31), r = Random(d.OutNumel(), 32);
  const int64_t seq_local = d.seq / cp, out_w = d.batch * d.heads * d.head_dim;
  // L = sum over ranks of <out_r, r_r>; its grad w.r.t. the full qkv is the
  // ring backward's dqkv of each rank, scattered to the global positions.
  auto loss = [&] {
    const std::vector<RankResult> res = RunRing(d, cp, qkv, r, false);
    double l = 0.0;
    for (int k = 0; k < cp; ++k) {
      const Vec rk = LocalRows(r, out_w, k, cp, seq_local);
      for (size_t i = 0; i < rk.size(); ++i) l += double(res[k].out[i]) * rk[i];
    }
    return l;
  };
  const std::vector<RankResult> res = RunRing(d, cp, qkv, r, false);
  const int64_t qkv_w = d.batch * d.heads * 3 * d.head_dim;
  Vec grad(qkv.size());
  for (int k = 0; k < cp; ++k)
    for (int64_t t = 0; t < seq_local; ++t) {
      const int64_t g = CpGlobalPosition(t, k, cp, seq_local);
      std::copy(res[k].dqkv.begin() + t * qkv_w, res[k].dqkv.begin() + (t + 1) * qkv_w, grad.begin() + g * qkv_w);
    }
  const double eps = 1e-2;
  for (size_t i = 0; i < qkv.size(); i += 5) {
    const float orig = qkv[i];
    qkv[i] = orig + static_cast<float>(eps);
    const double lp = loss();
    qkv[i] = orig - static_cast<float>(eps);
    const double lm = loss();
    qkv[i] = orig;
    const double numeric = (lp - lm) / (2 * eps);
    EXPECT_NEAR(grad[i], numeric, 1e-3 + 1e-2 * std::max(std::fabs(numeric), std::fabs(double(grad[i])))) << i;
  }
}

}  // namespace
}  // namespace dt::rt
