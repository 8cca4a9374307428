// The attention core of a context-parallel plan, priced as the ring of
// blocks Transformer Engine runs (Op::cp_ring, compute_cost.cc
// AttentionEfficiency): one causal block of the local sequence and cp - 1
// non-causal half blocks, each at its kernel's measured rate; a profile
// without non-causal curves keeps the one causal kernel over the sequence.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "planner/cost/compute_cost.h"
#include "planner/cost/layer_ops.h"
#include "planner/profile/interp.h"
#include "planner/profile/profile.h"
#include "tests/planner/test_models.h"
#include "tests/planner/test_profiles.h"

namespace dt {
namespace {

using testing_profiles::H100;

const Op& AttentionOf(const std::vector<Op>& ops) {
  for (const Op& op : ops)
    if (op.kind == OpKind::kAttention) return op;
  ADD_FAILURE() << "no attention core";
  return ops.front();
}

Op CoreOf(int cp, bool flash, bool cudnn, int seq) {
  ModelSpec m = testing_models::Llama8B();
  m.num_layers = 2;
  PlanSpec p = testing_models::TpSpPlan(m, 1, seq);
  p.cp = cp;
  p.flash_attention = flash;
  p.cudnn_attention = cudnn;
  return AttentionOf(TransformerLayerOps(m, p, 2).forward);
}

double At(const Curve& c, double x) { return Interpolate(c, x, Scale::kLog, Scale::kLinear).value; }

// The attention time of a core per counted FLOP, relative to the peak: the
// efficiency the op was priced at.
double PricedEfficiency(const Op& op, const HardwareProfile& hw) {
  const double t = OpDeviceTime(op, hw) - hw.compute.kernel_overhead_s;
  return op.flops / (t * hw.device.peak_flops);
}

TEST(CpRing, FusedCoresCarryTheirRingUnfusedOnesDoNot) {
  EXPECT_EQ(CoreOf(4, true, false, 32768).cp_ring, 4);
  EXPECT_EQ(CoreOf(1, true, false, 32768).cp_ring, 1);
  EXPECT_EQ(CoreOf(4, false, false, 32768).cp_ring, 1);
  const Op ring = CoreOf(4, true, false, 32768);
  EXPECT_EQ(ring.m, 8192);   // the rank's queries: the sequence over cp
  EXPECT_EQ(ring.n, 32768);  // the keys they meet over the ring
}

// cp ranks: one causal block at s local keys, cp - 1 non-causal blocks of
// s x s/2 at s / sqrt 2 keys, in the op's full-square count cp s^2.
TEST(CpRing, TheRingIsPricedBlockByBlock) {
  const ComputeProfile& c = H100().compute;
  ASSERT_FALSE(c.attention_noncausal_by_keys.empty());
  ASSERT_FALSE(c.attention_noncausal_by_keys_cudnn.empty());
  for (bool cudnn : {false, true}) {
    const Curve& causal = cudnn ? c.attention_efficiency_by_keys_cudnn : c.attention_efficiency_by_keys;
    const Curve& nc = cudnn ? c.attention_noncausal_by_keys_cudnn : c.attention_noncausal_by_keys;
    for (int cp : {2, 4, 8}) {
      const Op op = CoreOf(cp, true, cudnn, 8192 * cp);
      const double s = 8192;
      const double expect = cp / (1 / At(causal, s) + (cp - 1) / (2 * At(nc, s / std::sqrt(2.0))));
      EXPECT_NEAR(PricedEfficiency(op, H100()), expect, 1e-6) << "cudnn " << cudnn << " cp " << cp;
    }
    // One rank: the causal curve at the whole sequence, as before.
    EXPECT_NEAR(PricedEfficiency(CoreOf(1, true, cudnn, 16384), H100()), At(causal, 16384), 1e-6);
  }
}

// At 8k tokens over cp 2 the ring's blocks (4k causal, 4k x 2k non-causal)
// run slower than one causal kernel over 8k keys would: the CP plan's core
// costs more than the sequence's keys alone say; at 1M tokens over cp 32 the
// two agree within a few percent (both near the kernel's long-block rate).
TEST(CpRing, ShortBlocksCostMoreThanTheSequenceSays) {
  const ComputeProfile& c = H100().compute;
  const double short_ring = PricedEfficiency(CoreOf(2, true, true, 8192), H100());
  EXPECT_LT(short_ring, 0.95 * At(c.attention_efficiency_by_keys_cudnn, 8192));
  const double long_ring = PricedEfficiency(CoreOf(32, true, false, 1 << 20), H100());
  EXPECT_NEAR(long_ring / At(c.attention_efficiency_by_keys, 1 << 20), 1.0, 0.05);
}

// Without the non-causal curves a ring is one causal kernel over the whole
// sequence (the profile says nothing about the blocks).
TEST(CpRing, WithoutNonCausalCurvesTheRingIsOneCausalKernel) {
  HardwareProfile hw = H100();
  hw.compute.attention_noncausal_by_keys = Curve();
  const Op op = CoreOf(4, true, false, 32768);
  EXPECT_NEAR(PricedEfficiency(op, hw), At(hw.compute.attention_efficiency_by_keys, 32768), 1e-6);
  EXPECT_GT(PricedEfficiency(op, hw), PricedEfficiency(op, H100()));
}

// The curves travel through the profile's JSON.
TEST(CpRing, NonCausalCurvesRoundTrip) {
  const HardwareProfile& hw = H100();
  StatusOr<HardwareProfile> back = ProfileFromJson(json::parse(ToJson(hw).dump()), "round trip");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->compute.attention_noncausal_by_keys, hw.compute.attention_noncausal_by_keys);
  EXPECT_EQ(back->compute.attention_noncausal_by_keys_cudnn, hw.compute.attention_noncausal_by_keys_cudnn);
  EXPECT_FALSE(back->compute.attention_noncausal_by_keys_note.empty());
  EXPECT_TRUE(*back == hw);
  HardwareProfile changed = hw;
  changed.compute.attention_noncausal_by_keys_cudnn.y.back() += 0.01;
  EXPECT_FALSE(changed == hw);
}

}  // namespace
}  // namespace dt
