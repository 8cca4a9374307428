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
    const auto limit = std::chrono::duration<double>(timeout_s_);
    bool changed = cv_.wait_for(lock, limit, [&] { return stop_ || epoch_ != epoch; });
    if (changed) continue;
    char secs[32];
    std::snprintf(secs, sizeof(secs), "%g", timeout_s_);
    std::string msg = "FATAL [rank " + std::to_string(dt::CheckRank()) + "] phase '" + phase_ +
                      "' exceeded the watchdog timeout of " + secs +
                      " s (this rank or a peer it waits for is stopped, hung or dead); aborting the job";
    armed_ = false;
    lock.unlock();
    on_timeout_(msg);
    lock.lock();
  }
}

}  // namespace dt::rt
