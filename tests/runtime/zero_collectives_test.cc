// ZeRO-2/3: the runtime issues exactly the DP collectives and keeps exactly
// the shard sizes the planner models (planner/memory/zero_units.h, used by
// the lowering and the memory model). One training step per plan on LocalComm
// threads, with the DP comm wrapped to record every collective's size.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "planner/memory/memory_params.h"
#include "planner/memory/stage_memory.h"
#include "planner/memory/zero_units.h"
#include "planner/schedule/build_schedule.h"
#include "runtime/comm/local_comm.h"
#include "runtime/data/markov_source.h"
#include "runtime/exec/interpreter.h"

namespace dt::rt {
namespace {

// Forwards to `inner`, recording the per-member size of every all-gather and
// reduce-scatter.
class CountingComm : public Comm {
 public:
  explicit CountingComm(Comm* inner) : inner_(inner) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  void AllReduce(float* buf, size_t n, ReduceOp op) override { inner_->AllReduce(buf, n, op); }
  std::unique_ptr<Request> IAllReduce(float* buf, size_t n) override { return inner_->IAllReduce(buf, n); }
  void ReduceScatter(const float* in, float* out, size_t n) override {
    reduce_scatters.push_back(static_cast<int64_t>(n));
    inner_->ReduceScatter(in, out, n);
  }
  void AllGather(const float* in, float* out, size_t n) override {
    all_gathers.push_back(static_cast<int64_t>(n));
    inner_->AllGather(in, out, n);
  }
  std::unique_ptr<Request> ISend(const float* buf, size_t n, int peer, int tag) override {
    return inner_->ISend(buf, n, peer, tag);
  }
  std::unique_ptr<Request> IRecv(float* buf, size_t n, int peer, int tag) override {
    return inner_->IRecv(buf, n, peer, tag);
  }
  void Barrier() override { inner_->Barrier(); }
  void AllToAllV(const float* in, const size_t* sc, float* out, const size_t* rc) override {
    inner_->AllToAllV(in, sc, out, rc);
  }
  std::vector<int64_t> all_gathers, reduce_scatters;

 private:
  Comm* inner_;
};

struct StageRecord {
  std::vector<int64_t> all_gathers, reduce_scatters;
  int64_t shard_numel = 0;  // summed over the stage's chunks
};

// One step of plan p; the records of DP rank 0, TP rank 0 of every stage.
std::vector<StageRecord> RunOneStep(const ModelSpec& model, const PlanSpec& p) {
  RankGrid grid = *RankGrid::Create(p.tp, p.cp, p.dp, p.pp, p.order);
  std::vector<Groups> groups = MakeLocalGroups(grid);
  std::vector<ActionList> schedule = *BuildSchedule(p);
  MarkovOptions mo;
  mo.vocab = model.vocab;
  auto source = std::make_shared<MarkovSource>(*MarkovSource::Create(mo));
  std::vector<StageRecord> out(p.pp);
  RunRanks(p.world(), [&](int r) {
    Groups& g = groups[r];
    auto sized = [](const std::unique_ptr<Comm>& c) { return c && c->size() > 1 ? c.get() : nullptr; };
    CountingComm dp(g.dp.get());
    std::unique_ptr<Backend> backend = MakeCpuBackend();
    std::vector<std::unique_ptr<ModelChunk>> chunks;
    std::vector<ModelChunk*> ptrs;
    std::vector<ParamStore*> stores;
    std::vector<bool> counts_tied;
    int64_t shard_numel = 0;
    for (int i = 0; i < p.vpp; ++i) {
      const int c = i * p.pp + g.coord.pp;
      chunks.push_back(std::make_unique<ModelChunk>(model, p, c, g.coord.tp,
                                                    ParallelComms{sized(g.tp), &dp, sized(g.pp), sized(g.tied)},
                                                    *backend, 7));
      ptrs.push_back(chunks.back().get());
      stores.push_back(&chunks.back()->params());
      counts_tied.push_back(c == 0);
      EXPECT_NE(chunks.back()->sharding(), nullptr);
      if (chunks.back()->sharding()) shard_numel += chunks.back()->sharding()->shard_numel();
    }
    OptimizerOptions oo;
    oo.zero_stage = p.zero_stage;
    Optimizer opt(stores, counts_tied, oo, OptimizerComms{&dp, sized(g.tp), sized(g.pp), sized(g.tied)});
    DataLoader loader = *DataLoader::Create(source, BatchShapeFor(p, g.coord.dp, /*seed=*/0));
    Interpreter interp(p, schedule[g.coord.pp], ptrs, &opt, sized(g.pp), &loader);
    dp.all_gathers.clear();
    dp.reduce_scatters.clear();
    interp.RunStep(0);
    if (g.coord.dp == 0 && g.coord.tp == 0)
      out[g.coord.pp] = StageRecord{dp.all_gathers, dp.reduce_scatters, shard_numel};
  });
  return out;
}

std::vector<int64_t> Sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(ZeroCollectives, RuntimeIssuesWhatThePlannerModels) {
  const ModelSpec m = *LoadModel(std::string(DT_SOURCE_DIR) + "/examples/models/gpt-tiny.json");
  for (int pp : {1, 2}) {
    for (int zero : {2, 3}) {
      PlanSpec p;
      p.dp = 2;
      p.pp = pp;
      p.micro_batch = 1;
      p.num_microbatches = 4;
      p.seq_length = m.seq_length;
      p.schedule = Schedule::k1F1B;
      p.zero_stage = zero;
      p.flash_attention = false;
      p.layers_per_chunk = EvenSplit(m.num_layers, pp);
      ASSERT_TRUE(Validate(p, m, "test").ok());
      SCOPED_TRACE("pp " + std::to_string(pp) + " zero " + std::to_string(zero));
      const std::vector<StageRecord> rec = RunOneStep(m, p);
      for (int s = 0; s < pp; ++s) {
        const ChunkUnits u = ZeroChunkUnits(m, p, s);
        std::vector<int64_t> rs, ag;
        for (int mb = 0; mb < p.num_microbatches; ++mb)
          for (int64_t n : u.uses) {
            rs.push_back(UnitShard(n, p.dp));
            if (zero == 3) ag.insert(ag.end(), 2, UnitShard(n, p.dp));  // before forward and backward
          }
        if (zero == 2)
          for (int64_t n : u.units) ag.push_back(UnitShard(n, p.dp));  // parameter sync
        ag.push_back(3);  // the gradient norm's SumAcross over dp (grad_norm.h)
        EXPECT_EQ(Sorted(rec[s].reduce_scatters), Sorted(rs)) << "stage " << s;
        EXPECT_EQ(Sorted(rec[s].all_gathers), Sorted(ag)) << "stage " << s;
        // The memory model's sharded gradient bytes are the runtime's shard.
        const StageMemory mem = EstimateStageMemory(m, p, MemoryParams::Fp32(1e12), s, 1);
        EXPECT_DOUBLE_EQ(mem.gradients, 4.0 * rec[s].shard_numel) << "stage " << s;
        EXPECT_DOUBLE_EQ(mem.optimizer, 8.0 * rec[s].shard_numel) << "stage " << s;
        if (zero == 3) {
          EXPECT_DOUBLE_EQ(mem.weights, 4.0 * rec[s].shard_numel) << "stage " << s;
        }
      }
    }
  }
}

}  // namespace
}  // namespace dt::rt
