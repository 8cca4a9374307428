#include "runtime/comm/watchdog.h"

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1  // C bindings only
#endif
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "base/check.h"

namespace dt::rt {

JobWatchdog::JobWatchdog(double timeout_s, TimeoutFn on_timeout)
    : timeout_s_(timeout_s), on_timeout_(on_timeout ? std::move(on_timeout) : TimeoutFn(AbortJob)) {
  if (timeout_s_ > 0) thread_ = std::thread([this] { Loop(); });
}

JobWatchdog::~JobWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void JobWatchdog::Enter(const std::string& phase) {
  std::lock_guard<std::mutex> lock(mu_);
  armed_ = true;
  phase_ = phase;
  ++epoch_;
  cv_.notify_all();
}

void JobWatchdog::Disarm() {
  std::lock_guard<std::mutex> lock(mu_);
  armed_ = false;
  ++epoch_;
  cv_.notify_all();
}

void JobWatchdog::AbortJob(const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 3);
  std::_Exit(3);
}

void JobWatchdog::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (!armed_) {
      cv_.wait(lock, [&] { return stop_ || armed_; });
      continue;
    }
    const uint64_t epoch = epoch_;
    // Wake in slices: a slice that took far longer than asked means this
    // process itself did not run (SIGSTOP, a debugger), which the message
    // then says, so the stopped rank names itself once it is continued.
    using Clock = std::chrono::steady_clock;
    const double slice_s = std::min(1.0, timeout_s_ / 4);
    const auto slice = std::chrono::duration<double>(slice_s);
    const Clock::time_point start = Clock::now();
    Clock::time_point last = start;
    double not_running_s = 0.0;
    bool changed = false;
    while (true) {
      changed = cv_.wait_for(lock, slice, [&] { return stop_ || epoch_ != epoch; });
      if (changed) break;
      const Clock::time_point now = Clock::now();
      const double gap_s = std::chrono::duration<double>(now - last).count() - slice_s;
      if (gap_s > std::max(1.0, timeout_s_ / 2)) not_running_s += gap_s;
      last = now;
      if (std::chrono::duration<double>(now - start).count() >= timeout_s_) break;
    }
    if (changed) continue;
    char secs[32];
    std::snprintf(secs, sizeof(secs), "%g", timeout_s_);
    std::string why = " (a peer rank it waits for is stopped, hung or dead)";
    if (not_running_s > 0) {
      char stopped[64];
      std::snprintf(stopped, sizeof(stopped), "%.0f", not_running_s);
      why = ": THIS rank did not run for " + std::string(stopped) + " s of it (stopped: SIGSTOP, a debugger, or a "
            "starved node)";
    }
    std::string msg = "FATAL [rank " + std::to_string(dt::CheckRank()) + "] phase '" + phase_ +
                      "' exceeded the watchdog timeout of " + secs + " s" + why + "; aborting the job";
    armed_ = false;
    lock.unlock();
    on_timeout_(msg);
    lock.lock();
  }
}

}  // namespace dt::rt
