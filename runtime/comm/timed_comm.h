// TimedComm: a Comm decorator that measures where a rank's step waits on
// communication. It forwards every call to the Comm it owns and adds the
// host wall time spent inside the call (blocking collectives) or inside a
// Request's Wait (non-blocking sends, receives and all-reduces) to a
// CommTimes shared by the rank's groups, under the group's label. Time in a
// blocking call includes waiting for the slowest member to arrive, so it is
// what the step loses to the group, not the transfer alone.
//
// dtrun wraps its groups in it under DT_COMM_TIMES=1 (runtime/cli/trainer.cc)
// and prints the per-step means; the planner's breakdown of the same plan
// (exposed TP / PP / DP communication) is the prediction to compare with.
// Not thread-safe, like Comm; the CommTimes must outlive every TimedComm
// and Request that reports to it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/comm/comm.h"

namespace dt::rt {

struct CommTimes {
  struct Entry {
    double seconds = 0;
    long long calls = 0;
    std::vector<double> each;  // by_call with keep_each_call only: every call's time, in call order
  };
  // Keep every blocking call's time in by_call's `each` (the profiler takes
  // medians); off, only totals are kept, whatever the run's length.
  bool keep_each_call = false;
  std::map<std::string, Entry> by_group;  // label ("tp", "dp", ...) -> totals
  // Blocking collectives by operation ("all_reduce", "reduce_scatter",
  // "all_gather") and size in the nccl-tests convention of the profile's
  // series (all-reduce: the buffer; reduce-scatter: the whole input;
  // all-gather: the whole output; in bytes as moved, 2 per bf16 element).
  std::map<std::pair<std::string, double>, Entry> by_call;
  void Clear() {
    by_group.clear();
    by_call.clear();
  }
};

class TimedComm : public Comm {
 public:
  TimedComm(std::unique_ptr<Comm> inner, std::string label, CommTimes* times);

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  void AllReduce(float* buf, size_t n, ReduceOp op) override;
  std::unique_ptr<Request> IAllReduce(float* buf, size_t n) override;
  void ReduceScatter(const float* in, float* out, size_t n) override;
  void AllGather(const float* in, float* out, size_t n) override;
  std::unique_ptr<Request> ISend(const float* buf, size_t n, int peer, int tag) override;
  std::unique_ptr<Request> IRecv(float* buf, size_t n, int peer, int tag) override;
  void Barrier() override;
  void AllToAllV(const float* in, const size_t* send_counts, float* out, const size_t* recv_counts) override;
  void AllReduceBf16(uint16_t* buf, size_t n) override;
  void ReduceScatterBf16(const uint16_t* in, uint16_t* out, size_t n) override;
  void AllGatherBf16(const uint16_t* in, uint16_t* out, size_t n) override;

 private:
  template <typename F>
  void Timed(F f, const char* op = nullptr, double bus_bytes = 0);
  std::unique_ptr<Request> Wrap(std::unique_ptr<Request> r);

  std::unique_ptr<Comm> inner_;
  std::string label_;
  CommTimes* times_;
};

}  // namespace dt::rt
