#include "sim/collective_model.h"

#include <gtest/gtest.h>

namespace dt::sim {
namespace {

constexpr CollOp kAllOps[] = {CollOp::kAllReduce, CollOp::kAllGather, CollOp::kReduceScatter,
                              CollOp::kAllToAll,  CollOp::kSendRecv,  CollOp::kBroadcast,
                              CollOp::kReduce};

TEST(CollectiveModelTest, BusBwFactorsMatchNcclTests) {
  EXPECT_DOUBLE_EQ(BusBwFactor(CollOp::kAllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(BusBwFactor(CollOp::kAllGather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(BusBwFactor(CollOp::kReduceScatter, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(BusBwFactor(CollOp::kSendRecv, 2), 1.0);
  // all-reduce = reduce-scatter + all-gather.
  for (int n = 2; n <= 64; ++n) {
    EXPECT_DOUBLE_EQ(BusBwFactor(CollOp::kAllReduce, n),
                     BusBwFactor(CollOp::kReduceScatter, n) + BusBwFactor(CollOp::kAllGather, n));
  }
}

TEST(CollectiveModelTest, BusBwRecoveredFromTimeWithoutLatency) {
  // With zero latency, algbw * factor must give back the busbw we put in.
  const double busbw = 100e9, bytes = 1 << 30;
  for (CollOp op : kAllOps) {
    for (int n : {2, 3, 8, 64}) {
      double t = CollectiveTime(op, bytes, n, 0.0, busbw);
      EXPECT_NEAR(AlgBw(bytes, t) * BusBwFactor(op, n), busbw, busbw * 1e-12) << ToString(op) << " n=" << n;
    }
  }
}

TEST(CollectiveModelTest, LatencyTermCountsRingSteps) {
  const double lat = 1e-5;
  EXPECT_DOUBLE_EQ(CollectiveTime(CollOp::kAllReduce, 1.0, 8, lat, 1e30), 14 * lat);
  EXPECT_DOUBLE_EQ(CollectiveTime(CollOp::kAllGather, 1.0, 8, lat, 1e30), 7 * lat);
  EXPECT_DOUBLE_EQ(CollectiveTime(CollOp::kReduceScatter, 1.0, 8, lat, 1e30), 7 * lat);
  EXPECT_DOUBLE_EQ(CollectiveTime(CollOp::kSendRecv, 1.0, 2, lat, 1e30), lat);
  EXPECT_DOUBLE_EQ(TreeAllReduceTime(1.0, 8, lat, 1e30), 6 * lat);
  EXPECT_DOUBLE_EQ(TreeAllReduceTime(1.0, 9, lat, 1e30), 8 * lat);  // ceil(log2 9) = 4
}

TEST(CollectiveModelTest, SingleRankAndEmptyCostNothing) {
  for (CollOp op : kAllOps) {
    EXPECT_EQ(CollectiveTime(op, 1e9, 1, 1e-5, 1e9), 0.0) << ToString(op);
    EXPECT_EQ(CollectiveTime(op, 0.0, 8, 1e-5, 1e9), 0.0) << ToString(op);
  }
  EXPECT_EQ(TreeAllReduceTime(1e9, 1, 1e-5, 1e9), 0.0);
  EXPECT_EQ(BestAllReduceTime(1e9, 1, 1e-5, 1e9), 0.0);
}

TEST(CollectiveModelTest, MonotoneInBytesAndBandwidth) {
  for (CollOp op : kAllOps) {
    for (int n : {2, 4, 16, 128}) {
      double prev = 0.0;
      for (double bytes = 1; bytes < 1e11; bytes *= 3.7) {
        double t = CollectiveTime(op, bytes, n, 5e-6, 50e9);
        EXPECT_GT(t, prev) << ToString(op);
        prev = t;
        EXPECT_LE(CollectiveTime(op, bytes, n, 5e-6, 400e9), t) << "more bandwidth must not be slower";
        EXPECT_LE(TreeAllReduceTime(bytes, n, 5e-6, 400e9), TreeAllReduceTime(bytes, n, 5e-6, 50e9));
      }
    }
  }
}

TEST(CollectiveModelTest, TreeBeatsRingForSmallMessagesOnManyRanks) {
  const double lat = 5e-6, bw = 50e9;
  const int n = 256;
  EXPECT_LT(TreeAllReduceTime(1024, n, lat, bw), CollectiveTime(CollOp::kAllReduce, 1024, n, lat, bw));
  EXPECT_DOUBLE_EQ(BestAllReduceTime(1024, n, lat, bw), TreeAllReduceTime(1024, n, lat, bw));
  // Same bandwidth term: the ring is never faster than the tree for n >= 2 in this model.
  EXPECT_LE(BestAllReduceTime(1e10, 2, lat, bw), CollectiveTime(CollOp::kAllReduce, 1e10, 2, lat, bw));
}

TEST(CollectiveModelDeathTest, BadArgumentsAbort) {
  EXPECT_DEATH(CollectiveTime(CollOp::kAllReduce, 1.0, 0, 0.0, 1.0), "");
  EXPECT_DEATH(CollectiveTime(CollOp::kAllReduce, -1.0, 2, 0.0, 1.0), "bytes");
  EXPECT_DEATH(CollectiveTime(CollOp::kAllReduce, 1.0, 2, 0.0, 0.0), "busbw");
}

}  // namespace
}  // namespace dt::sim
