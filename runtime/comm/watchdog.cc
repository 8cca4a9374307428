#include "runtime/comm/watchdog.h"

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1  // C bindings only
#endif
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "base/check.h"

namespace dt::rt {

StepWatchdog::StepWatchdog(double timeout_s, TimeoutFn on_timeout)
    : timeout_s_(timeout_s), on_timeout_(on_timeout ? std::move(on_timeout) : TimeoutFn(AbortJob)) {
  if (timeout_s_ > 0) thread_ = std::thread([this] { Loop(); });
}

StepWatchdog::~StepWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StepWatchdog::BeginStep(int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  in_step_ = true;
  step_ = step;
  ++epoch_;
  cv_.notify_all();
}

void StepWatchdog::EndStep() {
  std::lock_guard<std::mutex> lock(mu_);
  in_step_ = false;
  ++epoch_;
  cv_.notify_all();
}

void StepWatchdog::AbortJob(const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 3);
  std::_Exit(3);
}

void StepWatchdog::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (!in_step_) {
      cv_.wait(lock, [&] { return stop_ || in_step_; });
      continue;
    }
    const uint64_t epoch = epoch_;
    const auto limit = std::chrono::duration<double>(timeout_s_);
    bool changed = cv_.wait_for(lock, limit, [&] { return stop_ || epoch_ != epoch; });
    if (changed) continue;
    std::string msg = "FATAL [rank " + std::to_string(dt::CheckRank()) + "] step " +
                      std::to_string(step_) + " exceeded the watchdog timeout of " +
                      std::to_string(timeout_s_) +
                      " s (a peer rank is hung or dead); aborting the job";
    in_step_ = false;
    lock.unlock();
    on_timeout_(msg);
    lock.lock();
  }
}

}  // namespace dt::rt
