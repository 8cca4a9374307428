// The CPU-profile speed check (planner/profile/machine_speed.h): the probe
// measures something plausible, and the note appears only beyond 1.5x
// either way, naming both rates and the fix.
#include <gtest/gtest.h>

#include <string>

#include "planner/profile/machine_speed.h"

namespace dt {
namespace {

TEST(MachineSpeed, ProbeMeasuresAPlausibleCopyRate) {
  const double one = ProbeCopyBandwidthPerRank(1);
  EXPECT_GT(one, 0.2e9);   // any machine that builds this project copies faster than 0.2 GB/s
  EXPECT_LT(one, 2000e9);  // and slower than 2 TB/s per core
  EXPECT_GT(ProbeCopyBandwidthPerRank(2), 0.0);
}

TEST(MachineSpeed, NoteOnlyBeyondOneAndAHalfTimes) {
  EXPECT_EQ(SpeedMismatchNote(21e9, 30e9, "local-cpu", "2026-11-23"), "");  // 0.70x: within
  EXPECT_EQ(SpeedMismatchNote(40e9, 30e9, "local-cpu", "2026-11-23"), "");  // 1.33x: within
  const std::string slow = SpeedMismatchNote(15e9, 30e9, "local-cpu", "2026-11-23");
  EXPECT_NE(slow.find("15.0 GB/s per rank now"), std::string::npos) << slow;
  EXPECT_NE(slow.find("measured 30.0 GB/s on 2026-11-23 (0.50x)"), std::string::npos) << slow;
  EXPECT_NE(slow.find("re-measure with `dtplan profile --device cpu --out my-cpu.json`"), std::string::npos) << slow;
  // With the plan's layout, the command measures that many ranks.
  const std::string one = SpeedMismatchNote(15e9, 30e9, "local-cpu", "2026-11-23", 1);
  EXPECT_NE(one.find("`dtplan profile --device cpu --ranks 1 --out my-cpu.json` and pass --profile my-cpu.json"),
            std::string::npos)
      << one;
  EXPECT_NE(SpeedMismatchNote(50e9, 30e9, "p", "").find("(1.67x)"), std::string::npos);
  EXPECT_EQ(SpeedMismatchNote(0.0, 30e9, "p", ""), "");  // a failed probe says nothing
  EXPECT_EQ(SpeedMismatchNote(10e9, 0.0, "p", ""), "");  // nor a profile without the rate
}

}  // namespace
}  // namespace dt
