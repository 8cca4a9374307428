// The eager MoE block's host time (HardwareProfile compute.moe_host,
// measured by scripts/moe-host-overhead.py) and the dropless dispatcher's
// host synchronisation (Op::host_sync), priced by plan_costs.cc's launch
// queue; and PlanSpec::moe_router_cuda_graph, which takes the router's part
// away. What the pricing may and may not do: never make a step faster, never
// add more than the host time itself, show it where the device has little to
// hide it behind, and nothing on CPU plans (dtrun) or without the profile's
// measurement.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "planner/cost/moe_ops.h"
#include "planner/frameworks/megatron_args.h"
#include "planner/lower/plan_costs.h"
#include "planner/profile/profile.h"
#include "planner/spec/capabilities.h"
#include "tests/planner/megatron_round_trip.h"
#include "tests/planner/test_models.h"

namespace dt {
namespace {

using testing_models::H100;
using testing_models::H100WithoutMoeHost;

// Qwen3-30B-A3B's MoE width on a small model: little device work per layer.
ModelSpec Moe() { return testing_models::SmallMoe("moe-host", 2048, 4096, 768, 0); }

PlanSpec Plan(const ModelSpec& m, int mbs) {
  PlanSpec p;
  p.dp = 8;
  p.ep = 8;
  p.micro_batch = mbs;
  p.num_microbatches = 4;
  p.seq_length = m.seq_length;
  p.zero_stage = 1;
  p.flash_attention = true;
  p.layers_per_chunk = {m.num_layers};
  return p;
}

struct Chunk {
  double fwd = 0, bwd = 0;  // one microbatch through the chunk's layers
};
Chunk Costs(const ModelSpec& m, const PlanSpec& p, const HardwareProfile& hw) {
  const PlanCosts c = ComputePlanCosts(m, testing_models::Cluster(1, 8), p, hw);
  return {c.chunks[0].fwd_compute + c.chunks[0].fwd_comm, c.chunks[0].bwd_compute + c.chunks[0].bwd_comm};
}
// What the MoE block's host time adds to one microbatch's chunk.
Chunk Added(const ModelSpec& m, const PlanSpec& p) {
  const Chunk with = Costs(m, p, H100()), without = Costs(m, p, H100WithoutMoeHost());
  return {with.fwd - without.fwd, with.bwd - without.bwd};
}

TEST(MoeHost, TheBundledH100ProfileCarriesTheMeasurement) {
  const MoeHostProfile& mh = H100().compute.moe_host;
  ASSERT_TRUE(mh.available());
  // 5.67 ms per forward + backward measured; split 51 / 13 / 36 %.
  EXPECT_NEAR(mh.router_s + mh.dispatch_s + mh.backward_s, 5.67e-3, 0.01e-3);
  EXPECT_NE(mh.note.find("moe-host-overhead"), std::string::npos);
}

TEST(MoeHost, NeverFasterAndNeverMoreThanTheHostTimeItself) {
  const ModelSpec m = Moe();
  const MoeHostProfile& mh = H100().compute.moe_host;
  int checked = 0;
  for (int mbs : {1, 2, 4, 8}) {
    for (int variant = 0; variant < 3; ++variant) {
      PlanSpec p = Plan(m, mbs);
      if (variant == 1) p.moe_capacity_factor = 1.0, p.moe_pad_to_capacity = true;
      if (variant == 2) p.moe_router_cuda_graph = true;
      SCOPED_TRACE("mbs " + std::to_string(mbs) + " variant " + std::to_string(variant));
      ASSERT_TRUE(Validate(p, m, "plan").ok()) << Validate(p, m, "plan").message();
      const Chunk a = Added(m, p);
      EXPECT_GE(a.fwd, -1e-12);
      EXPECT_GE(a.bwd, -1e-12);
      EXPECT_LE(a.fwd, m.num_layers * (mh.router_s + mh.dispatch_s) * (1 + 1e-9));
      EXPECT_LE(a.bwd, m.num_layers * mh.backward_s * (1 + 1e-9));
      ++checked;
    }
  }
  EXPECT_EQ(checked, 12);
}

TEST(MoeHost, ExposedWhereTheDeviceHasLittleToHideItBehind) {
  const ModelSpec m = Moe();
  const Chunk small = Added(m, Plan(m, 1)), large = Added(m, Plan(m, 8));
  // One microbatch of 4096 tokens: the forward's device work per layer is
  // below the 3.6 ms its MoE block keeps the host busy, and the dispatcher's
  // synchronisation stops the host from working ahead: most of it shows.
  EXPECT_GT(small.fwd, 0.5 * m.num_layers * (H100().compute.moe_host.router_s));
  // Eight times the tokens: the device has more to hide it behind.
  EXPECT_LT(large.fwd, small.fwd);
  EXPECT_LE(large.bwd, small.bwd + 1e-12);
}

TEST(MoeHost, PaddedCapacityNeedsNoSynchronisation) {
  const ModelSpec m = Moe();
  PlanSpec dropless = Plan(m, 1), padded = Plan(m, 1);
  padded.moe_capacity_factor = 1.0;
  padded.moe_pad_to_capacity = true;
  auto sync_of = [&](const PlanSpec& p) {
    for (const Op& op : MoeMlpForward(m, p, 2))
      if (std::strcmp(op.name, "moe_permute") == 0) return op.host_sync;
    ADD_FAILURE() << "no moe_permute";
    return false;
  };
  EXPECT_TRUE(sync_of(dropless));
  EXPECT_FALSE(sync_of(padded));  // every count is the capacity, known in advance
  dropless.force_balanced_routing = true;  // the same rows as capacity 1 padded
  EXPECT_LT(Added(m, padded).fwd, Added(m, dropless).fwd);
  // The host's shares of each part sum to one block's time.
  for (bool fwd : {true, false}) {
    double share[4] = {0, 0, 0, 0};
    for (const Op& op : fwd ? MoeMlpForward(m, dropless, 2) : MoeMlpBackward(m, dropless, 2))
      share[static_cast<int>(op.moe_host)] += op.moe_host_share;
    if (fwd) {
      EXPECT_NEAR(share[static_cast<int>(Op::MoeHostPart::kRouter)], 1.0, 1e-12);
      EXPECT_NEAR(share[static_cast<int>(Op::MoeHostPart::kDispatch)], 1.0, 1e-12);
    } else {
      EXPECT_NEAR(share[static_cast<int>(Op::MoeHostPart::kBackward)], 1.0, 1e-12);
    }
    EXPECT_EQ(share[static_cast<int>(Op::MoeHostPart::kNone)], 0.0);
  }
}

TEST(MoeHost, RouterGraphsTakeTheRouterPartAway) {
  const ModelSpec m = Moe();
  PlanSpec graphed = Plan(m, 1);
  graphed.moe_router_cuda_graph = true;
  EXPECT_LT(Added(m, graphed).fwd, Added(m, Plan(m, 1)).fwd);
  EXPECT_DOUBLE_EQ(Added(m, graphed).bwd, Added(m, Plan(m, 1)).bwd);
}

TEST(MoeHost, CpuPlansAndDenseModelsAreUnchanged) {
  // dtrun (CPU plans) runs no Megatron MoE block: a CPU profile that carried
  // the measurement would price the same.
  HardwareProfile cpu = testing_models::LocalCpu();
  HardwareProfile cpu_with = cpu;
  cpu_with.compute.moe_host = H100().compute.moe_host;
  const ModelSpec m = Moe();
  PlanSpec p = Plan(m, 1);
  p.dp = 2;
  p.ep = 2;
  p.flash_attention = false;
  const PlanCosts a = ComputePlanCosts(m, testing_models::Cluster(1, 2), p, cpu);
  const PlanCosts b = ComputePlanCosts(m, testing_models::Cluster(1, 2), p, cpu_with);
  EXPECT_EQ(a.chunks[0].fwd_compute, b.chunks[0].fwd_compute);
  EXPECT_EQ(a.chunks[0].bwd_compute, b.chunks[0].bwd_compute);
  // A dense model has no MoE block.
  const ModelSpec dense = testing_models::Gpt(2048, 16, 4);
  PlanSpec d = Plan(dense, 1);
  d.ep = 1;
  EXPECT_EQ(Costs(dense, d, H100()).fwd, Costs(dense, d, H100WithoutMoeHost()).fwd);
}

TEST(MoeHost, ProfileJsonRoundTripAndBounds) {
  const HardwareProfile& h = H100();
  auto back = ProfileFromJson(ToJson(h), "round trip");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->compute.moe_host, h.compute.moe_host);
  json j = ToJson(h);
  j["compute"]["moe_host"]["router_s"] = -1e-3;
  auto bad = ProfileFromJson(j, "bad");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("moe_host"), std::string::npos);
}

TEST(MoeRouterCudaGraph, PlanFilesMegatronFlagsAndTheCapabilityTable) {
  const ModelSpec m = Moe();
  PlanSpec p = Plan(m, 1);
  p.moe_router_cuda_graph = true;
  ASSERT_TRUE(Validate(p, m, "plan").ok());
  auto back = PlanFromJson(ToJson(p), m, "plan");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(back->moe_router_cuda_graph);
  EXPECT_FALSE(ToJson(Plan(m, 1)).contains("moe_router_cuda_graph"));
  EXPECT_NE(Describe(p).find("router-graph"), std::string::npos);
  // A dense model has no router to graph.
  const ModelSpec dense = testing_models::Gpt(2048, 16, 4);
  PlanSpec d = Plan(dense, 1);
  d.ep = 1;
  d.moe_router_cuda_graph = true;
  EXPECT_FALSE(Validate(d, dense, "plan").ok());
  // dtrun launches no CUDA graphs: refused by name on CPUs.
  const std::vector<Feature> missing = MissingFeatures(m, p, RuntimeDevice::kCpu);
  EXPECT_NE(std::find(missing.begin(), missing.end(), Feature::kMoeRouterCudaGraph), missing.end());
  // Megatron-LM: --cuda-graph-impl transformer_engine --cuda-graph-scope
  // moe_router moe_preprocess, and read back.
  auto job = testing_models::MegatronRoundTrip(m, p);
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_TRUE(job->plan.moe_router_cuda_graph);
  auto plain = testing_models::MegatronRoundTrip(m, Plan(m, 1));
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_FALSE(plain->plan.moe_router_cuda_graph);
}

TEST(MoeRouterCudaGraph, ImportRefusesGraphsItDoesNotPrice) {
  const ModelSpec m = Moe();
  auto flags = MegatronArgs(m, Plan(m, 1), true);
  ASSERT_TRUE(flags.ok()) << flags.status().message();
  const std::string base = FormatFlags(*flags);
  auto import = [&](const std::string& extra) {
    auto words = SplitCommandLine(base + " " + extra);
    EXPECT_TRUE(words.ok());
    return ImportMegatron(*words, 8, "x");
  };
  for (const char* bad : {"--cuda-graph-impl local", "--cuda-graph-impl transformer_engine",
                          "--cuda-graph-impl transformer_engine --cuda-graph-scope full",
                          "--cuda-graph-impl transformer_engine --cuda-graph-scope moe_router"}) {
    SCOPED_TRACE(bad);
    auto job = import(bad);
    ASSERT_FALSE(job.ok());
    EXPECT_NE(job.status().message().find("cuda-graph"), std::string::npos) << job.status().message();
  }
  auto attn = import("--cuda-graph-impl transformer_engine --cuda-graph-scope attn");
  ASSERT_TRUE(attn.ok()) << attn.status().message();
  EXPECT_FALSE(attn->plan.moe_router_cuda_graph);
  auto both = import("--cuda-graph-impl transformer_engine --cuda-graph-scope attn moe_router moe_preprocess");
  ASSERT_TRUE(both.ok()) << both.status().message();
  EXPECT_TRUE(both->plan.moe_router_cuda_graph);
}

}  // namespace
}  // namespace dt
