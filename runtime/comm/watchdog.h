// JobWatchdog: turns a rank that stops anywhere in the job — startup, a
// training step, a checkpoint save or resume, shutdown — into a prompt,
// non-zero exit of the whole job, with a message naming the phase.
//
// Why: Open MPI's mpirun already kills the whole job when a rank *dies*, but
// a rank that is stopped (SIGSTOP, a debugger, a swapped-out node) or blocked
// forever leaves its peers waiting in a collective with no end. A stopped
// rank cannot watch itself (its threads stop too), so every rank watches its
// own progress: the job is always in some phase, Enter(phase) restarts the
// clock for the next one, and a phase that lasts longer than timeout_s makes
// the background thread call on_timeout (default: print "FATAL [rank R]
// phase 'P' exceeded T s ..." and MPI_Abort(MPI_COMM_WORLD, 3), which makes
// mpirun kill every rank, the stopped one included). Since the phases cover
// the whole job back to back, the ranks waiting for a stopped peer fire
// within timeout_s of the stop. The thread wakes in slices (<= 1 s); a slice
// that took far longer than asked (> max(1 s, timeout_s / 2)) means this
// process itself did not run, and the message then says "THIS rank did not
// run for N s": a stopped rank that mpirun continues (SIGCONT before its
// kill) names itself — best effort, it may be killed before it prints. Calling MPI_Abort from this thread bends
// MPI_THREAD_FUNNELED; Open MPI's abort path tolerates it, and if MPI_Abort
// returns the process _Exit(3)s anyway.
//
// Thread-safety: Enter/Disarm from the training thread; the destructor stops
// the thread. A timeout_s <= 0 disables the watchdog. Fires at most once per
// Enter.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace dt::rt {

class JobWatchdog {
 public:
  using TimeoutFn = std::function<void(const std::string& message)>;
  explicit JobWatchdog(double timeout_s, TimeoutFn on_timeout = nullptr);
  ~JobWatchdog();
  JobWatchdog(const JobWatchdog&) = delete;
  JobWatchdog& operator=(const JobWatchdog&) = delete;

  // Arms the watchdog for `phase` (e.g. "startup", "step 7", "save step 8"),
  // restarting the clock.
  void Enter(const std::string& phase);
  // Nothing is watched until the next Enter.
  void Disarm();
  // Step-loop spelling: Enter("step <step>") / Disarm().
  void BeginStep(int64_t step) { Enter("step " + std::to_string(step)); }
  void EndStep() { Disarm(); }

  double timeout_s() const { return timeout_s_; }

  // The default action: message to stderr, MPI_Abort, then _Exit(3).
  static void AbortJob(const std::string& message);

 private:
  void Loop();
  const double timeout_s_;
  TimeoutFn on_timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool armed_ = false;
  std::string phase_;
  uint64_t epoch_ = 0;  // bumps on every Enter/Disarm
  std::thread thread_;
};

// The name the step loop and older callers use.
using StepWatchdog = JobWatchdog;

}  // namespace dt::rt
