// Interpreter unit tests without MPI: each "rank" is a thread with LocalComm
// groups (runtime/comm/local_comm.h). A plan's per-step losses must match the
// 1-rank run (the end-to-end MPI versions are the dtrun_* ctests).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "planner/schedule/build_schedule.h"
#include "runtime/comm/local_comm.h"
#include "runtime/data/markov_source.h"
#include "runtime/exec/interpreter.h"

namespace dt::rt {
namespace {

ModelSpec TinyModel() {
  StatusOr<ModelSpec> m = LoadModel(std::string(DT_SOURCE_DIR) + "/examples/models/gpt-tiny.json");
  DT_CHECK(m.ok()) << m.status().message();
  return *m;
}

PlanSpec MakePlan(const ModelSpec& m, int dp, int tp, int pp, int vpp, int mbs, Schedule s, int zero = 0,
                  int cp = 1, bool sp = false, Recompute rc = Recompute::kNone) {
  PlanSpec p;
  p.dp = dp;
  p.tp = tp;
  p.pp = pp;
  p.cp = cp;
  p.sequence_parallel = sp;
  p.recompute = rc;
  p.vpp = vpp;
  p.micro_batch = mbs;
  p.num_microbatches = 8 / (dp * mbs);
  p.seq_length = m.seq_length;
  p.schedule = s;
  p.zero_stage = zero;
  p.recompute = rc;
  p.sequence_parallel = sp;
  p.flash_attention = false;
  p.layers_per_chunk = EvenSplit(m.num_layers, pp * vpp);
  Status st = Validate(p, m, "test plan");
  DT_CHECK(st.ok()) << st.message();
  return p;
}

// Per-step global losses of `steps` steps of plan p, one thread per rank.
std::vector<double> Train(const ModelSpec& model, const PlanSpec& p, int steps) {
  RankGrid grid = *RankGrid::Create(p.tp, p.cp, p.dp, p.pp, p.order);
  std::vector<Groups> groups = MakeLocalGroups(grid);
  std::vector<ActionList> schedule = *BuildSchedule(p);
  MarkovOptions mo;
  mo.vocab = model.vocab;
  auto source = std::make_shared<MarkovSource>(*MarkovSource::Create(mo));
  const int world = p.world();
  std::vector<std::vector<double>> contrib(world, std::vector<double>(steps, 0.0));
  RunRanks(world, [&](int r) {
    Groups& g = groups[r];
    auto sized = [](const std::unique_ptr<Comm>& c) { return c && c->size() > 1 ? c.get() : nullptr; };
    std::unique_ptr<Backend> backend = MakeCpuBackend();
    std::vector<std::unique_ptr<ModelChunk>> chunks;
    std::vector<ModelChunk*> ptrs;
    std::vector<ParamStore*> stores;
    std::vector<bool> counts_tied;
    for (int i = 0; i < p.vpp; ++i) {
      const int c = i * p.pp + g.coord.pp;
      chunks.push_back(std::make_unique<ModelChunk>(
          model, p, c, g.coord.tp, ParallelComms{sized(g.tp), p.cp > 1 ? sized(g.dp_cp) : sized(g.dp), sized(g.pp), sized(g.tied), sized(g.cp)},
          *backend, 7));
      ptrs.push_back(chunks.back().get());
      stores.push_back(&chunks.back()->params());
      // ZeRO-2/3 really shard: no flat gradients (and, ZeRO-3, no flat values).
      const bool sharded = p.zero_stage >= 2 && p.dp * p.cp > 1;
      EXPECT_EQ(chunks.back()->sharding() != nullptr, sharded);
      EXPECT_EQ(stores.back()->has_grads(), !sharded);
      EXPECT_EQ(stores.back()->has_values(), !sharded || p.zero_stage == 2);
      counts_tied.push_back(c == 0);
    }
    OptimizerOptions oo;
    oo.lr.peak_lr = 3e-3;
    oo.lr.min_lr = 3e-4;
    oo.lr.warmup_steps = 2;
    oo.lr.total_steps = steps;
    oo.zero_stage = p.zero_stage;
    Comm* grad_group = p.cp > 1 ? sized(g.dp_cp) : sized(g.dp);
    Optimizer opt(stores, counts_tied, oo, OptimizerComms{grad_group, sized(g.tp), sized(g.pp), sized(g.tied)});
    DataLoader loader = *DataLoader::Create(source, BatchShapeFor(p, g.coord.dp, /*seed=*/11));
    Interpreter interp(p, schedule[g.coord.pp], ptrs, &opt, sized(g.pp), &loader);
    for (int s = 0; s < steps; ++s) {
      StepOutcome o = interp.RunStep(s);
      // Every TP and CP rank of a pipeline end reports the microbatch loss: count one.
      if (g.coord.tp == 0 && g.coord.cp == 0) contrib[r][s] = o.loss_sum;
      EXPECT_EQ(o.num_losses > 0, g.coord.pp == p.pp - 1);
    }
  });
  std::vector<double> losses(steps, 0.0);
  for (int s = 0; s < steps; ++s) {
    for (int r = 0; r < world; ++r) losses[s] += contrib[r][s];
    losses[s] /= static_cast<double>(p.dp) * p.num_microbatches;
  }
  return losses;
}

void ExpectClose(const std::vector<double>& ref, const std::vector<double>& got) {
  ASSERT_EQ(ref.size(), got.size());
  for (size_t i = 0; i < ref.size(); ++i)
    EXPECT_NEAR(got[i], ref[i], 1e-4 * std::abs(ref[i])) << "step " << i + 1;
}

TEST(InterpreterTest, DeterministicAndLossDecreases) {
  const ModelSpec m = TinyModel();
  const PlanSpec p = MakePlan(m, 1, 1, 1, 1, 2, Schedule::k1F1B);
  const std::vector<double> a = Train(m, p, 4), b = Train(m, p, 4);
  EXPECT_EQ(a, b);
  EXPECT_LT(a.back(), a.front());
}

TEST(InterpreterTest, PipelineSchedulesMatchOneRank) {
  const ModelSpec m = TinyModel();
  const std::vector<double> ref = Train(m, MakePlan(m, 1, 1, 1, 1, 2, Schedule::k1F1B), 3);
  ExpectClose(ref, Train(m, MakePlan(m, 1, 1, 2, 1, 2, Schedule::kGpipe), 3));
  ExpectClose(ref, Train(m, MakePlan(m, 1, 1, 2, 1, 2, Schedule::k1F1B), 3));
  // Interleaved: tied embedding on pipeline ranks 0 and 1 with deferred GradSync.
  ExpectClose(ref, Train(m, MakePlan(m, 1, 1, 2, 2, 2, Schedule::kInterleaved), 3));
}

TEST(InterpreterTest, MixedPlansMatchOneRank) {
  const ModelSpec m = TinyModel();
  const std::vector<double> ref = Train(m, MakePlan(m, 1, 1, 1, 1, 2, Schedule::k1F1B), 3);
  ExpectClose(ref, Train(m, MakePlan(m, 2, 2, 1, 1, 1, Schedule::k1F1B), 3));
  ExpectClose(ref, Train(m, MakePlan(m, 2, 1, 2, 1, 1, Schedule::k1F1B, /*zero=*/1), 3));
}

// ZeRO-2 / ZeRO-3: gradients reduce-scattered per unit during each backward,
// parameters sharded (ZeRO-3: gathered around every use).
TEST(InterpreterTest, Zero2And3MatchOneRank) {
  const ModelSpec m = TinyModel();
  const std::vector<double> ref = Train(m, MakePlan(m, 1, 1, 1, 1, 2, Schedule::k1F1B), 3);
  for (int zero : {2, 3}) {
    SCOPED_TRACE("zero " + std::to_string(zero));
    ExpectClose(ref, Train(m, MakePlan(m, 2, 1, 1, 1, 2, Schedule::k1F1B, zero), 3));
    ExpectClose(ref, Train(m, MakePlan(m, 2, 2, 1, 1, 1, Schedule::k1F1B, zero), 3));
    ExpectClose(ref, Train(m, MakePlan(m, 2, 2, 1, 1, 1, Schedule::k1F1B, zero, 1, /*sp=*/true), 3));
    ExpectClose(ref, Train(m, MakePlan(m, 2, 1, 2, 1, 1, Schedule::k1F1B, zero), 3));
    ExpectClose(ref, Train(m, MakePlan(m, 2, 1, 2, 2, 1, Schedule::kInterleaved, zero), 3));
    ExpectClose(ref, Train(m, MakePlan(m, 2, 1, 1, 1, 2, Schedule::k1F1B, zero, 1, false, Recompute::kFull), 3));
    // Under CP the shard group is DP x CP (here 1 x 2).
    ExpectClose(ref, Train(m, MakePlan(m, 1, 1, 1, 1, 2, Schedule::k1F1B, zero, /*cp=*/2), 3));
  }
}

// Untied embeddings: lm_head is its own unit.
TEST(InterpreterTest, Zero3UntiedHeadMatchesOneRank) {
  ModelSpec m = TinyModel();
  m.tied_embeddings = false;
  const std::vector<double> ref = Train(m, MakePlan(m, 1, 1, 1, 1, 2, Schedule::k1F1B), 3);
  ExpectClose(ref, Train(m, MakePlan(m, 2, 1, 1, 1, 2, Schedule::k1F1B, 3), 3));
  ExpectClose(ref, Train(m, MakePlan(m, 2, 1, 2, 1, 1, Schedule::k1F1B, 3), 3));
}

// Context parallelism: ring attention over the CP group, gradients averaged
// over DP x CP; alone and with TP (+SP), PP and DP, every recompute mode.
TEST(InterpreterTest, ContextParallelMatchesOneRank) {
  const ModelSpec m = TinyModel();
  const std::vector<double> ref = Train(m, MakePlan(m, 1, 1, 1, 1, 2, Schedule::k1F1B), 3);
  ExpectClose(ref, Train(m, MakePlan(m, 1, 1, 1, 1, 2, Schedule::k1F1B, 0, /*cp=*/2), 3));
  ExpectClose(ref, Train(m, MakePlan(m, 1, 1, 1, 1, 2, Schedule::k1F1B, 0, /*cp=*/4), 3));
  ExpectClose(ref, Train(m, MakePlan(m, 1, 2, 1, 1, 2, Schedule::k1F1B, 0, 2, /*sp=*/true), 3));
  ExpectClose(ref, Train(m, MakePlan(m, 1, 1, 2, 1, 2, Schedule::k1F1B, 0, 2), 3));
  ExpectClose(ref, Train(m, MakePlan(m, 2, 1, 1, 1, 1, Schedule::k1F1B, /*zero=*/1, 2), 3));
}

TEST(InterpreterTest, ContextParallelRecomputeModesMatchOneRank) {
  const ModelSpec m = TinyModel();
  const std::vector<double> ref = Train(m, MakePlan(m, 1, 1, 1, 1, 2, Schedule::k1F1B), 3);
  ExpectClose(ref, Train(m, MakePlan(m, 1, 1, 1, 1, 2, Schedule::k1F1B, 0, 2, false, Recompute::kSelective), 3));
  ExpectClose(ref, Train(m, MakePlan(m, 1, 2, 1, 1, 2, Schedule::k1F1B, 0, 2, false, Recompute::kFull), 3));
}

}  // namespace
}  // namespace dt::rt

// The Llama family (examples/models/llama-tiny.json: GQA with kv_heads=2,
// untied LM head, RoPE, SwiGLU): every plan matches one rank.
namespace dt::rt {
namespace {

ModelSpec TinyLlama() {
  StatusOr<ModelSpec> m = LoadModel(std::string(DT_SOURCE_DIR) + "/examples/models/llama-tiny.json");
  DT_CHECK(m.ok()) << m.status().message();
  DT_CHECK(m->family == ModelFamily::kLlama && m->kv_heads < m->heads && !m->tied_embeddings) << "llama-tiny";
  return *m;
}

TEST(InterpreterLlamaTest, TensorAndSequenceParallelMatchOneRank) {
  const ModelSpec m = TinyLlama();
  const std::vector<double> ref = Train(m, MakePlan(m, 1, 1, 1, 1, 2, Schedule::k1F1B), 3);
  EXPECT_LT(ref.back(), ref.front());
  ExpectClose(ref, Train(m, MakePlan(m, 1, 2, 1, 1, 2, Schedule::k1F1B), 3));
  ExpectClose(ref, Train(m, MakePlan(m, 1, 2, 1, 1, 2, Schedule::k1F1B, 0, 1, /*sp=*/true, Recompute::kSelective), 3));
  // tp=4 > kv_heads=2: each KV head replicated on two TP ranks.
  ExpectClose(ref, Train(m, MakePlan(m, 1, 4, 1, 1, 2, Schedule::k1F1B), 3));
  ExpectClose(ref, Train(m, MakePlan(m, 1, 4, 1, 1, 2, Schedule::k1F1B, 0, 1, /*sp=*/true, Recompute::kFull), 3));
}

TEST(InterpreterLlamaTest, PipelineDataAndContextParallelMatchOneRank) {
  const ModelSpec m = TinyLlama();
  const std::vector<double> ref = Train(m, MakePlan(m, 1, 1, 1, 1, 2, Schedule::k1F1B), 3);
  ExpectClose(ref, Train(m, MakePlan(m, 1, 1, 2, 2, 2, Schedule::kInterleaved), 3));
  PlanSpec uneven = MakePlan(m, 1, 1, 2, 1, 2, Schedule::k1F1B);
  uneven.layers_per_chunk = {1, 3};
  ExpectClose(ref, Train(m, uneven, 3));
  ExpectClose(ref, Train(m, MakePlan(m, 2, 2, 1, 1, 1, Schedule::k1F1B, /*zero=*/1), 3));
  ExpectClose(ref, Train(m, MakePlan(m, 1, 1, 1, 1, 2, Schedule::k1F1B, 0, /*cp=*/2), 3));
  ExpectClose(ref, Train(m, MakePlan(m, 1, 2, 1, 1, 2, Schedule::k1F1B, 0, /*cp=*/2, /*sp=*/true), 3));
}

}  // namespace
}  // namespace dt::rt
