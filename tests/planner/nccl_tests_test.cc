// nccl-tests logs as a profile source (planner/profile/nccl_tests_log.h,
// nccl_tests_profile.h): parsing both layouts, the profile reproducing the
// logged bus bandwidths through the simulator's cost function, merging with
// the base profile, and malformed logs refused with file and line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <regex>

#include "planner/cost/comm_cost.h"
#include "planner/profile/nccl_tests_log.h"
#include "planner/profile/nccl_tests_profile.h"

namespace dt {
namespace {

const std::string kDir = std::string(DT_SOURCE_DIR) + "/tests/planner/nccl_tests/";

std::vector<NcclTestsRun> Read(const std::string& path) {
  auto runs = ReadNcclTestsLogs(path, nullptr);
  EXPECT_TRUE(runs.ok()) << runs.status().message();
  return runs.ok() ? *runs : std::vector<NcclTestsRun>{};
}

NcclTestsImport Import(const std::string& base, const std::string& dir) {
  auto hw = LoadProfile(base);
  EXPECT_TRUE(hw.ok()) << hw.status().message();
  auto imp = ProfileFromNcclTests(*hw, Read(kDir + dir), "imported", dir, "2026-11-23");
  EXPECT_TRUE(imp.ok()) << imp.status().message();
  return *imp;
}

TEST(NcclTestsLog, ReadsTheCurrentLayout) {
  auto runs = Read(kDir + "h100/all_reduce_perf_2node.txt");
  ASSERT_EQ(runs.size(), 1u);
  const NcclTestsRun& r = runs[0];
  EXPECT_EQ(r.test, "all_reduce");
  EXPECT_EQ(r.ranks, 16);
  EXPECT_EQ(r.hosts, 2);
  EXPECT_EQ(r.ranks_per_host, 8);
  EXPECT_EQ(r.device_name, "NVIDIA H100 80GB HBM3");
  ASSERT_EQ(r.rows.size(), 31u);  // 8 B .. 8 GiB, factor 2
  EXPECT_EQ(r.rows.front().bytes, 8);
  EXPECT_EQ(r.rows.back().bytes, 8LL << 30);
  EXPECT_GT(r.rows.back().busbw_GBps, 300);
}

TEST(NcclTestsLog, ReadsTheOlderLayoutByFileNameAndAppendedRuns) {
  std::vector<std::string> ignored;
  auto runs = ReadNcclTestsLogs(kDir + "a100-older", &ignored);
  ASSERT_TRUE(runs.ok()) << runs.status().message();
  ASSERT_EQ(runs->size(), 4u);
  EXPECT_EQ((*runs)[0].test, "all_reduce");  // allreduce_8gpu.log: no "Collective test starting"
  EXPECT_EQ((*runs)[0].ranks, 8);
  EXPECT_EQ((*runs)[1].test, "all_gather");  // more.out: three runs appended
  EXPECT_EQ((*runs)[2].test, "reduce_scatter");
  EXPECT_EQ((*runs)[3].test, "sendrecv");
  EXPECT_EQ((*runs)[3].ranks, 2);
  EXPECT_EQ((*runs)[2].line, 50);
  EXPECT_TRUE(ignored.empty());
  // Only *.txt, *.log and *.out are read: the README beside the folders is
  // listed as ignored, and a directory without logs is refused.
  std::vector<std::string> top_ignored;
  auto none = ReadNcclTestsLogs(kDir, &top_ignored);
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(top_ignored, std::vector<std::string>{"README.md"});
  EXPECT_EQ(ReadNcclTestsLogs(kDir + "missing", nullptr).status().code(), StatusCode::kNotFound);
}

// The acceptance test: through comm_cost.h's CollectiveTime (what the
// lowering prices every collective with), the imported profile gives, at
// every logged size, the logged time made non-decreasing in size (exact up
// to floating point), hence the logged busbw within nccl-tests' printing
// precision (0.5% + 0.01 GB/s) wherever the log's own time does not dip
// below a smaller message's.
void ExpectReproduces(const HardwareProfile& hw, const std::vector<NcclTestsRun>& runs) {
  int checked = 0;
  for (const NcclTestsRun& r : runs) {
    CollKind kind;
    if (r.test == "all_reduce") kind = CollKind::kAllReduce;
    else if (r.test == "all_gather") kind = CollKind::kAllGather;
    else if (r.test == "reduce_scatter") kind = CollKind::kReduceScatter;
    else if (r.test == "sendrecv") kind = CollKind::kSendRecv;
    else continue;
    const bool spans = r.hosts > 1;
    // A pipeline send across nodes is 2 ranks, one per node (P2PTime).
    const int n = spans && kind == CollKind::kSendRecv ? 2 : r.ranks;
    const int g = spans && kind == CollKind::kSendRecv ? 1 : r.ranks_per_host;
    const double f = NcclTestsBusBwFactor(r.test, r.ranks);
    double running_max_us = 0;
    for (const NcclTestsRow& row : r.rows) {
      const bool dip = row.time_us < running_max_us;
      running_max_us = std::max(running_max_us, row.time_us);
      const double S = static_cast<double>(row.bytes);
      const double t = CollectiveTime(kind, S, n, g, spans, hw);
      SCOPED_TRACE(r.file + ":" + std::to_string(row.line));
      EXPECT_NEAR(t * 1e6, running_max_us, 1e-9 * running_max_us);
      if (!dip) {
        const double busbw_GBps = S * f / t / 1e9;
        EXPECT_NEAR(busbw_GBps, row.busbw_GBps, 0.005 * row.busbw_GBps + 0.01);
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(NcclTestsProfile, ReproducesLoggedBusBandwidthH100IntraAndInter) {
  NcclTestsImport imp = Import("h100", "h100");
  ExpectReproduces(imp.profile, Read(kDir + "h100"));
  EXPECT_TRUE(HasInterNode(imp.profile));
}

TEST(NcclTestsProfile, ReproducesLoggedBusBandwidthA100) {
  NcclTestsImport imp = Import("a100", "a100-older");
  ExpectReproduces(imp.profile, Read(kDir + "a100-older"));
}

TEST(NcclTestsProfile, KeepsTheBaseWhereNoLogAndRoundTrips) {
  auto base = LoadProfile("h100");
  ASSERT_TRUE(base.ok());
  NcclTestsImport imp = Import("h100", "h100");
  const HardwareProfile& p = imp.profile;
  EXPECT_EQ(p.device.peak_flops, base->device.peak_flops);
  EXPECT_EQ(p.compute.gemm_efficiency, base->compute.gemm_efficiency);
  EXPECT_EQ(p.network.gpus_per_node, 8);
  const CollectiveTable& ar = p.network.table(CollKind::kAllReduce);
  // Intra: 2 from the base, 8 from the log; inter: 1, 2, 4 from the base, 8 from the log.
  ASSERT_EQ(ar.intra.size(), 2u);
  EXPECT_EQ(ar.intra[0], base->network.table(CollKind::kAllReduce).intra[0]);
  EXPECT_EQ(ar.intra[1].key, 8);
  EXPECT_FALSE(ar.intra[1].points.empty());
  EXPECT_NE(ar.intra[1].note.find("all_reduce_perf_1node.txt"), std::string::npos);
  ASSERT_EQ(ar.inter.size(), 4u);
  EXPECT_EQ(ar.inter.back().key, 8);
  EXPECT_FALSE(ar.inter.back().points.empty());
  const CollectiveTable& sr = p.network.table(CollKind::kSendRecv);
  ASSERT_EQ(sr.inter.size(), 1u);
  EXPECT_EQ(sr.inter[0].key, 1);
  EXPECT_FALSE(sr.inter[0].points.empty());
  EXPECT_NE(p.network.note.find("alltoall, not priced"), std::string::npos);
  EXPECT_EQ(p.sources.count("nccl_tests_logs"), 1u);
  auto again = ProfileFromJson(ToJson(p), "round trip");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(*again == p);
}

TEST(NcclTestsProfile, RefusesDuplicatesOversizedNodesAndOneRank) {
  auto base = LoadProfile("h100");
  ASSERT_TRUE(base.ok());
  auto runs = Read(kDir + "h100/all_reduce_perf_1node.txt");
  std::vector<NcclTestsRun> twice = runs;
  twice.push_back(runs[0]);
  twice.back().file = "copy.txt";
  auto dup = ProfileFromNcclTests(*base, twice, "x", "d", "2026-11-23");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("copy.txt:"), std::string::npos) << dup.status().message();
  EXPECT_NE(dup.status().message().find("all_reduce_perf_1node.txt:"), std::string::npos);

  std::vector<NcclTestsRun> big = runs;
  big[0].ranks = big[0].ranks_per_host = 16;
  auto over = ProfileFromNcclTests(*base, big, "x", "d", "2026-11-23");
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("16 ranks on one host"), std::string::npos) << over.status().message();

  std::vector<NcclTestsRun> one = runs;
  one[0].ranks = one[0].ranks_per_host = 1;
  EXPECT_FALSE(ProfileFromNcclTests(*base, one, "x", "d", "2026-11-23").ok());
}

// A small valid log; the malformed ones below each break one thing.
std::string Log(const std::string& rows, const std::string& devices = "", const std::string& test = "all_reduce") {
  std::string dev = devices;
  if (dev.empty())
    for (int r = 0; r < 2; ++r)
      dev += "#  Rank  " + std::to_string(r) + " Group  0 Pid   100 on      node1 device  " + std::to_string(r) +
             " [0000:18:00] NVIDIA H100 80GB HBM3\n";
  return "# Collective test starting: " + test + "_perf\n"                           // line 1
         "# nThread 1 nGpus 2 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 5 iters: 20\n"  // 2
         "#\n# Using devices\n" + dev +                                              // 3, 4, 5-6
         "#\n#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
         "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n" +  // 7-9
         rows + "# Avg bus bandwidth    : 1.0\n";
}

const std::string kGood =
    "     1048576        262144     float     sum      -1    20.00   52.43   52.43      0    20.00   52.43   52.43      0\n"
    "     2097152        524288     float     sum      -1    30.00   69.91   69.91      0    30.00   69.91   69.91      0\n";

TEST(NcclTestsLog, AcceptsTheSmallLog) {
  auto runs = ParseNcclTestsLog(Log(kGood), "ok.txt");
  ASSERT_TRUE(runs.ok()) << runs.status().message();
  EXPECT_EQ((*runs)[0].rows.size(), 2u);
  EXPECT_EQ((*runs)[0].rows[1].line, 11);
  // NCCL INFO lines inside the table, from a host named by its address, are skipped.
  auto info = ParseNcclTestsLog(Log("10-0-0-7:1234:1290 [0] NCCL INFO comm 0x5 rank 0 nranks 2 - Init COMPLETE\n" + kGood),
                                "info.txt");
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_EQ((*info)[0].rows.size(), 2u);
}

TEST(NcclTestsLog, MalformedLogsNameFileAndLine) {
  struct Case {
    std::string text, file, want;  // want: regex on the message
  } cases[] = {
      {Log("     1048576        262144     float     sum      -1    20.00   52.43\n"), "cut.txt",
       "^cut\\.txt:10: result row has 7 columns"},
      {Log("     1048576        262144     float     sum      -1    20.x0   52.43   52.43      0    20.00   52.43   "
           "52.43      0\n"),
       "bad.txt", "^bad\\.txt:10: cannot read size"},
      {Log("     1048576        262144     float     sum      -1    20.00   52.43   52.43      3    20.00   52.43   "
           "52.43      0\n"),
       "wrong.txt", "^wrong\\.txt:10: nccl-tests found 3 wrong elements"},
      {Log("     1048576        262144     float     sum      -1    20.00   52.43   91.75      0    20.00   52.43   "
           "52.43      0\n"),
       "busbw.txt", "^busbw\\.txt:10: busbw 91\\.75 GB/s is not algbw x 1\\.0000"},
      {Log("     1048576        262144     float     sum      -1    20.00   90.43   90.43      0    20.00   52.43   "
           "52.43      0\n"),
       "algbw.txt", "^algbw\\.txt:10: algbw 90\\.43 GB/s is not size / time"},
      {Log(std::string(kGood.substr(kGood.find('\n') + 1)) + kGood.substr(0, kGood.find('\n') + 1)), "order.txt",
       "^order\\.txt:11: size 1048576 B is not larger"},
      {Log(kGood, "#  (device lines removed)\n"), "nodev.txt", "^nodev\\.txt:2: no '#  Rank"},
      {Log(kGood,
           "#  Rank  0 Group  0 Pid   100 on      node1 device  0 [0000:18:00] H100\n"
           "#  Rank  1 Group  0 Pid   100 on      node1 device  1 [0000:18:00] H100\n"
           "#  Rank  2 Group  0 Pid   100 on      node2 device  0 [0000:18:00] H100\n"),
       "uneven.txt", "^uneven\\.txt:2: host node1 runs 2 of 3 ranks"},
      {Log(kGood, "#  Rank  zero Group  0 Pid 1 on n device 0 [0] H100\n"), "devline.txt",
       "^devline\\.txt:5: device line does not parse"},
      {Log("", ""), "empty.txt", "^empty\\.txt:2: all_reduce run has no result rows"},
      {"just some text\n", "notalog.txt", "^notalog\\.txt: no nccl-tests result table"},
      {Log(kGood).substr(Log(kGood).find('\n') + 1), "mystery.txt",
       "^mystery\\.txt:1: cannot tell which nccl-tests test"},
      {Log(kGood, "", "all_gather"), "redop.txt", "^redop\\.txt:2: redop column 'sum' does not fit all_gather"},
  };
  for (const Case& c : cases) {
    auto r = ParseNcclTestsLog(c.text, c.file);
    ASSERT_FALSE(r.ok()) << c.file;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(std::regex_search(r.status().message(), std::regex(c.want)))
        << c.file << ": " << r.status().message();
  }
}

}  // namespace
}  // namespace dt
