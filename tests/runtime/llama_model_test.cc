// The Llama family in the runtime model: a whole Llama ModelChunk (and so
// LlamaLayer) against finite differences, recompute modes, pipeline split,
// tensor parallelism (tp=2 with kv_heads=2; tp=4 > kv_heads, which
// replicates KV heads) with and without sequence parallelism against one
// rank, and the planner's parameter counts against the runtime's.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "planner/memory/param_count.h"
#include "runtime/backend/backend.h"
#include "runtime/comm/local_comm.h"
#include "runtime/model/init.h"
#include "runtime/model/llama_layer.h"
#include "runtime/model/model_chunk.h"
#include "tests/runtime/model_step_util.h"

namespace dt::rt {
namespace {

ModelSpec TinyLlama() {
  ModelSpec m;
  m.name = "tiny-llama";
  m.family = ModelFamily::kLlama;
  m.num_layers = 2;
  m.hidden = 32;
  m.heads = 4;
  m.kv_heads = 2;
  m.ffn_hidden = 40;
  m.vocab = 50;
  m.seq_length = 8;
  m.max_position = 16;
  m.tied_embeddings = false;
  m.rope_theta = 1000.0;
  m.rms_norm_eps = 1e-5;
  return m;
}

using testing_util::Batch;
using testing_util::MakeBatch;
using testing_util::RunStep;
using testing_util::TinyPlan;

int Find(ModelChunk& c, const std::string& name) {
  for (size_t i = 0; i < c.params().params().size(); ++i)
    if (c.params().params()[i].name == name) return static_cast<int>(i);
  return -1;
}

class LlamaModelTest : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> be = MakeCpuBackend();
  ModelSpec m = TinyLlama();
};

TEST_F(LlamaModelTest, InitialLossAndParameterCountsMatchPlanner) {
  PlanSpec p = TinyPlan();
  ModelChunk c(m, p, 0, 0, {}, *be, 1234);
  Batch b = MakeBatch(m, p, 1);
  float loss = 0;
  c.Forward(0, nullptr, b.tokens.data(), b.targets.data(), &loss);
  EXPECT_NEAR(loss, std::log(50.0f), 0.1);
  EXPECT_EQ(c.params().numel(), m.TotalParams());
  EXPECT_EQ(c.params().numel(), StageParamsPerRank(m, p, 0));
  EXPECT_GE(Find(c, "lm_head.weight"), 0);  // untied
  EXPECT_GE(Find(c, "final_norm.weight"), 0);
  EXPECT_LT(Find(c, "embedding.position.weight"), 0);  // RoPE, no learned positions
  EXPECT_EQ(c.params().params()[Find(c, "layers.1.attn.k.weight")].full_shape,
            (std::vector<int64_t>{2 * 8, 32}));  // kv_heads * head_dim rows
}

TEST_F(LlamaModelTest, GradientsMatchFiniteDifferences) {
  ModelChunk c(m, TinyPlan(), 0, 0, {}, *be, 99);
  ParamStore& ps = c.params();
  testing_util::SpreadParams(ps, "norm");
  Batch b = MakeBatch(m, TinyPlan(), 2);
  RunStep(c, b);
  std::vector<float> grads(ps.grads(), ps.grads() + ps.numel());
  auto loss_at = [&] {
    float l = 0;
    c.Forward(1, nullptr, b.tokens.data(), b.targets.data(), &l);
    c.Backward(1, nullptr, 0.0f);
    return double(l);
  };
  auto four = [](int64_t n) { return std::vector<int64_t>{0, n / 3, n / 2 + 1, n - 1}; };
  EXPECT_GT(testing_util::ExpectFiniteDifferences(ps, grads, loss_at, four), 60);
}

// Central differences of L = r . layer(x) (double accumulation) against
// the layer's input grad and every parameter's grad, at a few elements each.
void CheckLayerGradients(LlamaLayer& layer, const LayerContext& ctx, ParamStore& store, Recompute mode,
                         uint32_t seed, double eps, double rel_tol, int min_checked) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, 0.3f);
  for (size_t i = 0; i < store.params().size(); ++i) {
    const bool is_norm = store.params()[i].name.find("norm") != std::string::npos;
    for (int64_t k = 0; k < store.params()[i].numel; ++k) store.value(static_cast<int>(i))[k] = (is_norm ? 1.0f : 0.0f) + d(g);
  }
  std::vector<float> x(ctx.rows * ctx.hidden), r(x.size());
  for (auto& v : x) v = d(g) * 3;
  for (auto& v : r) v = d(g);
  auto loss = [&](bool backward, std::vector<float>* dx) {
    Tensor in({ctx.rows, ctx.hidden});
    std::copy(x.begin(), x.end(), in.data());
    LayerStash st;
    Tensor out = layer.Forward(std::move(in), mode, &st);
    double l = 0;
    for (size_t i = 0; i < r.size(); ++i) l += double(out.data()[i]) * r[i];
    if (backward) {
      Tensor dout({ctx.rows, ctx.hidden});
      std::copy(r.begin(), r.end(), dout.data());
      Tensor din = layer.Backward(dout, &st);
      dx->assign(din.data(), din.data() + din.numel());
    }  // forward only: the stash is dropped with `st`
    return l;
  };
  std::vector<float> dx;
  store.ZeroGrads();
  loss(true, &dx);
  int checked = 0;
  auto check = [&](float* v, double analytic, const std::string& what) {
    const float orig = *v;
    *v = orig + static_cast<float>(eps);
    const double lp = loss(false, nullptr);
    *v = orig - static_cast<float>(eps);
    const double lm = loss(false, nullptr);
    *v = orig;
    const double numeric = (lp - lm) / (2 * eps);
    EXPECT_NEAR(analytic, numeric, 2e-3 + rel_tol * std::fabs(numeric)) << what;
    ++checked;
  };
  for (size_t i = 0; i < x.size(); i += 7) check(&x[i], dx[i], "dx[" + std::to_string(i) + "]");
  for (size_t i = 0; i < store.params().size(); ++i) {
    const Param& p = store.params()[i];
    for (int64_t k : {int64_t{0}, p.numel / 3, p.numel - 1})
      check(store.value(static_cast<int>(i)) + k, store.grad(static_cast<int>(i))[k], p.name + "[" + std::to_string(k) + "]");
  }
  EXPECT_GT(checked, min_checked);
}

// A small layer context: 2 x 5 tokens, hidden 16, 4 query heads of 4 over 2
// KV heads (GQA: 2 query heads per KV head), FFN 24.
LayerContext SmallLayerContext(Backend* be, ParamStore* store) {
  LayerContext ctx;
  ctx.be = be;
  ctx.seq = 5;
  ctx.batch = 2;
  ctx.rows = ctx.local_rows = 10;
  ctx.hidden = 16;
  ctx.heads_local = 4;
  ctx.head_dim = 4;
  ctx.ffn_local = 24;
  ctx.kv_heads = ctx.kv_heads_local = 2;
  ctx.rope_theta = 100.0;
  ctx.store = store;
  return ctx;
}

// One LlamaLayer on its own.
TEST_F(LlamaModelTest, WholeLayerGradientsMatchFiniteDifferences) {
  ParamStore store;
  LayerContext ctx = SmallLayerContext(be.get(), &store);
  LlamaLayer layer(&ctx, 0, 2);
  store.Finalize();
  CheckLayerGradients(layer, ctx, store, Recompute::kSelective, 9, 1e-2, 2e-2, 40);
}

// A Llama MoE layer with shared experts (Qwen2-MoE style, with and without
// the sigmoid gate) on its own: input and parameter grads against central
// differences, as the dense layer above. Routing is piecewise constant: the
// inputs are drawn so that no token's top-k choice flips within eps.
void CheckSharedExpertLayer(bool gate) {
  std::unique_ptr<Backend> be = MakeCpuBackend();
  ParamStore store;
  LayerContext ctx = SmallLayerContext(be.get(), &store);
  ctx.num_experts = 4;
  ctx.top_k = 2;
  ctx.expert_ffn_local = 12;
  ctx.shared_ffn_local = 20;
  ctx.shared_expert_gate = gate;
  LlamaLayer layer(&ctx, 0, 2);
  store.Finalize();
  int shared = 0;
  for (const Param& p : store.params()) shared += p.name.find("shared") != std::string::npos;
  EXPECT_EQ(shared, gate ? 4 : 3);
  CheckLayerGradients(layer, ctx, store, Recompute::kNone, 13, 1e-3, 3e-2, 60);
}

TEST(LlamaSharedExperts, ParameterCountsMatchPlanner) {
  auto be = MakeCpuBackend();
  for (bool gate : {true, false}) {
    ModelSpec m = TinyLlama();
    m.num_experts = 4;
    m.moe_top_k = 2;
    m.moe_ffn_hidden = 24;
    m.shared_ffn_hidden = 40;
    m.shared_expert_gate = gate;
    PlanSpec p = TinyPlan();
    ModelChunk c(m, p, 0, 0, {}, *be, 3);
    EXPECT_EQ(c.params().numel(), m.TotalParams()) << "gate " << gate;
    EXPECT_EQ(c.params().numel(), StageParamsPerRank(m, p, 0)) << "gate " << gate;
    EXPECT_EQ(Find(c, "layers.1.mlp.shared_expert_gate.weight") >= 0, gate);
    EXPECT_GE(Find(c, "layers.0.mlp.shared.down.weight"), 0);
  }
}

TEST(LlamaSharedExperts, GatedLayerGradientsMatchFiniteDifferences) { CheckSharedExpertLayer(true); }
TEST(LlamaSharedExperts, UngatedLayerGradientsMatchFiniteDifferences) { CheckSharedExpertLayer(false); }

TEST_F(LlamaModelTest, RecomputeModesGiveSameGrads) {
  Batch b = MakeBatch(m, TinyPlan(), 3);
  std::vector<std::vector<float>> grads;
  std::vector<float> losses;
  for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    ModelChunk c(m, TinyPlan(1, rc), 0, 0, {}, *be, 42);
    losses.push_back(RunStep(c, b, 0.5f));
    grads.emplace_back(c.params().grads(), c.params().grads() + c.params().numel());
  }
  for (int i = 1; i < 3; ++i) {
    EXPECT_EQ(losses[i], losses[0]);
    for (size_t k = 0; k < grads[0].size(); ++k) ASSERT_NEAR(grads[i][k], grads[0][k], 1e-6) << "mode " << i;
  }
}

TEST_F(LlamaModelTest, TwoChunksEqualOneChunk) {
  Batch b = MakeBatch(m, TinyPlan(), 5);
  ModelChunk whole(m, TinyPlan(1), 0, 0, {}, *be, 7);
  const float loss1 = RunStep(whole, b);
  PlanSpec p2 = TinyPlan(2);
  ModelChunk c0(m, p2, 0, 0, {}, *be, 7), c1(m, p2, 1, 0, {}, *be, 7);
  Tensor act = c0.Forward(0, nullptr, b.tokens.data(), nullptr, nullptr);
  float loss2 = 0;
  c1.Forward(0, &act, nullptr, b.targets.data(), &loss2);
  Tensor g = c1.Backward(0, nullptr, 1.0f);
  c0.Backward(0, &g, 1.0f);
  EXPECT_EQ(loss1, loss2);
  EXPECT_EQ(c0.params().numel() + c1.params().numel(), whole.params().numel());  // untied: no copy
  for (size_t i = 0; i < whole.params().params().size(); ++i) {
    const Param& p = whole.params().params()[i];
    const int i0 = Find(c0, p.name), i1 = Find(c1, p.name);
    ASSERT_TRUE((i0 >= 0) != (i1 >= 0)) << p.name;
    ModelChunk& c = i0 >= 0 ? c0 : c1;
    const int j = i0 >= 0 ? i0 : i1;
    EXPECT_FALSE(c.params().params()[j].tied) << p.name;
    for (int64_t k = 0; k < p.numel; ++k) ASSERT_NEAR(c.params().grad(j)[k], whole.params().grad(i)[k], 1e-6) << p.name;
  }
}

// TP=tp (optionally SP) on LocalComm threads equals TP=1: same loss, every
// shard's values and grads equal the matching slice of the unsharded ones,
// and replicated KV shards agree across their replicas.
void CheckTp(int tp, bool sp, Recompute rc) {
  auto be = MakeCpuBackend();
  ModelSpec m = TinyLlama();
  PlanSpec p1 = TinyPlan(1, rc);
  Batch b = MakeBatch(m, p1, 6);
  ModelChunk ref(m, p1, 0, 0, {}, *be, 11);
  const float ref_loss = RunStep(ref, b);

  PlanSpec pt = p1;
  pt.tp = tp;
  pt.sequence_parallel = sp;
  LocalGroupHandle group(tp);
  std::vector<float> loss(tp);
  std::vector<std::unique_ptr<ModelChunk>> chunks(tp);
  std::vector<std::unique_ptr<Backend>> bes(tp);
  std::vector<std::unique_ptr<Comm>> comms(tp);
  RunRanks(tp, [&](int r) {
    comms[r] = group.Member(r);
    bes[r] = MakeCpuBackend();
    ParallelComms pc;
    pc.tp = comms[r].get();
    chunks[r] = std::make_unique<ModelChunk>(m, pt, 0, r, pc, *bes[r], 11);
    loss[r] = RunStep(*chunks[r], b);
  });
  int replicated = 0;
  int64_t max_numel = 0;
  for (int r = 0; r < tp; ++r) {
    EXPECT_NEAR(loss[r], ref_loss, 1e-5);
    const ParamStore& ps = chunks[r]->params();
    max_numel = std::max(max_numel, ps.numel());
    ASSERT_EQ(ps.params().size(), ref.params().params().size());
    for (size_t i = 0; i < ps.params().size(); ++i) {
      const Param& prm = ps.params()[i];
      if (prm.tp_replicas > 1) ++replicated;
      const float* g = ps.grads() + prm.offset;
      const float* v = ps.values() + prm.offset;
      const float* rg = ref.params().grads() + ref.params().params()[i].offset;
      const float* rv = ref.params().values() + ref.params().params()[i].offset;
      float scale = 0;
      for (int64_t k = 0; k < ref.params().params()[i].numel; ++k) scale = std::max(scale, std::fabs(rg[k]));
      for (int64_t k = 0; k < prm.numel; ++k) {
        const int64_t gk = GlobalIndex(prm, k);
        ASSERT_EQ(v[k], rv[gk]) << prm.name;
        ASSERT_NEAR(g[k], rg[gk], 1e-5f * scale + 1e-4f * std::fabs(rg[gk]))
            << prm.name << " rank " << r << " [" << k << "]";
      }
    }
  }
  EXPECT_EQ(replicated > 0, tp > m.kv_heads);
  // The planner counts the largest rank (vocab 50 splits unevenly over 4).
  EXPECT_EQ(max_numel, StageParamsPerRank(m, pt, 0)) << "planner's per-rank count, tp=" << tp;
}

TEST(LlamaTpTest, Tp2MatchesTp1) { CheckTp(2, false, Recompute::kNone); }
TEST(LlamaTpTest, Tp2SequenceParallelMatchesTp1) { CheckTp(2, true, Recompute::kSelective); }
TEST(LlamaTpTest, Tp4ReplicatedKvHeadsMatchesTp1) { CheckTp(4, false, Recompute::kNone); }
TEST(LlamaTpTest, Tp4SequenceParallelFullRecomputeMatchesTp1) { CheckTp(4, true, Recompute::kFull); }

}  // namespace
}  // namespace dt::rt
