// Tests of the in-process fake Comm (LocalComm), MakeLocalGroups and StepWatchdog.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <numeric>
#include <thread>

#include "runtime/comm/local_comm.h"
#include "runtime/comm/timed_comm.h"
#include "runtime/comm/watchdog.h"

namespace dt::rt {
namespace {

TEST(LocalComm, AllReduceSumAndMax) {
  const int n = 3;
  LocalGroupHandle g(n);
  std::vector<std::vector<float>> sum(n), mx(n);
  RunRanks(n, [&](int r) {
    auto c = g.Member(r);
    EXPECT_EQ(c->rank(), r);
    EXPECT_EQ(c->size(), n);
    sum[r] = {float(r), float(10 * r), 1.f};
    c->AllReduce(sum[r].data(), 3);
    mx[r] = {float(r), float(-r)};
    c->AllReduce(mx[r].data(), 2, ReduceOp::kMax);
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(sum[r], (std::vector<float>{3.f, 30.f, 3.f}));
    EXPECT_EQ(mx[r], (std::vector<float>{2.f, 0.f}));
  }
}

TEST(LocalComm, NonBlockingAllReduceOverlapsWithOtherWork) {
  LocalGroupHandle g(2);
  std::vector<std::vector<float>> a(2), b(2);
  RunRanks(2, [&](int r) {
    auto c = g.Member(r);
    a[r] = {float(r + 1)};
    b[r] = {float(10 * (r + 1))};
    auto ra = c->IAllReduce(a[r].data(), 1);
    auto rb = c->IAllReduce(b[r].data(), 1);
    rb->Wait();  // waiting out of order is fine
    ra->Wait();
    EXPECT_TRUE(ra->Test());
  });
  EXPECT_EQ(a[0][0], 3.f);
  EXPECT_EQ(a[1][0], 3.f);
  EXPECT_EQ(b[1][0], 30.f);
}

TEST(LocalComm, ReduceScatterAndAllGather) {
  const int n = 2;
  LocalGroupHandle g(n);
  std::vector<std::vector<float>> rs(n), ag(n);
  RunRanks(n, [&](int r) {
    auto c = g.Member(r);
    std::vector<float> in = {1.f + r, 2.f + r, 3.f + r, 4.f + r};  // 2 blocks of 2
    rs[r].resize(2);
    c->ReduceScatter(in.data(), rs[r].data(), 2);
    std::vector<float> mine = {float(r), float(r) + 0.5f};
    ag[r].resize(4);
    c->AllGather(mine.data(), ag[r].data(), 2);
  });
  EXPECT_EQ(rs[0], (std::vector<float>{3.f, 5.f}));
  EXPECT_EQ(rs[1], (std::vector<float>{7.f, 9.f}));
  for (int r = 0; r < n; ++r) EXPECT_EQ(ag[r], (std::vector<float>{0.f, 0.5f, 1.f, 1.5f}));
}

// Member r sends (r + 1) * (p + 1) floats of value 100 r + p to member p;
// every member checks what it got from each source, in source order.
TEST(LocalComm, AllToAllVMovesUnevenBlocks) {
  const int n = 3;
  LocalGroupHandle g(n);
  std::vector<std::vector<float>> got(n);
  RunRanks(n, [&](int r) {
    auto c = g.Member(r);
    std::vector<size_t> sc(n), rc(n);
    std::vector<float> in;
    for (int p = 0; p < n; ++p) {
      sc[p] = static_cast<size_t>((r + 1) * (p + 1));
      rc[p] = static_cast<size_t>((p + 1) * (r + 1));
      in.insert(in.end(), sc[p], float(100 * r + p));
    }
    got[r].assign(std::accumulate(rc.begin(), rc.end(), size_t{0}), -1.f);
    c->AllToAllV(in.data(), sc.data(), got[r].data(), rc.data());
    // Zero counts are allowed; the fixed-size form too.
    std::vector<float> one = {float(r), float(r), float(r)}, back(3);
    c->AllToAll(one.data(), back.data(), 1);
    EXPECT_EQ(back, (std::vector<float>{0.f, 1.f, 2.f}));
  });
  for (int r = 0; r < n; ++r) {
    std::vector<float> want;
    for (int src = 0; src < n; ++src) want.insert(want.end(), (src + 1) * (r + 1), float(100 * src + r));
    EXPECT_EQ(got[r], want) << "member " << r;
  }
}

TEST(LocalComm, SendRecvMatchesByTagInFifoOrder) {
  LocalGroupHandle g(2);
  std::vector<float> got1(2), got2(2), got3(1);
  RunRanks(2, [&](int r) {
    auto c = g.Member(r);
    if (r == 0) {
      std::vector<float> x = {1.f, 2.f}, y = {3.f, 4.f}, z = {9.f};
      c->ISend(x.data(), 2, 1, 7)->Wait();
      c->ISend(z.data(), 1, 1, 8)->Wait();
      c->ISend(y.data(), 2, 1, 7)->Wait();
    } else {
      auto r3 = c->IRecv(got3.data(), 1, 0, 8);
      auto r1 = c->IRecv(got1.data(), 2, 0, 7);
      r1->Wait();
      auto r2 = c->IRecv(got2.data(), 2, 0, 7);
      r2->Wait();
      r3->Wait();
    }
    c->Barrier();
  });
  EXPECT_EQ(got1, (std::vector<float>{1.f, 2.f}));
  EXPECT_EQ(got2, (std::vector<float>{3.f, 4.f}));
  EXPECT_EQ(got3[0], 9.f);
}

TEST(LocalComm, GroupsFollowTheRankGrid) {
  auto grid = RankGrid::Create(/*tp=*/2, /*cp=*/1, /*dp=*/2, /*pp=*/2);
  ASSERT_TRUE(grid.ok());
  std::vector<Groups> groups = MakeLocalGroups(*grid);
  ASSERT_EQ(groups.size(), 8u);
  // Every rank contributes its world rank; each group's sum is checked.
  std::vector<std::array<float, 5>> sums(8);
  RunRanks(8, [&](int r) {
    Groups& g = groups[r];
    EXPECT_EQ(g.tp->rank(), g.coord.tp);
    EXPECT_EQ(g.dp->rank(), g.coord.dp);
    EXPECT_EQ(g.pp->rank(), g.coord.pp);
    EXPECT_EQ(g.dp_cp->size(), 2);
    float v[5] = {float(r), float(r), float(r), float(r), float(r)};
    g.tp->AllReduce(&v[0], 1);
    g.dp->AllReduce(&v[1], 1);
    g.pp->AllReduce(&v[2], 1);
    g.world->AllReduce(&v[3], 1);
    ASSERT_NE(g.tied, nullptr);  // pp=2: every rank is first or last
    EXPECT_EQ(g.tied->rank(), g.coord.pp == 0 ? 0 : 1);
    g.tied->AllReduce(&v[4], 1);
    for (int i = 0; i < 5; ++i) sums[r][i] = v[i];
  });
  // tp-cp-dp-pp: rank = tp + 2*dp + 4*pp.
  EXPECT_EQ(sums[0][0], 0 + 1);
  EXPECT_EQ(sums[0][1], 0 + 2);
  EXPECT_EQ(sums[0][2], 0 + 4);
  EXPECT_EQ(sums[3][3], 28);
  EXPECT_EQ(sums[5][4], 1 + 5);
}

TEST(LocalComm, TiedGroupOnlyOnPipelineEnds) {
  auto grid = RankGrid::Create(1, 1, 1, 3);
  ASSERT_TRUE(grid.ok());
  std::vector<Groups> groups = MakeLocalGroups(*grid);
  EXPECT_NE(groups[0].tied, nullptr);
  EXPECT_EQ(groups[1].tied, nullptr);
  EXPECT_NE(groups[2].tied, nullptr);
  auto single = RankGrid::Create(2, 1, 1, 1);
  EXPECT_EQ(MakeLocalGroups(*single)[0].tied, nullptr);
}

TEST(StepWatchdog, FiresWhenAStepHangs) {
  std::promise<std::string> fired;
  StepWatchdog w(0.05, [&](const std::string& m) { fired.set_value(m); });
  w.BeginStep(42);  // never ended
  auto f = fired.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  std::string msg = f.get();
  EXPECT_NE(msg.find("phase 'step 42'"), std::string::npos) << msg;
}

TEST(StepWatchdog, QuietWhenStepsFinish) {
  std::atomic<int> fired{0};
  {
    StepWatchdog w(30.0, [&](const std::string&) { ++fired; });
    for (int s = 0; s < 100; ++s) {
      w.BeginStep(s);
      w.EndStep();
    }
  }
  EXPECT_EQ(fired.load(), 0);
}

// Issue 13: the watchdog covers every phase, not only steps; the message
// names the phase, and moving on to the next phase restarts the clock.
TEST(JobWatchdog, NamesThePhaseThatStalls) {
  std::promise<std::string> fired;
  JobWatchdog w(0.3, [&](const std::string& m) { fired.set_value(m); });
  auto f = fired.get_future();
  for (const char* phase : {"startup", "resume", "step 1", "save step 1"}) {
    w.Enter(phase);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(f.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  ASSERT_EQ(f.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  const std::string msg = f.get();
  EXPECT_NE(msg.find("phase 'save step 1'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[rank "), std::string::npos) << msg;
}

// A rank that was itself stopped (SIGSTOP) says so once it is continued, so
// the job's output names the stopped rank, not only the ones that waited.
TEST(JobWatchdog, AStoppedRankNamesItself) {
  std::promise<std::string> fired;
  JobWatchdog w(2.0, [&](const std::string& m) { fired.set_value(m); });
  w.Enter("save step 4");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the watchdog is timing the phase
  const pid_t self = getpid();
  const pid_t helper = fork();
  ASSERT_GE(helper, 0);
  if (helper == 0) {  // continue the test process after 3.5 s
    sleep(3);
    usleep(500000);
    kill(self, SIGCONT);
    _exit(0);
  }
  raise(SIGSTOP);
  waitpid(helper, nullptr, 0);
  auto f = fired.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  const std::string msg = f.get();
  EXPECT_NE(msg.find("phase 'save step 4'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("THIS rank did not run for"), std::string::npos) << msg;
}


// TimedComm forwards every call unchanged and books each call and the time
// inside it under its group's label; a member that arrives early at a
// blocking collective is charged the wait for the late one (what a step
// loses to the group, DT_COMM_TIMES in dtrun).
TEST(TimedComm, ForwardsResultsAndBooksCallsAndWaits) {
  LocalGroupHandle g(2);
  CommTimes times[2];
  std::vector<std::vector<float>> sum(2), gathered(2), received(2);
  RunRanks(2, [&](int r) {
    times[r].keep_each_call = true;
    TimedComm c(g.Member(r), "tp", &times[r]);
    EXPECT_EQ(c.rank(), r);
    EXPECT_EQ(c.size(), 2);
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));  // rank 0 waits for it
    sum[r] = {float(r + 1), 2.f};
    c.AllReduce(sum[r].data(), 2, ReduceOp::kSum);
    const float mine = float(10 * r);
    gathered[r].assign(2, 0.f);
    c.AllGather(&mine, gathered[r].data(), 1);
    received[r].assign(1, 0.f);
    const float out = float(100 + r);
    auto send = c.ISend(&out, 1, 1 - r, 7);
    auto recv = c.IRecv(received[r].data(), 1, 1 - r, 7);
    recv->Wait();
    send->Wait();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(sum[r], (std::vector<float>{3.f, 4.f}));
    EXPECT_EQ(gathered[r], (std::vector<float>{0.f, 10.f}));
    EXPECT_EQ(received[r][0], float(100 + (1 - r)));
    ASSERT_EQ(times[r].by_group.size(), 1u);
    EXPECT_EQ(times[r].by_group.at("tp").calls, 4);  // all-reduce, all-gather, send, receive
    // Blocking collectives also by operation and size (bytes as the profile's series count them),
    // each call's time kept.
    ASSERT_EQ(times[r].by_call.size(), 2u);
    const auto& ar = times[r].by_call.at({"all_reduce", 8.0});
    const auto& ag = times[r].by_call.at({"all_gather", 8.0});
    EXPECT_EQ(ar.calls, 1);
    EXPECT_EQ(ag.calls, 1);
    ASSERT_EQ(ar.each.size(), 1u);
    EXPECT_DOUBLE_EQ(ar.each[0], ar.seconds);
  }
  EXPECT_GE(times[0].by_group.at("tp").seconds, 0.04);  // rank 0 waited ~50 ms for rank 1
  EXPECT_LT(times[1].by_group.at("tp").seconds, times[0].by_group.at("tp").seconds);
}

}  // namespace
}  // namespace dt::rt
