// CheckSchedule must reject broken schedules and name the first violation.
#include <gtest/gtest.h>

#include "tests/planner/test_models.h"

#include <algorithm>
#include <string>

#include "planner/schedule/schedule.h"

namespace dt {
namespace {

PlanSpec Plan(Schedule s, int pp, int vpp, int m, int zero = 0) {
  return testing_models::PipelinePlan(s, pp, vpp, m, zero);
}

std::vector<ActionList> Build(const PlanSpec& p) {
  auto s = BuildSchedule(p);
  DT_CHECK(s.ok()) << s.status().message();
  return *s;
}

size_t IndexOf(const ActionList& l, const Action& a) {
  auto it = std::find(l.begin(), l.end(), a);
  DT_CHECK(it != l.end()) << ToString(a);
  return it - l.begin();
}

void Erase(ActionList* l, const Action& a) { l->erase(l->begin() + IndexOf(*l, a)); }

// Fails the test unless CheckSchedule rejects `s` with a message holding every `parts`.
void ExpectRejected(const std::vector<ActionList>& s, const PlanSpec& p,
                    std::initializer_list<std::string> parts) {
  Status st = CheckSchedule(s, p);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  for (const std::string& part : parts)
    EXPECT_NE(st.message().find(part), std::string::npos)
        << "'" << part << "' not in: " << st.message();
}

TEST(CheckSchedule, MissingRecv) {
  PlanSpec p = Plan(Schedule::k1F1B, 4, 1, 8);
  auto s = Build(p);
  Erase(&s[2], {ActionKind::kRecvAct, 3, 2});
  ExpectRejected(s, p, {"rank 2", "(F3.2)", "not preceded by its receive RA3.2"});
}

TEST(CheckSchedule, MissingRecvGradInInterleaved) {
  PlanSpec p = Plan(Schedule::kInterleaved, 2, 2, 4);
  auto s = Build(p);
  Erase(&s[1], {ActionKind::kRecvGrad, 2, 1});
  ExpectRejected(s, p, {"rank 1", "(B2.1)", "RG2.1"});
}

TEST(CheckSchedule, MissingSendIsReportedAtEnd) {
  PlanSpec p = Plan(Schedule::k1F1B, 2, 1, 2);
  auto s = Build(p);
  Erase(&s[0], {ActionKind::kSendAct, 1, 0});
  ExpectRejected(s, p, {"rank 0 (end", "missing SA1.0"});
}

TEST(CheckSchedule, BackwardBeforeForward) {
  PlanSpec p = Plan(Schedule::k1F1B, 1, 1, 2);
  auto s = Build(p);  // F0.0 B0.0 F1.0 B1.0 GS0 OPT
  std::swap(s[0][2], s[0][3]);
  ExpectRejected(s, p, {"rank 0 action 2 (B1.0)", "backward before its forward F1.0"});
}

TEST(CheckSchedule, RecvOrderedSoTwoRanksWaitOnEachOther) {
  // Rank 0 receives the gradient of microbatch 0 before sending its activation:
  // rank 0 waits for SG0.1, which rank 1 issues only after RA0.1 <- SA0.0 on rank 0.
  PlanSpec p = Plan(Schedule::k1F1B, 2, 1, 2);
  auto s = Build(p);
  Erase(&s[0], {ActionKind::kRecvGrad, 0, 0});
  s[0].insert(s[0].begin(), {ActionKind::kRecvGrad, 0, 0});
  ExpectRejected(s, p, {"rank 0 action 0 (RG0.0)", "deadlock", "SG0.1", "rank 1", "(RA0.1)"});
}

TEST(CheckSchedule, DeadlockInsideInterleavedSchedule) {
  // Rank 1 asks for the activation of microbatch 0 on chunk 3 before finishing chunk 1's warmup.
  PlanSpec p = Plan(Schedule::kInterleaved, 2, 2, 4);
  auto s = Build(p);
  Erase(&s[1], {ActionKind::kRecvAct, 0, 3});
  s[1].insert(s[1].begin(), {ActionKind::kRecvAct, 0, 3});
  ExpectRejected(s, p, {"deadlock"});
}

TEST(CheckSchedule, StructuralViolations) {
  PlanSpec p = Plan(Schedule::k1F1B, 2, 1, 2, /*zero=*/1);
  {
    auto s = Build(p);
    s[0].insert(s[0].begin(), {ActionKind::kForward, 0, 1});  // chunk 1 lives on rank 1
    ExpectRejected(s, p, {"rank 0 action 0 (F0.1)", "chunk % pp == 0"});
  }
  {
    auto s = Build(p);
    s[1].push_back({ActionKind::kSendAct, 0, 1});  // last chunk sends nothing
    ExpectRejected(s, p, {"(SA0.1)", "last chunk"});
  }
  {
    auto s = Build(p);
    const size_t f = IndexOf(s[0], {ActionKind::kForward, 1, 0});
    s[0].insert(s[0].begin() + f + 1, {ActionKind::kForward, 1, 0});
    ExpectRejected(s, p, {"(F1.0)", "duplicate"});
  }
  {
    auto s = Build(p);
    Erase(&s[1], {ActionKind::kGradSync, -1, 1});
    ExpectRejected(s, p, {"rank 1", "(OPT)", "before GradSync of chunk 1"});
  }
  {
    auto s = Build(p);  // GradSync moved before the chunk's last backward
    Erase(&s[0], {ActionKind::kGradSync, -1, 0});
    s[0].insert(s[0].begin() + IndexOf(s[0], {ActionKind::kBackward, 1, 0}),
                {ActionKind::kGradSync, -1, 0});
    ExpectRejected(s, p, {"(GS0)", "last backward"});
  }
  {
    auto s = Build(p);
    Erase(&s[0], {ActionKind::kParamSync, -1, 0});
    ExpectRejected(s, p, {"rank 0 (end", "missing PS0"});
  }
  {
    auto s = Build(p);
    std::swap(s[1][s[1].size() - 1], s[1][s[1].size() - 2]);  // PS1 before OPT
    ExpectRejected(s, p, {"(PS1)", "before OptimizerStep"});
  }
  {
    auto s = Build(Plan(Schedule::k1F1B, 2, 1, 2, /*zero=*/0));
    s[0].push_back({ActionKind::kParamSync, -1, 0});
    ExpectRejected(s, Plan(Schedule::k1F1B, 2, 1, 2, 0), {"(PS0)", "zero_stage >= 1"});
  }
  {
    auto s = Build(p);
    s.pop_back();
    ExpectRejected(s, p, {"one list per pipeline rank"});
  }
  {
    auto s = Build(p);
    s[0][0].microbatch = 7;
    ExpectRejected(s, p, {"rank 0 action 0", "microbatch must be in [0, 2)"});
  }
}

TEST(CheckSchedule, AcceptsEarlyReceivesWhenDeadlockFree) {
  // Receives may be hoisted as long as no cycle forms: rank 1 of GPipe receiving
  // all activations up front is still deadlock-free (rank 0 sends them before any RG).
  PlanSpec p = Plan(Schedule::kGpipe, 2, 1, 3);
  auto s = Build(p);
  for (int mb = 2; mb >= 0; --mb) {
    Erase(&s[1], {ActionKind::kRecvAct, mb, 1});
    s[1].insert(s[1].begin(), {ActionKind::kRecvAct, mb, 1});
  }
  Status st = CheckSchedule(s, p);
  EXPECT_TRUE(st.ok()) << st.message();
}

}  // namespace
}  // namespace dt
