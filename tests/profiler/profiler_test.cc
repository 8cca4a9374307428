// Tests of the profiler's assembly, options, shapes and launch command, and
// of loading a profile it wrote (ProfilerWritten.*, run by
// quick_profile_test.sh with DT_PROFILE_TO_CHECK set).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <tuple>

#include "planner/cost/comm_cost.h"
#include "planner/cost/compute_cost.h"
#include "planner/cost/outside_profile.h"
#include "planner/lower/simulate.h"
#include "planner/profile/profile.h"
#include "planner/profiler/assemble.h"
#include "planner/profiler/gemm_shapes.h"
#include "planner/profiler/measure_compute.h"
#include "planner/profiler/measure_step_comm.h"
#include "planner/profiler/profile_command.h"
#include "planner/profiler/profiler_options.h"
#include "runtime/backend/backend.h"

namespace dt {
namespace {

// Synthetic measurements: GEMMs at 50 GFLOP/s plus 2 us, collectives at
// 4 GB/s algbw plus 5 us, a little noise that the assembly must smooth.
Measurements Synthetic() {
  Measurements m;
  m.name = "synthetic";
  m.device_name = "Test CPU";
  m.machine.cpu_model = "Test CPU";
  m.machine.cores = 2;
  m.machine.mem_total_bytes = 24LL << 30;
  m.machine.date = "2026-01-02";
  m.machine.datetime = "2026-01-02T03:04:05Z";
  m.ranks_per_node = 2;
  m.models = {"gpt-tiny"};
  m.command = "test";
  for (int64_t n : {16, 32, 64, 128, 256, 512, 1024}) {
    GemmPoint g;
    g.m = g.n = g.k = n;
    g.seconds = g.flops() / 50e9 + 2e-6;
    m.gemms.push_back(g);
  }
  m.gemms.push_back({64, 768, 2304, 1, 64.0 * 768 * 2304 * 2 / 45e9});
  m.copy_Bps = 10e9;
  m.tiny_op_s = 1e-7;
  m.attention.push_back({"att", 1e9, 1e8, 2, 1e9 / 20e9});
  m.memory_ops.push_back({"mem", 0, 1e8, 12, 1e8 / 6e9});
  m.optimizer_s = 4e6 * 30 / 6e9;
  m.optimizer_params = 4e6;
  m.memory_bytes = 12LL << 30;
  m.reserved_bytes = 100LL << 20;
  for (CollKind k : {CollKind::kAllReduce, CollKind::kReduceScatter, CollKind::kAllGather, CollKind::kSendRecv}) {
    CollSeries s;
    s.kind = k;
    s.group_size = 2;
    for (double b = 8; b <= (64 << 20); b *= 4) {
      double t = 5e-6 + b / 4e9;
      if (b == 512) t *= 0.8;  // noise: faster than the smaller message
      s.samples.push_back({b, t});
    }
    m.collectives.push_back(s);
  }
  return m;
}

TEST(ProfilerAssemble, RoundTripsAndIsAccepted) {
  StatusOr<HardwareProfile> p = AssembleProfile(Synthetic());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->device.kind, "cpu");
  EXPECT_EQ(p->device.dtype, "fp32");
  EXPECT_NEAR(p->device.peak_flops, 50e9, 2e9);
  EXPECT_EQ(p->network.gpus_per_node, 2);
  EXPECT_EQ(p->created, "2026-01-02");
  EXPECT_NE(p->description.find("Test CPU"), std::string::npos);
  EXPECT_NEAR(p->compute.memory_bound_efficiency, 0.6, 0.01);
  // 30 bytes/param at 6 GB/s achieved = 10 GB/s copy x 0.6 efficiency.
  EXPECT_NEAR(p->compute.optimizer_bytes_per_param, 30.0, 0.1);
  StatusOr<HardwareProfile> back = ProfileFromJson(ToJson(*p), "round trip");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(*back == *p);
  HardwareProfile q = *p;
  EXPECT_TRUE(PrepareProfile(&q, "prepare").ok());
  // Through a file and LoadProfile.
  std::string path = (std::filesystem::temp_directory_path() / "dt_profiler_test.json").string();
  ASSERT_TRUE(WriteJsonFile(path, ToJson(*p)).ok());
  StatusOr<HardwareProfile> loaded = LoadProfile(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_TRUE(*loaded == *p);
}

// The optimizer step timed over fewer parameters becomes
// compute.optimizer_time_by_params: time per parameter over the reference
// step's, 1 at the reference size; a noisy point that would make more
// parameters take less time in all is raised to its smaller neighbour's time.
TEST(ProfilerAssemble, OptimizerSizesBecomeATimeFactorCurve) {
  Measurements m = Synthetic();
  StatusOr<HardwareProfile> without = AssembleProfile(m);
  ASSERT_TRUE(without.ok()) << without.status().message();
  EXPECT_TRUE(without->compute.optimizer_time_by_params.empty());
  const double ref = m.optimizer_s / m.optimizer_params;
  m.optimizer_sizes = {{1e4, 1e4 * ref * 0.3}, {1e5, 1e4 * ref * 0.25}, {1e6, 1e6 * ref * 0.6}};
  StatusOr<HardwareProfile> p = AssembleProfile(m);
  ASSERT_TRUE(p.ok()) << p.status().message();
  const Curve& c = p->compute.optimizer_time_by_params;
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c.x, (std::vector<double>{1e4, 1e5, 1e6, 4e6}));
  EXPECT_NEAR(c.y[0], 0.3, 1e-12);
  EXPECT_NEAR(c.y[1], 0.03, 1e-12);  // 1e5 timed faster than 1e4 in all: floored at 1e4's time
  EXPECT_NEAR(c.y[2], 0.6, 1e-12);
  EXPECT_NEAR(c.y[3], 1.0, 1e-12);
  EXPECT_EQ(p->compute.optimizer_bytes_per_param, without->compute.optimizer_bytes_per_param);
  EXPECT_NE(p->compute.optimizer_time_by_params_note.find("over 4M"), std::string::npos)
      << p->compute.optimizer_time_by_params_note;
  StatusOr<HardwareProfile> back = ProfileFromJson(ToJson(*p), "round trip");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(*back == *p);
}

// The machine's speed at the profile's start and end: stated in the
// description when measured; a warning only when the step's speed moved
// beyond the threshold, in either direction (the copy rate alone decides
// only when no step was timed).
TEST(ProfilerAssemble, SpeedProbesAreStatedAndAnUnsteadyMachineWarned) {
  Measurements m = Synthetic();
  EXPECT_EQ(SpeedChange(m), 0.0);
  EXPECT_EQ(SpeedProbeSummary(m), "");
  EXPECT_EQ(UnsteadyMachineWarning(m), "");
  EXPECT_EQ(AssembleProfile(m)->description.find("Machine speed"), std::string::npos);

  m.speed_step_what = "gpt-tiny training step mbs1";
  m.speed_start = {20e9, 1.0e-3};
  m.speed_end = {19e9, 1.05e-3};  // 5% slower: steady enough
  EXPECT_NEAR(SpeedChange(m), 1 - 1 / 1.05, 1e-9);  // as a speed
  EXPECT_EQ(UnsteadyMachineWarning(m), "");
  const std::string d = AssembleProfile(m)->description;
  EXPECT_NE(d.find("stream copy 20 then 19 GB/s per rank (-5%)"), std::string::npos) << d;
  EXPECT_NE(d.find("gpt-tiny training step mbs1 1 then 1.05 ms (speed -5%)"), std::string::npos) << d;

  m.speed_end = {20e9, 0.8e-3};  // steps 1.25x as fast at the end
  EXPECT_NEAR(SpeedChange(m), 0.25, 1e-9);
  std::string w = UnsteadyMachineWarning(m);
  EXPECT_NE(w.find("speed +25%"), std::string::npos) << w;
  EXPECT_NE(w.find("re-run `dtplan profile`"), std::string::npos) << w;
  EXPECT_EQ(UnsteadyMachineWarning(m, 0.3), "");

  m.speed_end = {14e9, 1.0e-3};  // the copy 30% slower, the step unchanged
  EXPECT_EQ(SpeedChange(m), 0.0);
  EXPECT_EQ(UnsteadyMachineWarning(m), "");

  m.speed_start.step_s = m.speed_end.step_s = 0;  // no step timed: the copy decides
  EXPECT_NEAR(SpeedChange(m), 0.30, 1e-9);
  w = UnsteadyMachineWarning(m);
  EXPECT_NE(w.find("20 then 14 GB/s per rank (-30%)"), std::string::npos) << w;
}

// A CPU profile measured with bf16 GEMM inputs (twice the fp32 rate here):
// compute.bf16 round-trips; a bf16 plan's GEMMs and attention are priced
// from it, an fp32 plan's and a GPU profile's are not; without it a bf16
// plan on a CPU profile is flagged as priced at the fp32 rate.
// Synthetic() with bf16-input GEMMs at ~100 GFLOP/s and one attention shape.
Measurements SyntheticWithBf16() {
  Measurements m = Synthetic();
  for (GemmPoint g : m.gemms) {
    g.seconds = g.flops() / 100e9 + 2e-6;
    m.bf16_gemms.push_back(g);
  }
  m.bf16_attention.push_back({"att", 1e9, 1e8, 2, 1e9 / 30e9});
  m.bf16_gemm = "oneDNN test";
  return m;
}

TEST(ProfilerAssemble, Bf16InputsArePricedFromTheirOwnMeasurements) {
  const Measurements m = SyntheticWithBf16();
  StatusOr<HardwareProfile> p = AssembleProfile(m);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_TRUE(p->compute.bf16.available());
  EXPECT_NEAR(p->compute.bf16.peak_flops, 100e9, 5e9);
  EXPECT_NEAR(p->compute.bf16.attention_efficiency, 0.3, 0.02);  // 30 of ~100 GFLOP/s
  EXPECT_NE(p->compute.bf16.note.find("oneDNN test"), std::string::npos);
  StatusOr<HardwareProfile> back = ProfileFromJson(ToJson(*p), "round trip");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(*back == *p);

  Op gemm;
  gemm.kind = OpKind::kGemm;
  gemm.m = gemm.n = gemm.k = 512;
  gemm.flops = 2.0 * 512 * 512 * 512;
  HardwareProfile storage;
  const HardwareProfile& fp32 = ProfileForPrecision(*p, Precision::kFp32, &storage);
  EXPECT_EQ(&fp32, &*p);
  const HardwareProfile& bf16 = ProfileForPrecision(*p, Precision::kBf16, &storage);
  ASSERT_EQ(&bf16, &storage);
  EXPECT_NEAR(OpTime(gemm, *p) / OpTime(gemm, bf16), 2.0, 0.05);
  EXPECT_DOUBLE_EQ(bf16.device.peak_flops, p->compute.bf16.peak_flops);
  EXPECT_FALSE(bf16.compute.bf16.available());
  HardwareProfile again;
  EXPECT_EQ(&ProfileForPrecision(bf16, Precision::kBf16, &again), &bf16);  // already derived
  EXPECT_FALSE(Bf16PricedAsFp32(*p, Precision::kBf16));

  StatusOr<HardwareProfile> plain = AssembleProfile(Synthetic());
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(Bf16PricedAsFp32(*plain, Precision::kBf16));
  EXPECT_FALSE(Bf16PricedAsFp32(*plain, Precision::kFp32));
  EXPECT_EQ(&ProfileForPrecision(*plain, Precision::kBf16, &storage), &*plain);
  StatusOr<HardwareProfile> gpu = LoadProfile("h100");
  ASSERT_TRUE(gpu.ok());
  EXPECT_FALSE(Bf16PricedAsFp32(*gpu, Precision::kBf16));
  EXPECT_EQ(&ProfileForPrecision(*gpu, Precision::kBf16, &storage), &*gpu);

  // A bad compute.bf16 is refused with its field named.
  nlohmann::json j = ToJson(*p);
  j["compute"]["bf16"]["peak_flops"] = -1;
  StatusOr<HardwareProfile> bad = ProfileFromJson(j, "bad");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("compute.bf16.peak_flops"), std::string::npos) << bad.status().message();
}

// The runtime's bf16 storage conversions become per-element curves of
// compute.bf16 that round-trip and survive the bf16 view a plan is priced
// with; half of the pair is refused. The bf16 steps' in-step GEMM times
// replace the isolated bf16 points of the shapes they ran (as for fp32).
TEST(ProfilerAssemble, Bf16ConversionsAndInStepGemms) {
  Measurements m = SyntheticWithBf16();
  m.bf16_conversions = {{4096, 1e-10, 0.5e-10}, {1 << 20, 3e-10, 2e-10}};
  ModelSample step;
  step.what = "gpt-tiny bf16 training step mbs1";
  GemmPoint slow = m.bf16_gemms.front();
  slow.seconds *= 1.5;
  step.in_step_gemms = {slow};
  StatusOr<ModelSpec> tiny = LoadModel(std::string(DT_SOURCE_DIR) + "/examples/models/gpt-tiny.json");
  ASSERT_TRUE(tiny.ok()) << tiny.status().message();
  step.model = *tiny;
  step.plan = ProfilerStepPlan(*tiny, 64, 1, 1);
  step.plan.precision = Precision::kBf16;
  step.seconds = 2e-3;
  m.bf16_model_steps = {step};
  StatusOr<HardwareProfile> p = AssembleProfile(m);
  ASSERT_TRUE(p.ok()) << p.status().message();
  // The step is checked as the planner prices its 1-rank bf16 plan on the finished profile.
  ASSERT_FALSE(p->compute.step_checks.empty());
  const StepCheck& check = p->compute.step_checks.back();
  EXPECT_EQ(check.what, step.what);
  EXPECT_EQ(check.precision, "bf16");
  EXPECT_DOUBLE_EQ(check.measured_s, 2e-3);
  ClusterSpec one;
  one.nodes = one.gpus_per_node = 1;
  one.device = "cpu";
  StatusOr<Prediction> priced = SimulatePlan(*tiny, one, step.plan, *p);
  ASSERT_TRUE(priced.ok()) << priced.status().message();
  EXPECT_DOUBLE_EQ(check.predicted_s, priced->step_time_s);
  StatusOr<Prediction> as_fp32 = SimulatePlan(*tiny, one, ProfilerStepPlan(*tiny, 64, 1, 1), *p);
  ASSERT_TRUE(as_fp32.ok());
  EXPECT_NE(check.predicted_s, as_fp32->step_time_s);  // priced as bf16, not as the fp32 step
  EXPECT_NE(StepCheckNote(*p).find("1 whole bf16 training step within"), std::string::npos) << StepCheckNote(*p);
  {  // a step the planner cannot price (no plan) is left out and said, the profile still made
    Measurements unpriced = m;
    unpriced.bf16_model_steps.front().plan = PlanSpec();
    StatusOr<HardwareProfile> q = AssembleProfile(unpriced);
    ASSERT_TRUE(q.ok()) << q.status().message();
    for (const StepCheck& s : q->compute.step_checks) EXPECT_NE(s.precision, "bf16") << s.what;
    EXPECT_NE(q->compute.note.find("gpt-tiny bf16 training step mbs1 is not a step check"), std::string::npos)
        << q->compute.note;
  }
  const Bf16InputsCompute& b = p->compute.bf16;
  ASSERT_TRUE(b.has_conversions());
  EXPECT_EQ(b.narrow_s_per_element.x, (std::vector<double>{4096, 1 << 20}));
  EXPECT_EQ(b.widen_s_per_element.y, (std::vector<double>{0.5e-10, 2e-10}));
  EXPECT_DOUBLE_EQ(b.gemm_points.front().seconds, slow.seconds);  // in step, not alone
  EXPECT_NE(b.note.find("timed inside the whole-model training steps"), std::string::npos) << b.note;
  StatusOr<HardwareProfile> back = ProfileFromJson(ToJson(*p), "round trip");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(*back == *p);
  HardwareProfile storage;
  const HardwareProfile& bf16 = ProfileForPrecision(*p, Precision::kBf16, &storage);
  EXPECT_TRUE(bf16.compute.bf16.has_conversions());
  EXPECT_FALSE(bf16.compute.bf16.available());
  nlohmann::json j = ToJson(*p);
  j["compute"]["bf16"].erase("widen_s_per_element");
  StatusOr<HardwareProfile> half = ProfileFromJson(j, "half");
  ASSERT_FALSE(half.ok());
  EXPECT_NE(half.status().message().find("narrow_s_per_element and widen_s_per_element"), std::string::npos)
      << half.status().message();
}

TEST(ProfilerAssemble, MeasuredGemmPricedExactlyAndMonotone) {
  HardwareProfile p = *AssembleProfile(Synthetic());
  for (const GemmPoint& g : p.compute.gemm_points) {
    Op op;
    op.kind = OpKind::kGemm;
    op.m = g.m; op.n = g.n; op.k = g.k;
    op.flops = g.flops();
    EXPECT_DOUBLE_EQ(OpTime(op, p), g.seconds);
    EXPECT_FALSE(GemmOutsideProfile(op, p));
  }
  double prev = 0;
  for (int64_t n = 16; n <= 1024; n += 8) {  // unmeasured shapes in between
    Op op;
    op.kind = OpKind::kGemm;
    op.m = n; op.n = n + 1; op.k = n;
    op.flops = 2.0 * op.m * op.n * op.k;
    double t = OpTime(op, p);
    EXPECT_GE(t, prev) << n;
    prev = t;
  }
  Op big;
  big.kind = OpKind::kGemm;
  big.m = big.n = big.k = 4096;
  big.flops = 2.0 * 4096 * 4096 * 4096;
  EXPECT_TRUE(GemmOutsideProfile(big, p));
  Op tiny = big;
  tiny.m = tiny.n = tiny.k = 4;
  tiny.flops = 128;
  EXPECT_TRUE(GemmOutsideProfile(tiny, p));
}

// A GEMM timed inside the whole-model steps replaces the same shape's
// isolated point; a shape only the steps ran (above the sweep's cap) is
// added; the efficiency curve stays the isolated sweep's.
TEST(ProfilerAssemble, InStepGemmTimesReplaceIsolatedOnes) {
  Measurements m = Synthetic();
  const HardwareProfile alone = *AssembleProfile(m);
  const GemmPoint& iso = m.gemms.back();  // (64, 768, 2304)
  ModelSample step;
  step.what = "synthetic step";
  step.seconds = 1e-3;
  GemmPoint slower = iso;
  slower.seconds = 1.3 * iso.seconds;
  GemmPoint big;
  big.m = big.n = big.k = 2048;
  big.seconds = big.flops() / 40e9;
  step.in_step_gemms = {slower, big};
  m.model_steps.push_back(step);
  ModelSample again = step;  // a second microbatch size: the mean per call is kept
  again.in_step_gemms[0].seconds = 1.1 * iso.seconds;
  m.model_steps.push_back(again);
  HardwareProfile p = *AssembleProfile(m);
  auto time_of = [&](int64_t mm, int64_t n, int64_t k) {
    Op op;
    op.kind = OpKind::kGemm;
    op.m = mm; op.n = n; op.k = k;
    op.flops = 2.0 * mm * n * k;
    return OpTime(op, p);
  };
  EXPECT_NEAR(time_of(iso.m, iso.n, iso.k), 1.2 * iso.seconds, 1e-12);
  EXPECT_NEAR(time_of(2048, 2048, 2048), big.seconds, 1e-12);
  // Not in the steps (as a tp > 1 plan's shapes): its isolated time times
  // the in-step / alone ratio of the timed shape nearest in FLOPs (1.2).
  EXPECT_NEAR(time_of(64, 64, 64), 1.2 * m.gemms[2].seconds, 1e-15);
  EXPECT_NE(p.compute.note.find("scaled by the in-step / alone ratio"), std::string::npos);
  EXPECT_EQ(p.compute.gemm_points.size(), m.gemms.size() + 1);
  EXPECT_TRUE(p.compute.gemm_efficiency == alone.compute.gemm_efficiency);
  EXPECT_NE(p.compute.note.find("timed inside the whole-model training steps"), std::string::npos);
  EXPECT_NE(p.compute.note.find("1 more shapes"), std::string::npos);
}

// One repetition of each whole step, GEMMs timed inside it, on `be`.
MeasureConfig QuickStepConfig(rt::Backend* be) {
  MeasureConfig cfg;
  cfg.be = be;
  cfg.max_reps = 1;
  cfg.point_budget_s = 0.01;
  cfg.time_gemms_in_step = true;
  return cfg;
}

// The runtime's step maps back onto the planner's keys: every linear-layer
// GEMM the planner prices for the step (forward, dgrad and the swapped
// wgrad, the LM head) gets an in-step time, and no other shape does.
TEST(ProfilerSteps, InStepGemmsCoverThePlannersLinearGemms) {
  StatusOr<ModelSpec> m = LoadModel(std::string(DT_SOURCE_DIR) + "/examples/models/gpt-tiny.json");
  ASSERT_TRUE(m.ok()) << m.status().message();
  std::unique_ptr<rt::Backend> be = rt::MakeCpuBackend();
  MeasureConfig cfg = QuickStepConfig(be.get());
  std::vector<ModelSample> s = MeasureModelSteps(cfg, *m, 32, {2});
  ASSERT_EQ(s.size(), 1u);
  std::set<std::tuple<int64_t, int64_t, int64_t>> planner, timed;
  for (const Op& op : s[0].ops)
    if (op.kind == OpKind::kGemm && op.batch == 1) planner.insert({op.m, op.n, op.k});
  for (const GemmPoint& g : s[0].in_step_gemms) {
    EXPECT_GT(g.seconds, 0);
    timed.insert({g.m, g.n, g.k});
  }
  EXPECT_GE(planner.size(), 6u);
  EXPECT_EQ(timed, planner);
  cfg.time_gemms_in_step = false;
  EXPECT_TRUE(MeasureModelSteps(cfg, *m, 32, {2})[0].in_step_gemms.empty());
}

// A shape's in-step time is the median over steps of each step's time per
// call: one step whose call of a shape was descheduled (4x, as seen on a
// shared VM) does not move it, a shape every step runs slower does, and a
// shape missing from some steps keeps the samples it has.
// compute.recompute_cost_ratio: per step timed with full recompute, the
// extra time over the recompute's priced time; the median over the steps
// is kept, a disturbed pair clamped, and without such steps it stays 1
// (and is not written).
TEST(ProfilerAssemble, RecomputeCostRatioIsTheMedianInSituRecomputeOverItsPrice) {
  StatusOr<ModelSpec> tiny = LoadModel(std::string(DT_SOURCE_DIR) + "/examples/models/gpt-tiny.json");
  ASSERT_TRUE(tiny.ok());
  Measurements base = Synthetic();
  const HardwareProfile without = *AssembleProfile(base);
  EXPECT_EQ(without.compute.recompute_cost_ratio, 1.0);
  EXPECT_FALSE(ToJson(without).at("compute").contains("recompute_cost_ratio"));
  PlanSpec p;
  p.seq_length = 64;
  p.flash_attention = false;
  p.recompute = Recompute::kFull;
  const std::vector<Op> rc = TransformerLayerOps(*tiny, p, 4).recompute;
  ASSERT_FALSE(rc.empty());
  auto with_ratios = [&](std::vector<double> ratios) {
    Measurements m = base;
    for (size_t i = 0; i < ratios.size(); ++i) {
      ModelSample s;
      s.what = "gpt-tiny training step mbs" + std::to_string(i + 1);
      s.ops = rc;  // any work; the plain step's time is what it is
      s.seconds = 2e-3 * (i + 1);
      s.recompute_ops = rc;
      m.model_steps.push_back(s);
    }
    // Prices under the assembled profile (the recompute ops only depend on
    // the GEMM points and efficiencies, which the ratio leaves alone).
    HardwareProfile first = *AssembleProfile(m);
    double priced = 0;
    for (const Op& op : rc) priced += OpTime(op, first);
    for (size_t i = 0; i < ratios.size(); ++i)
      m.model_steps[i].full_recompute_seconds = m.model_steps[i].seconds + ratios[i] * priced;
    return *AssembleProfile(m);
  };
  HardwareProfile q = with_ratios({0.8, 0.9, 0.7, 5.0, 0.85});
  EXPECT_NEAR(q.compute.recompute_cost_ratio, 0.85, 1e-9);
  EXPECT_NE(q.compute.note.find("recompute_cost_ratio 0.85"), std::string::npos) << q.compute.note;
  StatusOr<HardwareProfile> back = ProfileFromJson(ToJson(q), "round trip");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->compute.recompute_cost_ratio, q.compute.recompute_cost_ratio);
  HardwareProfile clamped = with_ratios({0.01, 0.02, 0.03});
  EXPECT_EQ(clamped.compute.recompute_cost_ratio, 0.25);
  EXPECT_NE(clamped.compute.note.find("(clamped)"), std::string::npos);
  HardwareProfile bad = q;
  bad.compute.recompute_cost_ratio = 0;
  EXPECT_FALSE(ProfileFromJson(ToJson(bad), "bad").ok());
}

// Steps short enough are also timed with full recompute, alternately with
// the plain ones; the planner's recompute ops come with them.
TEST(ProfilerSteps, FullRecomputeTimedBesideThePlainStep) {
  StatusOr<ModelSpec> m = LoadModel(std::string(DT_SOURCE_DIR) + "/examples/models/gpt-tiny.json");
  ASSERT_TRUE(m.ok()) << m.status().message();
  std::unique_ptr<rt::Backend> be = rt::MakeCpuBackend();
  MeasureConfig cfg = QuickStepConfig(be.get());
  std::vector<ModelSample> s = MeasureModelSteps(cfg, *m, 32, {2}, /*recompute_max_step_s=*/10.0);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_GT(s[0].full_recompute_seconds, 0);
  EXPECT_EQ(s[0].recompute_ops.size(), static_cast<size_t>(m->num_layers) *
                                          TransformerLayerOps(*m, [&] {
                                            PlanSpec p;
                                            p.seq_length = 32;
                                            p.micro_batch = 2;
                                            p.flash_attention = false;
                                            p.recompute = Recompute::kFull;
                                            return p;
                                          }(), 4).recompute.size());
  EXPECT_FALSE(s[0].in_step_gemms.empty());
  std::vector<ModelSample> plain = MeasureModelSteps(cfg, *m, 32, {2});
  EXPECT_EQ(plain[0].full_recompute_seconds, 0);
  EXPECT_TRUE(plain[0].recompute_ops.empty());
}

TEST(ProfilerSteps, InStepGemmTimesAreMediansOverSteps) {
  auto point = [](int64_t m, int64_t n, int64_t k, double s) {
    GemmPoint g;
    g.m = m, g.n = n, g.k = k, g.seconds = s;
    return g;
  };
  std::vector<std::vector<GemmPoint>> steps;
  for (int i = 0; i < 7; ++i) {
    const double hiccup = i == 3 ? 4.0 : 1.0;
    std::vector<GemmPoint> step = {point(256, 64, 256, 90e-6 * hiccup), point(256, 256, 64, (100 + i) * 1e-6)};
    if (i % 2 == 0) step.push_back(point(64, 64, 64, 5e-6));
    steps.push_back(step);
  }
  const std::vector<GemmPoint> out = MedianOverSteps(steps);
  ASSERT_EQ(out.size(), 3u);
  auto time_of = [&](int64_t m, int64_t n, int64_t k) {
    for (const GemmPoint& g : out)
      if (g.m == m && g.n == n && g.k == k) return g.seconds;
    return -1.0;
  };
  EXPECT_DOUBLE_EQ(time_of(256, 64, 256), 90e-6);
  EXPECT_DOUBLE_EQ(time_of(256, 256, 64), 103e-6);
  EXPECT_DOUBLE_EQ(time_of(64, 64, 64), 5e-6);
  EXPECT_TRUE(MedianOverSteps({}).empty());
}

// Unmeasured shapes are priced from the median of the measured shapes of
// the same FLOPs: two skinny shapes (n or k = 4) four times slower than
// three square-ish ones of 2^19 FLOPs set neither that size's price nor,
// through the monotone pass, the price of larger sizes.
TEST(ProfilerAssemble, SkinnyShapesDoNotSetThePriceOfOtherShapes) {
  Measurements m = Synthetic();
  auto point = [](int64_t a, int64_t b, int64_t c, double gflops) {
    GemmPoint g;
    g.m = a; g.n = b; g.k = c;
    g.seconds = g.flops() / (gflops * 1e9);
    return g;
  };
  const double fast = 50, slow = 12;
  for (const GemmPoint& g : {point(32, 64, 128, fast), point(128, 32, 64, fast), point(1024, 64, 4, slow),
                             point(1024, 4, 64, slow)})
    m.gemms.push_back(g);  // with (64, 64, 64) at 50 GFLOP/s + 2 us from Synthetic()
  HardwareProfile p = *AssembleProfile(m);
  Op op;
  op.kind = OpKind::kGemm;
  op.m = 16; op.n = 256; op.k = 64;  // 2^19 FLOPs, not measured
  op.flops = 2.0 * op.m * op.n * op.k;
  // The median of 10.5, 10.5, 12.5 (Synthetic's 2 us), 43.7, 43.7 us.
  EXPECT_NEAR(OpTime(op, p), op.flops / (fast * 1e9) + 2e-6, 1e-9);
  op.m = 24;  // 1.5 x 2^19 FLOPs: between 2^19 and the next measured size, far below the skinny time
  op.flops = 2.0 * op.m * op.n * op.k;
  EXPECT_LT(OpTime(op, p), 0.5 * (op.flops / 1.5) / (slow * 1e9));
}

TEST(ProfilerAssemble, CollectiveCurveExactMonotoneAndFlagged) {
  HardwareProfile p = *AssembleProfile(Synthetic());
  const LinkEntry& e = p.network.table(CollKind::kAllReduce).intra.at(0);
  ASSERT_FALSE(e.points.empty());
  for (size_t i = 0; i < e.points.size(); ++i) {
    LinkChoice c = ChooseLink(CollKind::kAllReduce, e.points.x[i], 2, 1, false, p);
    EXPECT_DOUBLE_EQ(c.busbw_Bps, e.points.y[i]);
    EXPECT_FALSE(c.clamped);
  }
  double prev = 0;
  for (double b = e.points.x.front(); b <= e.points.x.back(); b *= 1.37) {
    double t = CollectiveTime(CollKind::kAllReduce, b, 2, 1, false, p);
    EXPECT_GE(t, prev * (1 - 1e-12)) << b;
    prev = t;
    EXPECT_FALSE(CollectiveOutsideProfile(CollKind::kAllReduce, b, 2, 1, false, p));
  }
  EXPECT_TRUE(CollectiveOutsideProfile(CollKind::kAllReduce, 1e9, 2, 1, false, p));
  EXPECT_TRUE(CollectiveOutsideProfile(CollKind::kAllReduce, 4, 2, 1, false, p));
  // Time at the noisy point was raised to the previous one (never faster).
  for (size_t i = 1; i < e.points.size(); ++i)
    EXPECT_GE(e.points.x[i] / e.points.y[i], e.points.x[i - 1] / e.points.y[i - 1]);
}

// In-step collectives (measure_step_comm.h): each isolated point takes the
// in-step / alone ratio of the in-step size of its operation and group
// nearest to it within a factor 4; the alone time at an in-step size is
// interpolated log-log; points farther away, other operations and other
// group sizes are untouched.
TEST(ProfilerAssemble, InStepCollectivesScaleTheNearestIsolatedPoints) {
  std::vector<CollSeries> series = Synthetic().collectives;
  CollSeries g4 = series[0];
  g4.group_size = 4;
  series.push_back(g4);
  const std::vector<CollSeries> before = series;
  CollSeries in;
  in.kind = CollKind::kAllGather;
  in.group_size = 2;
  // 32 KiB (an isolated point: 8 * 4^6) at 3x; 200 KB (between 128 KiB and
  // 512 KiB) at 2x its interpolated alone time.
  auto alone = [](double b) { return 5e-6 + b / 4e9; };
  const double mid = 200e3;
  const double lo = 131072, hi = 524288;
  const double x = std::log(mid / lo) / std::log(hi / lo);
  const double alone_mid = std::exp(std::log(alone(lo)) * (1 - x) + std::log(alone(hi)) * x);
  in.samples = {{32768, 3 * alone(32768)}, {mid, 2 * alone_mid}};
  std::vector<double> r = ApplyInStepCollectives({in}, &series);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_NEAR(r[0], 3.0, 1e-9);
  EXPECT_NEAR(r[1], 2.0, 1e-9);
  for (size_t s = 0; s < series.size(); ++s) {
    for (size_t i = 0; i < series[s].samples.size(); ++i) {
      const double b = series[s].samples[i].bytes, t0 = before[s].samples[i].seconds;
      const double t = series[s].samples[i].seconds;
      if (series[s].kind != CollKind::kAllGather || series[s].group_size != 2) {
        EXPECT_DOUBLE_EQ(t, t0) << CollectiveKey(series[s].kind) << " g=" << series[s].group_size << " " << b;
        continue;
      }
      // Nearest in-step size within 4x: 8 KiB..128 KiB -> 32 KiB (128 KiB is
      // 4x from 32 KiB but 1.5x from 200 KB: 200 KB), 512 KiB -> 200 KB.
      double expect = 1.0;
      if (b >= 8192 && b <= 65536) expect = 3.0;
      if (b >= 131072 && b <= 524288) expect = 2.0;
      EXPECT_NEAR(t / t0, expect, 1e-9) << b;
    }
  }
  // The assembled profile says so in its network note.
  Measurements m = Synthetic();
  m.in_step_collectives = {in};
  HardwareProfile p = *AssembleProfile(m);
  EXPECT_NE(p.network.note.find("in-step / alone ratio"), std::string::npos) << p.network.note;
  EXPECT_GT(CollectiveTime(CollKind::kAllGather, 32768, 2, 1, false, p),
            2.5 * CollectiveTime(CollKind::kAllGather, 32768, 2, 1, false, *AssembleProfile(Synthetic())));
}

TEST(ProfilerAssemble, EfficiencyCurveSatisfiesProfileRules) {
  std::vector<GemmPoint> pts = {{16, 16, 16, 1, 1e-6}, {20, 20, 20, 1, 1e-7},  // noisy: very fast
                                {64, 64, 64, 1, 2e-5}, {512, 512, 512, 1, 5e-3}};
  Curve c = GemmEfficiencyCurve(pts, 60e9);
  EXPECT_TRUE(ValidateCurve(c, "eff", true, true).ok());
  for (size_t i = 0; i < c.size(); ++i) {
    EXPECT_GT(c.y[i], 0);
    EXPECT_LE(c.y[i], 1);
    if (i) {
      EXPECT_GE(c.y[i], c.y[i - 1]);
      EXPECT_GE(c.x[i] / c.y[i], c.x[i - 1] / c.y[i - 1]);
    }
  }
}

TEST(ProfilerAssemble, RejectsUnusableMeasurements) {
  Measurements m = Synthetic();
  m.gemms.clear();
  EXPECT_NE(AssembleProfile(m).status().message().find("no GEMM"), std::string::npos);
  m = Synthetic();
  m.gemms[0].seconds = 0;
  EXPECT_FALSE(AssembleProfile(m).ok());
}

json GoodJson() { return ToJson(*AssembleProfile(Synthetic())); }

void ExpectRejected(const json& j, const std::string& fragment) {
  StatusOr<HardwareProfile> p = ProfileFromJson(j, "profile 'bad.json'");
  ASSERT_FALSE(p.ok()) << "accepted: expected an error mentioning " << fragment;
  EXPECT_NE(p.status().message().find(fragment), std::string::npos) << p.status().message();
}

TEST(ProfilerMalformed, MeasuredSectionsRejectedWithClearErrors) {
  json j = GoodJson();
  j["compute"]["gemm_points"][0]["m"] = 0;
  ExpectRejected(j, "gemm_points[0]");
  j = GoodJson();
  j["compute"]["gemm_points"][1]["seconds"] = -1;
  ExpectRejected(j, "gemm_points[1].seconds");
  j = GoodJson();
  j["compute"]["gemm_points"][0].erase("k");
  ExpectRejected(j, "k");
  j = GoodJson();
  j["compute"]["gemm_points"] = json::object();
  ExpectRejected(j, "gemm_points");
  j = GoodJson();
  auto& pts = j["network"]["collectives"]["all_reduce"]["intra"][0]["points"];
  pts[2][1] = pts[2][1].get<double>() * 1000;  // a bigger message much faster
  ExpectRejected(j, "points[2]");
  j = GoodJson();
  j["network"]["collectives"]["all_gather"]["intra"][0]["points"][1][0] = 1;  // x not increasing
  ExpectRejected(j, "strictly increasing");
  j = GoodJson();
  j["network"]["collectives"]["send_recv"]["intra"][0]["group_size"] = 3;  // > gpus_per_node
  ExpectRejected(j, "group_size = 3");
  j = GoodJson();
  j["network"]["collectives"]["reduce_scatter"]["intra"][0]["points"][0] = json::array({1});
  ExpectRejected(j, "[number, number]");
  j = GoodJson();
  j["network"]["collectives"].erase("send_recv");
  ExpectRejected(j, "send_recv");
}

TEST(ProfilerShapes, ModelShapesUseRuntimeCallsAndPlannerKeys) {
  StatusOr<ModelSpec> m = LoadModel(std::string(DT_SOURCE_DIR) + "/examples/models/gpt-tiny.json");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(TpSplits(*m, 2), (std::vector<int>{1, 2}));
  std::vector<GemmShape> s = ModelGemmShapes(*m, 64, {1, 2}, {1, 2});
  bool fc1_wgrad = false, fc2_dgrad = false;
  for (const GemmShape& g : s) {
    // fc1 at tp2 mbs1: forward (T=64, out=128, in=64); wgrad keyed (in, out, T).
    if (g.origin == "gpt-tiny tp2 mbs1 fc1_wgrad") {
      fc1_wgrad = true;
      EXPECT_EQ(g.call, GemmCall::kWgrad);
      EXPECT_EQ(g.m, 64); EXPECT_EQ(g.n, 128); EXPECT_EQ(g.k, 64);
    }
    if (g.origin == "gpt-tiny tp1 mbs2 fc2_dgrad") {
      fc2_dgrad = true;
      EXPECT_EQ(g.call, GemmCall::kDgrad);
      EXPECT_EQ(g.m, 128); EXPECT_EQ(g.n, 256); EXPECT_EQ(g.k, 64);
    }
  }
  EXPECT_TRUE(fc1_wgrad);
  EXPECT_TRUE(fc2_dgrad);
  std::vector<GemmShape> skipped;
  std::vector<GemmShape> sel = SelectGemmShapes(s, 2e6, &skipped);
  for (size_t i = 1; i < sel.size(); ++i) EXPECT_LE(sel[i - 1].flops(), sel[i].flops());
  for (const GemmShape& g : sel) EXPECT_LE(g.flops(), 2e6);
  EXPECT_FALSE(skipped.empty());
  std::vector<GemmShape> grid = GenericGemmGrid(1e9);
  ASSERT_FALSE(grid.empty());
  EXPECT_LE(grid.back().flops(), 1e9);
  EXPECT_EQ(grid.front().m, 16);
}

TEST(ProfilerOptionsTest, DefaultsAndErrors) {
  StatusOr<ProfilerOptions> o = ParseProfilerArgs({"--quick", "--out", "x/y/my-box.json"});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->name, "my-box");
  EXPECT_EQ(o->models.size(), 1u);
  o = ParseProfilerArgs({"--max-message-bytes", "64M", "--micro-batches", "1,4"});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->max_message_bytes, 64LL << 20);
  EXPECT_EQ(o->micro_batches, (std::vector<int>{1, 4}));
  EXPECT_NE(ParseProfilerArgs({"--device", "tpu"}).status().message().find("cpu or cuda"), std::string::npos);
  EXPECT_NE(ParseProfilerArgs({"--reps", "0"}).status().message().find("--reps"), std::string::npos);
  EXPECT_NE(ParseProfilerArgs({"--bogus"}).status().message().find("unknown option"), std::string::npos);
  EXPECT_EQ(ParseProfilerArgs({"--help"}).status().code(), StatusCode::kNotFound);
}

TEST(ProfilerLaunch, WrapsInMpirunUnlessUnderMpi) {
  std::vector<std::string> args = {"--device", "cpu", "--ranks", "2"};
  std::vector<std::string> cmd = ProfileLaunchCommand(args, "/bin/dtplan-profile", false, true, 8);
  std::vector<std::string> want = {"mpirun", "-np", "2", "--allow-run-as-root", "--oversubscribe",
                                   "/bin/dtplan-profile", "--device", "cpu", "--ranks", "2"};
  EXPECT_EQ(cmd, want);
  cmd = ProfileLaunchCommand({"--quick"}, "p", false, false, 4);
  EXPECT_EQ(cmd, (std::vector<std::string>{"mpirun", "-np", "4", "--oversubscribe", "p", "--quick"}));
  cmd = ProfileLaunchCommand({"--quick"}, "p", true, true, 4);
  EXPECT_EQ(cmd, (std::vector<std::string>{"p", "--quick"}));
}

// Run by quick_profile_test.sh after a real 2-rank --quick profile.
TEST(ProfilerWritten, LoadsAndPricesAPlan) {
  const char* path = std::getenv("DT_PROFILE_TO_CHECK");
  if (path == nullptr) GTEST_SKIP() << "DT_PROFILE_TO_CHECK not set (run by quick_profile_test.sh)";
  StatusOr<HardwareProfile> p = LoadProfile(path);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->device.kind, "cpu");
  EXPECT_EQ(p->network.gpus_per_node, 2);
  EXPECT_FALSE(p->compute.gemm_points.empty());
  for (CollKind k : {CollKind::kAllReduce, CollKind::kReduceScatter, CollKind::kAllGather, CollKind::kSendRecv}) {
    ASSERT_EQ(p->network.table(k).intra.size(), 1u) << CollectiveKey(k);
    EXPECT_FALSE(p->network.table(k).intra[0].points.empty());
  }
  StatusOr<ModelSpec> m = LoadModel(std::string(DT_SOURCE_DIR) + "/examples/models/gpt-tiny.json");
  ASSERT_TRUE(m.ok());
  PlanSpec plan;
  plan.tp = 2;
  plan.seq_length = 64;
  plan.flash_attention = false;
  LayerOps ops = TransformerLayerOps(*m, plan, 4);
  double t = ComputeTime(ops.forward, *p) + ComputeTime(ops.backward, *p);
  EXPECT_GT(t, 0);
  EXPECT_TRUE(std::isfinite(t));
  for (const Op& op : ops.forward) {
    if (op.kind == OpKind::kGemm) {
      EXPECT_FALSE(GemmOutsideProfile(op, *p)) << op.name;
    }
  }
  EXPECT_GT(CollectiveTime(CollKind::kAllReduce, 1 << 20, 2, 1, false, *p), 0);
}

}  // namespace
}  // namespace dt
