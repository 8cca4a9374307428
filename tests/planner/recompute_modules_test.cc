// Selective recompute of chosen modules (PlanSpec::recompute_modules,
// Megatron-LM's --recompute-modules): the bytes each module drops, the
// kernels it re-runs, the plan field, the Megatron flag mapping, the
// refusals, and that the default ([core_attn]) is selective recompute as it
// was. Expected bytes are worked out by hand in the comments.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "planner/cost/layer_ops.h"
#include "planner/cost/moe_ops.h"
#include "planner/frameworks/export.h"
#include "planner/frameworks/megatron_args.h"
#include "planner/memory/activation_memory.h"
#include "planner/memory/memory_params.h"
#include "planner/memory/stage_memory.h"
#include "planner/spec/capabilities.h"
#include "tests/planner/test_models.h"

namespace dt {
namespace {

using testing_models::Gpt;

// A Llama-style MoE: h 1024, 8 heads, 8 experts top-2 of width 512, a
// shared expert of width 1024, SwiGLU, 4 layers.
ModelSpec Moe(int shared = 1024) { return testing_models::SmallMoe("rm-moe", 1024, 1024, 512, shared); }

// dp 2, tp 2 + SP, ep 2, mbs 1, seq 1024, flash attention: T = 1024 tokens,
// T_r = 512, etp = tp = 2, routed rows 512 * 2 * 2 = 2048 balanced, 2560 at
// the 1.25 allowance (ep 2); f_exp = 256, f_shared = 512.
PlanSpec MoePlan(const ModelSpec& m, uint32_t modules) {
  PlanSpec p;
  p.dp = 2;
  p.tp = 2;
  p.ep = 2;
  p.sequence_parallel = true;
  p.micro_batch = 1;
  p.num_microbatches = 4;
  p.seq_length = 1024;
  p.layers_per_chunk = {m.num_layers};
  p.recompute = Recompute::kSelective;
  p.recompute_modules = modules;
  return p;
}

// GPT h 512, 8 heads, FFN 2048, tp 2 without SP, seq 1024, unfused attention
// with dropout: Korthikanti's setting, s b h = 1024 * 512 = 524,288.
PlanSpec GptPlan(const ModelSpec& m, Recompute rc, uint32_t modules) {
  PlanSpec p;
  p.tp = 2;
  p.seq_length = 1024;
  p.flash_attention = false;
  p.layers_per_chunk = {m.num_layers};
  p.recompute = rc;
  p.recompute_modules = modules;
  return p;
}

ModelSpec DeepSeekV3() {
  auto m = LoadModel(std::string(DT_SOURCE_DIR) + "/tests/planner/hf_configs/deepseek-v3.json");
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? *m : ModelSpec{};
}

// DeepSeek-V3 at tp 8 + SP, ep 8, dp 8, seq 4096: T = 4096, T_r = 512,
// 16 local heads.
PlanSpec V3Plan(const ModelSpec& m, uint32_t modules) {
  PlanSpec p;
  p.dp = 8;
  p.tp = 8;
  p.ep = 8;
  p.pp = 1;
  p.sequence_parallel = true;
  p.seq_length = 4096;
  p.layers_per_chunk = {m.num_layers};
  p.recompute = Recompute::kSelective;
  p.recompute_modules = modules;
  return p;
}

std::vector<std::string> Names(const std::vector<Op>& ops) {
  std::vector<std::string> v;
  for (const Op& op : ops) v.push_back(op.name);
  return v;
}

TEST(RecomputeModules, MoeModuleBytesByHand) {
  const ModelSpec m = Moe();
  const PlanSpec p = MoePlan(m, kRecomputeLayernorm);
  ASSERT_TRUE(Validate(p, m, "t").ok()) << Validate(p, m, "t").message();
  // layernorm: the pre-MLP norm's output, e T_r h = 2 * 512 * 1024 (the
  // attention norm is fused into QKV: nothing).
  EXPECT_DOUBLE_EQ(RecomputeModuleBytesPerLayer(m, p, 2, kRecomputeLayernorm), 1048576.0);
  // moe_act: the expert fc2 input at the busiest rank, e R f_exp = 2 * 2560 * 256.
  EXPECT_DOUBLE_EQ(RecomputeModuleBytesPerLayer(m, p, 2, kRecomputeMoeAct), 1310720.0);
  // shared_experts: gate, up and fc2 input, 3 e T f_s = 3 * 2 * 1024 * 512.
  EXPECT_DOUBLE_EQ(RecomputeModuleBytesPerLayer(m, p, 2, kRecomputeSharedExperts), 3145728.0);
  // moe: router probabilities 4 T_r E = 16,384; expert input e R h =
  // 5,242,880; gate, up, fc2 input 3 e R f_exp = 3,932,160; outputs
  // e R/etp h = 2,621,440; shared experts 3,145,728.
  EXPECT_DOUBLE_EQ(RecomputeModuleBytesPerLayer(m, p, 2, kRecomputeMoe), 14958592.0);
  // Modules the model lacks drop nothing; flash attention has no scores.
  EXPECT_DOUBLE_EQ(RecomputeModuleBytesPerLayer(m, p, 2, kRecomputeMlp), 0.0);
  EXPECT_DOUBLE_EQ(RecomputeModuleBytesPerLayer(m, p, 2, kRecomputeMlaUpProj), 0.0);
  EXPECT_DOUBLE_EQ(RecomputeModuleBytesPerLayer(m, p, 2, kRecomputeCoreAttn), 0.0);
}

TEST(RecomputeModules, MoeStoredBytesDropByTheModules) {
  const ModelSpec m = Moe();
  const double none = ActivationBytesPerLayerFor(m, MoePlan(m, kRecomputeCoreAttn), 2, Recompute::kNone);
  auto stored = [&](uint32_t modules) { return ActivationBytesPerLayer(m, MoePlan(m, modules), 2); };
  // Flash attention: the default selective stores what none does.
  EXPECT_DOUBLE_EQ(stored(kDefaultRecomputeModules), none);
  // GPT-OSS's Megatron-Bridge recipe: layernorm + moe_act.
  EXPECT_DOUBLE_EQ(stored(kRecomputeLayernorm | kRecomputeMoeAct), none - 1048576.0 - 1310720.0);
  // moe contains moe_act and shared_experts: counted once.
  EXPECT_DOUBLE_EQ(stored(kRecomputeMoe | kRecomputeMoeAct | kRecomputeSharedExperts), none - 14958592.0);
  EXPECT_DOUBLE_EQ(stored(kRecomputeMoe | kRecomputeLayernorm), none - 14958592.0 - 1048576.0);
  // Other modes ignore the modules.
  PlanSpec full = MoePlan(m, kRecomputeMoe);
  full.recompute = Recompute::kFull;
  EXPECT_DOUBLE_EQ(ActivationBytesPerLayer(m, full, 2), 2.0 * 512 * 1024);
  EXPECT_DOUBLE_EQ(RecomputedModuleBytesPerLayer(m, full, 2), 0.0);
}

TEST(RecomputeModules, DenseGptMlpAndCoreAttnAgainstKorthikanti) {
  const ModelSpec m = Gpt(512, 8, 2);
  // Table 2, TP without SP, t = 2: sbh (10 + 24/t + 5as/(ht)) = 524,288 x 62.
  EXPECT_DOUBLE_EQ(ActivationBytesPerLayer(m, GptPlan(m, Recompute::kNone, kDefaultRecomputeModules), 2), 32505856.0);
  // Selective (attention core): sbh (10 + 24/t) = 524,288 x 22.
  EXPECT_DOUBLE_EQ(ActivationBytesPerLayer(m, GptPlan(m, Recompute::kSelective, kDefaultRecomputeModules), 2),
                   11534336.0);
  // mlp drops the fc1 input (2 sbh) and the GeLU and fc2 inputs (16 sbh/t):
  // 10 sbh = 5,242,880; the scores stay when core_attn is not listed.
  EXPECT_DOUBLE_EQ(RecomputeModuleBytesPerLayer(m, GptPlan(m, Recompute::kSelective, kRecomputeMlp), 2, kRecomputeMlp),
                   5242880.0);
  EXPECT_DOUBLE_EQ(ActivationBytesPerLayer(m, GptPlan(m, Recompute::kSelective, kRecomputeMlp), 2), 27262976.0);
  EXPECT_DOUBLE_EQ(
      ActivationBytesPerLayer(m, GptPlan(m, Recompute::kSelective, kRecomputeCoreAttn | kRecomputeMlp), 2),
      6291456.0);
  // core_attn alone: the score term 5 a s^2 b / t = 20,971,520.
  EXPECT_DOUBLE_EQ(RecomputeModuleBytesPerLayer(m, GptPlan(m, Recompute::kSelective, kRecomputeCoreAttn), 2,
                                                kRecomputeCoreAttn),
                   20971520.0);
}

TEST(RecomputeModules, MlaModuleBytesByHand) {
  const ModelSpec m = DeepSeekV3();
  const PlanSpec p = V3Plan(m, kRecomputeMlaUpProj | kRecomputeLayernorm);
  ASSERT_TRUE(Validate(p, m, "t").ok()) << Validate(p, m, "t").message();
  // Q, K, V of 16 local heads: e T a (2 * 192 + 128) = 2 * 4096 * 16 * 512.
  EXPECT_DOUBLE_EQ(RecomputeModuleBytesPerLayer(m, p, 2, kRecomputeMlaUpProj), 67108864.0);
  // MLA's input norm and the MoE pre-MLP norm: 2 e T_r h = 2 * 2 * 512 * 7168.
  EXPECT_DOUBLE_EQ(RecomputeModuleBytesPerLayer(m, p, 2, kRecomputeLayernorm), 14680064.0);
  EXPECT_DOUBLE_EQ(ActivationBytesPerLayer(m, p, 2),
                   ActivationBytesPerLayer(m, V3Plan(m, kDefaultRecomputeModules), 2) - 67108864.0 - 14680064.0);
}

TEST(RecomputeModules, StageMemoryStoresLessAndRebuildsOneLayer) {
  const ModelSpec m = Moe();
  const MemoryParams mp = MemoryParams::MixedPrecision(80e9);
  const PlanSpec base = MoePlan(m, kDefaultRecomputeModules);
  const PlanSpec mods = MoePlan(m, kRecomputeCoreAttn | kRecomputeLayernorm | kRecomputeMoeAct);
  const StageMemory a = EstimateStageMemory(m, base, mp, 0, 3);
  const StageMemory b = EstimateStageMemory(m, mods, mp, 0, 3);
  const double dropped = 1048576.0 + 1310720.0;
  // 4 layers x 3 microbatches in flight store less; one layer's are rebuilt.
  EXPECT_DOUBLE_EQ(a.activations - b.activations, 4 * 3 * dropped);
  EXPECT_DOUBLE_EQ(b.temporary - a.temporary, dropped);
  // A fused (flash) core rebuilds no score matrix, so core_attn adds no
  // working set here and leaving it out changes nothing; an unfused core
  // rebuilds one layer's scores, b a_l s^2 e = 1 * 4 * 1024^2 * 2.
  const StageMemory c = EstimateStageMemory(m, MoePlan(m, kRecomputeLayernorm | kRecomputeMoeAct), mp, 0, 3);
  EXPECT_DOUBLE_EQ(c.activations, b.activations);
  EXPECT_DOUBLE_EQ(c.temporary, b.temporary);
  PlanSpec unfused = base, unfused_mods = MoePlan(m, kRecomputeLayernorm | kRecomputeMoeAct);
  unfused.flash_attention = unfused_mods.flash_attention = false;
  const StageMemory u = EstimateStageMemory(m, unfused, mp, 0, 3);
  const StageMemory v = EstimateStageMemory(m, unfused_mods, mp, 0, 3);
  EXPECT_DOUBLE_EQ(u.temporary - v.temporary, 8388608.0 - dropped);
}

TEST(RecomputeModules, RecomputeOpListsPerModule) {
  const ModelSpec m = Moe();
  // Default: the attention core only, as before modules existed.
  const LayerOps def = TransformerLayerOps(m, MoePlan(m, kDefaultRecomputeModules), 2);
  ASSERT_EQ(Names(def.recompute), std::vector<std::string>{"attn_core"});
  // layernorm + moe_act: the pre-MLP RMSNorm pass over T_r tokens and the
  // experts' SwiGLU pass over the routed rows at the busiest rank's share.
  const LayerOps ln = TransformerLayerOps(m, MoePlan(m, kRecomputeLayernorm | kRecomputeMoeAct), 2);
  ASSERT_EQ(Names(ln.recompute), (std::vector<std::string>{"rmsnorm2", "expert_swiglu"}));
  EXPECT_DOUBLE_EQ(ln.recompute[0].bytes, 2.0 * 2 * 512 * 1024);     // read + write e T_r h
  EXPECT_DOUBLE_EQ(ln.recompute[1].bytes, 3.0 * 2 * 2048 * 256);     // gate, up, out over balanced rows
  EXPECT_DOUBLE_EQ(ln.recompute[1].imbalance, 1.25);
  EXPECT_DOUBLE_EQ(SumFlops(ln.recompute), 0.0);
  // shared_experts: its module again, collectives and all, but not the add.
  const LayerOps sh = TransformerLayerOps(m, MoePlan(m, kRecomputeSharedExperts), 2);
  EXPECT_EQ(Names(sh.recompute), (std::vector<std::string>{"shared_sp_allgather", "shared_fc1_gate", "shared_fc1_up",
                                                          "shared_swiglu", "shared_fc2", "shared_sp_reducescatter"}));
  // moe: the whole block's forward, dispatch and combine all-to-alls included.
  const LayerOps moe = TransformerLayerOps(m, MoePlan(m, kRecomputeMoe), 2);
  EXPECT_EQ(Names(moe.recompute), Names(MoeMlpForward(m, MoePlan(m, kRecomputeMoe), 2)));
  bool a2a = false;
  for (const Op& op : moe.recompute) a2a |= op.kind == OpKind::kCollective && op.coll == CollKind::kAllToAll;
  EXPECT_TRUE(a2a);
}

TEST(RecomputeModules, DenseAndMlaRecomputeOps) {
  const ModelSpec g = Gpt(512, 8, 2);
  const LayerOps mlp = TransformerLayerOps(g, GptPlan(g, Recompute::kSelective, kRecomputeMlp), 2);
  EXPECT_EQ(Names(mlp.recompute), (std::vector<std::string>{"ln2", "fc1", "bias_gelu", "fc2", "tp_allreduce_mlp"}));
  // fc1 + fc2 FLOPs of T = 1024 tokens, 512 -> 1024 local columns and back.
  EXPECT_DOUBLE_EQ(SumFlops(mlp.recompute), 2 * 2.0 * 1024 * 1024 * 512);

  const ModelSpec v3 = DeepSeekV3();
  const LayerOps up = TransformerLayerOps(v3, V3Plan(v3, kRecomputeMlaUpProj | kRecomputeLayernorm), 2);
  EXPECT_EQ(Names(up.recompute), (std::vector<std::string>{"rmsnorm1", "rmsnorm2", "mla_q_up", "mla_kv_up", "rope",
                                                          "mla_k_assemble"}));
  // DeepSeek's dense leading layers: the input norm recomputes; moe_act has
  // nothing to act on there.
  const LayerOps dense = TransformerLayerOps(DenseLayerModel(v3), V3Plan(v3, kRecomputeLayernorm | kRecomputeMoeAct), 2);
  EXPECT_EQ(Names(dense.recompute), std::vector<std::string>{"rmsnorm1"});
}

TEST(RecomputeModules, DefaultIsTodaysSelective) {
  const ModelSpec m = Gpt(512, 8, 2);
  PlanSpec p = GptPlan(m, Recompute::kSelective, kDefaultRecomputeModules);
  EXPECT_FALSE(ToJson(p).contains("recompute_modules"));
  // An explicit ["core_attn"] reads as the default.
  json j = ToJson(p);
  j["recompute_modules"] = json::array({"core_attn"});
  auto back = PlanFromJson(j, m, "t");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->recompute_modules, kDefaultRecomputeModules);
  EXPECT_EQ(ToJson(*back).dump(), ToJson(p).dump());
  EXPECT_EQ(Describe(p).find("("), std::string::npos) << Describe(p);
  for (Feature f : FeaturesUsed(m, p)) EXPECT_NE(f, Feature::kRecomputeModules);
}

TEST(RecomputeModules, PlanJsonRoundTrip) {
  const ModelSpec m = Moe();
  const PlanSpec p = MoePlan(m, kRecomputeMoeAct | kRecomputeLayernorm | kRecomputeCoreAttn);
  const json j = ToJson(p);
  ASSERT_TRUE(j.contains("recompute_modules"));
  EXPECT_EQ(j["recompute_modules"], json::array({"core_attn", "layernorm", "moe_act"}));
  auto back = PlanFromJson(j, m, "t");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->recompute_modules, p.recompute_modules);
  EXPECT_EQ(ToJson(*back).dump(), j.dump());
  EXPECT_NE(Describe(p).find("rc=selective(core_attn,layernorm,moe_act)"), std::string::npos) << Describe(p);
}

// Validate's message for `modules` on `m` (empty when valid).
std::string Refusal(const ModelSpec& m, PlanSpec p) {
  Status s = Validate(p, m, "plan");
  return s.ok() ? "" : s.message();
}

TEST(RecomputeModules, Refusals) {
  const ModelSpec gpt = Gpt(512, 8, 2), moe = Moe(), plain_moe = Moe(0), v3 = DeepSeekV3();
  auto has = [](const std::string& msg, const std::string& part) {
    return msg.find(part) != std::string::npos;
  };
  std::string r = Refusal(gpt, GptPlan(gpt, Recompute::kFull, kRecomputeMlp));
  EXPECT_TRUE(has(r, "recompute_modules [mlp]") && has(r, "set recompute \"selective\"")) << r;
  r = Refusal(gpt, GptPlan(gpt, Recompute::kSelective, 0));
  EXPECT_TRUE(has(r, "empty")) << r;
  r = Refusal(gpt, GptPlan(gpt, Recompute::kSelective, kRecomputeMoeAct));
  EXPECT_TRUE(has(r, "'moe_act' but the model has no experts")) << r;
  r = Refusal(gpt, GptPlan(gpt, Recompute::kSelective, kRecomputeMoe));
  EXPECT_TRUE(has(r, "'moe' but the model has no experts")) << r;
  r = Refusal(plain_moe, MoePlan(plain_moe, kRecomputeSharedExperts));
  EXPECT_TRUE(has(r, "'shared_experts' but the model has no shared experts")) << r;
  r = Refusal(moe, MoePlan(moe, kRecomputeMlaUpProj));
  EXPECT_TRUE(has(r, "'mla_up_proj'") && has(r, "latent attention")) << r;
  r = Refusal(moe, MoePlan(moe, kRecomputeMlp));
  EXPECT_TRUE(has(r, "'mlp'") && has(r, "use 'moe'")) << r;
  r = Refusal(gpt, GptPlan(gpt, Recompute::kSelective, kRecomputeLayernorm));
  EXPECT_TRUE(has(r, "'layernorm'") && has(r, "frees nothing")) << r;
  PlanSpec fp8 = MoePlan(moe, kRecomputeMoeAct);
  fp8.precision = Precision::kFp8;
  r = Refusal(moe, fp8);
  EXPECT_TRUE(has(r, "delayed scaling") && has(r, "tensorwise")) << r;
  fp8.fp8_recipe = Fp8Recipe::kTensorwise;  // Megatron-LM allows them with current scaling
  EXPECT_EQ(Refusal(moe, fp8), "");
  PlanSpec overlap = MoePlan(moe, kRecomputeMoe);
  overlap.moe_a2a_overlap = true;
  r = Refusal(moe, overlap);
  EXPECT_TRUE(has(r, "moe_a2a_overlap")) << r;
  // What the model has is accepted: mlp on DeepSeek's dense leading layers.
  EXPECT_EQ(Refusal(v3, V3Plan(v3, kRecomputeMlp | kRecomputeMlaUpProj | kRecomputeMoeAct |
                                       kRecomputeSharedExperts | kRecomputeLayernorm)),
            "");
  // Names: unknown, and Megatron's modules of layers dtplan does not model.
  EXPECT_TRUE(has(ParseRecomputeModuleList("layernorm,attn").status().message(), "'attn' is unknown"));
  EXPECT_TRUE(has(ParseRecomputeModuleList("mhc").status().message(), "does not model"));
  EXPECT_TRUE(has(ParseRecomputeModuleList("layernorm,,moe_act").status().message(), "empty name"));
  auto ok = ParseRecomputeModuleList("moe_act,layernorm");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, static_cast<uint32_t>(kRecomputeMoeAct | kRecomputeLayernorm));
  // In plan JSON.
  json j = ToJson(MoePlan(moe, kRecomputeMoeAct));
  j["recompute_modules"] = json::array({"moe_act", "gdp_qkv"});
  auto bad = PlanFromJson(j, moe, "plan");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(has(bad.status().message(), "'recompute_modules'")) << bad.status().message();
  j["recompute_modules"] = "moe_act";
  EXPECT_FALSE(PlanFromJson(j, moe, "plan").ok());
}

TEST(RecomputeModules, DtrunRefusesByTheCapabilityTable) {
  const ModelSpec m = Moe(0);  // Mixtral-style, as dtrun runs MoE
  PlanSpec p = MoePlan(m, kRecomputeMoeAct);
  p.flash_attention = false;  // the CPU runtime's attention
  const Status s = CheckExecutable(m, p, RuntimeDevice::kCpu);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("recompute_modules [moe_act]"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(CapabilityOf(Feature::kRecomputeModules).fix), std::string::npos) << s.message();
  p.recompute_modules = kDefaultRecomputeModules;
  EXPECT_TRUE(CheckExecutable(m, p, RuntimeDevice::kCpu).ok()) << CheckExecutable(m, p, RuntimeDevice::kCpu).message();
}

TEST(RecomputeModules, MegatronExportImportRoundTrip) {
  PlanFile f;
  f.model = Moe();
  f.cluster = testing_models::Cluster(1, 4);
  f.plan = MoePlan(f.model, kRecomputeLayernorm | kRecomputeMoeAct);
  auto ex = ExportPlan(Framework::kMegatron, f);
  ASSERT_TRUE(ex.ok()) << ex.status().message();
  EXPECT_NE(ex->config.find("--recompute-modules layernorm moe_act\n"), std::string::npos) << ex->config;
  auto words = SplitCommandLine(ex->config + ex->launch);
  ASSERT_TRUE(words.ok());
  auto job = ImportMegatron(*words, 0, "rm");
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_EQ(job->plan.recompute, Recompute::kSelective);
  EXPECT_EQ(job->plan.recompute_modules, f.plan.recompute_modules);
  // torchtitan cannot say it: a note.
  f.model = testing_models::Llama8B();
  f.cluster = testing_models::Cluster(1, 8);
  f.plan = PlanSpec{};
  f.plan.dp = 8;
  f.plan.zero_stage = 3;
  f.plan.seq_length = 8192;
  f.plan.layers_per_chunk = {32};
  f.plan.recompute = Recompute::kSelective;
  f.plan.recompute_modules = kRecomputeCoreAttn | kRecomputeMlp;
  auto tt = ExportPlan(Framework::kTorchtitan, f);
  ASSERT_TRUE(tt.ok()) << tt.status().message();
  bool noted = false;
  for (const std::string& n : tt->notes) noted |= n.find("no torchtitan counterpart") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(RecomputeModules, MegatronImportReadsTheFlag) {
  auto import = [](const std::string& extra) {
    const std::string cmd =
        "pretrain_gpt.py --num-layers 4 --hidden-size 1024 --num-attention-heads 8 --seq-length 1024 "
        "--max-position-embeddings 1024 --micro-batch-size 1 --global-batch-size 8 --vocab-size 1024 "
        "--swiglu --normalization RMSNorm --position-embedding-type rope --disable-bias-linear --bf16 "
        "--ffn-hidden-size 2048 --untie-embeddings-and-output-weights " + extra;
    auto words = SplitCommandLine(cmd);
    EXPECT_TRUE(words.ok());
    return ImportMegatron(*words, 8, "t");
  };
  const std::string moe = "--num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 512 --moe-grouped-gemm "
                          "--expert-model-parallel-size 2 --moe-token-dispatcher-type alltoall ";
  auto a = import(moe + "--recompute-granularity selective --recompute-modules moe_act layernorm");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->plan.recompute_modules, static_cast<uint32_t>(kRecomputeMoeAct | kRecomputeLayernorm));
  // The deprecated --moe-layer-recompute: selective, Megatron's default list plus moe.
  auto b = import(moe + "--moe-layer-recompute");
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->plan.recompute, Recompute::kSelective);
  EXPECT_EQ(b->plan.recompute_modules, static_cast<uint32_t>(kRecomputeCoreAttn | kRecomputeMoe));
  // Megatron refuses moe_act without the grouped GEMM.
  auto c = import("--num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 512 --expert-model-parallel-size 2 "
                  "--moe-token-dispatcher-type alltoall --recompute-granularity selective --recompute-modules moe_act");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("--moe-grouped-gemm"), std::string::npos) << c.status().message();
  // Dense: layernorm frees nothing (dropped with a note); moe_act is refused.
  auto d = import("--recompute-granularity selective --recompute-modules core_attn layernorm");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->plan.recompute_modules, kDefaultRecomputeModules);
  bool noted = false;
  for (const std::string& n : d->notes) noted |= n.find("layernorm frees nothing") != std::string::npos;
  EXPECT_TRUE(noted);
  auto e = import("--recompute-granularity selective --recompute-modules moe_act");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("no experts"), std::string::npos) << e.status().message();
  // Without selective the modules do nothing (Megatron reads them there only).
  auto g = import("--recompute-modules mlp");
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->plan.recompute, Recompute::kNone);
  EXPECT_EQ(g->plan.recompute_modules, kDefaultRecomputeModules);
  auto h = import("--recompute-granularity selective --recompute-modules");
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->plan.recompute, Recompute::kNone);
}

}  // namespace
}  // namespace dt
