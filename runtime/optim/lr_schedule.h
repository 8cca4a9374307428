// LrSchedule: linear warmup then cosine decay of the learning rate.
//
//   step < warmup:          lr = peak * (step + 1) / warmup
//   warmup <= step < total: lr = min + (peak - min) * (1 + cos(pi * f)) / 2,
//                           f = (step - warmup) / (total - warmup)
//   step >= total:          lr = min
// `step` is 0-based (the step being taken). Pure value type.
#pragma once

#include <cstdint>

namespace dt::rt {

struct LrSchedule {
  double peak_lr = 3e-4;
  double min_lr = 3e-5;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  double At(int64_t step) const;
};

}  // namespace dt::rt
