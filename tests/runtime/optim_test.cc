// Tests of AdamW, the LR schedule, DP gradient sync, ZeRO-1 and the global
// gradient norm, using the in-process fake Comm for multi-rank plans.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "runtime/ckpt/reshard.h"
#include "runtime/comm/local_comm.h"
#include "runtime/optim/adam_moments.h"
#include "runtime/optim/grad_sync.h"
#include "runtime/optim/optimizer.h"
#include "runtime/optim/zero_shard.h"

#include "tests/runtime/test_util.h"

namespace dt::rt {
namespace {

using testing_util::MakeParam;

TEST(AdamW, TwoStepsMatchHandComputedValues) {
  ParamStore s;
  s.Add(MakeParam("w", {2, 1}));      // decayed
  s.Add(MakeParam("fc.bias", {1}));   // not decayed
  s.Finalize();
  s.values()[0] = 1.0f;
  s.values()[1] = -2.0f;
  s.values()[2] = 0.5f;
  AdamWConfig cfg;
  cfg.beta1 = 0.9f;
  cfg.beta2 = 0.999f;
  cfg.eps = 1e-8f;
  cfg.weight_decay = 0.1f;
  AdamWShard adam(s, 0, s.numel());
  const float g1[3] = {0.5f, -1.0f, 0.3f}, g2[3] = {0.1f, 0.2f, -0.4f};
  for (int i = 0; i < 3; ++i) s.grads()[i] = g1[i];
  adam.Update(s, cfg, 1, 0.1f, 1.0f);
  for (int i = 0; i < 3; ++i) s.grads()[i] = g2[i];
  adam.Update(s, cfg, 2, 0.1f, 1.0f);
  // Reference values worked out from the update formula in adamw.h.
  EXPECT_NEAR(s.values()[0], 0.8007959063646517, 1e-6);
  EXPECT_NEAR(s.values()[1], -1.8100973939804947, 1e-6);
  EXPECT_NEAR(s.values()[2], 0.41935104369969073, 1e-6);
}

// bf16 moments (a precision-aware optimizer): each update runs in fp32 from
// the stored bf16 moments and rounds them back. So a step equals the fp32
// update of the same (rounded) moments, the stored moments are the rounded
// fp32 ones, and Read / Write round-trip them exactly (checkpoints).
TEST(AdamMoments, Bf16StepsAreFp32StepsOfTheRoundedMoments) {
  const int64_t n = 2500;  // spans three of Apply's blocks
  AdamWConfig cfg;
  AdamMoments m16(n, /*bf16=*/true), m32(n, /*bf16=*/false);
  std::vector<float> p16(n), p32(n), g(n), a(n), b(n), c(n), d(n);
  for (int64_t i = 0; i < n; ++i) p16[i] = p32[i] = 0.01f * static_cast<float>(i % 97) - 0.3f;
  for (int t = 1; t <= 3; ++t) {
    for (int64_t i = 0; i < n; ++i) g[i] = std::sin(0.37f * static_cast<float>(i * t)) * 0.02f;
    // The fp32 reference starts this step from the bf16 moments.
    m16.ReadM(a.data());
    m16.ReadV(b.data());
    m32.Write(a.data(), b.data());
    p32 = p16;
    m16.Apply(cfg, t, 1e-3f, 1.0f, /*decay=*/true, 0, n, p16.data(), g.data());
    m32.Apply(cfg, t, 1e-3f, 1.0f, /*decay=*/true, 0, n, p32.data(), g.data());
    EXPECT_EQ(p16, p32) << "step " << t;
    m16.ReadM(a.data());
    m16.ReadV(b.data());
    m32.ReadM(c.data());
    m32.ReadV(d.data());
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(a[i], Bf16ToFloat(FloatToBf16(c[i]))) << i;
      ASSERT_EQ(b[i], Bf16ToFloat(FloatToBf16(d[i]))) << i;
    }
  }
  // Not the fp32 moments: the rounding is real.
  int64_t differ = 0;
  for (int64_t i = 0; i < n; ++i) differ += a[i] != c[i];
  EXPECT_GT(differ, n / 2);
  // A sub-range update touches only its elements.
  m16.ReadM(a.data());
  m16.Apply(cfg, 4, 1e-3f, 1.0f, false, 100, 50, p16.data() + 100, g.data() + 100);
  m16.ReadM(c.data());
  for (int64_t i = 0; i < n; ++i) {
    if (i < 100 || i >= 150) {
      ASSERT_EQ(a[i], c[i]) << i;
    }
  }
  EXPECT_EQ(m16.size(), n);
}

TEST(AdamW, DecayExemptions) {
  EXPECT_TRUE(NoWeightDecay(MakeParam("layers.0.ln1.weight", {8})));
  EXPECT_TRUE(NoWeightDecay(MakeParam("layers.0.attn.qkv.bias", {24})));
  EXPECT_TRUE(NoWeightDecay(MakeParam("final_norm.weight", {8, 1})));
  EXPECT_FALSE(NoWeightDecay(MakeParam("layers.0.mlp.fc1.weight", {32, 8})));
  EXPECT_FALSE(NoWeightDecay(MakeParam("embed.weight", {100, 8})));
}

TEST(LrSchedule, WarmupThenCosine) {
  LrSchedule s{1.0, 0.1, 10, 110};
  EXPECT_DOUBLE_EQ(s.At(0), 0.1);
  EXPECT_DOUBLE_EQ(s.At(9), 1.0);
  EXPECT_DOUBLE_EQ(s.At(10), 1.0);
  EXPECT_NEAR(s.At(60), 0.55, 1e-12);
  EXPECT_DOUBLE_EQ(s.At(110), 0.1);
  EXPECT_DOUBLE_EQ(s.At(1000), 0.1);
}

TEST(ZeroShard, RangesCoverBufferWithPadding) {
  int64_t covered = 0;
  for (int r = 0; r < 3; ++r) {
    ShardRange s = ComputeShard(10, 3, r);
    EXPECT_EQ(s.shard, 4);
    EXPECT_EQ(s.padded, 12);
    EXPECT_EQ(s.begin, covered);
    covered = s.end;
  }
  EXPECT_EQ(covered, 10);
}

// Non-blocking (all-reduces in flight until Finish) and blocking (summed on
// return from Start, the interpreter's last syncs before the step) agree.
class GradSyncModes : public ::testing::TestWithParam<bool> {};

TEST_P(GradSyncModes, BucketedAllReduceAverages) {
  const bool blocking = GetParam();
  LocalGroupHandle g(2);
  std::vector<std::vector<float>> out(2), at_start(2);
  RunRanks(2, [&](int r) {
    ParamStore s;
    s.Add(MakeParam("a", {5, 3}));
    s.Add(MakeParam("b", {7}));
    s.Finalize();
    for (int64_t i = 0; i < s.numel(); ++i) s.grads()[i] = float(i) * (r == 0 ? 1.f : 3.f);
    auto comm = g.Member(r);
    GradSync sync(comm.get(), /*bucket_bytes=*/16, 0.5f);  // 4 floats per bucket
    sync.Start(s, blocking);
    EXPECT_EQ(sync.num_buckets_last(), 6);
    if (blocking) at_start[r].assign(s.grads(), s.grads() + s.numel());
    sync.Finish();
    out[r].assign(s.grads(), s.grads() + s.numel());
  });
  for (int64_t i = 0; i < 22; ++i) {
    EXPECT_EQ(out[0][i], 2.0f * i);
    EXPECT_EQ(out[1][i], 2.0f * i);
    if (blocking) {
      EXPECT_EQ(at_start[0][i], 4.0f * i);  // summed, not yet averaged
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Both, GradSyncModes, ::testing::Bool());

// ---- A small "full model" split over tp x dp x pp, against one rank. ----

struct FullParam {
  std::string name;
  std::vector<int64_t> shape;
  ShardKind kind;
  int stage;  // 0 or 1 (last); tied params live on both
  bool tied;
};

const std::vector<FullParam>& Model() {
  static const std::vector<FullParam> m = {
      {"embed.weight", {8, 4}, ShardKind::kSplitDim0, 0, true},
      {"layers.0.fc1.weight", {6, 4}, ShardKind::kSplitDim0, 0, false},
      {"layers.0.fc1.bias", {6}, ShardKind::kSplitDim0, 0, false},
      {"layers.0.fc2.weight", {4, 6}, ShardKind::kSplitDim1, 0, false},
      {"layers.0.norm.weight", {4}, ShardKind::kReplicated, 0, false},
      {"layers.1.fc1.weight", {6, 4}, ShardKind::kSplitDim0, 1, false},
      {"final_norm.weight", {5}, ShardKind::kReplicated, 1, false},
  };
  return m;
}

float FullValue(const std::string& name, int64_t i) {
  return 0.1f * std::sin(float(i) + float(name.size()));
}
// Global gradient of step t (what one rank with the whole batch would see).
float FullGrad(const std::string& name, int64_t i, int t) {
  return 0.3f * std::cos(0.7f * float(i) + float(name.size()) + float(t));
}

// Builds the store of pipeline stage `stage` (of pp) for TP rank tp_rank.
ParamStore BuildStore(int stage, int pp, int tp_rank, int tp) {
  ParamStore s;
  for (const FullParam& f : Model()) {
    bool here = pp == 1 ? (f.stage == 0 || !f.tied) : (f.stage == stage || (f.tied && stage == pp - 1));
    if (pp == 1 && f.tied && f.stage != 0) here = false;
    if (here) s.Add(MakeParam(f.name, f.shape, f.kind, tp_rank, tp, f.tied && pp > 1));
  }
  s.Finalize();
  for (const Param& p : s.params()) {
    std::vector<float> full(FullNumel(p));
    for (size_t i = 0; i < full.size(); ++i) full[i] = FullValue(p.name, i);
    SliceShard(p, full.data(), s.values() + p.offset);
  }
  return s;
}

// Fills grads so that, after the tied sum and the DP mean, they equal FullGrad.
// exact: splits that float arithmetic undoes exactly (halves, no DP noise), so
// the norm must match one rank to double rounding.
void FillGrads(ParamStore& s, int t, int stage, int dp_rank, int dp, bool exact = false) {
  for (const Param& p : s.params()) {
    std::vector<float> full(FullNumel(p));
    for (size_t i = 0; i < full.size(); ++i) {
      float g = FullGrad(p.name, i, t);
      if (p.tied) g *= exact ? 0.5f : (stage == 0 ? 0.25f : 0.75f);  // copies sum to g
      if (dp > 1 && !exact) g += (dp_rank == 0 ? float(dp - 1) : -1.0f) * 0.05f * float(i % 3);  // mean is g
      full[i] = g;
    }
    SliceShard(p, full.data(), s.grads() + p.offset);
  }
}

OptimizerOptions Options(int zero) {
  OptimizerOptions o;
  o.adam.max_grad_norm = 0.5f;  // the gradients are larger: clipping is active
  o.lr = LrSchedule{1e-2, 1e-3, 1, 10};
  o.zero_stage = zero;
  o.bucket_bytes = 40;
  return o;
}

constexpr int kSteps = 3;

// One rank: returns full values by name after kSteps, and the norms.
std::map<std::string, std::vector<float>> Reference(std::vector<double>* norms) {
  ParamStore s = BuildStore(0, 1, 0, 1);
  Optimizer opt({&s}, {true}, Options(0), OptimizerComms{});
  for (int t = 0; t < kSteps; ++t) {
    FillGrads(s, t, 0, 0, 1);
    norms->push_back(opt.Step().grad_norm);
  }
  std::map<std::string, std::vector<float>> out;
  for (const Param& p : s.params()) out[p.name].assign(s.values() + p.offset, s.values() + p.offset + p.numel);
  return out;
}

struct PlanCase {
  int tp, dp, pp, zero;
  bool exact = false;  // exact gradient splits: norm equal to 1e-12
};

class OptimizerParity : public ::testing::TestWithParam<PlanCase> {};

TEST_P(OptimizerParity, SameNormAndValuesAsOneRank) {
  const PlanCase pc = GetParam();
  std::vector<double> ref_norms;
  auto ref = Reference(&ref_norms);
  ASSERT_GT(ref_norms[0], 0.5) << "test needs clipping to be active";
  auto grid = RankGrid::Create(pc.tp, 1, pc.dp, pc.pp);
  ASSERT_TRUE(grid.ok());
  std::vector<Groups> groups = MakeLocalGroups(*grid);
  const int world = grid->world();
  std::vector<std::vector<double>> norms(world);
  std::vector<std::map<std::string, std::vector<float>>> full(world);
  RunRanks(world, [&](int r) {
    Groups& g = groups[r];
    ParamStore s = BuildStore(g.coord.pp, pc.pp, g.coord.tp, pc.tp);
    OptimizerComms comms{g.dp.get(), g.tp.get(), g.pp.get(), g.tied.get()};
    Optimizer opt({&s}, {g.coord.pp == 0}, Options(pc.zero), comms);
    for (int t = 0; t < kSteps; ++t) {
      FillGrads(s, t, g.coord.pp, g.coord.dp, pc.dp, pc.exact);
      opt.StartGradSync(0);
      norms[r].push_back(opt.Step().grad_norm);
      opt.ParamSync(0);
    }
    for (const Param& p : s.params()) {
      std::vector<float> f(FullNumel(p), 0.0f);
      PlaceShard(p, s.values() + p.offset, f.data());
      full[r][p.name] = f;
    }
  });
  for (int r = 0; r < world; ++r) {
    for (int t = 0; t < kSteps; ++t)
      EXPECT_NEAR(norms[r][t], ref_norms[t], (pc.exact ? 1e-12 : 1e-6) * ref_norms[t])
          << "rank " << r << " step " << t;
    Coord c = grid->CoordOf(r);
    for (const auto& [name, vals] : full[r]) {
      const std::vector<float>& want = ref.at(name);
      const Param probe = [&] {
        for (const FullParam& f : Model())
          if (f.name == name) return MakeParam(f.name, f.shape, f.kind, c.tp, pc.tp);
        return Param{};
      }();
      std::vector<float> mine(probe.numel), expect(probe.numel);
      SliceShard(probe, vals.data(), mine.data());
      SliceShard(probe, want.data(), expect.data());
      for (size_t i = 0; i < mine.size(); ++i)
        ASSERT_NEAR(mine[i], expect[i], 1e-6) << name << "[" << i << "] on rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Plans, OptimizerParity,
                         ::testing::Values(PlanCase{1, 2, 1, 0}, PlanCase{1, 2, 1, 1},
                                           PlanCase{2, 1, 1, 0}, PlanCase{1, 1, 2, 0},
                                           PlanCase{2, 2, 2, 0}, PlanCase{2, 2, 2, 1},
                                           PlanCase{1, 3, 1, 1}, PlanCase{2, 2, 2, 1, true},
                                           PlanCase{2, 1, 2, 0, true}),
                         [](const auto& info) {
                           const PlanCase& p = info.param;
                           return "tp" + std::to_string(p.tp) + "dp" + std::to_string(p.dp) + "pp" +
                                  std::to_string(p.pp) + "zero" + std::to_string(p.zero) + (p.exact ? "exact" : "");
                         });

TEST(Optimizer, ZeroMomentsGatherToTheSameAsPlainDp) {
  std::vector<std::vector<float>> m0(2), m1(2);
  for (int zero = 0; zero <= 1; ++zero) {
    LocalGroupHandle g(2);
    RunRanks(2, [&](int r) {
      auto dp = g.Member(r);
      ParamStore s = BuildStore(0, 1, 0, 1);
      OptimizerComms comms;
      comms.dp = dp.get();
      Optimizer opt({&s}, {true}, Options(zero), comms);
      FillGrads(s, 0, 0, r, 2);
      opt.Step();
      opt.ParamSync(0);
      std::vector<float> m, v;
      opt.GatherMoments(0, &m, &v);
      (zero ? m1 : m0)[r] = m;
    });
  }
  ASSERT_EQ(m0[0].size(), m1[1].size());
  for (size_t i = 0; i < m0[0].size(); ++i) {
    EXPECT_NEAR(m1[0][i], m0[0][i], 1e-7);
    EXPECT_NEAR(m1[1][i], m0[0][i], 1e-7);
  }
}

// A gradient norm that is not finite (one NaN or inf anywhere on any rank):
// every rank skips the update alike, parameters, moments and the step count
// stay as they were, and the next finite step proceeds as if it were first.
TEST(Optimizer, NonFiniteGradientNormSkipsTheUpdate) {
  for (int zero = 0; zero <= 1; ++zero)
    for (float bad : {std::nanf(""), INFINITY}) {
      LocalGroupHandle g(2);
      RunRanks(2, [&](int r) {
        auto dp = g.Member(r);
        ParamStore s = BuildStore(0, 1, 0, 1);
        OptimizerComms comms;
        comms.dp = dp.get();
        Optimizer opt({&s}, {true}, Options(zero), comms);
        const std::vector<float> before(s.value(0), s.value(0) + s.numel());
        FillGrads(s, 0, 0, r, 2);
        if (r == 1) s.grad(0)[0] = bad;  // one element on one rank
        const StepStats st = opt.Step();
        opt.ParamSync(0);
        EXPECT_TRUE(st.skipped) << "rank " << r;
        EXPECT_FALSE(std::isfinite(st.grad_norm));
        EXPECT_EQ(opt.step_count(), 0);
        EXPECT_EQ(std::vector<float>(s.value(0), s.value(0) + s.numel()), before) << "rank " << r;
        std::vector<float> m, v;
        opt.GatherMoments(0, &m, &v);
        for (float x : m) ASSERT_EQ(x, 0.0f);
        s.ZeroGrads();
        FillGrads(s, 0, 0, r, 2);
        const StepStats next = opt.Step();
        EXPECT_FALSE(next.skipped);
        EXPECT_EQ(opt.step_count(), 1);
      });
    }
}

}  // namespace
}  // namespace dt::rt
