#include "runtime/cli/fault_drill.h"

#include <csignal>
#include <cstdio>
#include <cstring>

namespace dt::rt {

void InjectFault(const DtrunOptions& o, int rank, const char* phase, int64_t step) {
  const bool is_step = std::strcmp(phase, "step") == 0;
  // An empty phase means "step" (the original --debug-kill-step drill); a
  // step of -1 matches any step.
  auto matches = [&](const std::string& want_phase, int64_t want_step) {
    const bool phase_ok = want_phase.empty() ? is_step : want_phase == phase;
    return phase_ok && (want_step < 0 || step < 0 || want_step == step);
  };
  const bool kill = rank == o.debug_kill_rank && matches(o.debug_kill_phase, o.debug_kill_step);
  const bool stall = rank == o.debug_stall_rank && !o.debug_stall_phase.empty() &&
                     matches(o.debug_stall_phase, o.debug_stall_step);
  if (!kill && !stall) return;
  std::fprintf(stderr, "dtrun: [rank %d] fault drill: %s in phase '%s'", rank, kill ? "SIGKILL" : "SIGSTOP", phase);
  if (step >= 0) std::fprintf(stderr, " (step %lld)", static_cast<long long>(step));
  std::fprintf(stderr, "\n");
  std::fflush(stderr);
  std::raise(kill ? SIGKILL : SIGSTOP);
}

}  // namespace dt::rt
