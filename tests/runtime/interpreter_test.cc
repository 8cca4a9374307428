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
          model, p, c, g.coord.tp, ParallelComms{sized(g.tp), sized(g.dp), sized(g.pp), sized(g.tied), sized(g.cp)},
          *backend, 7));
      ptrs.push_back(chunks.back().get());
      stores.push_back(&chunks.back()->params());
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
    BatchShape shape;
    shape.micro_batch = p.micro_batch;
    shape.num_microbatches = p.num_microbatches;
    shape.seq_length = p.seq_length;
    shape.dp_size = p.dp;
    shape.dp_rank = g.coord.dp;
    shape.seed = 11;
    DataLoader loader = *DataLoader::Create(source, shape);
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
