// Tests of planner/cost/compute_cost and comm_cost: reference values and
// monotonicity (more FLOP/s or bandwidth never slower, more work never faster).
#include <gtest/gtest.h>

#include "planner/cost/comm_cost.h"
#include "planner/cost/compute_cost.h"

namespace dt {
namespace {

const HardwareProfile& A100() {
  static const HardwareProfile p = LoadProfile("a100").value();
  return p;
}

Op Gemm(int64_t m, int64_t n, int64_t k, int64_t batch = 1) {
  Op op;
  op.kind = OpKind::kGemm;
  op.name = "gemm";
  op.m = m;
  op.n = n;
  op.k = k;
  op.batch = batch;
  op.flops = 2.0 * m * n * k * batch;
  return op;
}

Op MemOp(double bytes) {
  Op op;
  op.kind = OpKind::kMemoryBound;
  op.bytes = bytes;
  return op;
}

Op Attn(double flops, double bytes) {
  Op op;
  op.kind = OpKind::kAttention;
  op.flops = flops;
  op.bytes = bytes;
  return op;
}

std::vector<Op> SampleOps() {
  std::vector<Op> ops;
  for (int64_t s : {16, 64, 256, 1024, 4096, 16384}) {
    ops.push_back(Gemm(s, s, s));
    ops.push_back(Gemm(8192, s, 4096));
    ops.push_back(Gemm(s, 128, 128, 32));
    ops.push_back(MemOp(s * 1e4));
    ops.push_back(Attn(s * 1e7, s * 1e3));
  }
  return ops;
}

HardwareProfile Scaled(double flops_x, double mem_bw_x, double net_bw_x) {
  HardwareProfile p = A100();
  p.device.peak_flops *= flops_x;
  p.device.memory_bandwidth_Bps *= mem_bw_x;
  for (CollectiveTable& t : p.network.collectives)
    for (auto* side : {&t.intra, &t.inter})
      for (LinkEntry& e : *side) {
        e.busbw_Bps *= net_bw_x;
        for (double& y : e.points.y) y *= net_bw_x;
      }
  return p;
}

TEST(ComputeCostTest, LargeGemmMatchesCurvePlateau) {
  const HardwareProfile& p = A100();
  Op op = Gemm(16384, 16384, 16384);  // beyond the last point: plateau
  const double plateau = p.compute.gemm_efficiency.y.back();  // calibrated value
  EXPECT_GT(plateau, 0.6);
  EXPECT_LT(plateau, 0.8);
  double eff = GemmEfficiency(op.flops, p);
  EXPECT_DOUBLE_EQ(eff, plateau);
  EXPECT_DOUBLE_EQ(GemmEfficiency(p.compute.gemm_efficiency.x.back(), p), plateau);  // exact at a point
  EXPECT_LT(GemmEfficiency(1e9, p), 0.45);             // small GEMMs are less efficient
  EXPECT_NEAR(OpTime(op, p), op.flops / (312e12 * plateau) + p.compute.kernel_overhead_s, 1e-12);
  bool clamped = false;
  GemmEfficiency(1e15, p, &clamped);
  EXPECT_TRUE(clamped);
}

// A batched GEMM (an MoE rank's local experts) is `batch` calls the host
// launches one by one: each pays the launch overhead, so E small experts
// never cost less than E launches, and the batched op costs what its calls
// would cost as separate ops (without a per-op host floor: a profile's
// host_overhead_s is per framework op, one grouped linear).
TEST(ComputeCostTest, BatchedGemmPaysOneLaunchPerCall) {
  HardwareProfile p = LoadProfile("h100").value();
  p.compute.host_overhead_s = 0;
  const double o = p.compute.kernel_overhead_s;
  ASSERT_GT(o, 0);
  for (int64_t e : {1, 4, 16, 64}) {
    const Op batched = Gemm(256, 1536, 2048, e);
    EXPECT_GE(OpTime(batched, p), e * o) << e;
    EXPECT_NEAR(OpTime(batched, p), e * OpTime(Gemm(256, 1536, 2048), p), 1e-12) << e;
  }
}

// With a measured attention curve (x = keys per query row), the attention
// core is priced at the curve's efficiency for its own key count, clamped at
// the ends; without one, at the single attention_efficiency. More keys (the
// same queries) never cost less.
TEST(ComputeCostTest, AttentionUsesTheCurveOverKeys) {
  HardwareProfile p = LoadProfile("h100").value();
  p.compute.kernel_overhead_s = 0;
  p.compute.attention_efficiency_by_keys.x = {2048, 8192};
  p.compute.attention_efficiency_by_keys.y = {0.3, 0.5};
  auto attn = [](int64_t keys) {
    Op op = Attn(4.0 * 4096 * keys * 128 * 32, 0);
    op.m = 4096;
    op.n = keys;
    return op;
  };
  const double peak = p.device.peak_flops;
  EXPECT_NEAR(OpTime(attn(2048), p), attn(2048).flops / (peak * 0.3), 1e-15);
  EXPECT_NEAR(OpTime(attn(8192), p), attn(8192).flops / (peak * 0.5), 1e-15);
  EXPECT_NEAR(OpTime(attn(1024), p), attn(1024).flops / (peak * 0.3), 1e-15);      // clamped below
  EXPECT_NEAR(OpTime(attn(1 << 20), p), attn(1 << 20).flops / (peak * 0.5), 1e-12);  // and above
  const double mid = attn(4096).flops / OpTime(attn(4096), p) / peak;
  EXPECT_GT(mid, 0.3);
  EXPECT_LT(mid, 0.5);
  double last = 0;
  for (int64_t keys = 512; keys <= (1 << 21); keys *= 2) {
    EXPECT_GE(OpTime(attn(keys), p), last) << keys;
    last = OpTime(attn(keys), p);
  }
  p.compute.attention_efficiency_by_keys = Curve();
  EXPECT_NEAR(OpTime(attn(2048), p), attn(2048).flops / (peak * p.compute.attention_efficiency), 1e-15);
}

TEST(ComputeCostTest, MemoryBoundAndThinGemmUseBandwidth) {
  const HardwareProfile& p = A100();
  EXPECT_NEAR(OpTime(MemOp(1e9), p), 1e9 / (2.039e12 * 0.8) + 5e-6, 1e-12);
  EXPECT_EQ(OpTime(MemOp(0), p), 0);
  // A matrix-vector product is bound by reading the matrix.
  Op gemv = Gemm(1, 16384, 16384);
  double bytes = (16384.0 * 16384 + 2 * 16384) * 2;
  EXPECT_GE(OpTime(gemv, p), bytes / (2.039e12 * 0.8));
}

TEST(ComputeCostTest, MoreFlopsOrBandwidthNeverSlower) {
  HardwareProfile base = A100();
  HardwareProfile faster_math = Scaled(2, 1, 1), faster_mem = Scaled(1, 2, 1);
  for (const Op& op : SampleOps()) {
    double t = OpTime(op, base);
    EXPECT_LE(OpTime(op, faster_math), t) << op.m << " " << op.bytes;
    EXPECT_LE(OpTime(op, faster_mem), t) << op.m << " " << op.bytes;
  }
  EXPECT_LT(OpTime(Gemm(8192, 8192, 8192), faster_math), OpTime(Gemm(8192, 8192, 8192), base));
}

TEST(ComputeCostTest, LargerWorkNeverFaster) {
  for (const std::string& name : BundledProfileNames()) {
    HardwareProfile p = LoadProfile(name).value();
    double prev = 0, prev_mem = 0, prev_attn = 0;
    for (double s = 1; s <= 65536; s *= 1.25) {
      int64_t d = static_cast<int64_t>(s);
      double t = OpTime(Gemm(d, d, d), p);
      EXPECT_GE(t, prev) << name << " size " << d;
      prev = t;
      double tm = OpTime(MemOp(s * 1e3), p);
      EXPECT_GE(tm, prev_mem);
      prev_mem = tm;
      double ta = OpTime(Attn(s * 1e6, s * 1e2), p);
      EXPECT_GE(ta, prev_attn);
      prev_attn = ta;
    }
  }
}

TEST(ComputeCostTest, MeasuredGemmPointsArePreferred) {
  HardwareProfile p = A100();
  p.compute.gemm_points = {{1024, 1024, 1024, 1, 2e-5}, {4096, 4096, 4096, 1, 6e-4},
                           {2048, 2048, 2048, 1, 1e-4}};
  ASSERT_TRUE(PrepareProfile(&p, "test").ok());
  EXPECT_EQ(OpTime(Gemm(2048, 2048, 2048), p), 1e-4);
  EXPECT_EQ(OpTime(Gemm(4096, 4096, 4096), p), 6e-4);
  double prev = 0;
  for (int64_t d = 512; d <= 16384; d += 256) {
    double t = OpTime(Gemm(d, d, d), p);
    EXPECT_GE(t, prev) << d;
    prev = t;
  }
  double mid = OpTime(Gemm(3000, 3000, 3000), p);
  EXPECT_GT(mid, 1e-4);
  EXPECT_LT(mid, 6e-4);
}

TEST(ComputeCostTest, CollectiveOpIsABug) {
  Op op;
  op.kind = OpKind::kCollective;
  EXPECT_DEATH(OpTime(op, A100()), "CollectiveTime");
}

constexpr CollKind kKinds[] = {CollKind::kAllReduce, CollKind::kReduceScatter,
                               CollKind::kAllGather, CollKind::kSendRecv};

struct GroupCase {
  int n, g;
  bool spans;
};
std::vector<GroupCase> Groups() {
  return {{2, 0, false}, {4, 0, false}, {8, 0, false}, {16, 1, true},
          {16, 8, true}, {64, 4, true}, {256, 8, true}, {3, 0, false}};
}

TEST(CommCostTest, GroupOfOneOrNoBytesCostsNothing) {
  for (CollKind k : kKinds) {
    EXPECT_EQ(CollectiveTime(k, 1e9, 1, 1, false, A100()), 0);
    EXPECT_EQ(CollectiveTime(k, 0, 8, 8, false, A100()), 0);
  }
  EXPECT_EQ(P2PTime(0, true, A100()), 0);
}

TEST(CommCostTest, LargeAllReduceFollowsBusBandwidth) {
  const HardwareProfile& p = A100();
  double bytes = 1e9;
  double t = CollectiveTime(CollKind::kAllReduce, bytes, 8, 8, false, p);
  // Bandwidth term + tree latency (2 * log2(8) steps of 1.5 us).
  EXPECT_NEAR(t, bytes * 2 * 7 / 8 / 200e9 + 6 * 1.5e-6, 1e-12);
  double ag = CollectiveTime(CollKind::kAllGather, bytes, 8, 8, false, p);
  EXPECT_NEAR(ag, bytes * 7 / 8 / 200e9 + 7 * 1.5e-6, 1e-12);  // ring: n-1 steps
}

TEST(CommCostTest, InterNodeBandwidthScalesWithRanksPerNode) {
  const HardwareProfile& p = A100();
  LinkChoice one = ChooseLink(CollKind::kAllReduce, 1e9, 32, 1, true, p);
  LinkChoice eight = ChooseLink(CollKind::kAllReduce, 1e9, 256, 8, true, p);
  EXPECT_DOUBLE_EQ(one.busbw_Bps, 23e9);
  EXPECT_DOUBLE_EQ(eight.busbw_Bps, 8 * 23e9);
  // Interpolated between listed sizes: 3 ranks per node.
  LinkChoice three = ChooseLink(CollKind::kAllReduce, 1e9, 24, 3, true, p);
  EXPECT_DOUBLE_EQ(three.busbw_Bps, 3 * 23e9);
  // NICs never beat NVLink: huge NIC numbers are capped by intra(g).
  HardwareProfile fat = p;
  for (LinkEntry& e : fat.network.collectives[0].inter) e.busbw_Bps = 1e13;
  EXPECT_DOUBLE_EQ(ChooseLink(CollKind::kAllReduce, 1e9, 16, 8, true, fat).busbw_Bps, 200e9);
  // Spanning nodes is slower than staying inside one.
  EXPECT_GT(CollectiveTime(CollKind::kAllReduce, 1e9, 8, 1, true, p),
            CollectiveTime(CollKind::kAllReduce, 1e9, 8, 8, false, p));
  EXPECT_GT(P2PTime(1e8, true, p), P2PTime(1e8, false, p));
  EXPECT_TRUE(HasInterNode(p));
}

TEST(CommCostTest, LargerMessagesNeverFaster) {
  HardwareProfile measured = A100();
  measured.network.collectives[0].intra[1].points =
      Curve{{1e3, 1e6, 1e9}, {1e8, 5e10, 1.9e11}};
  ASSERT_TRUE(PrepareProfile(&measured, "test").ok());
  for (const HardwareProfile* p : std::vector<const HardwareProfile*>{&A100(), &measured}) {
    for (CollKind k : kKinds) {
      for (const GroupCase& gc : Groups()) {
        double prev = 0;
        for (double b = 1; b <= 1e11; b *= 1.7) {
          double t = CollectiveTime(k, b, gc.n, gc.g, gc.spans, *p);
          EXPECT_GE(t, prev) << CollectiveKey(k) << " n=" << gc.n << " bytes=" << b;
          EXPECT_GT(t, 0);
          prev = t;
        }
      }
    }
  }
  // At a measured size the measured bus bandwidth is used as is.
  double t = CollectiveTime(CollKind::kAllReduce, 1e6, 8, 8, false, measured);
  EXPECT_NEAR(t, 1e6 * 2 * 7 / 8 / 5e10, 1e-12);
}

TEST(CommCostTest, MoreBandwidthNeverSlower) {
  HardwareProfile fast = Scaled(1, 1, 2);
  for (CollKind k : kKinds)
    for (const GroupCase& gc : Groups())
      for (double b : {1e2, 1e5, 1e7, 1e9}) {
        double base = CollectiveTime(k, b, gc.n, gc.g, gc.spans, A100());
        EXPECT_LE(CollectiveTime(k, b, gc.n, gc.g, gc.spans, fast), base)
            << CollectiveKey(k) << " n=" << gc.n << " bytes=" << b;
      }
  EXPECT_LT(CollectiveTime(CollKind::kAllReduce, 1e9, 64, 8, true, fast),
            CollectiveTime(CollKind::kAllReduce, 1e9, 64, 8, true, A100()));
}

TEST(ComputeCostTest, HostOverheadBoundsSmallOpsOnly) {
  HardwareProfile p = A100();
  p.compute.host_overhead_s = 50e-6;
  ASSERT_TRUE(PrepareProfile(&p, "test").ok());
  Op tiny = MemOp(1e3), big = Gemm(16384, 16384, 16384);
  EXPECT_DOUBLE_EQ(OpTime(tiny, p), 50e-6);  // host-bound: launches cannot go faster
  HardwareProfile q = p;
  q.compute.host_overhead_s = 0;
  EXPECT_DOUBLE_EQ(OpTime(big, p), OpTime(big, q));  // device-bound: unchanged
  EXPECT_LT(OpTime(tiny, q), 50e-6);
}

}  // namespace
}  // namespace dt
