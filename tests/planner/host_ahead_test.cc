// The host's launch time on a profile whose framework runs ahead of the
// device (HardwareProfile compute.host_runs_ahead: the H100 profile, eager
// Megatron-Core), priced by plan_costs.cc: a layer's lists at their steady
// state, where the launches hide behind the device work of the layers before
// them unless they outlast it; one host lead shared by a layer's forward,
// recompute and backward; and the start in step that a blocking pipeline's
// synchronisation (Megatron-Core's batch_p2p_sync) forces on every chunk.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "planner/cost/compute_cost.h"
#include "planner/cost/layer_ops.h"
#include "planner/lower/plan_costs.h"
#include "planner/lower/simulate.h"
#include "planner/profile/profile.h"
#include "tests/planner/test_models.h"

namespace dt {
namespace {

using testing_models::H100;
using testing_models::H100WithoutHostTime;

// Two ranks of TP: a pipeline of pp stages, interleaved with vpp chunks each
// when vpp > 1, layers spread evenly.
PlanSpec Plan(const ModelSpec& m, int tp, int mbs, int pp, int vpp, bool overlap_p2p) {
  PlanSpec p;
  p.tp = tp;
  p.pp = pp;
  p.vpp = vpp;
  p.schedule = vpp > 1 ? Schedule::kInterleaved : Schedule::k1F1B;
  p.overlap_p2p_comm = overlap_p2p;
  p.sequence_parallel = tp > 1;
  p.micro_batch = mbs;
  p.num_microbatches = 2 * pp;
  p.seq_length = m.seq_length;
  p.flash_attention = true;
  p.layers_per_chunk.assign(pp * vpp, m.num_layers / (pp * vpp));
  return p;
}

// One microbatch through chunk `ch`: forward and backward, kernels and
// exposed communication.
double ChunkTime(const ModelSpec& m, const PlanSpec& p, const HardwareProfile& hw, int ch) {
  const PlanCosts c = ComputePlanCosts(m, testing_models::Cluster(1, 8), p, hw);
  const ChunkCost& k = c.chunks.at(ch);
  return k.fwd_compute + k.fwd_comm + k.bwd_compute + k.bwd_comm;
}

// The host time one layer's lists launch: every op the device runs, at
// compute.host_overhead_s, but Transformer Engine's FP8 scaling kernels.
double LayerLaunches(const ModelSpec& m, const PlanSpec& p, const HardwareProfile& hw) {
  const LayerOps l = TransformerLayerOps(m, p, hw.device.bytes_per_element());
  double n = 0;
  for (const auto* list : {&l.forward, &l.backward, &l.recompute})
    for (const Op& op : *list) {
      if (op.fp8_scaling) continue;
      if (op.kind == OpKind::kCollective || OpDeviceTime(op, hw) > 0) n += 1;
    }
  return n * hw.compute.host_overhead_s;
}

TEST(HostAhead, TheH100ProfileRunsAheadWithItsMeasuredLaunchTimeAndTheA100DoesNot) {
  const HardwareProfile& h = H100();
  EXPECT_TRUE(h.compute.host_runs_ahead);
  EXPECT_GT(h.compute.host_overhead_s, 40e-6);  // 1.28-1.78 ms per eager layer / 26 modeled ops
  EXPECT_LT(h.compute.host_overhead_s, 80e-6);
  EXPECT_NE(h.compute.note.find("host_runs_ahead"), std::string::npos);
  EXPECT_FALSE(LoadProfile("a100").value().compute.host_runs_ahead);
  // A profile without the field does not run ahead; the field survives JSON.
  HardwareProfile p = LoadProfile("a100").value();
  p.compute.host_runs_ahead = true;
  StatusOr<HardwareProfile> q = ProfileFromJson(json::parse(ToJson(p).dump()), "round trip");
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_TRUE(q->compute.host_runs_ahead);
  EXPECT_FALSE(*q == LoadProfile("a100").value());
}

// A layer with far more device work than launches (Llama 3 8B, 8k tokens per
// microbatch): its launches hide, a middle chunk costs what its kernels do.
TEST(HostAhead, LaunchesHideBehindDeviceWork) {
  ModelSpec m = testing_models::Llama8B();
  m.seq_length = 8192;
  const PlanSpec p = Plan(m, 1, 1, 2, 2, /*overlap_p2p=*/true);  // chunks 1 and 2 hold no embedding or head
  for (int ch : {1, 2}) {
    const double with = ChunkTime(m, p, H100(), ch), without = ChunkTime(m, p, H100WithoutHostTime(), ch);
    EXPECT_NEAR(with, without, 1e-9 * without) << ch;
  }
}

// A layer with little device work (hidden 256, 256 tokens): a middle chunk
// costs its launches, over all its lists together, and never less than its
// kernels.
TEST(HostAhead, AHostBoundLayerCostsItsLaunches) {
  ModelSpec m = testing_models::Gpt(256, 4, 8);
  m.seq_length = 256;
  m.max_position = 256;
  const PlanSpec p = Plan(m, 1, 1, 2, 2, /*overlap_p2p=*/true);
  const double launches = LayerLaunches(m, p, H100());
  for (int ch : {1, 2}) {
    const double with = ChunkTime(m, p, H100(), ch), without = ChunkTime(m, p, H100WithoutHostTime(), ch);
    const int layers = p.layers_per_chunk[ch];
    ASSERT_LT(without, layers * launches) << "the layer should be host-bound";
    EXPECT_NEAR(with, layers * launches, 1e-9 * with) << ch;
  }
}

// One host lead per layer: a forward whose launches outlast its kernels
// hides behind the backward's surplus, so a layer that is device-bound over
// its lists together pays no launch time, although its forward alone would.
// (The first such GPT layer of a size sweep: the window between the two
// conditions is narrow, the backward's kernels being about twice the
// forward's.)
TEST(HostAhead, TheLeadCarriesFromTheBackwardIntoTheForward) {
  const HardwareProfile& h = H100();
  bool found = false;
  for (int hidden = 256; hidden <= 4096 && !found; hidden += 128)
    for (int seq : {256, 512, 1024, 2048}) {
      ModelSpec m = testing_models::Gpt(hidden, 8, 8);
      m.seq_length = seq;
      m.max_position = seq;
      const PlanSpec p = Plan(m, 1, 1, 2, 2, /*overlap_p2p=*/true);
      const LayerOps l = TransformerLayerOps(m, p, 2);
      double fwd_kernels = 0, fwd_launches = 0, all_kernels = 0;
      for (const auto* list : {&l.forward, &l.backward, &l.recompute})
        for (const Op& op : *list) {
          const double t = OpDeviceTime(op, h);
          all_kernels += t;
          if (list == &l.forward) {
            fwd_kernels += t;
            if (t > 0) fwd_launches += h.compute.host_overhead_s;
          }
        }
      if (!(fwd_launches > 1.05 * fwd_kernels && LayerLaunches(m, p, h) < 0.95 * all_kernels)) continue;
      found = true;
      const PlanCosts with = ComputePlanCosts(m, testing_models::Cluster(1, 8), p, h),
                      without = ComputePlanCosts(m, testing_models::Cluster(1, 8), p, H100WithoutHostTime());
      EXPECT_NEAR(with.chunks[1].fwd_compute, without.chunks[1].fwd_compute, 1e-9 * without.chunks[1].fwd_compute)
          << "hidden " << hidden << " seq " << seq;
      EXPECT_NEAR(with.chunks[1].bwd_compute, without.chunks[1].bwd_compute, 1e-9 * without.chunks[1].bwd_compute);
      break;
    }
  EXPECT_TRUE(found) << "no GPT layer in the sweep has a host-bound forward and a device-bound whole";
}

// A pipeline whose sends block synchronises the host at every message, so
// each chunk starts in step: the same chunks cost more per microbatch than
// with the p2p overlap (no synchronisation), by at most one layer's list
// priced in step; without host time the two are the same.
TEST(HostAhead, ABlockingPipelineStartsEveryChunkInStep) {
  ModelSpec m = testing_models::Gpt(1024, 8, 8);
  m.seq_length = 1024;
  m.max_position = 1024;
  const PlanSpec blocking = Plan(m, 1, 1, 2, 2, /*overlap_p2p=*/false),
                 overlapped = Plan(m, 1, 1, 2, 2, /*overlap_p2p=*/true);
  for (int ch : {1, 2}) {
    const double b = ChunkTime(m, blocking, H100(), ch), o = ChunkTime(m, overlapped, H100(), ch);
    EXPECT_GT(b, o) << ch;
    EXPECT_LT(b - o, LayerLaunches(m, blocking, H100())) << ch;
    EXPECT_DOUBLE_EQ(ChunkTime(m, blocking, H100WithoutHostTime(), ch),
                     ChunkTime(m, overlapped, H100WithoutHostTime(), ch))
        << ch;
  }
  // A pipeline of one stage sends nothing: nothing to start in step.
  const PlanSpec one = Plan(m, 1, 1, 1, 1, /*overlap_p2p=*/false);
  PlanSpec same = one;
  same.overlap_p2p_comm = true;
  EXPECT_DOUBLE_EQ(ChunkTime(m, one, H100(), 0), ChunkTime(m, same, H100(), 0));
}

// What the device waits for launches is told apart (ChunkCost::host_wait,
// Prediction::host_wait_share): all of a host-bound chunk's extra time,
// nothing of a device-bound one's; the report calls a plan launch-bound from
// it (tests/cli/dtplan_cli_test.sh).
TEST(HostAhead, TheWaitForLaunchesIsToldApart) {
  ModelSpec small = testing_models::Gpt(256, 4, 8);
  small.seq_length = 256;
  small.max_position = 256;
  ModelSpec big = testing_models::Llama8B();
  big.seq_length = 8192;
  const ClusterSpec c = testing_models::Cluster(1, 8);
  for (bool blocking : {false, true}) {
    const PlanSpec ps = Plan(small, 1, 1, 2, 2, /*overlap_p2p=*/!blocking);
    const PlanCosts with = ComputePlanCosts(small, c, ps, H100()), without = ComputePlanCosts(small, c, ps, H100WithoutHostTime());
    for (int ch : {1, 2}) {
      const ChunkCost &w = with.chunks[ch], &o = without.chunks[ch];
      const double extra = (w.fwd_compute + w.bwd_compute) - (o.fwd_compute + o.bwd_compute);
      ASSERT_GT(extra, 0);
      EXPECT_NEAR(w.host_wait, extra, 1e-9 * extra) << "chunk " << ch << " blocking " << blocking;
      EXPECT_EQ(o.host_wait, 0);
    }
    const PlanSpec pb = Plan(big, 1, 1, 2, 2, /*overlap_p2p=*/!blocking);
    const PlanCosts b = ComputePlanCosts(big, c, pb, H100());
    EXPECT_LT(b.chunks[1].host_wait, 1e-3 * (b.chunks[1].fwd_compute + b.chunks[1].bwd_compute));
  }
  PlanSpec ps = Plan(small, 1, 1, 2, 2, /*overlap_p2p=*/true), pb = Plan(big, 1, 1, 2, 2, /*overlap_p2p=*/true);
  ps.dp = pb.dp = 4;  // the cluster's 8 devices
  auto s = SimulatePlan(small, c, ps, H100()), b = SimulatePlan(big, c, pb, H100());
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_GT(s->host_wait_share, 0.3);
  EXPECT_LE(s->host_wait_share, 1.0);
  EXPECT_LT(b->host_wait_share, 0.01);
  EXPECT_EQ(ToJson(*s)["host_wait_share"].get<double>(), s->host_wait_share);
}

// Never faster with the host than without it, on plans from device- to
// host-bound, with TP, its overlap, recompute and pipelines.
TEST(HostAhead, HostTimeNeverMakesAPlanFaster) {
  int checked = 0;
  for (int h : {256, 1024, 4096})
    for (int tp : {1, 2, 8})
      for (int pp : {1, 2})
        for (bool tp_overlap : {false, true})
          for (Recompute rc : {Recompute::kNone, Recompute::kFull}) {
            ModelSpec m = testing_models::Gpt(h, 16, 8);
            m.seq_length = 1024;
            m.max_position = 1024;
            PlanSpec p = Plan(m, tp, 1, pp, 1, /*overlap_p2p=*/false);
            p.tp_comm_overlap = tp_overlap && tp > 1;
            p.recompute = rc;
            for (int ch = 0; ch < p.num_chunks(); ++ch) {
              EXPECT_GE(ChunkTime(m, p, H100(), ch), ChunkTime(m, p, H100WithoutHostTime(), ch) * (1 - 1e-12))
                  << "h " << h << " tp " << tp << " pp " << pp << " chunk " << ch;
              ++checked;
            }
          }
  EXPECT_GT(checked, 100);
}

}  // namespace
}  // namespace dt
