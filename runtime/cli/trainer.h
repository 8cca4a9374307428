// RunTraining: dtrun's whole job on one MPI rank — validate the plan against
// the world and the runtime's features, build groups, model chunks,
// optimizer, data loader and the schedule's Interpreter, optionally resume
// from a checkpoint, run the steps (rank 0 prints a line per step and the
// summary), write metrics and checkpoints.
//
// Every rank calls it with the same options. Validation failures are
// detected identically on every rank before any collective (or agreed on
// through one all-reduce), so every rank returns the same exit code and none
// hangs. Returns the process exit code:
//   0 success; 1 runtime failure (e.g. checkpoint write failed);
//   2 bad input (plan file, world size, unsupported feature, data file,
//     corrupt checkpoint). A rank that stops in any phase aborts the job
//   (exit 3) through the JobWatchdog, which RunTraining moves from phase to
//   phase ("resume", "step N", "save step N", ...); a crashed rank makes
//   mpirun kill the job.
#pragma once

#include "runtime/cli/options.h"
#include "runtime/comm/mpi_comm.h"
#include "runtime/comm/watchdog.h"

namespace dt::rt {

// `watchdog` (not null) is armed by the caller ("startup") and left in the
// phase RunTraining ended in.
int RunTraining(const DtrunOptions& opts, const MpiWorld& world, JobWatchdog* watchdog);

}  // namespace dt::rt
