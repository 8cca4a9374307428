#include "sim/event_queue.h"

namespace dt::sim {

void EventQueue::SiftUp(size_t i) {
  Event e = heap_[i];
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!EventBefore(e, heap_[parent])) break;
    heap_[i] = heap_[parent];
    i = parent;
  }
  heap_[i] = e;
}

void EventQueue::SiftDownFromRoot(Event e) {
  const size_t n = heap_.size();
  size_t i = 0;
  while (true) {
    size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && EventBefore(heap_[child + 1], heap_[child])) ++child;
    if (!EventBefore(heap_[child], e)) break;
    heap_[i] = heap_[child];
    i = child;
  }
  heap_[i] = e;
}

bool EventQueue::IsValidHeap() const {
  for (size_t i = 1; i < heap_.size(); ++i) {
    if (EventBefore(heap_[i], heap_[(i - 1) / 2])) return false;
  }
  return true;
}

}  // namespace dt::sim
