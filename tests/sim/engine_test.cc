#include "sim/engine.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace dt::sim {
namespace {

constexpr int32_t kCompute = 0;
constexpr int32_t kComm = 1;

TEST(EngineTest, ChainOnOneStreamSumsDurations) {
  Engine e;
  StreamId s = e.AddStream("rank0", "compute");
  TaskId a = e.AddTask(s, 1.0, kCompute);
  TaskId b = e.AddTask(s, 2.0, kCompute);
  TaskId c = e.AddTask(s, 0.5, kCompute);
  ASSERT_TRUE(e.Run().ok());
  EXPECT_DOUBLE_EQ(e.start(a), 0.0);
  EXPECT_DOUBLE_EQ(e.start(b), 1.0);
  EXPECT_DOUBLE_EQ(e.start(c), 3.0);
  EXPECT_DOUBLE_EQ(e.end(c), 3.5);
  EXPECT_DOUBLE_EQ(e.makespan(), 3.5);
  EXPECT_EQ(e.num_tasks(), 3u);
}

TEST(EngineTest, IndependentStreamsRunConcurrently) {
  Engine e;
  StreamId s0 = e.AddStream("rank0", "compute");
  StreamId s1 = e.AddStream("rank1", "compute");
  TaskId a = e.AddTask(s0, 2.0, kCompute);
  TaskId b = e.AddTask(s1, 3.0, kCompute);
  ASSERT_TRUE(e.Run().ok());
  EXPECT_DOUBLE_EQ(e.start(a), 0.0);
  EXPECT_DOUBLE_EQ(e.start(b), 0.0);
  EXPECT_DOUBLE_EQ(e.makespan(), 3.0);
}

TEST(EngineTest, CrossStreamDependency) {
  Engine e;
  StreamId compute = e.AddStream("rank0", "compute");
  StreamId comm = e.AddStream("rank0", "comm");
  TaskId f = e.AddTask(compute, 1.0, kCompute);
  TaskId send = e.AddTask(comm, 0.5, kComm);
  TaskId g = e.AddTask(compute, 1.0, kCompute);
  TaskId h = e.AddTask(compute, 1.0, kCompute);
  e.AddDep(f, send);  // send waits for f
  e.AddDep(send, h);  // h waits for the send
  ASSERT_TRUE(e.Run().ok());
  EXPECT_DOUBLE_EQ(e.start(send), 1.0);
  EXPECT_DOUBLE_EQ(e.end(send), 1.5);
  EXPECT_DOUBLE_EQ(e.start(g), 1.0);  // overlaps the send
  EXPECT_DOUBLE_EQ(e.start(h), 2.0);  // stream free at 2.0, send done at 1.5
  // Make the send longer than g: h now waits for it.
  e.SetDuration(send, 3.0);
  ASSERT_TRUE(e.Run().ok());
  EXPECT_DOUBLE_EQ(e.start(h), 4.0);
  EXPECT_DOUBLE_EQ(e.makespan(), 5.0);
}

TEST(EngineTest, DiamondDag) {
  Engine e;
  StreamId s[4];
  for (int i = 0; i < 4; ++i) s[i] = e.AddStream("p", "s" + std::to_string(i));
  TaskId top = e.AddTask(s[0], 1.0, 0);
  TaskId left = e.AddTask(s[1], 2.0, 0);
  TaskId right = e.AddTask(s[2], 5.0, 0);
  TaskId bottom = e.AddTask(s[3], 1.0, 0);
  e.AddDep(top, left);
  e.AddDep(top, right);
  e.AddDep(left, bottom);
  e.AddDep(right, bottom);
  ASSERT_TRUE(e.Run().ok());
  EXPECT_DOUBLE_EQ(e.start(left), 1.0);
  EXPECT_DOUBLE_EQ(e.start(right), 1.0);
  EXPECT_DOUBLE_EQ(e.start(bottom), 6.0);
  EXPECT_DOUBLE_EQ(e.makespan(), 7.0);
}

TEST(EngineTest, StreamIsInOrderEvenWhenLaterTaskIsReadyFirst) {
  Engine e;
  StreamId producer = e.AddStream("rank0", "producer");
  StreamId s = e.AddStream("rank0", "fifo");
  TaskId slow = e.AddTask(producer, 10.0, 0);
  TaskId blocked = e.AddTask(s, 1.0, 0);  // first on `s`, waits for `slow`
  TaskId ready_early = e.AddTask(s, 1.0, 0);     // no deps: ready at 0, but behind `blocked`
  e.AddDep(slow, blocked);
  ASSERT_TRUE(e.Run().ok());
  EXPECT_DOUBLE_EQ(e.start(blocked), 10.0);
  EXPECT_DOUBLE_EQ(e.start(ready_early), 11.0);
}

TEST(EngineTest, ZeroDurationTasks) {
  Engine e;
  StreamId s0 = e.AddStream("p", "a");
  StreamId s1 = e.AddStream("p", "b");
  TaskId a = e.AddTask(s0, 0.0, 0);
  TaskId b = e.AddTask(s1, 0.0, 0);
  TaskId c = e.AddTask(s0, 2.0, 0);
  e.AddDep(a, b);
  e.AddDep(b, c);
  ASSERT_TRUE(e.Run().ok());
  EXPECT_DOUBLE_EQ(e.start(c), 0.0);
  EXPECT_DOUBLE_EQ(e.makespan(), 2.0);
}

TEST(EngineTest, CycleReturnsErrorNamingStuckTasks) {
  Engine e;
  e.EnableTrace(true);
  StreamId s0 = e.AddStream("rank0", "compute");
  StreamId s1 = e.AddStream("rank1", "compute");
  TaskId ok = e.AddTask(s0, 1.0, 0, "fine");
  TaskId x = e.AddTask(s0, 1.0, 0, "F1.0");
  TaskId y = e.AddTask(s1, 1.0, 0, "B1.0");
  e.AddDep(x, y);
  e.AddDep(y, x);
  Status st = e.Run();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInfeasible);
  EXPECT_NE(st.message().find("2 of 3"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("F1.0"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("rank1/compute"), std::string::npos) << st.message();
  EXPECT_DOUBLE_EQ(e.end(ok), 1.0);
  EXPECT_LT(e.start(x), 0.0);
}

TEST(EngineTest, DependencyOnLaterTaskOfSameStreamDeadlocks) {
  Engine e;
  StreamId s = e.AddStream("rank0", "compute");
  TaskId a = e.AddTask(s, 1.0, 0);
  TaskId b = e.AddTask(s, 1.0, 0);
  e.AddDep(b, a);  // a waits for b, b waits (in order) for a
  Status st = e.Run();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("task 0"), std::string::npos) << st.message();
}

TEST(EngineTest, SelfDependencyDeadlocks) {
  Engine e;
  StreamId s = e.AddStream("rank0", "compute");
  TaskId a = e.AddTask(s, 1.0, 0);
  e.AddDep(a, a);
  EXPECT_FALSE(e.Run().ok());
}

// Builds a random layered graph (acyclic by construction) into `e`.
void BuildRandomGraph(Engine& e, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dur_ticks(0, 8);  // coarse: many equal times
  constexpr int kStreams = 8, kPerStream = 200;
  for (int s = 0; s < kStreams; ++s) e.AddStream("rank" + std::to_string(s / 2), "s" + std::to_string(s));
  for (int i = 0; i < kPerStream; ++i) {
    for (int s = 0; s < kStreams; ++s) {
      TaskId t = e.AddTask(s, dur_ticks(rng) * 0.125, s % 3);
      if (i > 0) {
        // Depend on a task of an earlier layer on a random stream.
        int other = static_cast<int>(rng() % kStreams);
        int layer = static_cast<int>(rng() % i);
        e.AddDep(layer * kStreams + other, t);
      }
    }
  }
}

TEST(EngineTest, DeterministicAcrossEnginesAndReruns) {
  Engine a, b;
  BuildRandomGraph(a, 42);
  BuildRandomGraph(b, 42);
  ASSERT_TRUE(a.Run().ok());
  ASSERT_TRUE(b.Run().ok());
  std::vector<double> first(a.num_tasks());
  for (size_t t = 0; t < a.num_tasks(); ++t) {
    first[t] = a.start(static_cast<TaskId>(t));
    EXPECT_EQ(first[t], b.start(static_cast<TaskId>(t)));
    EXPECT_EQ(a.end(static_cast<TaskId>(t)), b.end(static_cast<TaskId>(t)));
  }
  ASSERT_TRUE(a.Run().ok());
  for (size_t t = 0; t < a.num_tasks(); ++t) EXPECT_EQ(first[t], a.start(static_cast<TaskId>(t)));
}

// Reference: start = max(end of stream predecessor, end of every dependency),
// evaluated in task-id order (valid because BuildRandomGraph only adds deps
// from lower ids to higher ids).
TEST(EngineTest, MatchesLongestPathReference) {
  Engine e;
  BuildRandomGraph(e, 3);
  ASSERT_TRUE(e.Run().ok());
  std::vector<double> ref_end(e.num_tasks());
  std::vector<double> stream_free(e.num_streams(), 0.0);
  // Replay the same random stream as BuildRandomGraph.
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> dur_ticks(0, 8);
  constexpr int kStreams = 8, kPerStream = 200;
  for (int i = 0; i < kPerStream; ++i) {
    for (int s = 0; s < kStreams; ++s) {
      const int t = i * kStreams + s;
      double d = dur_ticks(rng) * 0.125;
      double ready = stream_free[s];
      if (i > 0) {
        int other = static_cast<int>(rng() % kStreams);
        int layer = static_cast<int>(rng() % i);
        ready = std::max(ready, ref_end[layer * kStreams + other]);
      }
      ref_end[t] = ready + d;
      stream_free[s] = ref_end[t];
      EXPECT_DOUBLE_EQ(e.start(t), ready) << "task " << t;
    }
  }
}

TEST(EngineTest, BusyTimePerCategory) {
  Engine e;
  StreamId s0 = e.AddStream("rank0", "compute");
  StreamId s1 = e.AddStream("rank0", "comm");
  e.AddTask(s0, 1.0, kCompute);
  e.AddTask(s0, 2.0, kComm);
  e.AddTask(s0, 0.5, kCompute);
  TaskId c = e.AddTask(s1, 4.0, kComm);
  e.AddDep(0, c);
  ASSERT_TRUE(e.Run().ok());
  EXPECT_DOUBLE_EQ(e.BusyTime(s0, kCompute), 1.5);
  EXPECT_DOUBLE_EQ(e.BusyTime(s0, kComm), 2.0);
  EXPECT_DOUBLE_EQ(e.BusyTime(s0), 3.5);
  EXPECT_DOUBLE_EQ(e.BusyTime(s1, kCompute), 0.0);
  EXPECT_DOUBLE_EQ(e.BusyTime(s1), 4.0);
  EXPECT_DOUBLE_EQ(e.BusyTime(s1, 17), 0.0);  // unknown category
  EXPECT_DOUBLE_EQ(e.makespan(), 5.0);
}

TEST(EngineTest, ClearAllowsReuse) {
  Engine e;
  BuildRandomGraph(e, 1);
  ASSERT_TRUE(e.Run().ok());
  e.Clear();
  EXPECT_EQ(e.num_tasks(), 0u);
  EXPECT_EQ(e.num_streams(), 0u);
  StreamId s = e.AddStream("r", "c");
  e.AddTask(s, 2.0, 0);
  ASSERT_TRUE(e.Run().ok());
  EXPECT_DOUBLE_EQ(e.makespan(), 2.0);
  EXPECT_DOUBLE_EQ(e.BusyTime(s), 2.0);
}

TEST(EngineTest, EmptyEngineRuns) {
  Engine e;
  ASSERT_TRUE(e.Run().ok());
  EXPECT_DOUBLE_EQ(e.makespan(), 0.0);
}

TEST(EngineTest, NamesKeptOnlyWhenTracing) {
  Engine e;
  StreamId s = e.AddStream("r", "c");
  TaskId a = e.AddTask(s, 1.0, 0, "dropped");
  e.EnableTrace(true);
  TaskId b = e.AddTask(s, 1.0, 0, "kept");
  EXPECT_EQ(e.name(a), "");
  EXPECT_EQ(e.name(b), "kept");
}

TEST(EngineDeathTest, MisuseAborts) {
  Engine e;
  StreamId s = e.AddStream("r", "c");
  EXPECT_DEATH(e.AddTask(s + 1, 1.0, 0), "unknown stream");
  EXPECT_DEATH(e.AddTask(s, -1.0, 0), "bad duration");
  TaskId a = e.AddTask(s, 1.0, 0);
  EXPECT_DEATH(e.AddDep(a, 5), "unknown task");
  EXPECT_DEATH(e.start(a), "before Run");
}

}  // namespace
}  // namespace dt::sim
