#include "sim/event_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace dt::sim {
namespace {

TEST(EventQueueTest, PopsInTimeOrder) {
  EventQueue q;
  q.Push(3.0, 3);
  q.Push(1.0, 1);
  q.Push(2.0, 2);
  ASSERT_EQ(q.size(), 3u);
  EXPECT_EQ(q.Pop().payload, 1);
  EXPECT_EQ(q.Pop().payload, 2);
  EXPECT_EQ(q.Pop().payload, 3);
  EXPECT_TRUE(q.empty());
}

TEST(EventQueueTest, EqualTimesPopInPushOrder) {
  EventQueue q;
  for (int i = 0; i < 50; ++i) q.Push(1.0, i);
  q.Push(0.5, 100);
  EXPECT_EQ(q.Pop().payload, 100);
  for (int i = 0; i < 50; ++i) {
    Event e = q.Pop();
    EXPECT_EQ(e.payload, i);
    EXPECT_EQ(e.seq, static_cast<uint32_t>(i));
  }
}

TEST(EventQueueTest, MatchesStableSortOnRandomInput) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> coarse(0, 20);  // many ties
  EventQueue q;
  std::vector<std::pair<double, int>> ref;
  for (int i = 0; i < 2000; ++i) {
    double t = coarse(rng) * 0.25;
    q.Push(t, i);
    ref.emplace_back(t, i);
    if (i % 7 == 6) {
      EXPECT_TRUE(q.IsValidHeap());
    }
  }
  std::stable_sort(ref.begin(), ref.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [t, id] : ref) {
    Event e = q.Pop();
    EXPECT_EQ(e.time, t);
    EXPECT_EQ(e.payload, id);
  }
  EXPECT_TRUE(q.empty());
}

TEST(EventQueueTest, RandomInterleavedPushPopMatchesReference) {
  std::mt19937 rng(11);
  EventQueue q;
  std::vector<Event> ref;  // pending events, compared with EventBefore
  uint32_t seq = 0;
  for (int step = 0; step < 5000; ++step) {
    if (ref.empty() || rng() % 3 != 0) {
      double t = static_cast<double>(rng() % 16);
      q.Push(t, step);
      ref.push_back(Event{t, seq++, step});
    } else {
      auto it = std::min_element(ref.begin(), ref.end(), EventBefore);
      Event e = q.Pop();
      EXPECT_EQ(e.payload, it->payload);
      EXPECT_EQ(e.seq, it->seq);
      ref.erase(it);
    }
  }
  EXPECT_EQ(q.size(), ref.size());
}

TEST(EventQueueTest, InterleavedPushPopKeepsOrder) {
  EventQueue q;
  q.Push(5.0, 0);
  q.Push(1.0, 1);
  EXPECT_EQ(q.Pop().payload, 1);
  q.Push(5.0, 2);  // same time as payload 0 but pushed later
  q.Push(2.0, 3);
  EXPECT_EQ(q.Top().payload, 3);
  EXPECT_EQ(q.Pop().payload, 3);
  EXPECT_EQ(q.Pop().payload, 0);
  EXPECT_EQ(q.Pop().payload, 2);
}

TEST(EventQueueTest, ClearRestartsSequence) {
  EventQueue q;
  q.Push(1.0, 0);
  q.Push(1.0, 1);
  q.Clear();
  EXPECT_TRUE(q.empty());
  q.Push(2.0, 9);
  EXPECT_EQ(q.Pop().seq, 0u);
}

TEST(EventQueueDeathTest, PopEmptyAborts) {
  EventQueue q;
  EXPECT_DEATH(q.Pop(), "empty EventQueue");
}

}  // namespace
}  // namespace dt::sim
