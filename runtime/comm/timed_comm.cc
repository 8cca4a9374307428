#include "runtime/comm/timed_comm.h"

#include <chrono>
#include <utility>

namespace dt::rt {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class TimedRequest : public Request {
 public:
  TimedRequest(std::unique_ptr<Request> inner, CommTimes::Entry* entry)
      : inner_(std::move(inner)), entry_(entry) {}
  void Wait() override {
    const double t0 = Now();
    inner_->Wait();
    entry_->seconds += Now() - t0;
  }
  bool Test() override { return inner_->Test(); }

 private:
  std::unique_ptr<Request> inner_;
  CommTimes::Entry* entry_;
};

}  // namespace

TimedComm::TimedComm(std::unique_ptr<Comm> inner, std::string label, CommTimes* times)
    : inner_(std::move(inner)), label_(std::move(label)), times_(times) {}

template <typename F>
void TimedComm::Timed(F f, const char* op, double bus_bytes) {
  const double t0 = Now();
  f();
  const double dt = Now() - t0;
  CommTimes::Entry& e = times_->by_group[label_];
  e.seconds += dt;
  ++e.calls;
  if (op != nullptr) {
    CommTimes::Entry& c = times_->by_call[{op, bus_bytes}];
    c.seconds += dt;
    ++c.calls;
    if (times_->keep_each_call) c.each.push_back(dt);
  }
}

std::unique_ptr<Request> TimedComm::Wrap(std::unique_ptr<Request> r) {
  CommTimes::Entry& e = times_->by_group[label_];
  ++e.calls;
  // std::map never moves its elements, so the entry outlives the request
  // as long as the CommTimes does (its Clear() must not run while one is
  // pending: dtrun clears between steps, when every request has completed).
  return std::make_unique<TimedRequest>(std::move(r), &e);
}

void TimedComm::AllReduce(float* buf, size_t n, ReduceOp op) {
  Timed([&] { inner_->AllReduce(buf, n, op); }, "all_reduce", 4.0 * n);
}
std::unique_ptr<Request> TimedComm::IAllReduce(float* buf, size_t n) { return Wrap(inner_->IAllReduce(buf, n)); }
void TimedComm::ReduceScatter(const float* in, float* out, size_t n) {
  Timed([&] { inner_->ReduceScatter(in, out, n); }, "reduce_scatter", 4.0 * n * size());
}
void TimedComm::AllGather(const float* in, float* out, size_t n) {
  Timed([&] { inner_->AllGather(in, out, n); }, "all_gather", 4.0 * n * size());
}
std::unique_ptr<Request> TimedComm::ISend(const float* buf, size_t n, int peer, int tag) {
  return Wrap(inner_->ISend(buf, n, peer, tag));
}
std::unique_ptr<Request> TimedComm::IRecv(float* buf, size_t n, int peer, int tag) {
  return Wrap(inner_->IRecv(buf, n, peer, tag));
}
void TimedComm::Barrier() { Timed([&] { inner_->Barrier(); }); }
void TimedComm::AllToAllV(const float* in, const size_t* send_counts, float* out, const size_t* recv_counts) {
  Timed([&] { inner_->AllToAllV(in, send_counts, out, recv_counts); });
}
void TimedComm::AllReduceBf16(uint16_t* buf, size_t n) {
  Timed([&] { inner_->AllReduceBf16(buf, n); }, "all_reduce", 2.0 * n);
}
void TimedComm::ReduceScatterBf16(const uint16_t* in, uint16_t* out, size_t n) {
  Timed([&] { inner_->ReduceScatterBf16(in, out, n); }, "reduce_scatter", 2.0 * n * size());
}
void TimedComm::AllGatherBf16(const uint16_t* in, uint16_t* out, size_t n) {
  Timed([&] { inner_->AllGatherBf16(in, out, n); }, "all_gather", 2.0 * n * size());
}

}  // namespace dt::rt
