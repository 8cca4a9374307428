// The capability table (planner/spec/capabilities.h) and the promise built on
// it: dtplan --device cpu never emits a plan the CPU runtime cannot execute.
#include "planner/spec/capabilities.h"

#include <gtest/gtest.h>

#include <set>

#include "planner/profile/profile.h"
#include "planner/search/enumerate.h"
#include "planner/search/search.h"
#include "tests/planner/test_models.h"

namespace dt {
namespace {

TEST(Capabilities, TableListsEveryFeatureOnce) {
  std::set<int> seen;
  for (const Capability& c : CapabilityTable()) {
    EXPECT_TRUE(seen.insert(static_cast<int>(c.feature)).second) << c.name << " listed twice";
    EXPECT_GT(std::string(c.name).size(), 3u);
    EXPECT_GT(std::string(c.fix).size(), 3u) << c.name << " has no fix text";
  }
  for (int f = 0; f <= static_cast<int>(Feature::kDropout); ++f)
    EXPECT_TRUE(seen.count(f)) << "feature " << f << " missing from the table";
}

TEST(Capabilities, RefusalNamesFeatureDeviceAndFix) {
  ModelSpec m = testing_models::Gpt(64, 4, 2);
  PlanSpec p;
  p.seq_length = 64;
  p.layers_per_chunk = {2};
  p.flash_attention = true;  // the CPU runtime runs unfused attention
  p.dropout = false;
  ASSERT_FALSE(Executes(RuntimeDevice::kCpu, Feature::kFlashAttention));
  Status s = CheckExecutable(m, p, RuntimeDevice::kCpu);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("CPU runtime"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(CapabilityOf(Feature::kFlashAttention).name), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(CapabilityOf(Feature::kFlashAttention).fix), std::string::npos) << s.message();
  p.flash_attention = false;
  EXPECT_TRUE(CheckExecutable(m, p, RuntimeDevice::kCpu).ok());
  EXPECT_EQ(MissingSummary(m, p, RuntimeDevice::kCpu), "");
}

TEST(Capabilities, FeaturesUsedFollowModelAndPlan) {
  ModelSpec m = testing_models::Llama8B();
  PlanSpec p;
  p.cp = 2;
  p.zero_stage = 3;
  p.flash_attention = false;
  p.dropout = true;  // Llama never uses dropout
  std::set<Feature> used;
  for (Feature f : FeaturesUsed(m, p)) used.insert(f);
  for (Feature f : {Feature::kTrainingStep, Feature::kLlamaFamily, Feature::kGroupedQueryAttention,
                    Feature::kUntiedEmbeddings, Feature::kZero3, Feature::kContextParallel})
    EXPECT_TRUE(used.count(f)) << CapabilityOf(f).name;
  for (Feature f : {Feature::kGptFamily, Feature::kZero2, Feature::kFlashAttention, Feature::kDropout})
    EXPECT_FALSE(used.count(f)) << CapabilityOf(f).name;
}

// A model file's "dropout" key: on or off is within the GPT layout (the CPU
// runtime trains either way: off uses no dropout feature); dropout in a Llama
// model is a layout the runtime's Llama layer does not have.
TEST(Capabilities, DropoutKeyOfAModel) {
  PlanSpec p;
  p.seq_length = 64;
  p.layers_per_chunk = {2};
  p.flash_attention = false;
  ModelSpec gpt = testing_models::Gpt(64, 4, 2);
  for (bool on : {false, true}) {
    gpt.dropout_set = on;
    std::set<Feature> used;
    for (Feature f : FeaturesUsed(gpt, p)) used.insert(f);
    EXPECT_FALSE(used.count(Feature::kModelVariant)) << "gpt dropout " << on;
    EXPECT_EQ(used.count(Feature::kDropout), on ? 1u : 0u) << "gpt dropout " << on;
    EXPECT_TRUE(CheckExecutable(gpt, p, RuntimeDevice::kCpu).ok()) << "gpt dropout " << on;
  }
  ModelSpec llama = testing_models::Llama8B();
  llama.dropout_set = false;
  EXPECT_TRUE(llama.FamilyLayout());
  llama.dropout_set = true;
  EXPECT_FALSE(llama.FamilyLayout());
  EXPECT_FALSE(CheckExecutable(llama, p, RuntimeDevice::kCpu).ok());
}

// Property: over models, CPU clusters and every fixed ZeRO stage / CP degree,
// each plan the enumeration or the search emits for --device cpu passes the
// CPU column of the table; every plan it leaves out for that reason is
// counted under a rejection reason that names the feature.
TEST(Capabilities, CpuSearchEmitsOnlyExecutablePlans) {
  auto hw = LoadProfile("cpu-generic");
  ASSERT_TRUE(hw.ok()) << hw.status().message();
  ModelSpec gpt = testing_models::Gpt(64, 4, 4);
  gpt.vocab = 256;
  gpt.seq_length = gpt.max_position = 64;
  ModelSpec llama = testing_models::Llama8B();
  llama.num_layers = 4, llama.hidden = 64, llama.heads = 4, llama.kv_heads = 2, llama.ffn_hidden = 128;
  llama.vocab = 256, llama.seq_length = llama.max_position = 64;
  for (const ModelSpec& m : {gpt, llama}) {
    for (int nodes : {1, 2}) {
      ClusterSpec c{nodes, 2, "cpu"};
      for (int zero = -1; zero <= 3; ++zero) {
        for (int cp : {0, 1, 2}) {
          SearchConstraints k;
          k.global_batch = 16;
          k.seq_length = 64;
          k.flash_attention = false;
          k.dropout = false;
          if (zero >= 0) k.zero_stage = zero;
          if (cp > 0) k.cp = cp;
          auto e = EnumeratePlans(m, c, k);
          if (!e.ok()) {  // a model the CPU runtime lacks is refused up front, naming it
            EXPECT_NE(e.status().message().find("CPU runtime"), std::string::npos) << e.status().message();
            EXPECT_FALSE(CheckExecutable(m, PlanSpec{}, RuntimeDevice::kCpu).ok());
            continue;
          }
          for (const PlanSpec& p : e->plans)
            EXPECT_TRUE(CheckExecutable(m, p, RuntimeDevice::kCpu).ok()) << Describe(p);
          for (const auto& [reason, n] : e->plan_rejects)
            if (reason.find("CPU runtime") != std::string::npos) {
              EXPECT_GT(n, 0);
            }
          SearchOptions so;
          so.top = 3;
          so.threads = 1;
          auto r = SearchPlans(m, c, *hw, k, so);
          ASSERT_TRUE(r.ok()) << r.status().message();
          for (const RankedPlan& rp : r->top)
            EXPECT_TRUE(CheckExecutable(m, rp.plan, RuntimeDevice::kCpu).ok()) << Describe(rp.plan);
        }
      }
    }
  }
}

// GPU plans are not filtered (they are advice for GPU frameworks) but every
// one is reported as not executable by dtrun while the CUDA column says so.
TEST(Capabilities, GpuPlansAreNotFilteredButFlagged) {
  ModelSpec m = testing_models::Gpt(1024, 16, 4);
  ClusterSpec c{1, 8, "gpu"};
  SearchConstraints k;
  k.global_batch = 64;
  k.seq_length = 2048;
  auto e = EnumeratePlans(m, c, k);
  ASSERT_TRUE(e.ok());
  bool zero3 = false;
  for (const PlanSpec& p : e->plans) zero3 |= p.zero_stage == 3;
  EXPECT_TRUE(zero3);
  if (!Executes(RuntimeDevice::kCuda, Feature::kTrainingStep)) {
    EXPECT_FALSE(CheckExecutable(m, e->plans.front(), RuntimeDevice::kCuda).ok());
  }
}

}  // namespace
}  // namespace dt
