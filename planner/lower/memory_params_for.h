// MemoryParamsFor: the memory model's constants for a hardware profile
// (capacity, reserve and fragmentation from the device; element sizes from
// its training dtype: bf16 mixed precision or fp32; a plan's grad_bytes, when
// set, overrides the gradient element size). Pure.
#pragma once

#include "planner/memory/memory_params.h"
#include "planner/profile/profile.h"
#include "planner/spec/plan_spec.h"

namespace dt {

inline MemoryParams MemoryParamsFor(const HardwareProfile& hw) {
  const double cap = static_cast<double>(hw.device.memory_bytes);
  MemoryParams mp = hw.device.dtype == "fp32" ? MemoryParams::Fp32(cap) : MemoryParams::MixedPrecision(cap);
  mp.reserved_bytes = static_cast<double>(hw.device.reserved_bytes);
  mp.fragmentation = hw.device.fragmentation;
  return mp;
}

inline MemoryParams MemoryParamsFor(const HardwareProfile& hw, const PlanSpec& p) {
  MemoryParams mp = MemoryParamsFor(hw);
  if (p.grad_bytes > 0) mp.grad_bytes = p.grad_bytes;
  return mp;
}

}  // namespace dt
