// MemoryParamsFor: the memory model's constants for a hardware profile
// (capacity, reserve and fragmentation from the device; element sizes from
// its training dtype: bf16 mixed precision or fp32). Pure.
#pragma once

#include "planner/memory/memory_params.h"
#include "planner/profile/profile.h"

namespace dt {

inline MemoryParams MemoryParamsFor(const HardwareProfile& hw) {
  const double cap = static_cast<double>(hw.device.memory_bytes);
  MemoryParams mp = hw.device.dtype == "fp32" ? MemoryParams::Fp32(cap) : MemoryParams::MixedPrecision(cap);
  mp.reserved_bytes = static_cast<double>(hw.device.reserved_bytes);
  mp.fragmentation = hw.device.fragmentation;
  return mp;
}

}  // namespace dt
