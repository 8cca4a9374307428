// EventQueue: a binary min-heap of timed events for the discrete-event engine.
//
// Events are ordered by (time, sequence number). The sequence number is
// assigned by Push in call order, so two events at the same time pop in the
// order they were pushed: the pop order is a pure function of the push calls,
// deterministic by construction (no pointer or hash order involved).
// Each event carries one int32 payload (the engine stores a task id there).
//
// Ownership: the queue owns its storage; Clear() keeps the capacity so one
// queue can serve many simulations without reallocating.
// Thread-compatible: one queue per thread, no shared state.
// Failure: Pop()/Top() on an empty queue is a bug and aborts (DT_CHECK);
// more than 2^32 pushes without Clear() also aborts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/check.h"

namespace dt::sim {

struct Event {
  double time;
  uint32_t seq;     // push order; breaks ties between equal times
  int32_t payload;  // caller's datum (a task id for the engine)
};

// True if `a` must pop before `b`.
inline bool EventBefore(const Event& a, const Event& b) {
  return a.time < b.time || (a.time == b.time && a.seq < b.seq);
}

class EventQueue {
 public:
  void Push(double time, int32_t payload) {
    DT_CHECK(next_seq_ != UINT32_MAX) << "event sequence overflow";
    heap_.push_back(Event{time, next_seq_++, payload});
    SiftUp(heap_.size() - 1);
  }
  // Removes and returns the earliest event.
  Event Pop() {
    DT_CHECK(!heap_.empty()) << "Pop() on an empty EventQueue";
    Event top = heap_.front();
    Event last = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) SiftDownFromRoot(last);
    return top;
  }
  const Event& Top() const {
    DT_CHECK(!heap_.empty()) << "Top() on an empty EventQueue";
    return heap_.front();
  }
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  // Drops all events and restarts sequence numbers at 0; keeps capacity.
  void Clear() {
    heap_.clear();
    next_seq_ = 0;
  }
  void Reserve(size_t n) { heap_.reserve(n); }
  // Checks the heap property over the whole array (for tests; O(n)).
  bool IsValidHeap() const;

 private:
  void SiftUp(size_t i);
  // Places `e` (taken from the back) starting at the root, moving smaller children up.
  void SiftDownFromRoot(Event e);

  std::vector<Event> heap_;
  uint32_t next_seq_ = 0;
};

}  // namespace dt::sim
