// MemoryParamsFor: the memory model's constants for a hardware profile
// (capacity, reserve and fragmentation from the device; element sizes from
// its training dtype: bf16 mixed precision or fp32; a plan's precision, when
// set, overrides the profile's dtype, and its grad_bytes the gradient element
// size). bf16 on a CPU profile is the bundled runtime's bf16 path: bf16
// storage, fp32 working set and fp32 working copies of the unit in use, and
// its fp32 gradient buffer unless the plan keeps fp32 main gradients
// (runtime/model/bf16_params.h, docs/memory.md). Pure.
#pragma once

#include "planner/memory/memory_params.h"
#include "planner/profile/profile.h"
#include "planner/spec/plan_spec.h"

namespace dt {

// The fp32 or the mixed-precision preset with the device's capacity,
// reserve, fragmentation and executor behaviour.
inline MemoryParams MemoryPresetFor(const HardwareProfile& hw, bool fp32) {
  const double cap = static_cast<double>(hw.device.memory_bytes);
  MemoryParams mp = fp32 ? MemoryParams::Fp32(cap) : MemoryParams::MixedPrecision(cap);
  mp.reserved_bytes = static_cast<double>(hw.device.reserved_bytes);
  mp.fragmentation = hw.device.fragmentation;
  mp.attention_kernels = hw.device.kind == "gpu" ? AttentionKernels::kMegatron : AttentionKernels::kRuntime;
  mp.sends_held_until_received = hw.device.kind == "cpu";  // dtrun's executor
  return mp;
}

inline MemoryParams MemoryParamsFor(const HardwareProfile& hw) { return MemoryPresetFor(hw, hw.device.dtype == "fp32"); }

inline MemoryParams MemoryParamsFor(const HardwareProfile& hw, const PlanSpec& p) {
  MemoryParams mp = p.precision == Precision::kFp32 || p.precision == Precision::kBf16
                        ? MemoryPresetFor(hw, p.precision == Precision::kFp32)
                        : MemoryParamsFor(hw);
  if (hw.device.kind == "cpu" && mp.activation_bytes == 2) {
    mp.working_bytes = 4;
    mp.unit_working_bytes = 8;
    mp.gemm_operand_copy_bytes = 2;
  }
  if (p.grad_bytes > 0) mp.grad_bytes = p.grad_bytes;
  // CPU bf16 with fp32 main gradients: the unit in backward accumulates into
  // them directly, so it has no fp32 gradient buffer (bf16_params.h).
  if (mp.unit_working_bytes > 0 && mp.grad_bytes == 4) mp.unit_working_bytes = 4;
  // Adam moments narrower than fp32: m and v at adam_moment_bytes each,
  // beside the fp32 master copy (mixed precision; an fp32 plan's weights
  // are their own master).
  if (p.adam_moment_bytes > 0) mp.optimizer_bytes = (mp.weight_bytes == 4 ? 0 : 4) + 2 * p.adam_moment_bytes;
  return mp;
}

}  // namespace dt
