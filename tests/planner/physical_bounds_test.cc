// Physical bounds (issue "Predictions that hold on data they were not tuned
// on"): over random plans of the search space, every prediction respects
//   step time >= hardware FLOPs per device / peak FLOP/s (a causal attention
//                core counted at the half of its square a kernel computes)
//   step time >= weight bytes each device must stream from memory / memory bandwidth
//   step time >= bytes each node must push through its NICs for the
//                gradient (and ZeRO-3 parameter) traffic / the node's best
//                inter-node bus bandwidth in the profile
//   memory    >= weights + gradients + optimizer state for the sharding chosen.
// Each bound is a resource's unavoidable work over its peak rate: a plan
// predicted faster than one of them is physically impossible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "planner/cost/flops.h"
#include "planner/lower/group_topology.h"
#include "planner/lower/memory_params_for.h"
#include "planner/lower/simulate.h"
#include "planner/memory/param_count.h"
#include "planner/cost/compute_cost.h"
#include "planner/profile/profile.h"
#include "planner/search/enumerate.h"
#include "tests/planner/test_models.h"

namespace dt {
namespace {

double BestInterBusBw(const HardwareProfile& hw, CollKind k) {
  double best = 0;
  for (const auto& e : hw.network.table(k).inter) best = std::max(best, e.busbw_Bps);
  return best;
}

struct Bounds {
  double compute = 0, memory_traffic = 0, nic = 0;
  std::vector<double> model_states;  // per pipeline stage
};

Bounds BoundsOf(const ModelSpec& m, const ClusterSpec& c, const PlanSpec& p, const HardwareProfile& hw,
                bool causal_count) {
  Bounds b;
  const MemoryParams mp = MemoryParamsFor(hw, p);  // the plan's precision and Adam moments
  // Compute: the average device's FLOPs (the busiest does at least that), at
  // the peak of the plan's math (a CPU profile's bf16-input GEMMs for bf16).
  HardwareProfile storage;
  const double peak = ProfileForPrecision(hw, p.precision, &storage).device.peak_flops;
  b.compute = StepFlops(m, p, /*with_recompute=*/true, causal_count) / p.world() / peak;
  const GroupTopology grad = GradGroupTopology(p, c.gpus_per_node);
  const int shard = p.dp * p.cp;
  int64_t max_params = 0, max_dense = 0;
  for (int s = 0; s < p.pp; ++s) {
    // MoE: routed-expert gradients reduce over the smaller expert-DP group;
    // the NIC bound below counts only the parameters reduced over dp*cp.
    max_dense = std::max<int64_t>(max_dense, StageParamsPerRank(m, p, s) - StageExpertParamsPerRank(m, p, s));
    const double params = static_cast<double>(StageParamsPerRank(m, p, s));
    max_params = std::max<int64_t>(max_params, StageParamsPerRank(m, p, s));
    // Routed experts shard their states over the expert-DP group
    // (tp*dp*cp/(ep*etp)), which folding (etp < tp) can make larger than dp*cp.
    const double expert = static_cast<double>(StageExpertParamsPerRank(m, p, s));
    const double eshard = std::max(shard, p.expert_dp());
    auto states = [&](double n, double sh) {
      return n * (mp.weight_bytes / (p.zero_stage >= 3 ? sh : 1.0) + mp.grad_bytes / (p.zero_stage >= 2 ? sh : 1.0) +
                  mp.optimizer_bytes / (p.zero_stage >= 1 ? sh : 1.0));
    };
    b.model_states.push_back(states(params - expert, shard) + states(expert, eshard));
  }
  // Memory traffic: every microbatch's forward and backward read each local
  // weight at least once (the GEMMs' B operand).
  b.memory_traffic = 2.0 * p.num_microbatches * static_cast<double>(max_params) * mp.weight_bytes /
                     hw.device.memory_bandwidth_Bps;
  // NICs: a gradient group spanning N nodes. Per node and group, what must
  // enter the node (NICs are full duplex; the profile's best inter-node bus
  // bandwidth is the node's per-direction rate), in units of the buffer B:
  //   ZeRO-0    all-reduce: reduce-scatter + all-gather    2 (N-1)/N B_grad
  //   ZeRO-1/2  reduce-scatter grads + all-gather params   (N-1)/N (B_grad + B_weight)
  //   ZeRO-3    reduce-scatter grads + gather params for forward and for backward
  //                                                        (N-1)/N (B_grad + 2 B_weight)
  // and the node carries this for every group with members on it.
  if (grad.spans_nodes && shard > 1) {
    const double nodes = static_cast<double>(shard) / grad.per_node;
    const double groups_on_node = static_cast<double>(c.gpus_per_node) / grad.per_node;
    const double frac = (nodes - 1) / nodes;
    const double g = static_cast<double>(max_dense) * mp.grad_bytes;
    const double w = static_cast<double>(max_dense) * mp.weight_bytes;
    const double bytes = frac * (p.zero_stage == 0 ? 2 * g : p.zero_stage <= 2 ? g + w : g + 2 * w);
    const double node_bw = BestInterBusBw(hw, CollKind::kAllReduce);
    if (node_bw > 0) b.nic = groups_on_node * bytes / node_bw;
  }
  return b;
}

TEST(PhysicalBounds, RandomPlansRespectComputeMemoryNicAndStateBounds) {
  struct Case {
    ModelSpec m;
    ClusterSpec c;
    const char* profile;
    int64_t batch;
    bool moe_a2a_overlap = false;  // combined 1F1B: all-to-alls hidden behind another microbatch
    int adam_moment_bytes = 0;     // 2: bf16 Adam moments
    bool tp_comm_overlap = false;  // SP collectives under their GEMMs (userbuffers)
    bool folded_over_cp = false;   // the default search must reach EP folded over tp*cp*dp with cp > 1
    bool cudnn_attention = false;  // cuDNN's curves: the CP ring's blocks above 1.0 of peak in the
                                   // full-square count, so the bound counts the causal half computed
  };
  ModelSpec small = testing_models::Gpt(2048, 16, 24);
  ModelSpec mid = testing_models::Gpt(5120, 40, 40);
  ModelSpec llama = testing_models::Llama8B();
  ModelSpec big = testing_models::Gpt(12288, 96, 96);
  // MoE (issue 11): the compute bound counts active FLOPs (StepFlops is
  // balanced routing; the load-imbalance allowance only adds time); model
  // states divide the dense parameters by dp*cp and the experts' by the
  // larger of dp*cp and their expert-DP group (etp < tp can make it larger).
  ModelSpec moe = testing_models::Llama8B();
  moe.num_layers = 16;
  moe.hidden = 2048;
  moe.heads = 16;
  moe.kv_heads = 8;
  moe.seq_length = 2048;
  moe.num_experts = 8;
  moe.moe_top_k = 2;
  moe.moe_ffn_hidden = 5632;
  ModelSpec moe_long = moe;  // 16k tokens: the search tries cp > 1, and EP folded over it
  moe_long.seq_length = 16384;
  ModelSpec llama_long = llama;  // 128k tokens: CP rings of up to 16 ranks, attention-bound
  llama_long.num_layers = 8;
  llama_long.seq_length = 131072;
  ModelSpec llama_mtp = llama;  // with a multi-token-prediction module on the last stage
  llama_mtp.mtp_layers = 1;
  // GPT-OSS-shaped: alternating 128-key windows (attention priced by the
  // tiles a window visits), attention sinks, biases on every linear and
  // expert; q width (32 x 64) apart from hidden.
  ModelSpec windowed = moe;
  windowed.num_layers = 12;
  windowed.heads = 32;
  windowed.head_dim_set = 64;
  windowed.seq_length = 4096;
  windowed.num_experts = 16;
  windowed.moe_top_k = 4;
  windowed.moe_ffn_hidden = 1024;
  windowed.linear_bias_set = true;
  windowed.attention_sinks = true;
  windowed.sliding_window = 128;
  windowed.sliding_window_pattern = 2;
  std::vector<Case> cases = {
      {small, {1, 8, "gpu"}, "A100-SXM4-80GB", 64},   {small, {4, 8, "gpu"}, "H100-SXM5-80GB", 256},
      {mid, {8, 8, "gpu"}, "A100-SXM4-80GB", 512},    {llama, {2, 8, "gpu"}, "H100-SXM5-80GB", 128},
      {llama, {16, 8, "gpu"}, "A100-SXM4-80GB", 1024}, {big, {32, 8, "gpu"}, "A100-SXM4-80GB", 1536},
      {moe, {4, 8, "gpu"}, "H100-SXM5-80GB", 256},
      {moe, {4, 8, "gpu"}, "H100-SXM5-80GB", 256, true},
      {llama_mtp, {2, 8, "gpu"}, "H100-SXM5-80GB", 128},
      {windowed, {4, 8, "gpu"}, "H100-SXM5-80GB", 256, false, 2},
      {big, {16, 8, "gpu"}, "H100-SXM5-80GB", 768, false, 0, true},
      {moe_long, {4, 8, "gpu"}, "H100-SXM5-80GB", 64, false, 0, false, true},
      {llama_long, {8, 8, "gpu"}, "H100-SXM5-80GB", 16, false, 0, false, false, true},
  };
  std::mt19937_64 rng(20261123);
  int checked = 0, nic_bound_active = 0;
  double tight_compute = 1e9, tight_memory = 1e9, tight_nic = 1e9, tight_states = 1e9;
  for (const Case& cs : cases) {
    auto hw = LoadProfile(cs.profile);
    ASSERT_TRUE(hw.ok()) << hw.status().message();
    SearchConstraints k;
    k.global_batch = cs.batch;
    k.seq_length = cs.m.seq_length;
    k.moe_a2a_overlap = cs.moe_a2a_overlap;
    k.adam_moment_bytes = cs.adam_moment_bytes;
    k.tp_comm_overlap = cs.tp_comm_overlap;
    k.cudnn_attention = cs.cudnn_attention;
    auto e = EnumeratePlans(cs.m, cs.c, k);
    ASSERT_TRUE(e.ok()) << e.status().message();
    std::vector<PlanSpec> plans(e->plans.begin(), e->plans.end());
    std::shuffle(plans.begin(), plans.end(), rng);
    const size_t n = std::min<size_t>(plans.size(), 1800);
    int folded_over_cp = 0, long_rings = 0;
    for (size_t i = 0; i < n; ++i) {
      const PlanSpec& p = plans[i];
      folded_over_cp += p.expert_folded() && p.cp > 1;
      long_rings += cs.cudnn_attention && p.cp >= 8;
      auto pred = SimulatePlan(cs.m, cs.c, p, *hw);
      ASSERT_TRUE(pred.ok()) << Describe(p) << ": " << pred.status().message();
      const Bounds b = BoundsOf(cs.m, cs.c, p, *hw, cs.cudnn_attention);
      const double t = pred->step_time_s;
      const double tol = 1 + 1e-9;
      ASSERT_GE(t * tol, b.compute) << Describe(p) << " on " << cs.profile << ": faster than its FLOPs allow";
      ASSERT_GE(t * tol, b.memory_traffic) << Describe(p) << ": faster than its weight reads allow";
      ASSERT_GE(t * tol, b.nic) << Describe(p) << ": faster than its NICs allow";
      nic_bound_active += b.nic > 0;
      tight_compute = std::min(tight_compute, t / b.compute);
      tight_memory = std::min(tight_memory, t / b.memory_traffic);
      if (b.nic > 0) tight_nic = std::min(tight_nic, t / b.nic);
      for (size_t s = 0; s < b.model_states.size(); ++s)
        tight_states = std::min(tight_states, pred->stages[s].memory.total / b.model_states[s]);
      ASSERT_EQ(pred->stages.size(), b.model_states.size());
      for (size_t s = 0; s < b.model_states.size(); ++s)
        ASSERT_GE(pred->stages[s].memory.total * tol, b.model_states[s])
            << Describe(p) << " stage " << s << ": less memory than its model states";
      ++checked;
    }
    if (cs.cudnn_attention) {
      EXPECT_GT(long_rings, 0) << "the 128k-token search must reach CP rings of 8 ranks or more";
    }
    if (cs.folded_over_cp) {
      EXPECT_GT(folded_over_cp, 0) << "the 16k-token MoE search must reach EP folded over CP ranks";
    }
  }
  // How close the closest plan comes to each bound (1.0 = at the bound).
  std::printf("%d plans; tightest prediction / bound: compute %.3f, weight reads %.3f, NIC %.3f, model states %.3f\n",
              checked, tight_compute, tight_memory, tight_nic, tight_states);
  EXPECT_GE(checked, 10000);
  EXPECT_GT(nic_bound_active, 1000);  // the NIC bound is exercised, not vacuous
}

}  // namespace
}  // namespace dt
