// Whose kernels run a plan's unfused attention core: dtrun's (kRuntime:
// the profiler, CPU plans) or a GPU framework's (kMegatron: Megatron-LM's
// FusedScaleMaskSoftmax, whose fused kernel takes only some shapes; the
// others fall back to PyTorch ops, layer_ops.h UsesMegatronTorchSoftmax).
// Shared by the op lists (planner/cost) and the memory model
// (planner/memory, MemoryParams::attention_kernels). Plain data.
#pragma once

namespace dt {

enum class AttentionKernels { kRuntime, kMegatron };

}  // namespace dt
