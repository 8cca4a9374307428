// Expert capacity (PlanSpec::moe_capacity_factor, moe_pad_to_capacity;
// Megatron-LM's --moe-expert-capacity-factor and
// --moe-pad-expert-input-to-capacity): the allowance it prices, its memory,
// the rules a plan must keep, the plan file and plan line, dtrun's refusal,
// and the Megatron-LM round trip.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "planner/cost/moe_ops.h"
#include "planner/frameworks/megatron_args.h"
#include "planner/lower/simulate.h"
#include "planner/profile/profile.h"
#include "planner/spec/capabilities.h"
#include "tests/planner/test_models.h"

namespace dt {
namespace {

ModelSpec Moe() { return testing_models::Mixtral8Layers(); }

PlanSpec Plan(const ModelSpec& m, int ep, double capacity, bool pad) {
  PlanSpec p;
  p.dp = 8;
  p.ep = ep;
  p.micro_batch = 1;
  p.num_microbatches = 8;
  p.seq_length = m.seq_length;
  p.zero_stage = 1;
  p.moe_capacity_factor = capacity;
  p.moe_pad_to_capacity = pad;
  p.layers_per_chunk = {m.num_layers};
  return p;
}

// The rows' price without the eager MoE block's host time, whose
// synchronisation a padded capacity removes (moe_host_test.cc).
const HardwareProfile& H100() { return testing_models::H100WithoutHostTime(); }

double StepSeconds(const ModelSpec& m, const PlanSpec& p) {
  ClusterSpec c;
  c.nodes = 1;
  c.gpus_per_node = p.world();
  auto r = SimulatePlan(m, c, p, H100());
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? r->step_time_s : 0;
}

TEST(MoeCapacity, BoundsOrSetsTheLoadAllowance) {
  const ModelSpec m = Moe();
  // Dropless: the 1.25 allowance with ep > 1, 1 with ep 1 or forced balance.
  EXPECT_DOUBLE_EQ(ExpertLoadImbalance(Plan(m, 8, 0, false)), kExpertLoadImbalance);
  EXPECT_DOUBLE_EQ(ExpertLoadImbalance(Plan(m, 1, 0, false)), 1.0);
  // A capacity without padding caps the busiest rank's rows; above the
  // allowance it changes nothing.
  EXPECT_DOUBLE_EQ(ExpertLoadImbalance(Plan(m, 8, 1.0, false)), 1.0);
  EXPECT_DOUBLE_EQ(ExpertLoadImbalance(Plan(m, 8, 1.1, false)), 1.1);
  EXPECT_DOUBLE_EQ(ExpertLoadImbalance(Plan(m, 8, 2.0, false)), kExpertLoadImbalance);
  EXPECT_DOUBLE_EQ(ExpertLoadImbalance(Plan(m, 1, 0.5, false)), 0.5);  // half the copies dropped
  // Padded, every expert takes exactly its capacity, with ep 1 or forced balance too.
  EXPECT_DOUBLE_EQ(ExpertLoadImbalance(Plan(m, 8, 1.0, true)), 1.0);
  EXPECT_DOUBLE_EQ(ExpertLoadImbalance(Plan(m, 8, 2.0, true)), 2.0);
  EXPECT_DOUBLE_EQ(ExpertLoadImbalance(Plan(m, 1, 1.5, true)), 1.5);
  PlanSpec forced = Plan(m, 8, 2.0, true);
  forced.force_balanced_routing = true;
  EXPECT_DOUBLE_EQ(ExpertLoadImbalance(forced), 2.0);
  forced.moe_pad_to_capacity = false;
  EXPECT_DOUBLE_EQ(ExpertLoadImbalance(forced), 1.0);
}

TEST(MoeCapacity, PricesTimeAndMemoryByTheRowsComputed) {
  const ModelSpec m = Moe();
  const double dropless = StepSeconds(m, Plan(m, 8, 0, false));
  const double cap1 = StepSeconds(m, Plan(m, 8, 1.0, true));
  const double cap2 = StepSeconds(m, Plan(m, 8, 2.0, true));
  PlanSpec balanced = Plan(m, 8, 0, false);
  balanced.force_balanced_routing = true;
  // Capacity 1 padded computes the balanced rows: the forced-balance price.
  EXPECT_NEAR(cap1, StepSeconds(m, balanced), 1e-9 * cap1);
  EXPECT_LT(cap1, dropless);
  EXPECT_GT(cap2, dropless);  // twice the balanced rows, real or padding, beyond the 1.25 allowance
  ClusterSpec c;
  c.nodes = 1;
  c.gpus_per_node = 8;
  const double mem1 = SimulatePlan(m, c, Plan(m, 8, 1.0, true), H100())->peak_memory_bytes;
  const double mem2 = SimulatePlan(m, c, Plan(m, 8, 2.0, true), H100())->peak_memory_bytes;
  EXPECT_GT(mem2, mem1);  // the expert activations follow the rows
}

TEST(MoeCapacity, FollowsMegatronsRules) {
  const ModelSpec m = Moe();
  EXPECT_TRUE(Validate(Plan(m, 8, 1.25, false), m, "plan").ok());
  EXPECT_TRUE(Validate(Plan(m, 8, 1.0, true), m, "plan").ok());
  auto msg = [&](const PlanSpec& p, const ModelSpec& mm) { return Validate(p, mm, "plan").message(); };
  EXPECT_NE(msg(Plan(m, 8, -1, false), m).find(">= 0"), std::string::npos);
  EXPECT_NE(msg(Plan(m, 8, std::numeric_limits<double>::quiet_NaN(), false), m).find("finite"), std::string::npos);
  EXPECT_NE(msg(Plan(m, 8, 0, true), m).find("needs moe_capacity_factor > 0"), std::string::npos);
  PlanSpec dense = Plan(m, 1, 1.0, false);
  EXPECT_NE(msg(dense, testing_models::Llama8B()).find("mixture-of-experts"), std::string::npos);
  PlanSpec dedup = Plan(m, 8, 1.0, false);
  dedup.moe_dispatcher = MoeDispatcher::kDeduplicated;
  EXPECT_NE(msg(dedup, m).find("all-to-all dispatcher"), std::string::npos);
}

TEST(MoeCapacity, PlanFilesLinesAndMegatronCarryIt) {
  const ModelSpec m = Moe();
  const PlanSpec p = Plan(m, 8, 1.5, true);
  ASSERT_TRUE(Validate(p, m, "plan").ok());
  auto back = PlanFromJson(ToJson(p), m, "test");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_DOUBLE_EQ(back->moe_capacity_factor, 1.5);
  EXPECT_TRUE(back->moe_pad_to_capacity);
  EXPECT_NE(Describe(p).find("capacity=1.5(padded)"), std::string::npos);
  EXPECT_FALSE(ToJson(Plan(m, 8, 0, false)).contains("moe_capacity_factor"));
  // dtrun drops on CPU where each rank holds whole sequences (tp = cp = 1);
  // with the sequence split over TP the plan is refused by name.
  std::vector<Feature> missing = MissingFeatures(m, p, RuntimeDevice::kCpu);
  EXPECT_EQ(std::find(missing.begin(), missing.end(), Feature::kMoeCapacity), missing.end());
  EXPECT_EQ(std::find(missing.begin(), missing.end(), Feature::kMoeCapacitySharded), missing.end());
  PlanSpec sharded = p;
  sharded.tp = 2;
  sharded.dp = 4;
  sharded.sequence_parallel = true;
  missing = MissingFeatures(m, sharded, RuntimeDevice::kCpu);
  EXPECT_NE(std::find(missing.begin(), missing.end(), Feature::kMoeCapacitySharded), missing.end());
  EXPECT_NE(CheckExecutable(m, sharded, RuntimeDevice::kCpu).message().find("moe_capacity_factor with tp=2"),
            std::string::npos);
  // Megatron-LM: exported as its two flags and read back.
  auto flags = MegatronArgs(m, p, true);
  ASSERT_TRUE(flags.ok()) << flags.status().message();
  const std::string line = FormatFlags(*flags);
  EXPECT_NE(line.find("--moe-expert-capacity-factor 1.5"), std::string::npos) << line;
  EXPECT_NE(line.find("--moe-pad-expert-input-to-capacity"), std::string::npos) << line;
  auto words = SplitCommandLine(line);
  ASSERT_TRUE(words.ok());
  auto job = ImportMegatron(*words, p.world(), "x");
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_DOUBLE_EQ(job->plan.moe_capacity_factor, 1.5);
  EXPECT_TRUE(job->plan.moe_pad_to_capacity);
  EXPECT_EQ(Describe(job->plan), Describe(p));
  // A negative factor is Megatron-LM's "none" (dropless); 0 would drop every token.
  auto dropless = SplitCommandLine(FormatFlags(*MegatronArgs(m, Plan(m, 8, 0, false), true)) +
                                   " --moe-expert-capacity-factor -1");
  ASSERT_TRUE(dropless.ok());
  auto none = ImportMegatron(*dropless, p.world(), "x");
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_EQ(none->plan.moe_capacity_factor, 0.0);
  auto zero = SplitCommandLine(FormatFlags(*MegatronArgs(m, Plan(m, 8, 0, false), true)) +
                               " --moe-expert-capacity-factor 0");
  ASSERT_TRUE(zero.ok());
  EXPECT_NE(ImportMegatron(*zero, p.world(), "x").status().message().find("drop every routed token"),
            std::string::npos);
}

}  // namespace
}  // namespace dt
