// `dtplan profile`: the launcher half of the profiler. The measuring is done
// by the MPI executable `dtplan-profile` (planner/profiler/main.cc), one
// process per rank; this entry point only decides how to start it, so the
// planner binary never links MPI or the runtime.
//
//   * Already inside an MPI job (OMPI_COMM_WORLD_SIZE / PMI_SIZE / PMIX_RANK
//     set): exec dtplan-profile in place with the same arguments.
//   * Otherwise: exec `mpirun -np <ranks> [--allow-run-as-root]
//     --oversubscribe dtplan-profile <args>`, with <ranks> from `--ranks N`
//     (default: the number of online cores, i.e. one rank per core).
//
// dtplan-profile is found via $DTPLAN_PROFILE_EXE, then next to the running
// executable, then at its build path. On success this function does not
// return (exec); it returns 1 when the exec fails and 2 on a bad --ranks,
// printing one line to stderr. Arguments: argv[0] is ignored (the
// subcommand name or program), argv[1..] are passed through verbatim.
// Exit codes of dtplan-profile itself: see docs/profiler.md (0 ok, 1
// internal, 2 bad input, 3 device unavailable).
#pragma once

#include <string>
#include <vector>

namespace dt {

int RunProfileCommand(int argc, char** argv);

// The command line RunProfileCommand would exec (exposed for tests):
// `exe` is the dtplan-profile path; `under_mpi` skips the mpirun wrapper.
std::vector<std::string> ProfileLaunchCommand(const std::vector<std::string>& args,
                                              const std::string& exe, bool under_mpi,
                                              bool as_root, int default_ranks);

}  // namespace dt
