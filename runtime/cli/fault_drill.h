// Fault drills for dtrun's tests: hidden flags (options.h, debug_*) make one
// rank die (SIGKILL) or stop (SIGSTOP) on entering a phase, so tests can
// check that the job ends promptly and that no checkpoint is lost.
// Phases: "startup", "resume", "step" (`step`: the 1-based step), "save"
// (`step`: the step saved), "shutdown" (step -1). A drill's step of -1
// matches any step; an empty drill phase means "step". A no-op unless the options name this rank and phase. Stopping
// stops every thread of the process, the watchdog's included: the peers'
// watchdogs must end the job. Not for production use.
#pragma once

#include <cstdint>

#include "runtime/cli/options.h"

namespace dt::rt {

void InjectFault(const DtrunOptions& o, int rank, const char* phase, int64_t step = -1);

}  // namespace dt::rt
