// Fault drill for "a rank killed (or hung) mid-step: the job exits non-zero
// within 30 s". Run with 2+ ranks:
//   mpirun --allow-run-as-root --oversubscribe -np 2 mpi_fault_main kill
//   mpirun --allow-run-as-root --oversubscribe -np 2 mpi_fault_main hang
// kill: rank 1 SIGKILLs itself at step 3 while rank 0 waits in an
//       all-reduce; mpirun notices the dead process and kills the job.
// hang: rank 1 stops participating at step 3 (sleeps); rank 0's
//       StepWatchdog (5 s) calls MPI_Abort.
// Either way the expected result is a NON-ZERO exit of mpirun (CTest marks
// the test WILL_FAIL with a 30 s timeout). Exits 0 only if nothing happened,
// which means the fault was not injected (usage error).
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>

#include "runtime/comm/mpi_comm.h"
#include "runtime/comm/watchdog.h"

int main(int argc, char** argv) {
  using namespace dt::rt;
  MpiWorld world(&argc, &argv);
  const bool hang = argc > 1 && std::strcmp(argv[1], "hang") == 0;
  MpiComm comm(MPI_COMM_WORLD, /*owned=*/false);
  StepWatchdog watchdog(5.0);
  for (int step = 0; step < 6; ++step) {
    watchdog.BeginStep(step);
    if (step == 3 && world.rank() == 1) {
      if (hang) {
        std::this_thread::sleep_for(std::chrono::hours(1));
      } else {
        std::raise(SIGKILL);
      }
    }
    float x = 1.f;
    comm.AllReduce(&x, 1);
    watchdog.EndStep();
  }
  if (world.rank() == 0) std::printf("mpi_fault_main: no fault happened\n");
  return 0;
}
