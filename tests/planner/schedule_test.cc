// Tests of the schedule generators, the validator and the in-flight counts.
#include "planner/schedule/schedule.h"

#include <gtest/gtest.h>

#include "tests/planner/test_models.h"

#include <algorithm>
#include <array>
#include <string>

namespace dt {
namespace {

PlanSpec Plan(Schedule s, int pp, int vpp, int m, int zero = 0) {
  return testing_models::PipelinePlan(s, pp, vpp, m, zero);
}

std::string Join(const ActionList& l, bool compute_only = false) {
  std::string s;
  for (const Action& a : l) {
    if (compute_only && a.kind != ActionKind::kForward && a.kind != ActionKind::kBackward) continue;
    s += (s.empty() ? "" : " ") + ToString(a);
  }
  return s;
}

int Count(const ActionList& l, ActionKind k) {
  return static_cast<int>(
      std::count_if(l.begin(), l.end(), [&](const Action& a) { return a.kind == k; }));
}

// Builds, checks and verifies counts and in-flight peaks against the closed forms.
void ExpectValid(const PlanSpec& p) {
  SCOPED_TRACE(Describe(p));
  auto s = BuildSchedule(p);
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(static_cast<int>(s->size()), p.pp);
  Status st = CheckSchedule(*s, p);
  ASSERT_TRUE(st.ok()) << st.message();
  const int m = p.num_microbatches;
  for (int r = 0; r < p.pp; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const ActionList& l = (*s)[r];
    EXPECT_EQ(Count(l, ActionKind::kForward), m * p.vpp);
    EXPECT_EQ(Count(l, ActionKind::kBackward), m * p.vpp);
    EXPECT_EQ(Count(l, ActionKind::kGradSync), p.vpp);
    EXPECT_EQ(Count(l, ActionKind::kOptimizerStep), 1);
    EXPECT_EQ(Count(l, ActionKind::kParamSync), p.zero_stage >= 1 ? p.vpp : 0);
    InFlight f = PeakInFlight(l, p, r);
    ASSERT_EQ(static_cast<int>(f.per_chunk_peak.size()), p.vpp);
    int expected = 0;
    if (p.pp == 1)
      expected = 1;
    else if (p.schedule == Schedule::kGpipe)
      expected = m;
    else if (p.schedule == Schedule::k1F1B)
      expected = std::min(p.pp - r, m);
    else
      expected = std::min(2 * (p.pp - r - 1) + (p.vpp - 1) * p.pp + 1, m * p.vpp);
    EXPECT_EQ(f.total_peak, expected);
    EXPECT_EQ(InFlightMicrobatches(p, r), f.total_peak);
    for (int peak : f.per_chunk_peak) {
      EXPECT_GE(peak, 1);
      EXPECT_LE(peak, std::min(m, f.total_peak));
    }
  }
}

TEST(Schedule, GpipeAnd1F1BGridPassCheck) {
  for (Schedule sched : {Schedule::kGpipe, Schedule::k1F1B})
    for (int pp = 1; pp <= 8; ++pp)
      for (int m : {1, 2, 3, pp - 1, pp, pp + 1, 2 * pp, 3 * pp + 1, 16})
        for (int zero : {0, 1, 3})
          if (m >= 1) ExpectValid(Plan(sched, pp, 1, m, zero));
}

TEST(Schedule, InterleavedGridPassCheck) {
  for (int pp = 2; pp <= 8; ++pp)
    for (int vpp = 1; vpp <= 4; ++vpp)
      for (int k : {1, 2, 3, 4})
        for (int zero : {0, 1}) ExpectValid(Plan(Schedule::kInterleaved, pp, vpp, k * pp, zero));
}

TEST(Schedule, OneFOneBGoldenTwoStages) {
  auto s = BuildSchedule(Plan(Schedule::k1F1B, 2, 1, 3, /*zero=*/1));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(Join((*s)[0]),
            "F0.0 SA0.0 F1.0 SA1.0 RG0.0 B0.0 F2.0 SA2.0 RG1.0 B1.0 RG2.0 B2.0 GS0 OPT PS0");
  EXPECT_EQ(Join((*s)[1]),
            "RA0.1 F0.1 B0.1 SG0.1 RA1.1 F1.1 B1.1 SG1.1 RA2.1 F2.1 B2.1 SG2.1 GS1 OPT PS1");
}

TEST(Schedule, GpipeGoldenAllForwardsThenBackwards) {
  auto s = BuildSchedule(Plan(Schedule::kGpipe, 2, 1, 3));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(Join((*s)[0], true), "F0.0 F1.0 F2.0 B0.0 B1.0 B2.0");
  EXPECT_EQ(Join((*s)[1], true), "F0.1 F1.1 F2.1 B0.1 B1.1 B2.1");
}

TEST(Schedule, SingleStageIsForwardBackwardPerMicrobatch) {
  for (Schedule sched : {Schedule::kGpipe, Schedule::k1F1B}) {
    auto s = BuildSchedule(Plan(sched, 1, 1, 3, /*zero=*/2));
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(Join((*s)[0]), "F0.0 B0.0 F1.0 B1.0 F2.0 B2.0 GS0 OPT PS0");
  }
}

// Hand-derived from Megatron-LM's interleaved ordering: pp=2, vpp=2, m=4, rank 1
// (chunks 1 and 3): warmup 2, forward chunk groups [1,1,3,3,1,1,3,3], backward [3,3,1,1,...].
TEST(Schedule, InterleavedGoldenOrder) {
  auto s = BuildSchedule(Plan(Schedule::kInterleaved, 2, 2, 4));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(Join((*s)[1], true),
            "F0.1 F1.1 F0.3 B0.3 F1.3 B1.3 F2.1 B0.1 F3.1 B1.1 F2.3 B2.3 F3.3 B3.3 B2.1 B3.1");
  // Rank 0: warmup min(2*1 + 1*2, 8) = 4.
  EXPECT_EQ(Join((*s)[0], true),
            "F0.0 F1.0 F0.2 F1.2 F2.0 B0.2 F3.0 B1.2 F2.2 B0.0 F3.2 B1.0 B2.2 B3.2 B2.0 B3.0");
  EXPECT_EQ(WarmupForwards(Plan(Schedule::kInterleaved, 2, 2, 4), 0), 4);
}

TEST(Schedule, GradSyncFollowsLastBackwardOfItsChunk) {
  auto s = BuildSchedule(Plan(Schedule::kInterleaved, 4, 2, 8));
  ASSERT_TRUE(s.ok());
  for (int r = 0; r < 4; ++r) {
    const ActionList& l = (*s)[r];
    for (int i = 0; i < static_cast<int>(l.size()); ++i) {
      if (l[i].kind != ActionKind::kGradSync) continue;
      int last_b = -1;
      for (int j = 0; j < static_cast<int>(l.size()); ++j)
        if (l[j].kind == ActionKind::kBackward && l[j].chunk == l[i].chunk) last_b = j;
      const int after = l[last_b].chunk > 0 ? 2 : 1;  // B, then SG unless chunk 0
      EXPECT_EQ(i, last_b + after) << "rank " << r << " " << Join(l);
    }
  }
  // Chunk r+4 (local chunk 1) finishes its backwards first: its GradSync precedes chunk r's.
  const ActionList& l0 = (*s)[0];
  auto gs = [&](int c) {
    return std::find(l0.begin(), l0.end(), Action{ActionKind::kGradSync, -1, c}) - l0.begin();
  };
  EXPECT_LT(gs(4), gs(0));
}

// Megatron's memory claim: the first stage of the interleaved schedule holds
// pp*(1 + (pp-1)/(pp*v)) microbatches of stage activations, i.e. pp*v + pp - 1 chunk-microbatches.
TEST(Schedule, InterleavedFirstStagePeakMatchesMegatron) {
  for (int pp : {2, 4, 8})
    for (int vpp : {2, 3, 4}) {
      PlanSpec p = Plan(Schedule::kInterleaved, pp, vpp, 4 * pp);
      auto s = BuildSchedule(p);
      ASSERT_TRUE(s.ok());
      EXPECT_EQ(PeakInFlight((*s)[0], p, 0).total_peak, pp * vpp + pp - 1);
      EXPECT_EQ(PeakInFlight((*s)[pp - 1], p, pp - 1).total_peak, (vpp - 1) * pp + 1);
    }
  // pp=4, vpp=2, m=8: rank 0 peaks at 11 chunk-microbatches (6 of chunk 0, 5 of chunk 4).
  PlanSpec p = Plan(Schedule::kInterleaved, 4, 2, 8);
  auto s = BuildSchedule(p);
  InFlight f = PeakInFlight((*s)[0], p, 0);
  EXPECT_EQ(f.total_peak, 11);
  EXPECT_EQ(f.per_chunk_peak, (std::vector<int>{8, 4}));
}

// The stored-layer peak (PeakInFlightLayers) is the list's own: walking
// each rank's built list, adding a chunk's layers at its forward and taking
// them off at its backward, over random uneven splits (zero-layer chunks
// included), every schedule, combined 1F1B on and off.
TEST(Schedule, PeakInFlightLayersMatchesWalkingTheList) {
  uint32_t seed = 12345;
  auto next = [&](int n) {
    seed = seed * 1664525u + 1013904223u;
    return static_cast<int>((seed >> 8) % static_cast<uint32_t>(n));
  };
  int uneven_peaks_differ = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const Schedule sched = std::array<Schedule, 3>{Schedule::kGpipe, Schedule::k1F1B, Schedule::kInterleaved}[next(3)];
    const int pp = 1 + next(6);
    if (sched == Schedule::kInterleaved && pp < 2) continue;
    const int vpp = sched == Schedule::kInterleaved ? 1 + next(4) : 1;
    const int m = sched == Schedule::kInterleaved ? pp * (1 + next(5)) : 1 + next(12);
    PlanSpec p = Plan(sched, pp, vpp, m);
    p.moe_a2a_overlap = next(2) == 1;
    for (int& l : p.layers_per_chunk) l = next(4);
    auto s = BuildSchedule(p);
    ASSERT_TRUE(s.ok()) << Describe(p);
    for (int r = 0; r < pp; ++r) {
      double live = 0, peak = 0;
      for (const Action& a : (*s)[r]) {
        if (a.kind == ActionKind::kForward) peak = std::max(peak, live += p.layers_per_chunk[a.chunk]);
        if (a.kind == ActionKind::kBackward) live -= p.layers_per_chunk[a.chunk];
      }
      EXPECT_DOUBLE_EQ(PeakInFlightLayers(p, r), peak) << Describe(p) << " rank " << r;
      double layers = 0;
      for (int local = 0; local < vpp; ++local) layers += p.layers_per_chunk[local * pp + r];
      if (peak != InFlightMicrobatches(p, r) * layers / vpp) ++uneven_peaks_differ;
    }
  }
  EXPECT_GT(uneven_peaks_differ, 0);  // the average-chunk count is not already the peak
  // Equal chunks: the count times the chunk's layers.
  PlanSpec even = Plan(Schedule::kInterleaved, 4, 2, 8);
  even.layers_per_chunk.assign(8, 3);
  for (int r = 0; r < 4; ++r) EXPECT_DOUBLE_EQ(PeakInFlightLayers(even, r), 3.0 * InFlightMicrobatches(even, r));
}

TEST(Schedule, Deterministic) {
  PlanSpec p = Plan(Schedule::kInterleaved, 4, 3, 12, 1);
  auto a = BuildSchedule(p), b = BuildSchedule(p);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
}

TEST(Schedule, RejectsUnschedulablePlans) {
  auto expect_bad = [](const PlanSpec& p, const std::string& field) {
    auto s = BuildSchedule(p);
    ASSERT_FALSE(s.ok()) << Describe(p);
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(field), std::string::npos) << s.status().message();
  };
  expect_bad(Plan(Schedule::kInterleaved, 4, 2, 6), "num_microbatches");
  expect_bad(Plan(Schedule::kInterleaved, 1, 2, 4), "pp >= 2");
  expect_bad(Plan(Schedule::k1F1B, 4, 2, 8), "vpp");
  expect_bad(Plan(Schedule::k1F1B, 4, 1, 0), "num_microbatches");
  expect_bad(Plan(Schedule::k1F1B, 0, 1, 4), "pp");
  expect_bad(Plan(Schedule::k1F1B, 2, 1, 4, 4), "zero_stage");
}

TEST(Schedule, BubbleHelpers) {
  EXPECT_DOUBLE_EQ(BubbleOverIdeal(Plan(Schedule::k1F1B, 4, 1, 8)), 3.0 / 8);
  EXPECT_DOUBLE_EQ(BubbleFraction(Plan(Schedule::k1F1B, 4, 1, 8)), 3.0 / 11);
  EXPECT_DOUBLE_EQ(BubbleFraction(Plan(Schedule::kGpipe, 4, 1, 8)), 3.0 / 11);
  EXPECT_DOUBLE_EQ(BubbleOverIdeal(Plan(Schedule::kInterleaved, 4, 2, 8)), 3.0 / 16);
  EXPECT_DOUBLE_EQ(BubbleFraction(Plan(Schedule::kInterleaved, 4, 2, 8)), 3.0 / 19);
  EXPECT_DOUBLE_EQ(BubbleFraction(Plan(Schedule::k1F1B, 1, 1, 8)), 0.0);
}

// overlap_grad_reduce off (Megatron-LM without --overlap-grad-reduce): the
// same compute order, and every GradSync after the rank's last backward,
// right before the optimizer step.
TEST(Schedule, GradSyncAfterTheWholeBackwardWhenNotOverlapped) {
  for (const PlanSpec& base : {Plan(Schedule::k1F1B, 4, 1, 8), Plan(Schedule::kInterleaved, 2, 3, 4, 1),
                               Plan(Schedule::kGpipe, 2, 1, 3), Plan(Schedule::k1F1B, 1, 1, 5)}) {
    PlanSpec p = base;
    p.overlap_grad_reduce = false;
    ExpectValid(p);
    auto on = BuildSchedule(base), off = BuildSchedule(p);
    ASSERT_TRUE(on.ok() && off.ok());
    for (int r = 0; r < p.pp; ++r) {
      const ActionList& l = (*off)[r];
      EXPECT_EQ(Join(l, true), Join((*on)[r], true)) << Describe(p) << " rank " << r;
      size_t last_bwd = 0, first_sync = l.size(), step = l.size();
      for (size_t i = 0; i < l.size(); ++i) {
        if (l[i].kind == ActionKind::kBackward) last_bwd = i;
        if (l[i].kind == ActionKind::kGradSync) first_sync = std::min(first_sync, i);
        if (l[i].kind == ActionKind::kOptimizerStep) step = i;
      }
      EXPECT_GT(first_sync, last_bwd) << Describe(p) << " rank " << r;
      EXPECT_EQ(step, first_sync + static_cast<size_t>(p.vpp)) << Describe(p) << " rank " << r;
    }
  }
}

}  // namespace
}  // namespace dt
