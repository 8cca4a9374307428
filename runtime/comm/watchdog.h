// StepWatchdog: turns a hung training step into a prompt, non-zero job exit.
//
// Why: Open MPI's mpirun already kills the whole job when a rank *dies*
// (signal or abnormal exit), but a rank blocked forever in a collective whose
// peer is stuck (or whose peer died under a launcher that does not clean up)
// would hang. The watchdog runs one background thread; the training loop
// calls BeginStep(step) / EndStep() around each step, and if a step stays
// open longer than timeout_s the thread calls on_timeout (default: print
// "FATAL [rank R] step S exceeded T s ..." and MPI_Abort(MPI_COMM_WORLD, 3),
// which makes mpirun kill every rank and exit non-zero). Calling MPI_Abort
// from this thread bends MPI_THREAD_FUNNELED; Open MPI's abort path tolerates
// it, and if MPI_Abort returns the process _Exit(3)s anyway.
// Thread-safe: BeginStep/EndStep from the training thread; the destructor
// stops the thread. A timeout_s <= 0 disables the watchdog.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace dt::rt {

class StepWatchdog {
 public:
  using TimeoutFn = std::function<void(const std::string& message)>;
  explicit StepWatchdog(double timeout_s, TimeoutFn on_timeout = nullptr);
  ~StepWatchdog();
  StepWatchdog(const StepWatchdog&) = delete;
  StepWatchdog& operator=(const StepWatchdog&) = delete;

  void BeginStep(int64_t step);
  void EndStep();

  // The default action: message to stderr, MPI_Abort, then _Exit(3).
  static void AbortJob(const std::string& message);

 private:
  void Loop();
  const double timeout_s_;
  TimeoutFn on_timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool in_step_ = false;
  int64_t step_ = -1;
  uint64_t epoch_ = 0;  // bumps on every BeginStep/EndStep
  std::thread thread_;
};

}  // namespace dt::rt
