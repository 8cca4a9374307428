// Every op's backward against central finite differences of a random
// projection L = sum_i r_i y_i (computed in double), fp32 forward.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/comm/local_comm.h"
#include "runtime/ops/attention.h"
#include "runtime/ops/cross_entropy.h"
#include "runtime/ops/embedding.h"
#include "runtime/ops/gelu.h"
#include "runtime/ops/layernorm.h"
#include "runtime/ops/linear.h"
#include "runtime/ops/residual.h"

#include "tests/runtime/test_util.h"

namespace dt::rt {
namespace {

using testing_util::Vec;

using testing_util::Random;

double Dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
  return s;
}

// Compares analytic[i] with (L(x_i + eps) - L(x_i - eps)) / 2eps, where
// loss() recomputes the forward from the current contents of x.
void CheckGrad(const char* what, Vec& x, const Vec& analytic, const std::function<double()>& loss,
               double eps = 1e-2, double rtol = 1e-2, double atol = 1e-3) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  const size_t stride = x.size() > 64 ? x.size() / 64 : 1;
  for (size_t i = 0; i < x.size(); i += stride) {
    const float orig = x[i];
    x[i] = orig + static_cast<float>(eps);
    const double lp = loss();
    x[i] = orig - static_cast<float>(eps);
    const double lm = loss();
    x[i] = orig;
    const double numeric = (lp - lm) / (2 * eps);
    EXPECT_NEAR(analytic[i], numeric, atol + rtol * std::max(std::fabs(numeric), std::fabs(double(analytic[i]))))
        << what << "[" << i << "]";
  }
}

class OpsTest : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> be = MakeCpuBackend();
};

TEST_F(OpsTest, LinearMatchesReferenceAndGradients) {
  const int64_t rows = 5, in = 7, out = 4;
  Vec x = Random(rows * in, 1), w = Random(out * in, 2), b = Random(out, 3), r = Random(rows * out, 4);
  Vec y(rows * out);
  auto fwd = [&] {
    LinearForward(*be, x.data(), rows, in, w.data(), b.data(), out, y.data());
    return Dot(y, r);
  };
  fwd();
  double ref = 0;
  for (int k = 0; k < in; ++k) ref += double(x[1 * in + k]) * w[2 * in + k];
  EXPECT_NEAR(y[1 * out + 2], ref + b[2], 1e-5);
  Vec dx(x.size()), dw(w.size(), 0.0f), db(b.size(), 0.0f);
  LinearBackward(*be, x.data(), rows, in, w.data(), out, r.data(), dx.data(), dw.data(), db.data());
  CheckGrad("dx", x, dx, fwd);
  CheckGrad("dw", w, dw, fwd);
  CheckGrad("db", b, db, fwd);
  // Accumulation: a second backward doubles dw.
  Vec dw2 = dw;
  LinearBackward(*be, x.data(), rows, in, w.data(), out, r.data(), nullptr, dw2.data(), nullptr);
  EXPECT_NEAR(dw2[3], 2 * dw[3], 1e-5);
}

TEST_F(OpsTest, LayerNormGradients) {
  const int64_t rows = 4, cols = 9;
  Vec x = Random(rows * cols, 5, 2.0f), g = Random(cols, 6), bta = Random(cols, 7), r = Random(rows * cols, 8);
  Vec y(rows * cols), mean(rows), rstd(rows);
  auto fwd = [&] {
    LayerNormForward(*be, x.data(), g.data(), bta.data(), rows, cols, y.data(), mean.data(), rstd.data());
    return Dot(y, r);
  };
  fwd();
  Vec dx(x.size()), dg(cols, 0.0f), db(cols, 0.0f);
  LayerNormBackward(*be, x.data(), g.data(), mean.data(), rstd.data(), r.data(), rows, cols, dx.data(), dg.data(), db.data());
  CheckGrad("dx", x, dx, fwd);
  CheckGrad("dgamma", g, dg, fwd);
  CheckGrad("dbeta", bta, db, fwd);
}

TEST_F(OpsTest, GeluGradientsAndValues) {
  Vec x = Random(50, 9, 2.0f), r = Random(50, 10), y(50);
  auto fwd = [&] {
    GeluForward(*be, x.data(), 50, y.data());
    return Dot(y, r);
  };
  fwd();
  // gelu(0) = 0, gelu(large) ~ x.
  Vec probe = {0.0f, 10.0f}, out(2);
  GeluForward(*be, probe.data(), 2, out.data());
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_NEAR(out[1], 10.0f, 1e-5);
  Vec dx(50);
  GeluBackward(*be, x.data(), r.data(), 50, dx.data());
  CheckGrad("dx", x, dx, fwd, 1e-3);
}

TEST_F(OpsTest, ResidualGradients) {
  Vec a = Random(6, 11), b = Random(6, 12), r = Random(6, 13), y(6);
  auto fwd = [&] {
    ResidualAddForward(*be, a.data(), b.data(), 6, y.data());
    return Dot(y, r);
  };
  fwd();
  Vec da(6, 0.0f), db(6, 0.0f);
  ResidualAddBackward(*be, r.data(), 6, da.data(), db.data());
  CheckGrad("da", a, da, fwd);
  CheckGrad("db", b, db, fwd);
}

TEST_F(OpsTest, AttentionIsCausalAndGradientsMatch) {
  AttentionDims d{5, 2, 2, 3};
  Vec qkv = Random(d.QkvNumel(), 14), r = Random(d.OutNumel(), 15);
  Vec probs(d.ProbsNumel()), out(d.OutNumel());
  auto fwd = [&] {
    AttentionForward(*be, d, qkv.data(), probs.data(), out.data());
    return Dot(out, r);
  };
  fwd();
  // Causality: position 0's output is exactly its own V.
  const int64_t row = d.batch * d.heads * 3 * d.head_dim;
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t h = 0; h < d.heads; ++h)
      for (int64_t c = 0; c < d.head_dim; ++c)
        EXPECT_NEAR(out[(b * d.heads + h) * d.head_dim + c], qkv[(b * d.heads + h) * 3 * d.head_dim + 2 * d.head_dim + c], 1e-6);
  // Probabilities above the diagonal are 0; rows sum to 1.
  for (int64_t i = 0; i < d.seq; ++i) {
    double s = 0;
    for (int64_t j = 0; j < d.seq; ++j) {
      if (j > i) {
        EXPECT_EQ(probs[i * d.seq + j], 0.0f);
      }
      s += probs[i * d.seq + j];
    }
    EXPECT_NEAR(s, 1.0, 1e-6);
  }
  (void)row;
  Vec dqkv(qkv.size()), scratch(d.seq * d.seq);
  AttentionBackward(*be, d, qkv.data(), probs.data(), r.data(), dqkv.data(), scratch.data());
  CheckGrad("dqkv", qkv, dqkv, fwd);
}

TEST_F(OpsTest, CrossEntropyValueAndGradients) {
  const int64_t rows = 6, vocab = 11;
  Vec logits = Random(rows * vocab, 16, 2.0f), lse(rows);
  std::vector<int32_t> tgt = {0, 3, 10, 5, 5, 7};
  auto fwd = [&] { return double(CrossEntropyForward(logits.data(), rows, 0, vocab, tgt.data(), nullptr, lse.data())); };
  const double loss = fwd();
  double ref = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t c = 0; c < vocab; ++c) s += std::exp(double(logits[r * vocab + c]));
    ref += std::log(s) - logits[r * vocab + tgt[r]];
  }
  EXPECT_NEAR(loss, ref / rows, 1e-5);
  Vec dl(logits.size());
  CrossEntropyBackward(logits.data(), rows, 0, vocab, tgt.data(), lse.data(), 1.0f, dl.data());
  CheckGrad("dlogits", logits, dl, fwd, 1e-2, 1e-2, 2e-4);
}

TEST_F(OpsTest, EmbeddingGradients) {
  const int64_t vocab = 7, hidden = 4, seq = 3, batch = 2, rows = seq * batch;
  Vec w = Random(vocab * hidden, 17), p = Random(seq * hidden, 18), r = Random(rows * hidden, 19), y(rows * hidden);
  std::vector<int32_t> tok = {1, 6, 1, 0, 3, 6};
  auto fwd = [&] {
    EmbeddingForward(w.data(), 0, vocab, hidden, tok.data(), rows, y.data());
    PositionEmbeddingForward(p.data(), seq, batch, hidden, y.data());
    return Dot(y, r);
  };
  fwd();
  EXPECT_EQ(y[2 * hidden + 1], w[1 * hidden + 1] + p[1 * hidden + 1]);  // row 2 = (t=1, b=0)
  Vec dw(w.size(), 0.0f), dp(p.size(), 0.0f);
  EmbeddingBackward(r.data(), tok.data(), rows, 0, vocab, hidden, dw.data());
  PositionEmbeddingBackward(r.data(), seq, batch, hidden, dp.data());
  CheckGrad("dW", w, dw, fwd);
  CheckGrad("dP", p, dp, fwd);
}

// Vocab-parallel versions over an in-process TP=2 group equal the unsplit op.
TEST_F(OpsTest, VocabParallelEmbeddingAndCrossEntropyMatchSingleRank) {
  const int64_t vocab = 10, hidden = 3, rows = 5, half = vocab / 2;
  Vec w = Random(vocab * hidden, 20), logits = Random(rows * vocab, 21, 3.0f);
  std::vector<int32_t> tok = {0, 9, 4, 5, 7};
  Vec emb_ref(rows * hidden), lse_ref(rows), dl_ref(rows * vocab);
  EmbeddingForward(w.data(), 0, vocab, hidden, tok.data(), rows, emb_ref.data());
  const float loss_ref = CrossEntropyForward(logits.data(), rows, 0, vocab, tok.data(), nullptr, lse_ref.data());
  CrossEntropyBackward(logits.data(), rows, 0, vocab, tok.data(), lse_ref.data(), 0.5f, dl_ref.data());

  LocalGroupHandle group(2);
  std::vector<Vec> emb(2, Vec(rows * hidden)), dl(2, Vec(rows * half));
  std::vector<float> loss(2);
  RunRanks(2, [&](int rank) {
    auto comm = group.Member(rank);
    const int64_t start = rank * half;
    VocabParallelEmbeddingForward(w.data() + start * hidden, start, half, hidden, tok.data(), rows, emb[rank].data(), comm.get());
    Vec shard(rows * half), lse(rows);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < half; ++c) shard[r * half + c] = logits[r * vocab + start + c];
    loss[rank] = CrossEntropyForward(shard.data(), rows, start, half, tok.data(), comm.get(), lse.data());
    CrossEntropyBackward(shard.data(), rows, start, half, tok.data(), lse.data(), 0.5f, dl[rank].data());
  });
  for (int rank = 0; rank < 2; ++rank) {
    for (int64_t i = 0; i < rows * hidden; ++i) EXPECT_EQ(emb[rank][i], emb_ref[i]);
    EXPECT_NEAR(loss[rank], loss_ref, 1e-5);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < half; ++c)
        EXPECT_NEAR(dl[rank][r * half + c], dl_ref[r * vocab + rank * half + c], 1e-6);
  }
}

}  // namespace
}  // namespace dt::rt
