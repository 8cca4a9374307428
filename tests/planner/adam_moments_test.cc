// bf16 Adam moments (PlanSpec::adam_moment_bytes; Megatron-LM's
// --use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype
// bf16): optimizer memory and the optimizer step's bytes, the plan and case
// fields, Megatron import and export, and dtrun's refusal.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "planner/frameworks/megatron_args.h"
#include "planner/lower/memory_params_for.h"
#include "planner/lower/plan_costs.h"
#include "planner/memory/stage_memory.h"
#include "planner/spec/capabilities.h"
#include "planner/validate/case.h"
#include "tests/planner/test_models.h"

namespace dt {
namespace {

using testing_models::H100;

PlanSpec Plan(const ModelSpec& m, int moments) {
  PlanSpec p;
  p.tp = 2;
  p.pp = 2;
  p.dp = 8;
  p.micro_batch = 1;
  p.num_microbatches = 8;
  p.seq_length = m.seq_length;
  p.sequence_parallel = true;
  p.zero_stage = 1;
  p.adam_moment_bytes = moments;
  p.layers_per_chunk = EvenSplit(m.num_layers, p.pp);
  return p;
}

TEST(AdamMoments, Bf16MomentsShrinkOptimizerStateAndItsStep) {
  const ModelSpec m = testing_models::Llama8B();
  const PlanSpec fp32 = Plan(m, 0), bf16 = Plan(m, 2);
  ASSERT_TRUE(Validate(bf16, m, "plan").ok());
  // fp32 master (4) + m and v (2 x 2) = 8 bytes per parameter, not 12.
  EXPECT_EQ(MemoryParamsFor(H100(), fp32).optimizer_bytes, 12);
  EXPECT_EQ(MemoryParamsFor(H100(), bf16).optimizer_bytes, 8);
  PlanSpec fp32_plan = bf16;
  fp32_plan.precision = Precision::kFp32;  // fp32 weights are their own master: m and v only
  EXPECT_EQ(MemoryParamsFor(H100(), fp32_plan).optimizer_bytes, 4);
  const StageMemory a = EstimateStageMemory(m, fp32, MemoryParamsFor(H100(), fp32), 0, 2);
  const StageMemory b = EstimateStageMemory(m, bf16, MemoryParamsFor(H100(), bf16), 0, 2);
  EXPECT_DOUBLE_EQ(b.optimizer / a.optimizer, 8.0 / 12.0);
  EXPECT_DOUBLE_EQ(b.weights, a.weights);
  EXPECT_LT(b.total, a.total);
  // The step moves 2 x 2 bytes less per moment element each way: 30 -> 22
  // bytes per parameter on the H100 profile (its step overhead aside).
  const ClusterSpec c = testing_models::Cluster(4, 8);
  const double oa = ComputePlanCosts(m, c, fp32, H100()).optimizer[0] - H100().compute.step_overhead_s;
  const double ob = ComputePlanCosts(m, c, bf16, H100()).optimizer[0] - H100().compute.step_overhead_s;
  EXPECT_NEAR((ob - H100().compute.kernel_overhead_s) / (oa - H100().compute.kernel_overhead_s),
              (H100().compute.optimizer_bytes_per_param - 8) / H100().compute.optimizer_bytes_per_param, 1e-9);
}

TEST(AdamMoments, PlanFieldRoundTripsAndCpuExecutesIt) {
  const ModelSpec m = testing_models::Llama8B();
  const PlanSpec p = Plan(m, 2);
  const json j = ToJson(p);
  EXPECT_EQ(j.at("adam_moment_bytes"), 2);
  EXPECT_FALSE(ToJson(Plan(m, 0)).contains("adam_moment_bytes"));  // default plans keep their form
  auto back = PlanFromJson(j, m, "plan");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->adam_moment_bytes, 2);
  EXPECT_NE(Describe(p).find("bf16-moments"), std::string::npos);
  json bad = j;
  bad["adam_moment_bytes"] = 3;
  EXPECT_FALSE(PlanFromJson(bad, m, "plan").ok());
  // dtrun's CPU ranks keep bf16 moments (runtime/optim/adam_moments.h); the
  // CUDA runtime lacks it (with everything else it lacks).
  const auto cpu = MissingFeatures(m, p, RuntimeDevice::kCpu);
  EXPECT_EQ(std::find(cpu.begin(), cpu.end(), Feature::kBf16AdamMoments), cpu.end());
  const auto cuda = MissingFeatures(m, p, RuntimeDevice::kCuda);
  EXPECT_NE(std::find(cuda.begin(), cuda.end(), Feature::kBf16AdamMoments), cuda.end());
  const auto none = MissingFeatures(m, Plan(m, 0), RuntimeDevice::kCuda);
  EXPECT_EQ(std::find(none.begin(), none.end(), Feature::kBf16AdamMoments), none.end());
}

TEST(AdamMoments, MegatronFlagsRoundTripAndMixedDtypesAreRefused) {
  ModelSpec m = testing_models::Llama8B();
  m.vocab = static_cast<int>(MegatronPaddedVocab(m.vocab, 128, 2));
  const PlanSpec p = Plan(m, 2);
  auto flags = MegatronArgs(m, p, true);
  ASSERT_TRUE(flags.ok()) << flags.status().message();
  const std::string line = FormatFlags(*flags);
  EXPECT_NE(line.find("--use-precision-aware-optimizer"), std::string::npos) << line;
  EXPECT_NE(line.find("--exp-avg-dtype bf16"), std::string::npos) << line;
  auto words = SplitCommandLine(line);
  ASSERT_TRUE(words.ok());
  auto job = ImportMegatron(*words, p.world(), "x");
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_EQ(job->plan.adam_moment_bytes, 2);
  auto with = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> w = *SplitCommandLine(FormatFlags(*MegatronArgs(m, Plan(m, 0), true)));
    w.insert(w.end(), extra.begin(), extra.end());
    return ImportMegatron(w, p.world(), "x");
  };
  auto mixed = with({"--use-precision-aware-optimizer", "--exp-avg-dtype", "bf16", "--exp-avg-sq-dtype", "fp32"});
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.status().message().find("--exp-avg-sq-dtype"), std::string::npos) << mixed.status().message();
  EXPECT_FALSE(with({"--use-precision-aware-optimizer", "--main-params-dtype", "fp16"}).ok());
  auto grads = with({"--use-precision-aware-optimizer", "--main-grads-dtype", "bf16"});
  ASSERT_TRUE(grads.ok()) << grads.status().message();
  EXPECT_EQ(grads->plan.grad_bytes, 2);
  EXPECT_EQ(grads->plan.adam_moment_bytes, 0);
  auto ignored = with({"--exp-avg-dtype", "bf16", "--exp-avg-sq-dtype", "bf16"});  // no switch: no effect
  ASSERT_TRUE(ignored.ok());
  EXPECT_EQ(ignored->plan.adam_moment_bytes, 0);
  EXPECT_FALSE(ignored->notes.empty());
}

TEST(AdamMoments, CasesReadTheField) {
  auto text = [](const std::string& moments) {
    return R"({"cases": [{"id": "c", "hardware": {"gpu": "H100"},
      "model": {"family": "llama", "num_layers": 4, "hidden_size": 1024, "num_attention_heads": 8,
                "vocab_size": 32000, "seq_length": 1024},
      "plan": {"tp": 1, "pp": 1, "dp": 8, "global_batch_size": 32, "adam_moments": ")" +
           moments + R"("}, "measured": {"iteration_time_s": 1.0}}]})";
  };
  auto ok = JsonCasesFromText(text("bf16"), "t.json");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_TRUE((*ok)[0].invalid.empty()) << (*ok)[0].invalid;
  EXPECT_EQ((*ok)[0].constraints.adam_moment_bytes, 2);
  auto bad = JsonCasesFromText(text("fp8"), "t.json");
  ASSERT_TRUE(bad.ok());
  EXPECT_NE((*bad)[0].invalid.find("adam_moments"), std::string::npos) << (*bad)[0].invalid;
}

}  // namespace
}  // namespace dt
