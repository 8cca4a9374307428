// Bundled hardware profiles for planner tests, loaded once per process.
// Aborts (via StatusOr::value) when a bundled profile does not load: the
// tests cannot mean anything without it.
#pragma once

#include "planner/profile/profile.h"

namespace dt::testing_profiles {

inline const HardwareProfile& H100() {
  static const HardwareProfile p = LoadProfile("h100").value();
  return p;
}

inline const HardwareProfile& A100() {
  static const HardwareProfile p = LoadProfile("A100-SXM4-80GB").value();
  return p;
}

}  // namespace dt::testing_profiles
