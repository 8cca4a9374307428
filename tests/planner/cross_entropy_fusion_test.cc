// The loss kernel (PlanSpec::cross_entropy_fusion, Megatron-LM's
// --cross-entropy-loss-fusion): plan files, the Megatron round trip in both
// directions, dtrun's refusal of the unfused form, what a plan pays for it,
// the search, and the validation cases' defaults by source.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "planner/frameworks/megatron_args.h"
#include "planner/lower/simulate.h"
#include "planner/profile/profile.h"
#include "planner/search/search.h"
#include "planner/spec/capabilities.h"
#include "planner/validate/case.h"
#include "tests/planner/test_cases.h"
#include "tests/planner/test_models.h"
#include "tests/planner/test_profiles.h"

namespace dt {
namespace {

using testing_profiles::A100;

PlanSpec Dp8(const ModelSpec& m, bool fused) {
  PlanSpec p;
  p.dp = 8;
  p.micro_batch = 4;
  p.num_microbatches = 4;
  p.seq_length = 2048;
  p.cross_entropy_fusion = fused;
  p.layers_per_chunk = {m.num_layers};
  return p;
}

TEST(CrossEntropyFusion, PlanFilesDescribeAndDtrun) {
  const ModelSpec m = testing_models::Llama8B();
  const PlanSpec fused = Dp8(m, true), unfused = Dp8(m, false);
  ASSERT_TRUE(Validate(unfused, m, "plan").ok()) << Validate(unfused, m, "plan").message();
  EXPECT_FALSE(ToJson(fused).contains("cross_entropy_loss_fusion"));  // absent: fused
  auto back = PlanFromJson(ToJson(unfused), m, "test");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_FALSE(back->cross_entropy_fusion);
  EXPECT_TRUE(PlanFromJson(ToJson(fused), m, "test")->cross_entropy_fusion);
  EXPECT_NE(Describe(unfused).find("unfused-ce"), std::string::npos);
  EXPECT_EQ(Describe(fused).find("unfused-ce"), std::string::npos);
  for (RuntimeDevice d : {RuntimeDevice::kCpu, RuntimeDevice::kCuda}) {
    const std::vector<Feature> missing = MissingFeatures(m, unfused, d);
    EXPECT_NE(std::find(missing.begin(), missing.end(), Feature::kUnfusedCrossEntropy), missing.end());
    const std::vector<Feature> none = MissingFeatures(m, fused, d);
    EXPECT_EQ(std::find(none.begin(), none.end(), Feature::kUnfusedCrossEntropy), none.end());
  }
}

// Export writes --cross-entropy-loss-fusion for fused plans only (Megatron's
// default is the unfused loss), and import reads its absence as unfused.
TEST(CrossEntropyFusion, MegatronRoundTripBothWays) {
  const ModelSpec m = testing_models::Llama8B();
  for (bool fused : {true, false}) {
    const PlanSpec p = Dp8(m, fused);
    auto flags = MegatronArgs(m, p, true);
    ASSERT_TRUE(flags.ok()) << flags.status().message();
    const std::string line = FormatFlags(*flags);
    EXPECT_EQ(line.find("--cross-entropy-loss-fusion") != std::string::npos, fused) << line;
    auto words = SplitCommandLine(line);
    ASSERT_TRUE(words.ok());
    auto job = ImportMegatron(*words, p.world(), "x");
    ASSERT_TRUE(job.ok()) << job.status().message();
    EXPECT_EQ(job->plan.cross_entropy_fusion, fused);
    EXPECT_EQ(Describe(job->plan), Describe(p));
    // Both implementations of the fused loss are one pass; others are refused.
    std::vector<std::string> with_impl = *words;
    with_impl.push_back("--cross-entropy-fusion-impl");
    with_impl.push_back("te");
    EXPECT_TRUE(ImportMegatron(with_impl, p.world(), "x").ok());
    with_impl.back() = "triton";
    auto bad = ImportMegatron(with_impl, p.world(), "x");
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find("--cross-entropy-fusion-impl"), std::string::npos);
  }
}

// The unfused loss costs a plan its extra passes over the logits and
// nothing else: slower by at most those bytes at a quarter of HBM
// bandwidth plus their launches, and never faster.
TEST(CrossEntropyFusion, TheUnfusedLossCostsItsExtraPasses) {
  const ModelSpec m = testing_models::Llama8B();
  ClusterSpec c;
  c.gpus_per_node = 8;
  auto fused = SimulatePlan(m, c, Dp8(m, true), A100());
  auto unfused = SimulatePlan(m, c, Dp8(m, false), A100());
  ASSERT_TRUE(fused.ok() && unfused.ok());
  const double logits = 4.0 * 2048 * m.vocab * 4;  // per rank and step: mbs x seq x vocab x m
  const double extra_bytes = logits * ((38 - 10) + (14 - 6));
  const double dt = unfused->step_time_s - fused->step_time_s;
  EXPECT_GT(dt, extra_bytes / A100().device.memory_bandwidth_Bps);
  EXPECT_LT(dt, extra_bytes / (0.25 * A100().device.memory_bandwidth_Bps) + 4 * 8 * A100().compute.host_overhead_s);
  EXPECT_DOUBLE_EQ(unfused->peak_memory_bytes, fused->peak_memory_bytes);
}

TEST(CrossEntropyFusion, SearchKeepsTheChoice) {
  const ModelSpec m = testing_models::Llama8B();
  ClusterSpec c;
  c.gpus_per_node = 8;
  SearchConstraints k;
  k.global_batch = 64;
  k.seq_length = 2048;
  k.cross_entropy_fusion = false;
  SearchOptions so;
  so.top = 20;
  so.threads = 1;
  auto r = SearchPlans(m, c, A100(), k, so);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_FALSE(r->top.empty());
  for (const RankedPlan& rp : r->top) EXPECT_FALSE(rp.plan.cross_entropy_fusion) << Describe(rp.plan);
}

// Validation cases: fused unless the case says so or its software had no
// fused loss (Megatron-LM of SC21, NeMo 1.x's performance pages).
TEST(CrossEntropyFusion, ValidationCasesDefaultBySource) {
  struct Row {
    std::string source, extra;
    bool fused;
  } rows[] = {{"Narayanan et al. SC21, Table 1", "", false},
              {"NVIDIA/NeMo docs/source/performance/performance_summary.md, 24.07", "", false},
              {"NVIDIA dgxc-benchmarking v25.02", "", true},
              {"NVIDIA dgxc-benchmarking v25.02", R"(, "cross_entropy_loss_fusion": false)", false},
              {"Narayanan et al. SC21", R"(, "cross_entropy_loss_fusion": true)", true}};
  for (const Row& r : rows)
    EXPECT_EQ(testing_cases::OneCaseConstraints(r.source, R"(, "tp": 1, "pp": 1, "dp": 8)" + r.extra, 2)
                  .cross_entropy_fusion,
              r.fused)
        << r.source << r.extra;
}

}  // namespace
}  // namespace dt
