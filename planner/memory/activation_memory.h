// Activation memory of one transformer layer for one microbatch on one GPU:
// the tensors the forward stores for the backward, after Korthikanti et al.
// 2022 ("Reducing Activation Recomputation in Large Transformer Models",
// Sec. 4 and Table 2), generalised to Llama (SwiGLU, RMSNorm, no dropout),
// GQA, fp32 (bytes_per_element = 4) and context parallelism (s -> s/cp for
// the stored tensors; the softmax scores are s/cp x s per head).
// `kernels` (attention_kernels.h): kMegatron stores what Megatron's PyTorch
// softmax fallback keeps (an fp32 softmax output) for shapes its fused
// kernel refuses (layer_ops.h UsesMegatronTorchSoftmax); kRuntime, dtrun's.
// Pure functions of validated inputs; no failure modes. docs/memory.md.
#pragma once

#include "planner/cost/attention_kernels.h"
#include "planner/spec/model_spec.h"
#include "planner/spec/plan_spec.h"

namespace dt {

// Bytes stored per layer per microbatch under the plan's recompute mode
// (selective: minus what PlanSpec::recompute_modules drop).
double ActivationBytesPerLayer(const ModelSpec& m, const PlanSpec& p, int bytes_per_element,
                               AttentionKernels kernels = AttentionKernels::kRuntime);
// Same, for an explicit recompute mode (the plan's own mode is ignored).
double ActivationBytesPerLayerFor(const ModelSpec& m, const PlanSpec& p, int bytes_per_element,
                                  Recompute mode, AttentionKernels kernels = AttentionKernels::kRuntime);
// Mean stored bytes per layer over layers of which `recomputed_share` run
// full recompute and the rest none (PlanSpec::recompute_num_layers); for a
// plan without full recompute, ActivationBytesPerLayer.
double StoredBytesPerLayer(const ModelSpec& m, const PlanSpec& p, int bytes_per_element, double recomputed_share,
                           AttentionKernels kernels = AttentionKernels::kRuntime);
// Bytes selective-recompute module `module` alone drops from one layer's
// stored tensors (core_attn: the score term; 0 for a module the model lacks).
double RecomputeModuleBytesPerLayer(const ModelSpec& m, const PlanSpec& p, int bytes_per_element,
                                    RecomputeModule module, AttentionKernels kernels = AttentionKernels::kRuntime);
// What the plan's selective-recompute modules other than the attention core
// drop, and rebuild in one layer's backward (the sum over them; "moe"
// contains "moe_act" and "shared_experts"): 0 unless recompute is selective.
double RecomputedModuleBytesPerLayer(const ModelSpec& m, const PlanSpec& p, int bytes_per_element,
                                     AttentionKernels kernels = AttentionKernels::kRuntime);
// The attention-score part (softmax output, dropout mask and output): what
// selective recompute drops and what its backward rebuilds for one layer.
double AttentionScoreBytesPerLayer(const ModelSpec& m, const PlanSpec& p, int bytes_per_element,
                                   AttentionKernels kernels = AttentionKernels::kRuntime);

}  // namespace dt
