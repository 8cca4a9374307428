#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "planner/memory/activation_memory.h"
#include "runtime/backend/backend.h"
#include "runtime/comm/local_comm.h"
#include "runtime/model/init.h"
#include "runtime/model/model_chunk.h"
#include "runtime/tensor/allocator.h"
#include "tests/runtime/model_step_util.h"

namespace dt::rt {
namespace {

ModelSpec TinyModel() {
  ModelSpec m;
  m.name = "tiny";
  m.num_layers = 2;
  m.hidden = 16;
  m.heads = 4;
  m.kv_heads = 4;
  m.ffn_hidden = 64;
  m.vocab = 50;
  m.seq_length = 8;
  m.max_position = 16;
  return m;
}

using testing_util::Batch;
using testing_util::MakeBatch;
using testing_util::RunStep;
using testing_util::TinyPlan;

class ModelTest : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> be = MakeCpuBackend();
  ModelSpec m = TinyModel();
};

TEST_F(ModelTest, InitialLossIsNearLnVocab) {
  PlanSpec p = TinyPlan();
  ModelChunk c(m, p, 0, 0, {}, *be, 1234);
  Batch b = MakeBatch(m, p, 1);
  float loss = 0;
  Tensor out = c.Forward(0, nullptr, b.tokens.data(), b.targets.data(), &loss);
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_NEAR(loss, std::log(50.0f), 0.1);
  EXPECT_EQ(out[0], loss);
  // The planner's count and the runtime's allocation agree, max_position
  // learned positions included.
  ASSERT_GT(m.max_position, m.seq_length);  // the test model exercises the difference
  EXPECT_EQ(c.params().numel(), m.TotalParams());
}

TEST_F(ModelTest, InitIsPlanIndependentAndSeeded) {
  // The TP shard of a split weight holds exactly the slice of the full tensor.
  Param full;
  full.name = "layers.0.mlp.fc2.weight";
  full.full_shape = full.local_shape = {4, 6};
  full.numel = 24;
  Param shard = full;
  shard.shard = ShardKind::kSplitDim1;
  shard.tp_rank = 1;
  shard.tp_size = 2;
  shard.local_shape = {4, 3};
  shard.numel = 12;
  std::vector<float> a(24), s(12);
  InitNormal(full, 7, 1.0f, a.data());
  InitNormal(shard, 7, 1.0f, s.data());
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 3; ++c) EXPECT_EQ(s[r * 3 + c], a[r * 6 + 3 + c]);
  std::vector<float> other(24);
  InitNormal(full, 8, 1.0f, other.data());
  EXPECT_NE(a[0], other[0]);
  double mean = 0, var = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const double x = HashNormal(3, "x", i);
    mean += x / n;
    var += x * x / n;
  }
  EXPECT_NEAR(mean, 0.0, 0.03);
  EXPECT_NEAR(var, 1.0, 0.05);
}

// Three elements of every parameter (the learned positions past seq_length are unused).
std::vector<int64_t> ThreeElements(int64_t n) { return {0, n / 2, n - 1}; }

TEST_F(ModelTest, GradientsMatchFiniteDifferences) {
  PlanSpec p = TinyPlan();
  ModelChunk c(m, p, 0, 0, {}, *be, 99);
  ParamStore& ps = c.params();
  testing_util::SpreadParams(ps, "ln");
  Batch b = MakeBatch(m, p, 2);
  RunStep(c, b);
  std::vector<float> grads(ps.grads(), ps.grads() + ps.numel());
  auto loss_at = [&] {
    float l = 0;
    c.Forward(1, nullptr, b.tokens.data(), b.targets.data(), &l);
    c.Backward(1, nullptr, 0.0f);  // frees the stash
    return double(l);
  };
  auto unused = [&](const std::string& name, int64_t k) {
    return name == "embedding.position.weight" && k >= p.seq_length * m.hidden;
  };
  EXPECT_GT(testing_util::ExpectFiniteDifferences(ps, grads, loss_at, ThreeElements, unused), 30);
}

std::vector<float> Grads(ModelChunk& c) { return {c.params().grads(), c.params().grads() + c.params().numel()}; }

TEST_F(ModelTest, RecomputeModesGiveSameGrads) {
  Batch b = MakeBatch(m, TinyPlan(), 3);
  std::vector<std::vector<float>> grads;
  std::vector<float> losses;
  for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    ModelChunk c(m, TinyPlan(1, rc), 0, 0, {}, *be, 42);
    losses.push_back(RunStep(c, b, 0.5f));
    grads.push_back(Grads(c));
    EXPECT_EQ(c.num_stashed(), 0);
  }
  for (int i = 1; i < 3; ++i) {
    EXPECT_EQ(losses[i], losses[0]);
    ASSERT_EQ(grads[i].size(), grads[0].size());
    for (size_t k = 0; k < grads[0].size(); ++k) ASSERT_NEAR(grads[i][k], grads[0][k], 1e-6) << "mode " << i << " elem " << k;
  }
}

TEST_F(ModelTest, FullRecomputeStashesLess) {
  Batch b = MakeBatch(m, TinyPlan(), 4);
  std::vector<int64_t> stash_bytes;
  for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    ModelChunk c(m, TinyPlan(1, rc), 0, 0, {}, *be, 42);
    const int64_t before = CurrentBytes();
    float loss;
    c.Forward(0, nullptr, b.tokens.data(), b.targets.data(), &loss);
    stash_bytes.push_back(CurrentBytes() - before);
    c.Backward(0, nullptr, 1.0f);
    EXPECT_EQ(CurrentBytes(), before);  // Backward frees the stash
  }
  EXPECT_GT(stash_bytes[0], stash_bytes[1]);
  EXPECT_GT(stash_bytes[1], stash_bytes[2]);
}

// Dropout (rate 0.3): one forward + backward with the batch rows' global
// sample indices `samples`; the loss.
float DropoutStep(ModelChunk& c, const Batch& b, int mb, const std::vector<int64_t>& samples, float scale) {
  float loss = 0;
  c.Forward(mb, nullptr, b.tokens.data(), b.targets.data(), &loss, samples.data());
  c.Backward(mb, nullptr, scale);
  return loss;
}

TEST_F(ModelTest, DropoutGradientsMatchFiniteDifferences) {
  PlanSpec p = TinyPlan();
  ModelChunk c(m, p, 0, 0, {}, *be, 99);
  c.EnableDropout(0.3f, 17);
  ParamStore& ps = c.params();
  testing_util::SpreadParams(ps, "ln");
  Batch b = MakeBatch(m, p, 2);
  const std::vector<int64_t> samples = {5, 9};
  const float loss = DropoutStep(c, b, 0, samples, 1.0f);
  std::vector<float> grads(ps.grads(), ps.grads() + ps.numel());
  // The masks are a function of the samples: another pair gives another loss.
  EXPECT_NE(DropoutStep(c, b, 1, {6, 9}, 0.0f), loss);
  auto loss_at = [&] { return double(DropoutStep(c, b, 1, samples, 0.0f)); };
  EXPECT_EQ(loss_at(), loss);  // same samples, same masks
  auto unused = [&](const std::string& name, int64_t k) {
    return name == "embedding.position.weight" && k >= p.seq_length * m.hidden;
  };
  EXPECT_GT(testing_util::ExpectFiniteDifferences(ps, grads, loss_at, ThreeElements, unused), 30);
}

TEST_F(ModelTest, DropoutRecomputeModesGiveSameGrads) {
  Batch b = MakeBatch(m, TinyPlan(), 3);
  std::vector<std::vector<float>> grads;
  std::vector<float> losses;
  for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    ModelChunk c(m, TinyPlan(1, rc), 0, 0, {}, *be, 42);
    c.EnableDropout(0.2f, 3);
    losses.push_back(DropoutStep(c, b, 0, {0, 1}, 0.5f));
    grads.push_back(Grads(c));
  }
  for (int i = 1; i < 3; ++i) {
    EXPECT_EQ(losses[i], losses[0]);
    for (size_t k = 0; k < grads[0].size(); ++k) ASSERT_NEAR(grads[i][k], grads[0][k], 1e-6) << "mode " << i << " elem " << k;
  }
}

// What dropout adds to a microbatch's stash is what the planner's memory
// model adds for it: per layer two 1-byte residual masks per element of
// [tokens, h], the attention mask (1 byte) and dropped probabilities (e)
// per score, and the embedding's 1-byte mask.
TEST_F(ModelTest, DropoutStashIsWhatThePlannerCounts) {
  Batch b = MakeBatch(m, TinyPlan(), 4);
  std::vector<int64_t> stash_bytes;
  for (bool dropout : {false, true}) {
    PlanSpec p = TinyPlan();
    p.dropout = dropout;
    ModelChunk c(m, p, 0, 0, {}, *be, 42);
    if (dropout) c.EnableDropout(0.1f, 1);
    const std::vector<int64_t> samples = {0, 1};
    const int64_t before = CurrentBytes();
    float loss;
    c.Forward(0, nullptr, b.tokens.data(), b.targets.data(), &loss, samples.data());
    stash_bytes.push_back(CurrentBytes() - before);
    c.Backward(0, nullptr, 1.0f);
    EXPECT_EQ(CurrentBytes(), before);
  }
  PlanSpec with = TinyPlan(), without = TinyPlan();
  with.flash_attention = without.flash_attention = false;  // the runtime's attention keeps the scores
  without.dropout = false;
  const double per_layer = ActivationBytesPerLayerFor(m, with, 4, Recompute::kNone) -
                           ActivationBytesPerLayerFor(m, without, 4, Recompute::kNone);
  const double tokens = with.micro_batch * with.seq_length;
  EXPECT_GT(per_layer, 0.0);
  EXPECT_EQ(static_cast<double>(stash_bytes[1] - stash_bytes[0]), m.num_layers * per_layer + tokens * m.hidden);
}

TEST_F(ModelTest, TwoChunksEqualOneChunk) {
  Batch b = MakeBatch(m, TinyPlan(), 5);
  ModelChunk whole(m, TinyPlan(1), 0, 0, {}, *be, 7);
  const float loss1 = RunStep(whole, b, 1.0f);

  PlanSpec p2 = TinyPlan(2);
  ModelChunk c0(m, p2, 0, 0, {}, *be, 7), c1(m, p2, 1, 0, {}, *be, 7);
  Tensor act = c0.Forward(0, nullptr, b.tokens.data(), nullptr, nullptr);
  float loss2 = 0;
  c1.Forward(0, &act, nullptr, b.targets.data(), &loss2);
  Tensor g = c1.Backward(0, nullptr, 1.0f);
  Tensor none = c0.Backward(0, &g, 1.0f);
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(loss1, loss2);

  // Every parameter of the split model matches by name; the tied embedding
  // grad is the sum of both chunks' copies.
  auto find = [](ModelChunk& c, const std::string& name) -> int {
    for (size_t i = 0; i < c.params().params().size(); ++i)
      if (c.params().params()[i].name == name) return static_cast<int>(i);
    return -1;
  };
  for (size_t i = 0; i < whole.params().params().size(); ++i) {
    const Param& p = whole.params().params()[i];
    const int i0 = find(c0, p.name), i1 = find(c1, p.name);
    ASSERT_TRUE(i0 >= 0 || i1 >= 0) << p.name;
    for (int64_t k = 0; k < p.numel; ++k) {
      float g2 = 0;
      if (i0 >= 0) g2 += c0.params().grad(i0)[k];
      if (i1 >= 0) g2 += c1.params().grad(i1)[k];
      if (i0 >= 0) { EXPECT_EQ(c0.params().value(i0)[k], whole.params().value(i)[k]); }
      if (i1 >= 0) { EXPECT_EQ(c1.params().value(i1)[k], whole.params().value(i)[k]); }
      ASSERT_NEAR(g2, whole.params().grad(i)[k], 1e-6) << p.name << "[" << k << "]";
    }
    if (p.name == "embedding.word.weight") {
      EXPECT_TRUE(c0.params().params()[i0].tied);
      EXPECT_TRUE(c1.params().params()[i1].tied);
    }
  }
}

// TP=2 (with and without sequence parallelism) on the in-process LocalComm
// equals TP=1: the same loss, and every shard's grads equal the matching
// slice of the unsharded grads.
void CheckTp2(bool sp) {
  auto be = MakeCpuBackend();
  ModelSpec m = TinyModel();
  PlanSpec p1 = TinyPlan(1);
  Batch b = MakeBatch(m, p1, 6);
  ModelChunk ref(m, p1, 0, 0, {}, *be, 11);
  const float ref_loss = RunStep(ref, b, 1.0f);

  PlanSpec p2 = p1;
  p2.tp = 2;
  p2.sequence_parallel = sp;
  LocalGroupHandle group(2);
  std::vector<float> loss(2);
  std::vector<std::unique_ptr<ModelChunk>> chunks(2);
  std::vector<std::unique_ptr<Backend>> bes(2);
  std::vector<std::unique_ptr<Comm>> comms(2);
  RunRanks(2, [&](int r) {
    comms[r] = group.Member(r);
    bes[r] = MakeCpuBackend();
    ParallelComms pc;
    pc.tp = comms[r].get();
    chunks[r] = std::make_unique<ModelChunk>(m, p2, 0, r, pc, *bes[r], 11);
    loss[r] = RunStep(*chunks[r], b, 1.0f);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NEAR(loss[r], ref_loss, 1e-5);
    const ParamStore& ps = chunks[r]->params();
    ASSERT_EQ(ps.params().size(), ref.params().params().size());
    for (size_t i = 0; i < ps.params().size(); ++i) {
      const Param& prm = ps.params()[i];
      const float* g = ps.grads() + prm.offset;
      const float* v = ps.values() + prm.offset;
      const float* rg = ref.params().grads() + ref.params().params()[i].offset;
      const float* rv = ref.params().values() + ref.params().params()[i].offset;
      float scale = 0;  // summation order differs from TP=1: tolerance relative to the tensor's largest grad
      for (int64_t k = 0; k < ref.params().params()[i].numel; ++k) scale = std::max(scale, std::fabs(rg[k]));
      for (int64_t k = 0; k < prm.numel; ++k) {
        const int64_t gk = GlobalIndex(prm, k);
        ASSERT_EQ(v[k], rv[gk]) << prm.name;
        ASSERT_NEAR(g[k], rg[gk], 1e-5f * scale + 1e-4f * std::fabs(rg[gk])) << prm.name << " rank " << r << " [" << k << "]";
      }
    }
  }
}

TEST(ModelTpTest, Tp2MatchesTp1) { CheckTp2(false); }
TEST(ModelTpTest, Tp2SequenceParallelMatchesTp1) { CheckTp2(true); }

}  // namespace
}  // namespace dt::rt
