// Capabilities: the one table of which plan and model features each backend
// of the bundled runtime (dtrun) executes. Read by the planner (dtplan
// --device cpu never emits a plan outside the CPU column; GPU plans carry a
// note naming what the CUDA runtime cannot execute yet), by dtrun (its
// refusals are this table's messages) and by tests. Adding a feature to a
// runtime means flipping its entry here, in the same change as the test that
// proves it runs end to end.
//
// Pure data and pure functions; no I/O. CheckExecutable returns
// InvalidArgument naming the first missing feature and the fix; it never
// aborts.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "planner/spec/model_spec.h"
#include "planner/spec/plan_spec.h"

namespace dt {

enum class RuntimeDevice { kCpu, kCuda };
const char* ToString(RuntimeDevice d);  // "CPU", "CUDA"
// "cpu" -> kCpu; "gpu" / "cuda" -> kCuda.
RuntimeDevice RuntimeDeviceFor(const std::string& cluster_device);

enum class Feature {
  kTrainingStep,           // dtrun drives this backend for whole training steps at all
  kGptFamily,              // LayerNorm, GeLU MLP, learned positions
  kLlamaFamily,            // RMSNorm, SwiGLU, rotary positions
  kGroupedQueryAttention,  // kv_heads < heads
  kUntiedEmbeddings,       // separate LM head
  kModelVariant,           // layout details beyond GPT-2 / Llama (ModelSpec::FamilyLayout() false)
  kZero2,                  // gradients sharded over DP
  kZero3,                  // parameters sharded over DP, gathered per layer
  kContextParallel,        // cp > 1, ring attention
  kFlashAttention,         // fused attention (no s x s scores stored)
  kDropout,                // GPT dropout masks
  kMixtureOfExperts,       // routed experts, expert parallelism (ModelSpec::moe())
  kSharedExperts,          // MoE shared experts (+ sigmoid gate): Qwen2-MoE, DeepSeek
  kUngatedExperts,         // MoE in the GPT family (GeLU experts, no SwiGLU)
  kExpertParallelZero,     // ZeRO-1 with ep > 1 (expert optimizer state sharded over expert-DP)
  kForcedBalancedRouting,  // PlanSpec::force_balanced_routing (a benchmarking router setting)
  kMoeCapacity,            // PlanSpec::moe_capacity_factor > 0 (token dropping, optionally padded)
  kMoeCapacitySharded,     // the same with tp > 1 or cp > 1 (each rank drops among its sequence shard)
  kDeduplicatedDispatch,   // PlanSpec::moe_dispatcher == kDeduplicated (DeepEP / HybridEP)
  kExpertFolding,          // expert tensor parallelism below tp (PlanSpec::expert_folded)
  kFp8,                    // FP8 GEMMs (PlanSpec::precision == kFp8)
  kFp8ParamGather,         // FP8 weights all-gathered in FP8 (PlanSpec::fp8_param_gather)
  kMultiTokenPrediction,   // ModelSpec::mtp_layers > 0 (DeepSeek-V3's MTP modules)
  kDenseMoeLayers,         // dense MLP layers in an MoE model (ModelSpec::has_dense_layers())
  kLatentAttention,        // multi-head latent attention (ModelSpec::mla(): DeepSeek-V2/V3, Kimi K2)
  kMoeA2aOverlap,          // PlanSpec::moe_a2a_overlap (combined 1F1B)
  kTpCommOverlap,          // PlanSpec::tp_comm_overlap (Transformer Engine userbuffers)
  kMoeRouterCudaGraph,     // PlanSpec::moe_router_cuda_graph (router + preprocessing as CUDA graphs)
  kMoeSharedExpertOverlap, // PlanSpec::moe_shared_expert_overlap (shared experts on a side stream)
  kExpertWgradOverlap,     // PlanSpec::overlap_dispatch_backward_wgrad (expert wgrads on a side stream)
  kUnfusedCrossEntropy,    // PlanSpec::cross_entropy_fusion false (Megatron's loss as PyTorch ops)
  kRecomputeModules,       // selective recompute of modules other than the attention core alone
  kBf16,                   // precision bf16: bf16 storage, fp32 master weights and Adam
  kBf16ZeroSharded,        // precision bf16 with ZeRO-2/3
  kBf16Fp32Grads,          // precision bf16 with grad_bytes 4 (fp32 main gradients)
  kBf16AdamMoments,        // PlanSpec::adam_moment_bytes 2 (bf16 Adam m and v)
};

struct Capability {
  Feature feature;
  const char* name;  // what a user reads: "ZeRO stage 3"
  bool cpu;          // executed by dtrun on CPU ranks (Eigen + MPI)
  bool cuda;         // executed by dtrun on GPUs (cuBLAS + NCCL)
  const char* fix;   // what to do instead, for a plan that needs it
};

// Every Feature exactly once.
const std::vector<Capability>& CapabilityTable();
const Capability& CapabilityOf(Feature f);
bool Executes(RuntimeDevice d, Feature f);

// The features running (model, plan) needs, each once, in table order.
std::vector<Feature> FeaturesUsed(const ModelSpec& m, const PlanSpec& p);
// The subset of FeaturesUsed that device d's runtime does not execute.
std::vector<Feature> MissingFeatures(const ModelSpec& m, const PlanSpec& p, RuntimeDevice d);
// Ok, or InvalidArgument: "<what the plan uses>: the <device> runtime does
// not execute <feature> yet; <fix>" for the first missing feature.
Status CheckExecutable(const ModelSpec& m, const PlanSpec& p, RuntimeDevice d);
// One line describing every missing feature (empty when none): for notes.
std::string MissingSummary(const ModelSpec& m, const PlanSpec& p, RuntimeDevice d);

}  // namespace dt
