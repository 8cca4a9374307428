// Lowering + engine + schedules together: the simulated pipeline bubble
// equals the closed forms, the lower bound never exceeds the simulation,
// and more bandwidth or FLOP/s never makes a plan slower.
#include <gtest/gtest.h>

#include "tests/planner/test_models.h"

#include <cmath>

#include "planner/cost/comm_cost.h"
#include "planner/lower/group_topology.h"
#include "planner/lower/lowering.h"
#include "planner/lower/memory_params_for.h"
#include "planner/memory/zero_units.h"
#include "planner/lower/simulate.h"
#include "planner/schedule/schedule.h"
#include "planner/search/enumerate.h"

namespace dt {
namespace {

using testing_models::PipelinePlan;
PlanSpec Pipeline(Schedule s, int pp, int vpp, int m) { return PipelinePlan(s, pp, vpp, m); }

// Uniform chunks, free communication, no optimizer: the only idle time on
// a stage's compute stream is the pipeline bubble.
double SimulatedBubble(const PlanSpec& p, double fwd, double bwd) {
  PlanCosts c;
  c.chunks.resize(p.num_chunks());
  for (auto& k : c.chunks) {
    k.layers = 1;
    k.fwd_compute = fwd / p.vpp;
    k.bwd_compute = bwd / p.vpp;
  }
  c.optimizer.assign(p.pp, 0.0);
  auto sched = BuildSchedule(p);
  EXPECT_TRUE(sched.ok()) << sched.status().message();
  sim::Engine e;
  Lowered l = LowerSchedule(*sched, p, c, false, &e);
  EXPECT_TRUE(e.Run().ok());
  double busy = e.BusyTime(l.compute[0]);
  EXPECT_NEAR(busy, p.num_microbatches * (fwd + bwd), 1e-9);
  TimeBreakdown b = ReadBreakdown(l, e);
  EXPECT_NEAR(b.bubble, e.makespan() - busy, 1e-9);
  return (e.makespan() - busy) / e.makespan();
}

TEST(Lowering, OneFOneBAndGpipeBubbleIsPMinus1OverMPlusPMinus1) {
  for (Schedule s : {Schedule::k1F1B, Schedule::kGpipe}) {
    for (int pp : {2, 4, 8}) {
      for (int m : {1, 4, 8, 16}) {
        double expect = double(pp - 1) / (m + pp - 1);
        EXPECT_NEAR(SimulatedBubble(Pipeline(s, pp, 1, m), 1.0, 2.0), expect, 1e-9)
            << ToString(s) << " pp=" << pp << " m=" << m;
      }
    }
  }
}

TEST(Lowering, InterleavedBubbleShrinksByV) {
  for (int pp : {2, 4}) {
    for (int v : {2, 3, 4}) {
      for (int m : {pp * 2, pp * 4}) {
        // Narayanan et al. SC21: bubble / ideal = (1/v) (p-1)/m, so the
        // fraction of the step is (p-1) / (v m + p - 1).
        double expect = double(pp - 1) / (v * m + pp - 1);
        EXPECT_NEAR(SimulatedBubble(Pipeline(Schedule::kInterleaved, pp, v, m), 1.0, 2.0), expect, 1e-9)
            << "pp=" << pp << " v=" << v << " m=" << m;
      }
    }
  }
}

TEST(Lowering, BubbleTestCanFail) {
  // Not a tautology: with p = 4 and m = 4 the 1F1B bubble is 3/7, not 3/8.
  EXPECT_GT(std::fabs(SimulatedBubble(Pipeline(Schedule::k1F1B, 4, 1, 4), 1, 2) - 3.0 / 8), 0.01);
}

class PlannerFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = LoadModel(std::string(DT_SOURCE_DIR) + "/examples/models/gpt2-124m.json");
    ASSERT_TRUE(m.ok()) << m.status().message();
    model_ = *m;
    auto hw = LoadProfile("A100-SXM4-80GB");
    ASSERT_TRUE(hw.ok()) << hw.status().message();
    hw_ = *hw;
    cluster_.nodes = 2;
    cluster_.gpus_per_node = 8;
    SearchConstraints k;
    k.global_batch = 64;
    k.seq_length = model_.seq_length;
    k.max_vpp = 3;
    auto e = EnumeratePlans(model_, cluster_, k);
    ASSERT_TRUE(e.ok());
    // A deterministic sample of the space, every kind of plan included.
    for (size_t i = 0; i < e->plans.size(); i += 37) plans_.push_back(e->plans[i]);
    ASSERT_GT(plans_.size(), 50u);
  }
  ModelSpec model_;
  HardwareProfile hw_;
  ClusterSpec cluster_;
  std::vector<PlanSpec> plans_;
};

TEST_F(PlannerFixture, LowerBoundNeverExceedsSimulation) {
  for (const PlanSpec& p : plans_) {
    auto pred = SimulatePlan(model_, cluster_, p, hw_);
    ASSERT_TRUE(pred.ok()) << Describe(p) << ": " << pred.status().message();
    double lb = StepTimeLowerBound(p, ComputePlanCosts(model_, cluster_, p, hw_));
    EXPECT_LE(lb, pred->step_time_s * (1 + 1e-9)) << Describe(p);
    EXPECT_GT(lb, 0.3 * pred->step_time_s) << "bound uselessly loose for " << Describe(p);
  }
}

// The search prices its candidates' lower bounds without the out-of-profile
// checks (ComputePlanCosts(..., track_outside = false)): every cost is the
// same, only the flag stays unset, and the sample has plans that set it.
TEST_F(PlannerFixture, UntrackedCostsAreTheTrackedOnesWithoutTheOutsideFlag) {
  int flagged = 0;
  for (const PlanSpec& p : plans_) {
    const PlanCosts a = ComputePlanCosts(model_, cluster_, p, hw_);
    const PlanCosts b = ComputePlanCosts(model_, cluster_, p, hw_, /*track_outside=*/false);
    flagged += a.outside_profile;
    EXPECT_FALSE(b.outside_profile) << Describe(p);
    EXPECT_EQ(StepTimeLowerBound(p, a), StepTimeLowerBound(p, b)) << Describe(p);
    ASSERT_EQ(a.chunks.size(), b.chunks.size());
    for (size_t k = 0; k < a.chunks.size(); ++k) {
      const ChunkCost &x = a.chunks[k], &y = b.chunks[k];
      EXPECT_EQ(x.fwd_compute, y.fwd_compute);
      EXPECT_EQ(x.fwd_comm, y.fwd_comm);
      EXPECT_EQ(x.bwd_compute, y.bwd_compute);
      EXPECT_EQ(x.bwd_comm, y.bwd_comm);
      EXPECT_EQ(x.grad_sync, y.grad_sync);
      EXPECT_EQ(x.param_sync, y.param_sync);
      EXPECT_EQ(x.zero3_gather, y.zero3_gather);
    }
    EXPECT_EQ(a.p2p, b.p2p);
    EXPECT_EQ(a.optimizer, b.optimizer);
  }
  EXPECT_GT(flagged, 0) << "no sampled plan needs a point outside the profile: the test cannot tell";
}

TEST_F(PlannerFixture, MoreBandwidthOrFlopsNeverSlower) {
  HardwareProfile fast_net = hw_, fast_gpu = hw_;
  for (auto& t : fast_net.network.collectives) {
    for (auto& e : t.intra) e.busbw_Bps *= 2;
    for (auto& e : t.inter) e.busbw_Bps *= 2;
  }
  fast_gpu.device.peak_flops *= 2;
  ASSERT_TRUE(PrepareProfile(&fast_net, "fast_net").ok());
  ASSERT_TRUE(PrepareProfile(&fast_gpu, "fast_gpu").ok());
  int faster = 0;
  for (const PlanSpec& p : plans_) {
    double base = SimulatePlan(model_, cluster_, p, hw_)->step_time_s;
    double net = SimulatePlan(model_, cluster_, p, fast_net)->step_time_s;
    double gpu = SimulatePlan(model_, cluster_, p, fast_gpu)->step_time_s;
    EXPECT_LE(net, base * (1 + 1e-12)) << Describe(p);
    EXPECT_LE(gpu, base * (1 + 1e-12)) << Describe(p);
    faster += (net < base) + (gpu < base);
  }
  EXPECT_GT(faster, static_cast<int>(plans_.size()));  // the knobs do matter
}

TEST_F(PlannerFixture, BreakdownAddsUpToStepTime) {
  for (const PlanSpec& p : plans_) {
    auto pred = SimulatePlan(model_, cluster_, p, hw_);
    ASSERT_TRUE(pred.ok());
    const TimeBreakdown& b = pred->time;
    double sum = b.compute + b.tp_exposed + b.pp_exposed + b.dp_exposed + b.bubble + b.optimizer;
    EXPECT_NEAR(sum, pred->step_time_s, 1e-6 * pred->step_time_s + 1e-12) << Describe(p);
  }
}

// The host launches a microbatch's ops at compute.host_overhead_s each and
// the device runs them as they arrive: a microbatch of small kernels runs at
// the host's pace (twice the launch cost, about twice the time), while a
// microbatch of large kernels hides the launches of its small ones: it is
// slower than its device time by a few launches only (each op list starts
// with host and device in step, and its first kernel, a norm, is small),
// not by the launch cost of every small op.
TEST(LaunchQueue, SmallKernelsRunAtTheHostsPaceLargeOnesHideLaunches) {
  HardwareProfile hw = LoadProfile("A100-SXM4-80GB").value();
  const ClusterSpec c = testing_models::Cluster(1, 8);
  auto fwd = [&](const ModelSpec& m, const PlanSpec& p, double launch) {
    hw.compute.host_overhead_s = launch;
    const PlanCosts k = ComputePlanCosts(m, c, p, hw);
    return k.chunks[0].fwd_compute + k.chunks[0].fwd_comm;
  };
  PlanSpec p;
  p.dp = 1;
  p.tp = 1;
  p.pp = 1;
  p.micro_batch = 1;
  p.num_microbatches = 1;
  p.layers_per_chunk = {2};
  // Tiny: hidden 64, sequence 64: every kernel takes microseconds.
  ModelSpec tiny = testing_models::Gpt(64, 4, 2);
  tiny.seq_length = tiny.max_position = 64;
  tiny.vocab = 256;
  p.seq_length = 64;
  const double t1 = fwd(tiny, p, 100e-6), t2 = fwd(tiny, p, 200e-6);
  EXPECT_NEAR(t2 / t1, 2.0, 0.1) << t1 << " " << t2;
  // Large: 8 of GPT-3 175B's layers at sequence 512: GEMMs of about 2 ms
  // between norms and elementwise kernels of 5-15 us. At most two launches
  // per op list show (one list per layer, plus the embedding and the head;
  // 1.4 ms in all here); a floor of one launch per op added 2.2 ms.
  ModelSpec big = testing_models::Gpt(12288, 96, 8);
  big.seq_length = big.max_position = 512;
  p.seq_length = 512;
  p.layers_per_chunk = {8};
  const double device = fwd(big, p, 0), queued = fwd(big, p, 80e-6);
  EXPECT_GE(queued, device);
  EXPECT_LE(queued, device + (8 + 2) * 2 * 80e-6) << device << " " << queued;
}

// Gradient reduction after the whole backward (PlanSpec::overlap_grad_reduce
// off): never faster; on one stage the whole reduction is exposed (it waits
// for the last backward; with pp > 1 another stage's longer backward can
// still hide part of it); the lower bound stays below the simulation.
TEST_F(PlannerFixture, GradReduceAfterTheBackwardIsExposed) {
  int slower = 0;
  for (PlanSpec p : plans_) {
    if (p.dp * p.cp == 1) continue;
    const double on = SimulatePlan(model_, cluster_, p, hw_)->step_time_s;
    p.overlap_grad_reduce = false;
    auto off = SimulatePlan(model_, cluster_, p, hw_);
    ASSERT_TRUE(off.ok()) << Describe(p);
    EXPECT_GE(off->step_time_s, on * (1 - 1e-12)) << Describe(p);
    slower += off->step_time_s > on * (1 + 1e-9);
    const PlanCosts c = ComputePlanCosts(model_, cluster_, p, hw_);
    if (p.pp == 1) {  // one stage: its whole reduction runs after its last backward
      double sync = 0;
      for (int ch = 0; ch < p.num_chunks(); ++ch) sync += c.chunks[ch].grad_sync;
      EXPECT_GE(off->time.dp_exposed, sync * (1 - 1e-9)) << Describe(p);
    }
    EXPECT_LE(StepTimeLowerBound(p, c), off->step_time_s * (1 + 1e-9)) << Describe(p);
  }
  EXPECT_GT(slower, 10);
}

// ZeRO-2/3: the lowering issues what the runtime's ModelChunk issues — per
// microbatch and chunk, one all-gather per unit use before a forward and a
// backward (ZeRO-3) and one reduce-scatter per unit use after a backward,
// blocking on the compute stream, each priced at its padded unit size.
TEST_F(PlannerFixture, ZeroUnitCollectivesMatchTheRuntime) {
  PlanSpec p;
  p.dp = 4;
  p.pp = 2;
  p.vpp = 1;
  p.micro_batch = 1;
  p.num_microbatches = 4;
  p.seq_length = model_.seq_length;
  p.schedule = Schedule::k1F1B;
  p.layers_per_chunk = EvenSplit(model_.num_layers, 2);
  cluster_.nodes = 1;
  cluster_.gpus_per_node = 8;
  const GroupTopology g = GradGroupTopology(p, cluster_.gpus_per_node);
  const MemoryParams mp = MemoryParamsFor(hw_);
  for (int zero : {2, 3}) {
    p.zero_stage = zero;
    const PlanCosts c = ComputePlanCosts(model_, cluster_, p, hw_);
    for (int ch = 0; ch < 2; ++ch) {
      const ChunkUnits u = ZeroChunkUnits(model_, p, ch);
      // chunk 0: word, position, 6 layers; chunk 1: 6 layers, final_ln, lm_head copy.
      EXPECT_EQ(u.uses.size(), 8u);
      EXPECT_EQ(c.chunks[ch].num_unit_uses, 8);
      double ag = 0, rs = 0;
      for (int64_t n : u.uses) {
        const double padded = static_cast<double>(UnitPadded(n, 4));
        ag += CollectiveTime(CollKind::kAllGather, padded * mp.weight_bytes, 4, g.per_node,
                             g.spans_nodes, hw_);
        rs += CollectiveTime(CollKind::kReduceScatter, padded * mp.grad_bytes, 4, g.per_node, g.spans_nodes, hw_);
      }
      EXPECT_NEAR(c.chunks[ch].grad_sync_per_microbatch, rs, 1e-12);
      EXPECT_NEAR(c.chunks[ch].zero3_gather, zero == 3 ? ag : 0.0, 1e-12);
      EXPECT_EQ(c.chunks[ch].grad_sync, 0.0);
      EXPECT_EQ(c.chunks[ch].param_sync > 0, zero == 2);
    }
    auto sched = BuildSchedule(p);
    ASSERT_TRUE(sched.ok());
    sim::Engine e;
    Lowered l = LowerSchedule(*sched, p, c, /*trace=*/true, &e);
    ASSERT_TRUE(e.Run().ok());
    for (int s = 0; s < 2; ++s) {
      int gathers = 0, scatters = 0;
      for (size_t t = 0; t < e.num_tasks(); ++t) {
        const std::string_view n = e.name(static_cast<sim::TaskId>(t));
        if (e.stream_of(static_cast<sim::TaskId>(t)) != l.compute[s]) continue;
        gathers += n.substr(0, 2) == "AG";
        scatters += n.substr(0, 2) == "RS";
      }
      EXPECT_EQ(gathers, zero == 3 ? 2 * p.num_microbatches : 0) << "stage " << s;
      EXPECT_EQ(scatters, p.num_microbatches) << "stage " << s;
      EXPECT_NEAR(e.BusyTime(l.compute[s], kCatDpComm),
                  p.num_microbatches * (2 * c.chunks[s].zero3_gather + c.chunks[s].grad_sync_per_microbatch),
                  1e-12);
    }
  }
}

}  // namespace
}  // namespace dt
