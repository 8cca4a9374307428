#include "runtime/optim/lr_schedule.h"

#include <cmath>

namespace dt::rt {

double LrSchedule::At(int64_t step) const {
  if (step < warmup_steps) return peak_lr * static_cast<double>(step + 1) / warmup_steps;
  if (step >= total_steps || total_steps <= warmup_steps) return min_lr;
  const double f = static_cast<double>(step - warmup_steps) / (total_steps - warmup_steps);
  return min_lr + (peak_lr - min_lr) * 0.5 * (1.0 + std::cos(M_PI * f));
}

}  // namespace dt::rt
