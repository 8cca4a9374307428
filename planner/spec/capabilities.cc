#include "planner/spec/capabilities.h"

#include "base/check.h"

namespace dt {

const char* ToString(RuntimeDevice d) { return d == RuntimeDevice::kCpu ? "CPU" : "CUDA"; }

RuntimeDevice RuntimeDeviceFor(const std::string& cluster_device) {
  return cluster_device == "cpu" ? RuntimeDevice::kCpu : RuntimeDevice::kCuda;
}

const std::vector<Capability>& CapabilityTable() {
  // The table. CUDA: the backend and NCCL comm exist with per-op parity
  // tests, but dtrun does not drive them for training steps yet.
  static const std::vector<Capability> table = {
      {Feature::kTrainingStep, "training steps on this device", true, false,
       "dtrun trains on CPU ranks only for now (plan with --device cpu to run it); use the plan's settings in "
       "Megatron-LM / torchtitan on GPUs"},
      // Before the model features: an MoE model is refused for what it is.
      // MoE on CPU: Mixtral-style (top-k routed SwiGLU experts, dropless), EP over
      // the DP group with expert TP = tp (runtime/model/moe_mlp.h); the rows below
      // refuse what it does not execute.
      {Feature::kMixtureOfExperts, "mixture of experts (routed experts, expert parallelism)", true, false,
       "plan it for GPUs and run the plan in Megatron-LM (dtplan export --to megatron)"},
      {Feature::kSharedExperts, "shared experts (Qwen2-MoE / DeepSeek style)", true, false,
       "use a Mixtral-style model (routed experts only, e.g. examples/models/mixtral-tiny.json), or run the plan "
       "in Megatron-LM (dtplan export --to megatron)"},
      {Feature::kUngatedExperts, "mixture of experts in the GPT family (GeLU experts)", false, false,
       "use a Llama-family (SwiGLU) MoE model such as examples/models/mixtral-tiny.json"},
      {Feature::kExpertParallelZero, "ZeRO-1 with expert parallelism (ep > 1)", true, false,
       "replan with --zero 0, or with --ep 1"},
      {Feature::kForcedBalancedRouting, "force-balanced MoE routing (a benchmarking setting)", false, false,
       "remove force_balanced_routing from the plan (dtrun routes by the learned router)"},
      // Capacity on CPU: runtime/model/moe_mlp.h (Megatron-LM's "probs" drop
      // policy, each rank among its own copies; padding to capacity).
      {Feature::kMoeCapacity, "an MoE expert capacity (token dropping, --moe-expert-capacity-factor)", true, false,
       "remove moe_capacity_factor from the plan, or run the plan in Megatron-LM (dtplan export --to megatron "
       "writes --moe-expert-capacity-factor)"},
      {Feature::kMoeCapacitySharded,
       "an MoE expert capacity with the sequence split over TP or CP (each rank drops among its own shard)", false,
       false,
       "replan with --tp 1 --cp 1 (each rank then drops among whole sequences, as one rank does), or drop "
       "--moe-capacity-factor, or run the plan in Megatron-LM"},
      {Feature::kDeduplicatedDispatch, "a deduplicating MoE token dispatcher (DeepEP / HybridEP)", false, false,
       "replan without --moe-dispatcher deduplicated (dtrun's all-to-all sends every routed copy), or run the "
       "plan in Megatron-LM with its flex dispatcher"},
      {Feature::kExpertFolding, "expert tensor parallelism below tp (MoE parallel folding, etp < tp)", false, false,
       "replan with --etp equal to tp (dtrun splits each expert over the TP group and EP over DP), or run the "
       "plan in Megatron-LM (--expert-tensor-parallel-size)"},
      {Feature::kFp8, "FP8 GEMMs (Transformer Engine style)", false, false,
       "plan it with --precision bf16 for dtrun, or run the FP8 plan in Megatron-LM (dtplan export --to "
       "megatron writes --fp8-format hybrid)"},
      {Feature::kMultiTokenPrediction, "multi-token prediction modules (DeepSeek-V3 MTP)", false, false,
       "set \"mtp_layers\": 0 in the model to train the main model only, or run it in Megatron-LM "
       "(dtplan export --to megatron writes --mtp-num-layers)"},
      {Feature::kDenseMoeLayers,
       "dense MLP layers in a mixture-of-experts model (DeepSeek's leading ones, Llama 4 Maverick's interleaved)",
       true, false,
       "set \"first_dense_layers\": 0 and \"moe_layer_step\": 1 in the model to train every layer as MoE, or "
       "run it in Megatron-LM (dtplan export --to megatron writes --moe-layer-freq)"},
      {Feature::kLatentAttention, "multi-head latent attention (DeepSeek-V2/V3 MLA)", false, false,
       "plan it for GPUs and run it in Megatron-LM (dtplan export --to megatron writes --multi-latent-attention)"},
      {Feature::kMoeA2aOverlap, "MoE all-to-alls overlapped with another microbatch (combined 1F1B)", false, false,
       "replan without --moe-a2a-overlap (dtrun runs the all-to-alls in line), or run the plan in Megatron-LM "
       "(--overlap-moe-expert-parallel-comm)"},
      {Feature::kMoeSharedExpertOverlap, "MoE shared experts on a stream of their own beside the dispatch and combine",
       false, false,
       "replan without --moe-shared-expert-overlap (dtrun runs the shared experts in line), or run the plan in "
       "Megatron-LM (dtplan export --to megatron writes --moe-shared-expert-overlap)"},
      {Feature::kExpertWgradOverlap,
       "MoE experts' weight gradients on a stream of their own beside the dispatch's backward all-to-all", false, false,
       "replan without --overlap-dispatch-backward-with-experts-wgrad (dtrun runs the weight gradients in line), or "
       "run the plan in Megatron-LM (dtplan export --to megatron writes the flag)"},
      {Feature::kTpCommOverlap, "TP communication overlapped with the GEMMs (userbuffers, --tp-comm-overlap)", false,
       false,
       "replan without --tp-comm-overlap (dtrun runs the sequence-parallel collectives in line), or run the plan in "
       "Megatron-LM (dtplan export --to megatron writes --tp-comm-overlap)"},
      {Feature::kMoeRouterCudaGraph, "MoE router and dispatcher preprocessing replayed as CUDA graphs", false, false,
       "replan without --moe-router-cuda-graph (dtrun launches no CUDA graphs), or run the plan in Megatron-LM "
       "(dtplan export --to megatron writes --cuda-graph-scope moe_router moe_preprocess)"},
      // dtrun's loss is one fused pass over each row of logits
      // (runtime/ops/cross_entropy.cc): priced as PlanSpec::cross_entropy_fusion.
      {Feature::kUnfusedCrossEntropy, "Megatron-LM's unfused cross-entropy (the loss as six PyTorch passes)", false,
       false,
       "replan without --cross-entropy unfused (dtrun's loss is one fused pass), or run the plan in Megatron-LM "
       "(dtplan export --to megatron writes --cross-entropy-loss-fusion only for fused plans)"},
      // dtrun's selective recompute rebuilds the attention probabilities only
      // (runtime/model/gpt_layer.cc, llama_layer.cc): Megatron-LM's default.
      {Feature::kRecomputeModules,
       "selective recompute of chosen modules (recompute_modules other than [core_attn])", false, false,
       "omit recompute_modules (dtrun recomputes the attention core, Megatron-LM's default), or run the plan in "
       "Megatron-LM (dtplan export --to megatron writes --recompute-modules)"},
      {Feature::kFp8ParamGather, "FP8 parameters all-gathered in FP8 (--fp8-param-gather)", false, false,
       "plan it with --precision bf16 for dtrun, or run it in Megatron-LM (dtplan export --to megatron "
       "writes --fp8-param-gather)"},
      {Feature::kGptFamily, "the GPT family", true, false, "use a supported model family"},
      {Feature::kLlamaFamily, "the Llama family (RMSNorm, SwiGLU, rotary positions)", true, false,
       "use a GPT model (e.g. examples/models/gpt-tiny.json)"},
      {Feature::kGroupedQueryAttention, "grouped-query attention (kv_heads < heads)", true, false,
       "use a model with num_kv_heads == heads"},
      {Feature::kUntiedEmbeddings, "an untied LM head", true, false, "use a model with tied embeddings"},
      {Feature::kModelVariant,
       "a layout beyond GPT-2 / Llama (explicit head_dim, QKV-only biases, OPT position offset, Falcon's "
       "parallel block, Gemma-2 post-norms, Gemma's GeGLU and scaled embeddings, RoPE scaling, partial RoPE, "
       "q/k norms, sliding-window attention, attention sinks, biases in MoE experts, Phi-3.5-MoE's LayerNorms, SmolLM3's layers without RoPE)",
       false, false, "use a GPT-2 or Llama layout model"},
      {Feature::kZero2, "ZeRO stage 2 (sharded gradients)", true, false, "replan with --zero 1"},
      {Feature::kZero3, "ZeRO stage 3 (sharded parameters)", true, false, "replan with --zero 1"},
      {Feature::kContextParallel, "context parallelism (cp > 1)", true, false, "replan with --cp 1"},
      {Feature::kFlashAttention, "fused (flash) attention", false, false,
       "replan with --attention unfused (the CPU runtime's attention stores the score matrix)"},
      {Feature::kDropout, "dropout (GPT: embedding, attention probabilities, attention and MLP outputs)", true,
       false, "plan without dropout (set \"dropout\": false in the plan file's plan)"},
      {Feature::kBf16,
       "bf16 mixed precision (bf16 weights, saved activations and gradients; fp32 master weights and Adam "
       "states; GEMMs on bf16 operands with fp32 accumulation on CPU)",
       true, false, "plan with --precision fp32"},
      {Feature::kBf16ZeroSharded, "bf16 mixed precision with ZeRO-2/3 sharding", true, false,
       "plan with --device cpu to run it on CPU ranks, or replan with --zero 1"},
      {Feature::kBf16Fp32Grads, "fp32 main gradients under bf16 (grad_bytes 4)", true, false,
       "plan with --device cpu to run it on CPU ranks, or set grad_bytes to 0 (bf16 gradients)"},
      {Feature::kBf16AdamMoments, "bf16 Adam moments (a precision-aware optimizer)", true, false,
       "plan with --device cpu to run it on CPU ranks, or run the plan in Megatron-LM "
       "(dtplan export --to megatron writes --use-precision-aware-optimizer)"},
  };
  return table;
}

const Capability& CapabilityOf(Feature f) {
  for (const Capability& c : CapabilityTable())
    if (c.feature == f) return c;
  DT_CHECK(false) << "feature " << static_cast<int>(f) << " missing from the capability table";
  return CapabilityTable().front();
}

bool Executes(RuntimeDevice d, Feature f) {
  const Capability& c = CapabilityOf(f);
  return d == RuntimeDevice::kCpu ? c.cpu : c.cuda;
}

std::vector<Feature> FeaturesUsed(const ModelSpec& m, const PlanSpec& p) {
  std::vector<Feature> used;
  for (const Capability& c : CapabilityTable()) {
    bool u = false;
    switch (c.feature) {
      case Feature::kTrainingStep: u = true; break;
      case Feature::kGptFamily: u = m.family == ModelFamily::kGpt; break;
      case Feature::kLlamaFamily: u = m.family == ModelFamily::kLlama; break;
      case Feature::kGroupedQueryAttention: u = m.kv_heads != m.heads; break;
      case Feature::kUntiedEmbeddings: u = !m.tied_embeddings; break;
      // Gemma prices like Llama but computes differently (GeGLU, (1 + w) norms, sqrt(h) embedding scale);
      // Phi-3.5-MoE has LayerNorms where the runtime's Llama has RMSNorms; SmolLM3 leaves RoPE out of
      // every fourth layer.
      case Feature::kModelVariant:
        u = !m.FamilyLayout() || m.source_type == "gemma" || m.source_type == "gemma2" ||
            m.source_type == "phimoe" || m.source_type == "smollm3" || m.rope_scaled;
        break;
      case Feature::kZero2: u = p.zero_stage == 2; break;
      case Feature::kZero3: u = p.zero_stage == 3; break;
      case Feature::kContextParallel: u = p.cp > 1; break;
      case Feature::kFlashAttention: u = p.flash_attention; break;
      case Feature::kDropout: u = p.dropout && m.uses_dropout(); break;
      case Feature::kMixtureOfExperts: u = m.moe(); break;
      case Feature::kSharedExperts: u = m.moe() && m.shared_ffn_hidden > 0; break;
      case Feature::kUngatedExperts: u = m.moe() && !m.gated_mlp(); break;
      case Feature::kExpertParallelZero: u = m.moe() && p.ep > 1 && p.zero_stage >= 1; break;
      case Feature::kForcedBalancedRouting: u = p.force_balanced_routing; break;
      case Feature::kMoeCapacity: u = m.moe() && p.moe_capacity_factor > 0; break;
      case Feature::kMoeCapacitySharded: u = m.moe() && p.moe_capacity_factor > 0 && (p.tp > 1 || p.cp > 1); break;
      case Feature::kDeduplicatedDispatch: u = m.moe() && p.moe_dispatcher == MoeDispatcher::kDeduplicated; break;
      case Feature::kExpertFolding: u = m.moe() && p.expert_folded(); break;
      case Feature::kFp8: u = p.precision == Precision::kFp8; break;
      case Feature::kFp8ParamGather: u = p.fp8_param_gather; break;
      case Feature::kMultiTokenPrediction: u = m.mtp_layers > 0; break;
      case Feature::kDenseMoeLayers: u = m.has_dense_layers(); break;
      case Feature::kLatentAttention: u = m.mla(); break;
      case Feature::kMoeA2aOverlap: u = p.moe_a2a_overlap; break;
      case Feature::kTpCommOverlap: u = p.tp_comm_overlap; break;
      case Feature::kMoeRouterCudaGraph: u = m.moe() && p.moe_router_cuda_graph; break;
      case Feature::kMoeSharedExpertOverlap: u = m.moe() && p.moe_shared_expert_overlap; break;
      case Feature::kExpertWgradOverlap: u = m.moe() && p.overlap_dispatch_backward_wgrad; break;
      case Feature::kUnfusedCrossEntropy: u = !p.cross_entropy_fusion; break;
      case Feature::kRecomputeModules:
        u = p.recompute == Recompute::kSelective && p.recompute_modules != kDefaultRecomputeModules;
        break;
      case Feature::kBf16: u = p.precision == Precision::kBf16; break;
      case Feature::kBf16ZeroSharded: u = p.precision == Precision::kBf16 && p.zero_stage >= 2; break;
      case Feature::kBf16Fp32Grads: u = p.precision == Precision::kBf16 && p.grad_bytes == 4; break;
      case Feature::kBf16AdamMoments: u = p.adam_moment_bytes == 2; break;
    }
    if (u) used.push_back(c.feature);
  }
  return used;
}

std::vector<Feature> MissingFeatures(const ModelSpec& m, const PlanSpec& p, RuntimeDevice d) {
  std::vector<Feature> missing;
  for (Feature f : FeaturesUsed(m, p))
    if (!Executes(d, f)) missing.push_back(f);
  return missing;
}

namespace {
std::string Where(const ModelSpec& m, const PlanSpec& p, Feature f) {
  switch (f) {
    case Feature::kZero2:
    case Feature::kZero3: return "plan has zero_stage=" + std::to_string(p.zero_stage);
    case Feature::kContextParallel: return "plan has cp=" + std::to_string(p.cp);
    case Feature::kExpertParallelZero:
      return "plan has ep=" + std::to_string(p.ep) + " and zero_stage=" + std::to_string(p.zero_stage);
    case Feature::kExpertFolding:
      return "plan has etp=" + std::to_string(p.expert_tp()) + " and tp=" + std::to_string(p.tp);
    case Feature::kFlashAttention: return "plan assumes flash attention";
    case Feature::kTpCommOverlap: return "plan has tp_comm_overlap";
    case Feature::kMoeRouterCudaGraph: return "plan has moe_router_cuda_graph";
    case Feature::kMoeCapacity: return "plan has moe_capacity_factor";
    case Feature::kMoeCapacitySharded:
      return "plan has moe_capacity_factor with tp=" + std::to_string(p.tp) + " and cp=" + std::to_string(p.cp);
    case Feature::kUnfusedCrossEntropy: return "plan has cross_entropy_loss_fusion=false";
    case Feature::kDropout: return "plan has dropout";
    case Feature::kBf16: return "plan has precision=bf16";
    case Feature::kBf16ZeroSharded: return "plan has precision=bf16 and zero_stage=" + std::to_string(p.zero_stage);
    case Feature::kBf16Fp32Grads: return "plan has precision=bf16 and grad_bytes=4";
    case Feature::kBf16AdamMoments: return "plan has adam_moment_bytes=2";
    case Feature::kRecomputeModules:
      return "plan has recompute_modules [" + RecomputeModulesString(p.recompute_modules, ", ") + "]";
    case Feature::kTrainingStep: return "plan";
    default: return "model '" + m.name + "'";
  }
}
}  // namespace

Status CheckExecutable(const ModelSpec& m, const PlanSpec& p, RuntimeDevice d) {
  const std::vector<Feature> missing = MissingFeatures(m, p, d);
  if (missing.empty()) return Status::Ok();
  const Capability& c = CapabilityOf(missing.front());
  return InvalidArgument(Where(m, p, c.feature) + ": the " + ToString(d) + " runtime does not execute " + c.name +
                         " yet; " + c.fix);
}

std::string MissingSummary(const ModelSpec& m, const PlanSpec& p, RuntimeDevice d) {
  std::string s;
  for (Feature f : MissingFeatures(m, p, d)) s += (s.empty() ? "" : "; ") + std::string(CapabilityOf(f).name);
  return s;
}

}  // namespace dt
