// FP8 (Transformer-Engine style) plans: which GEMMs run in FP8, the cast
// overheads, the FP8 weight copies in memory, the profile's FP8 curve, and
// the refusals (no FP8 data in the profile, MoE, CPU).
#include <gtest/gtest.h>

#include <string>

#include "planner/cost/compute_cost.h"
#include "planner/cost/flops.h"
#include "planner/cost/layer_ops.h"
#include "planner/lower/plan_costs.h"
#include "planner/lower/simulate.h"
#include "planner/memory/activation_memory.h"
#include "planner/memory/param_count.h"
#include "planner/memory/stage_memory.h"
#include "planner/search/enumerate.h"
#include "planner/spec/capabilities.h"
#include "tests/planner/test_models.h"

namespace dt {
namespace {

using testing_models::H100;

PlanSpec Plan(const ModelSpec& m, Precision precision, int tp = 1) {
  PlanSpec p;
  p.tp = tp;
  p.micro_batch = 1;
  p.num_microbatches = 8;
  p.seq_length = m.seq_length;
  p.sequence_parallel = tp > 1;
  p.precision = precision;
  p.layers_per_chunk = EvenSplit(m.num_layers, 1);
  return p;
}

bool HasOp(const std::vector<Op>& ops, const std::string& name) {
  for (const Op& op : ops)
    if (name == op.name) return true;
  return false;
}

TEST(Fp8, LinearGemmsAreFp8AttentionAndHeadStayBf16) {
  const ModelSpec m = testing_models::Llama8B();
  const PlanSpec p = Plan(m, Precision::kFp8, 2);
  const LayerOps layer = TransformerLayerOps(m, p, 2);
  int fp8_gemms = 0, gemms = 0;
  for (const auto* list : {&layer.forward, &layer.backward})
    for (const Op& op : *list) {
      if (op.kind == OpKind::kGemm) {
        ++gemms;
        fp8_gemms += op.fp8;
      }
      if (op.kind == OpKind::kAttention) {
        EXPECT_FALSE(op.fp8);
      }
    }
  EXPECT_EQ(gemms, 15);  // qkv, proj, gate, up, down: forward, dgrad, wgrad
  EXPECT_EQ(fp8_gemms, gemms);
  const LayerOps head = HeadOps(m, p, 2);
  for (const auto* list : {&head.forward, &head.backward})
    for (const Op& op : *list) EXPECT_FALSE(op.fp8) << op.name;
  // Casts: one per GEMM input in forward (gate and up share theirs), one
  // per output gradient in backward, the cached weights once per step.
  for (const char* name : {"fp8_cast_qkv_input", "fp8_cast_proj_input", "fp8_cast_fc1_input", "fp8_cast_fc2_input",
                           "fp8_cast_weights"})
    EXPECT_TRUE(HasOp(layer.forward, name)) << name;
  for (const char* name : {"fp8_cast_qkv_grad", "fp8_cast_proj_grad", "fp8_cast_fc1_grad", "fp8_cast_fc2_grad"})
    EXPECT_TRUE(HasOp(layer.backward, name)) << name;
  // A bf16 plan has none of them, and the FLOP count does not change.
  const PlanSpec b = Plan(m, Precision::kBf16, 2);
  const LayerOps bl = TransformerLayerOps(m, b, 2);
  EXPECT_FALSE(HasOp(bl.forward, "fp8_cast_qkv_input"));
  EXPECT_DOUBLE_EQ(SumFlops(bl.forward), SumFlops(layer.forward));
  EXPECT_DOUBLE_EQ(StepFlops(m, b, false), StepFlops(m, p, false));
}

TEST(Fp8, WeightCastsAreSpreadOverTheMicrobatchesAndNotRecomputed) {
  const ModelSpec m = testing_models::Llama8B();
  PlanSpec p = Plan(m, Precision::kFp8);
  p.recompute = Recompute::kFull;
  auto cast_bytes = [&](const PlanSpec& q) {
    for (const Op& op : TransformerLayerOps(m, q, 2).forward)
      if (std::string(op.name) == "fp8_cast_weights") return op.bytes;
    return -1.0;
  };
  const double w = static_cast<double>(LinearWeightParamsPerRank(m, p));
  EXPECT_DOUBLE_EQ(cast_bytes(p), 4.0 * w / p.num_microbatches);  // read bf16, write FP8 + transpose
  PlanSpec q = p;
  q.num_microbatches = 2 * p.num_microbatches;
  EXPECT_DOUBLE_EQ(cast_bytes(q), cast_bytes(p) / 2);
  EXPECT_FALSE(HasOp(TransformerLayerOps(m, p, 2).recompute, "fp8_cast_weights"));
  EXPECT_TRUE(HasOp(TransformerLayerOps(m, p, 2).recompute, "fp8_cast_qkv_input"));
}

TEST(Fp8, GemmTimeUsesTheFp8Curve) {
  Op g;
  g.kind = OpKind::kGemm;
  g.name = "g";
  g.m = g.n = g.k = 8192;
  g.flops = 2.0 * 8192 * 8192 * 8192;
  const double bf16 = OpTime(g, H100());
  g.fp8 = true;
  const double fp8 = OpTime(g, H100());
  const Fp8Compute& f = H100().compute.fp8;
  ASSERT_TRUE(f.available());
  EXPECT_DOUBLE_EQ(f.peak_flops, 1.979e15);  // H100 SXM datasheet, dense
  // The FP8 rate: the curve's efficiency at 1.1 TFLOP of the FP8 peak.
  const double eff = Interpolate(f.gemm_efficiency, g.flops, Scale::kLog, Scale::kLog).value;
  EXPECT_NEAR(fp8, g.flops / (f.peak_flops * eff) + H100().compute.kernel_overhead_s, 1e-9);
  EXPECT_LT(fp8, bf16);
  EXPECT_GT(fp8, bf16 / 2.5);  // never more than the peak ratio (2x) plus the curves' difference
  // Larger never faster.
  Op big = g;
  big.m *= 2;
  big.flops *= 2;
  EXPECT_GT(OpTime(big, H100()), fp8);
}

TEST(Fp8, MemoryHoldsTheFp8WeightCopies) {
  const ModelSpec m = testing_models::Llama8B();
  MemoryParams mp = MemoryParams::MixedPrecision(80e9);
  const PlanSpec b = Plan(m, Precision::kBf16, 2), f = Plan(m, Precision::kFp8, 2);
  const StageMemory sb = EstimateStageMemory(m, b, mp, 0, 1), sf = EstimateStageMemory(m, f, mp, 0, 1);
  const double copies = 2.0 * m.num_layers * static_cast<double>(LinearWeightParamsPerRank(m, f));
  EXPECT_DOUBLE_EQ(sf.weights - sb.weights, copies);
  EXPECT_DOUBLE_EQ(sf.optimizer, sb.optimizer);
  EXPECT_DOUBLE_EQ(sf.gradients, sb.gradients);
  // Stored activations: the four linear inputs drop from 2 bytes to the
  // 1-byte FP8 transpose (QKV and fc1 inputs at the SP shard).
  const double T = static_cast<double>(f.micro_batch) * f.seq_length, tp = f.tp;
  const double linear_inputs = 2 * (T / tp) * m.hidden + T * (m.hidden / tp) + T * (m.ffn_hidden / tp);
  EXPECT_NEAR(sb.activations - sf.activations, m.num_layers * linear_inputs, 1.0);
  // The linear weights are most of a Llama layer: QKV (GQA) + O + 3 MLP matrices.
  const int64_t h = m.hidden, kv = m.kv_heads * m.head_dim(), ff = m.ffn_hidden;
  EXPECT_EQ(LinearWeightParamsPerRank(m, f), (h * (h + 2 * kv) + h * h + 3 * h * ff) / 2);
}

TEST(Fp8, StepIsFasterThanBf16AndRefusedWithoutFp8Data) {
  const ModelSpec m = testing_models::Llama8B();
  ClusterSpec c;
  c.nodes = 1;
  c.gpus_per_node = 2;
  PlanSpec b = Plan(m, Precision::kBf16, 2), f = Plan(m, Precision::kFp8, 2);
  auto pb = SimulatePlan(m, c, b, H100());
  auto pf = SimulatePlan(m, c, f, H100());
  ASSERT_TRUE(pb.ok()) << pb.status().message();
  ASSERT_TRUE(pf.ok()) << pf.status().message();
  EXPECT_LT(pf->step_time_s, pb->step_time_s);
  EXPECT_GT(pf->step_time_s, 0.5 * pb->step_time_s);  // attention, norms, head and comm stay bf16
  auto a100 = LoadProfile("a100");
  ASSERT_TRUE(a100.ok());
  auto refused = SimulatePlan(m, c, f, *a100);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("compute.fp8"), std::string::npos) << refused.status().message();
}

// MoE under FP8: the expert and shared-expert GEMMs run in FP8 with their
// casts (routed-row casts at the load-imbalance allowance), the router
// stays bf16; the step is faster than bf16 and the stored expert inputs
// shrink to 1 byte.
TEST(Fp8, MoeExpertGemmsAreFp8RouterStaysBf16) {
  ModelSpec m = testing_models::Llama8B();
  m.num_experts = 8;
  m.moe_top_k = 2;
  m.moe_ffn_hidden = m.ffn_hidden / 4;
  m.shared_ffn_hidden = m.ffn_hidden / 4;
  ASSERT_TRUE(CheckPrecision(Precision::kFp8, m, H100()).ok());
  PlanSpec f = Plan(m, Precision::kFp8), b = Plan(m, Precision::kBf16);
  const LayerOps lf = TransformerLayerOps(m, f, 2), lb = TransformerLayerOps(m, b, 2);
  int expert_gemms = 0;
  for (const auto* list : {&lf.forward, &lf.backward})
    for (const Op& op : *list) {
      if (op.kind != OpKind::kGemm) continue;
      const std::string name = op.name;
      if (name.rfind("router", 0) == 0) {
        EXPECT_FALSE(op.fp8) << name;
      } else {
        EXPECT_TRUE(op.fp8) << name;
        expert_gemms += name.rfind("expert_", 0) == 0;
      }
    }
  EXPECT_EQ(expert_gemms, 9);  // gate, up, down: forward, dgrad, wgrad
  for (const char* cast : {"fp8_cast_expert_fc1_input", "fp8_cast_expert_fc2_input", "fp8_cast_shared_fc1_input"})
    EXPECT_TRUE(HasOp(lf.forward, cast)) << cast;
  EXPECT_TRUE(HasOp(lf.backward, "fp8_cast_expert_fc1_grad"));
  EXPECT_FALSE(HasOp(lb.forward, "fp8_cast_expert_fc1_input"));
  EXPECT_FALSE(HasOp(lf.recompute, "fp8_cast_weights"));  // cached copies are not recast
  EXPECT_EQ(SumFlops(lf.forward), SumFlops(lb.forward));  // same FLOPs, different rate
  ClusterSpec c;
  c.nodes = 1;
  c.gpus_per_node = 1;
  auto pb = SimulatePlan(m, c, b, H100()), pf = SimulatePlan(m, c, f, H100());
  ASSERT_TRUE(pb.ok() && pf.ok());
  EXPECT_LT(pf->step_time_s, pb->step_time_s);
  const MemoryParams mp = MemoryParams::MixedPrecision(80e9);
  EXPECT_LT(EstimateStageMemory(m, f, mp, 0, 1).activations, EstimateStageMemory(m, b, mp, 0, 1).activations);
}

// Transformer Engine's scaling kernels (amax, casts, weight casts) carry
// Op::fp8_scaling, which keeps the per-op host time off them
// (plan_costs.cc): every one of them in a dense and an MoE layer, delayed
// and tensorwise, and nothing else; bf16 lists have none.
TEST(Fp8, ScalingKernelsAreMarked) {
  ModelSpec dense = testing_models::Llama8B();
  ModelSpec moe = dense;
  moe.num_experts = 8, moe.moe_top_k = 2, moe.moe_ffn_hidden = moe.ffn_hidden / 4;
  moe.shared_ffn_hidden = moe.ffn_hidden / 4;
  int marked = 0;
  for (const ModelSpec* m : {&dense, &moe})
    for (Fp8Recipe r : {Fp8Recipe::kDelayed, Fp8Recipe::kTensorwise})
      for (Precision pr : {Precision::kFp8, Precision::kBf16}) {
        PlanSpec p = Plan(*m, pr, 2);
        if (pr == Precision::kFp8) p.fp8_recipe = r;
        const LayerOps l = TransformerLayerOps(*m, p, 2);
        for (const auto* list : {&l.forward, &l.backward, &l.recompute})
          for (const Op& op : *list) {
            const bool scaling = op.kind == OpKind::kMemoryBound && std::string(op.name).rfind("fp8_", 0) == 0;
            EXPECT_EQ(op.fp8_scaling, scaling) << op.name;
            EXPECT_FALSE(op.fp8_scaling && pr == Precision::kBf16) << op.name;
            marked += op.fp8_scaling;
          }
      }
  EXPECT_GT(marked, 0);
}

TEST(Fp8, DtrunRefusesFp8PlansByName) {
  const ModelSpec m = testing_models::Gpt(64, 4, 2);
  PlanSpec p = Plan(m, Precision::kFp8);
  p.flash_attention = false;
  p.dropout = false;
  for (RuntimeDevice d : {RuntimeDevice::kCpu, RuntimeDevice::kCuda}) {
    Status s = CheckExecutable(m, p, d);
    ASSERT_FALSE(s.ok());
    if (d == RuntimeDevice::kCpu) {
      EXPECT_NE(s.message().find("FP8"), std::string::npos) << s.message();
    }
  }
  p.precision = Precision::kBf16;
  EXPECT_TRUE(CheckExecutable(m, p, RuntimeDevice::kCpu).ok());
}

TEST(Fp8, PlanJsonRoundTripsThePrecision) {
  const ModelSpec m = testing_models::Llama8B();
  const PlanSpec f = Plan(m, Precision::kFp8);
  const json j = ToJson(f);
  EXPECT_EQ(j.at("precision"), "fp8");
  auto back = PlanFromJson(j, m, "test");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->precision, Precision::kFp8);
  EXPECT_FALSE(ToJson(Plan(m, Precision::kProfile)).contains("precision"));  // absent: the profile's (bf16 on GPUs)
  json bad = j;
  bad["precision"] = "fp4";
  auto refused = PlanFromJson(bad, m, "test");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("fp4"), std::string::npos);
}

// Tensorwise (current) scaling: every quantization reads its input twice
// (an amax pass, then the cast), the inputs sequence parallelism gathers
// all-reduce their amax over TP first, the per-step weight cast reads each
// weight once more; the FP8 GEMMs and the memory are those of delayed
// scaling. Exact byte counts against the delayed plan's casts.
TEST(Fp8, TensorwiseScalingReadsEachInputTwice) {
  const ModelSpec m = testing_models::Llama8B();
  for (int tp : {1, 2}) {
    const PlanSpec d = Plan(m, Precision::kFp8, tp);
    PlanSpec t = d;
    t.fp8_recipe = Fp8Recipe::kTensorwise;
    ASSERT_TRUE(Validate(t, m, "plan").ok());
    const LayerOps ld = TransformerLayerOps(m, d, 2), lt = TransformerLayerOps(m, t, 2);
    for (const auto& [dl, tl] : {std::pair{&ld.forward, &lt.forward}, std::pair{&ld.backward, &lt.backward}}) {
      double cast_bytes = 0, amax_bytes = 0, weight_bytes_d = 0, weight_bytes_t = 0;
      int casts = 0, amaxes = 0, allreduces = 0;
      for (const Op& op : *dl) {
        const std::string n = op.name;
        if (n == "fp8_cast_weights") weight_bytes_d = op.bytes;
        else if (n.rfind("fp8_cast_", 0) == 0) cast_bytes += op.bytes, ++casts;
      }
      for (const Op& op : *tl) {
        const std::string n = op.name;
        if (n == "fp8_cast_weights") weight_bytes_t = op.bytes;
        if (n == "fp8_amax") amax_bytes += op.bytes, ++amaxes;
        if (n == "fp8_amax_allreduce") {
          ++allreduces;
          EXPECT_EQ(op.coll, CollKind::kAllReduce);
          EXPECT_EQ(op.group_size, tp);
          EXPECT_DOUBLE_EQ(op.bytes, 4.0);
        }
      }
      EXPECT_GT(casts, 0);
      EXPECT_EQ(amaxes, casts) << "tp " << tp;
      EXPECT_DOUBLE_EQ(amax_bytes, cast_bytes * 2.0 / 4.0) << "tp " << tp;  // e of the cast's e + 2 bytes
      // Gathered under SP: the QKV and fc1 inputs, the proj and fc2 output gradients.
      EXPECT_EQ(allreduces, tp > 1 ? 2 : 0) << "tp " << tp;
      EXPECT_EQ(tl->size(), dl->size() + amaxes + allreduces);
      if (dl == &ld.forward) {
        const double w = static_cast<double>(LinearWeightParamsPerRank(m, d)) / d.num_microbatches;
        EXPECT_DOUBLE_EQ(weight_bytes_d, 4.0 * w);  // read bf16, write FP8 + transpose
        EXPECT_DOUBLE_EQ(weight_bytes_t, 6.0 * w);  // and the amax read
      }
    }
    EXPECT_DOUBLE_EQ(SumFlops(lt.forward), SumFlops(ld.forward));
    const MemoryParams mp = MemoryParams::MixedPrecision(80e9);
    EXPECT_DOUBLE_EQ(EstimateStageMemory(m, t, mp, 0, 1).total, EstimateStageMemory(m, d, mp, 0, 1).total);
    const ClusterSpec c = testing_models::Cluster(1, tp);
    auto pd = SimulatePlan(m, c, d, H100()), pt = SimulatePlan(m, c, t, H100());
    ASSERT_TRUE(pd.ok() && pt.ok()) << (pd.ok() ? pt.status().message() : pd.status().message());
    EXPECT_GT(pt->step_time_s, pd->step_time_s);
    EXPECT_LT(pt->step_time_s, 1.1 * pd->step_time_s);  // memory-bound passes beside FP8 GEMMs
  }
}

TEST(Fp8, RecipesAreNamedAsMegatronNamesThem) {
  const ModelSpec m = testing_models::Llama8B();
  PlanSpec p = Plan(m, Precision::kFp8);
  p.fp8_recipe = Fp8Recipe::kTensorwise;
  const json j = ToJson(p);
  EXPECT_EQ(j.at("fp8_recipe"), "tensorwise");
  auto back = PlanFromJson(j, m, "test");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->fp8_recipe, Fp8Recipe::kTensorwise);
  EXPECT_NE(Describe(p).find("fp8(tensorwise)"), std::string::npos) << Describe(p);
  p.fp8_recipe = Fp8Recipe::kDelayed;
  EXPECT_FALSE(ToJson(p).contains("fp8_recipe"));  // absent: delayed
  // Only with FP8; the recipes that are not modeled are refused by name.
  PlanSpec b = Plan(m, Precision::kBf16);
  b.fp8_recipe = Fp8Recipe::kTensorwise;
  Status s = Validate(b, m, "plan");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("needs precision fp8"), std::string::npos) << s.message();
  for (const char* name : {"mxfp8", "blockwise", "custom", "current"}) {
    json bad = j;
    bad["fp8_recipe"] = name;
    auto refused = PlanFromJson(bad, m, "test");
    ASSERT_FALSE(refused.ok()) << name;
    EXPECT_NE(refused.status().message().find(std::string("'") + name + "'"), std::string::npos)
        << refused.status().message();
  }
  EXPECT_NE(ParseFp8Recipe("mxfp8").status().message().find("Blackwell"), std::string::npos);
}

// --fp8-param-gather: the linear weights are the FP8 parameters themselves
// (1 byte plus the cached transpose, not bf16 plus both copies), the
// per-step cast only writes the transpose, and the ZeRO-1 all-gather moves
// those weights at 1 byte.
TEST(Fp8, ParamGatherKeepsOneFp8WeightAndItsTranspose) {
  const ModelSpec m = testing_models::Llama8B();
  PlanSpec f = Plan(m, Precision::kFp8, 2);
  f.dp = 8;
  f.zero_stage = 1;
  PlanSpec g = f;
  g.fp8_param_gather = true;
  ASSERT_TRUE(Validate(g, m, "plan").ok());
  const MemoryParams mp = MemoryParams::MixedPrecision(80e9);
  const StageMemory sf = EstimateStageMemory(m, f, mp, 0, 1), sg = EstimateStageMemory(m, g, mp, 0, 1);
  const double linear = m.num_layers * static_cast<double>(LinearWeightParamsPerRank(m, f));
  EXPECT_DOUBLE_EQ(sf.weights - sg.weights, 2.0 * linear);  // bf16 2 + FP8 1 + transpose 1 -> 1 + 1
  EXPECT_DOUBLE_EQ(sg.optimizer, sf.optimizer);             // fp32 master shard either way
  EXPECT_DOUBLE_EQ(sg.gradients, sf.gradients);
  EXPECT_DOUBLE_EQ(sg.activations, sf.activations);
  auto cast_bytes = [&](const PlanSpec& q) {
    for (const Op& op : TransformerLayerOps(m, q, 2).forward)
      if (std::string(op.name) == "fp8_cast_weights") return op.bytes;
    return -1.0;
  };
  const double w = static_cast<double>(LinearWeightParamsPerRank(m, f));
  EXPECT_DOUBLE_EQ(cast_bytes(g), 2.0 * w / g.num_microbatches);  // read FP8, write its transpose
  // The all-gather: the linear weights at 1 byte, the rest (norms, the
  // embedding and head) at 2, so a little over half the bytes of bf16.
  const ClusterSpec c = testing_models::Cluster(2, 8);
  const PlanCosts cf = ComputePlanCosts(m, c, f, H100()), cg = ComputePlanCosts(m, c, g, H100());
  ASSERT_EQ(cf.chunks.size(), 1u);
  EXPECT_GT(cg.chunks[0].param_sync, 0.45 * cf.chunks[0].param_sync);
  EXPECT_LT(cg.chunks[0].param_sync, 0.65 * cf.chunks[0].param_sync);
  EXPECT_DOUBLE_EQ(cg.chunks[0].grad_sync, cf.chunks[0].grad_sync);  // gradients stay bf16
  auto pf = SimulatePlan(m, c, f, H100()), pg = SimulatePlan(m, c, g, H100());
  ASSERT_TRUE(pf.ok() && pg.ok());
  EXPECT_LE(pg->step_time_s, pf->step_time_s);
  EXPECT_LT(pg->peak_memory_bytes, pf->peak_memory_bytes);
}

TEST(Fp8, ParamGatherNeedsFp8AndTheDistributedOptimizer) {
  const ModelSpec m = testing_models::Llama8B();
  PlanSpec p = Plan(m, Precision::kFp8, 2);
  p.dp = 8;
  p.fp8_param_gather = true;
  for (int zero : {0, 2, 3}) {
    p.zero_stage = zero;
    Status s = Validate(p, m, "plan");
    ASSERT_FALSE(s.ok()) << zero;
    EXPECT_NE(s.message().find("zero_stage 1"), std::string::npos) << s.message();
  }
  p.zero_stage = 1;
  EXPECT_TRUE(Validate(p, m, "plan").ok());
  p.precision = Precision::kBf16;
  EXPECT_FALSE(Validate(p, m, "plan").ok());
  p.precision = Precision::kFp8;
  // Plan files: written only when set, read back; dtrun refuses it by name.
  const json j = ToJson(p);
  EXPECT_EQ(j.at("fp8_param_gather"), true);
  auto back = PlanFromJson(j, m, "test");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(back->fp8_param_gather);
  EXPECT_NE(Describe(p).find("fp8-params"), std::string::npos);
  p.fp8_param_gather = false;
  EXPECT_FALSE(ToJson(p).contains("fp8_param_gather"));
  p.fp8_param_gather = true;
  const std::vector<Feature> missing = MissingFeatures(m, p, RuntimeDevice::kCpu);
  EXPECT_NE(std::find(missing.begin(), missing.end(), Feature::kFp8ParamGather), missing.end());
}

// Off unless asked (Megatron-LM's default; not searched, see
// SearchConstraints::fp8_param_gather); asked, every FP8 plan with the
// distributed optimizer has it and the others are rejected; refused with a
// fixed ZeRO stage other than 1 or without FP8.
TEST(Fp8, SearchUsesParamGatherWhenAsked) {
  const ModelSpec m = testing_models::Llama8B();
  const ClusterSpec c = testing_models::Cluster(1, 8);
  SearchConstraints k;
  k.global_batch = 16;
  k.seq_length = 1024;
  k.tp = 2;
  k.precision = Precision::kFp8;
  auto off = EnumeratePlans(m, c, k);
  ASSERT_TRUE(off.ok()) << off.status().message();
  for (const PlanSpec& p : off->plans) EXPECT_FALSE(p.fp8_param_gather) << Describe(p);
  k.fp8_param_gather = true;
  auto on = EnumeratePlans(m, c, k);
  ASSERT_TRUE(on.ok()) << on.status().message();
  ASSERT_FALSE(on->plans.empty());
  for (const PlanSpec& p : on->plans) {
    EXPECT_TRUE(p.fp8_param_gather) << Describe(p);
    EXPECT_EQ(p.zero_stage, 1) << Describe(p);
  }
  EXPECT_GT(on->plan_rejects.at("--fp8-param-gather needs the distributed optimizer (zero 1)"), 0);
  k.zero_stage = 2;
  auto refused = EnumeratePlans(m, c, k);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--zero 1"), std::string::npos) << refused.status().message();
  k.zero_stage.reset();
  k.precision = Precision::kBf16;
  auto bf16 = EnumeratePlans(m, c, k);
  ASSERT_FALSE(bf16.ok());
  EXPECT_NE(bf16.status().message().find("--precision fp8"), std::string::npos) << bf16.status().message();
}


// Multi-head latent attention under FP8 (DeepSeek-V3's own training, and
// Megatron-LM's MLA built of Transformer Engine linears): every projection
// GEMM is FP8 with its input and output-gradient casts; the latent inputs
// of the up projections are kept as 1-byte transposes.
TEST(Fp8, MlaProjectionsAreFp8) {
  auto loaded = LoadModel(std::string(DT_SOURCE_DIR) + "/tests/planner/hf_configs/deepseek-v3.json");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  ModelSpec m = *loaded;
  m.seq_length = 4096;
  PlanSpec p = Plan(m, Precision::kFp8, 2);
  p.ep = 8;
  p.dp = 8;
  p.etp = 1;
  ASSERT_TRUE(CheckPrecision(p.precision, m, H100()).ok());
  const LayerOps layer = TransformerLayerOps(m, p, 2);
  int mla_gemms = 0;
  for (const auto* list : {&layer.forward, &layer.backward})
    for (const Op& op : *list)
      if (op.kind == OpKind::kGemm && std::string(op.name).rfind("mla_", 0) == 0) {
        ++mla_gemms;
        EXPECT_TRUE(op.fp8) << op.name;
      }
  EXPECT_EQ(mla_gemms, 12);  // q_down, q_up, kv_down, kv_up: forward, dgrad, wgrad
  for (const char* name : {"fp8_cast_mla_q_down_input", "fp8_cast_mla_q_up_input", "fp8_cast_mla_kv_down_input",
                           "fp8_cast_mla_kv_up_input", "fp8_cast_proj_input"})
    EXPECT_TRUE(HasOp(layer.forward, name)) << name;
  for (const char* name : {"fp8_cast_mla_q_down_grad", "fp8_cast_mla_q_up_grad", "fp8_cast_mla_kv_down_grad",
                           "fp8_cast_mla_kv_up_grad"})
    EXPECT_TRUE(HasOp(layer.backward, name)) << name;
  // The cached weight casts cover the attention's own matrices (the
  // experts' are cast in the MoE block): the per-rank attention parameters
  // without the two latent norms, read bf16 and written FP8 + transpose.
  double cast = -1;  // the attention block's (the first; the MoE block has its own)
  for (const Op& op : layer.forward)
    if (cast < 0 && std::string(op.name) == "fp8_cast_weights") cast = op.bytes;
  const double attention = static_cast<double>(AttentionParamsPerRank(m, p) - m.q_lora_rank - m.kv_lora_rank);
  EXPECT_DOUBLE_EQ(cast, 4.0 * attention / p.num_microbatches);
  // Recomputing the up projections casts their latent inputs again.
  PlanSpec rc = p;
  rc.recompute = Recompute::kSelective;
  rc.recompute_modules = kRecomputeCoreAttn | kRecomputeMlaUpProj;
  const LayerOps rl = TransformerLayerOps(m, rc, 2);
  for (const char* name : {"fp8_cast_mla_q_up_input", "fp8_cast_mla_kv_up_input", "mla_q_up", "mla_kv_up"})
    EXPECT_TRUE(HasOp(rl.recompute, name)) << name;
  EXPECT_FALSE(HasOp(rl.recompute, "fp8_cast_mla_kv_down_input"));
  // Same FLOPs as bf16.
  const PlanSpec b = [&] { PlanSpec q = p; q.precision = Precision::kBf16; return q; }();
  EXPECT_DOUBLE_EQ(SumFlops(TransformerLayerOps(m, b, 2).forward), SumFlops(layer.forward));
  // Memory: what FP8 saves grows by one byte per token and latent column.
  auto saved = [&](const ModelSpec& model) {
    return ActivationBytesPerLayer(model, b, 2) - ActivationBytesPerLayer(model, p, 2);
  };
  ModelSpec wider = m;
  wider.q_lora_rank += 512;
  const double tokens = static_cast<double>(p.micro_batch) * p.seq_length;
  EXPECT_DOUBLE_EQ(saved(wider) - saved(m), tokens * 512);
  EXPECT_GT(saved(m), 0);
}

}  // namespace
}  // namespace dt
