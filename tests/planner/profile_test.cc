// Tests of planner/profile: interpolation, loading, validation, round trip.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "planner/profile/collective_series.h"
#include "planner/profile/interp.h"
#include "planner/profile/profile.h"

namespace dt {
namespace {

Curve MakeCurve(std::vector<double> x, std::vector<double> y) {
  Curve c;
  c.x = std::move(x);
  c.y = std::move(y);
  return c;
}

TEST(InterpTest, ExactAtPoints) {
  Curve c = MakeCurve({1e3, 1e6, 1e9}, {0.1, 0.5, 0.8});
  for (Scale s : {Scale::kLinear, Scale::kLog}) {
    for (size_t i = 0; i < c.size(); ++i) {
      InterpResult r = Interpolate(c, c.x[i], s, s);
      EXPECT_EQ(r.value, c.y[i]) << i;
      EXPECT_FALSE(r.clamped);
    }
  }
}

TEST(InterpTest, MonotoneBetweenPoints) {
  Curve c = MakeCurve({1, 10, 100, 1000}, {5, 2, 2, 9});  // down, flat, up
  for (Scale s : {Scale::kLinear, Scale::kLog}) {
    for (size_t seg = 0; seg + 1 < c.size(); ++seg) {
      double prev = c.y[seg];
      double dir = c.y[seg + 1] - c.y[seg];
      for (int i = 1; i <= 100; ++i) {
        double x = c.x[seg] + (c.x[seg + 1] - c.x[seg]) * i / 100.0;
        double v = Interpolate(c, x, s, s).value;
        if (dir >= 0) {
          EXPECT_GE(v, prev) << x;
        }
        if (dir <= 0) {
          EXPECT_LE(v, prev) << x;
        }
        EXPECT_GE(v, std::min(c.y[seg], c.y[seg + 1]));
        EXPECT_LE(v, std::max(c.y[seg], c.y[seg + 1]));
        prev = v;
      }
    }
  }
  // Midpoint of a linear segment is the mean; of a log-log segment the geometric mean.
  Curve d = MakeCurve({1, 100}, {1, 100});
  EXPECT_DOUBLE_EQ(Interpolate(d, 50.5).value, 50.5);
  EXPECT_NEAR(Interpolate(d, 10, Scale::kLog, Scale::kLog).value, 10, 1e-9);
}

TEST(InterpTest, OutOfRangeIsClampedAndFlagged) {
  Curve c = MakeCurve({10, 20}, {1, 3});
  InterpResult lo = Interpolate(c, 5);
  EXPECT_EQ(lo.value, 1);
  EXPECT_TRUE(lo.clamped);
  EXPECT_TRUE(lo.below);
  EXPECT_FALSE(lo.above);
  InterpResult hi = Interpolate(c, 50, Scale::kLog, Scale::kLog);
  EXPECT_EQ(hi.value, 3);
  EXPECT_TRUE(hi.clamped && hi.above && !hi.below);
  EXPECT_FALSE(Interpolate(c, 15).clamped);
  InterpResult one = Interpolate(MakeCurve({4}, {7}), 3);
  EXPECT_EQ(one.value, 7);
  EXPECT_TRUE(one.below);
}

TEST(InterpTest, ValidateCurveRejectsBadCurves) {
  EXPECT_FALSE(ValidateCurve(Curve{}, "c", false, false).ok());
  Status unsorted = ValidateCurve(MakeCurve({1, 1}, {1, 2}), "my.curve", false, false);
  EXPECT_FALSE(unsorted.ok());
  EXPECT_NE(unsorted.message().find("my.curve"), std::string::npos);
  EXPECT_NE(unsorted.message().find("increasing"), std::string::npos);
  EXPECT_FALSE(ValidateCurve(MakeCurve({0, 1}, {1, 2}), "c", true, true).ok());
  EXPECT_FALSE(ValidateCurve(MakeCurve({1, 2}, {1, -2}), "c", true, true).ok());
  EXPECT_TRUE(ValidateCurve(MakeCurve({1, 2}, {1, -2}), "c", true, false).ok());
}

// A measured collective series becomes a table whose time never falls with
// the message size and never exceeds sending it as several smaller messages:
// a noisy point (here 16 KiB measured at 37 us after 4 KiB at 4 us, as a
// busy moment of the profiling machine gave on 2026-11-24) is brought down to
// 1.25 x 4 x 4 us, and a clean series keeps its points.
// The bus-bandwidth factor of a 2-rank all-reduce (nccl-tests: 2 (n-1) / n).
double BusBwFactorOf(int n) { return 2.0 * (n - 1) / n; }

TEST(CollectiveSeries, NoisyPointsAreBoundedByChunking) {
  CollSeries s;
  s.kind = CollKind::kAllReduce;
  s.group_size = 2;
  s.samples = {{1024, 1.9e-6}, {4096, 4.0e-6}, {16384, 37.3e-6}, {65536, 53.5e-6}, {262144, 152.6e-6}};
  const LinkEntry e = LinkEntryFromSeries(s);
  ASSERT_EQ(e.points.size(), 5u);
  auto time_at = [&](size_t i) { return e.points.x[i] * BusBwFactorOf(2) / e.points.y[i]; };
  EXPECT_NEAR(time_at(2), 20.0e-6, 1e-12);  // 1.25 x 4 x the 4 KiB time, not 37.3 us
  EXPECT_NEAR(time_at(3), 53.5e-6, 1e-12);  // within 1.25 x 4 x 20 us: kept
  EXPECT_NEAR(time_at(1), 4.0e-6, 1e-12);
  for (size_t i = 1; i < e.points.size(); ++i) {
    EXPECT_GE(time_at(i), time_at(i - 1));
    EXPECT_LE(time_at(i), 1.25 * std::ceil(e.points.x[i] / e.points.x[i - 1]) * time_at(i - 1) * (1 + 1e-12));
  }
}

TEST(ProfileTest, BundledProfilesLoadByNameAndAlias) {
  std::vector<std::string> names = BundledProfileNames();
  for (const char* want : {"A100-SXM4-80GB", "H100-SXM5-80GB", "cpu-generic"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  for (const std::string& n : names) {
    StatusOr<HardwareProfile> p = LoadProfile(n);
    ASSERT_TRUE(p.ok()) << p.status().message();
    EXPECT_EQ(p->name, n);
    EXPECT_FALSE(p->sources.empty());
  }
  StatusOr<HardwareProfile> a = LoadProfile("a100");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->name, "A100-SXM4-80GB");
  EXPECT_EQ(a->device.peak_flops, 312e12);
  EXPECT_EQ(a->device.memory_bandwidth_Bps, 2.039e12);
  EXPECT_EQ(a->network.gpus_per_node, 8);
  StatusOr<HardwareProfile> h = LoadProfile("H100");
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->device.peak_flops, 989e12);
  StatusOr<HardwareProfile> c = LoadProfile("cpu");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->device.kind, "cpu");
  EXPECT_EQ(c->device.dtype, "fp32");
  EXPECT_EQ(c->network.gpus_per_node, 2);
}

// A measured profile's end check round-trips and gives the user the range of
// its own prediction errors; a check with a non-positive time is refused.
TEST(ProfileTest, StepChecksRoundTripAndSummarise) {
  HardwareProfile p = LoadProfile("cpu-generic").value();
  EXPECT_EQ(StepCheckNote(p), "");
  p.compute.step_checks = {{"gpt-tiny training step mbs1", 1.8e-3, 1.93e-3},
                           {"gpt-small-cpu training step mbs16", 0.550, 0.494}};
  json j = ToJson(p);
  StatusOr<HardwareProfile> q = ProfileFromJson(json::parse(j.dump()), "round trip");
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_TRUE(*q == p);
  const std::string note = StepCheckNote(*q);
  EXPECT_NE(note.find("2 whole fp32 training steps within -10%..+7%"), std::string::npos) << note;
  EXPECT_NE(note.find("worst: gpt-small-cpu training step mbs16, -10%"), std::string::npos) << note;
  EXPECT_EQ(note.find("bf16"), std::string::npos) << note;
  // bf16 steps: their own range beside the fp32 one, and the field round-trips.
  StepCheck b{"gpt-tiny bf16 training step mbs4", 4.0e-3, 3.8e-3};
  b.precision = "bf16";
  p.compute.step_checks.push_back(b);
  q = ProfileFromJson(json::parse(ToJson(p).dump()), "round trip");
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_TRUE(*q == p);
  EXPECT_EQ(q->compute.step_checks.back().precision, "bf16");
  EXPECT_NE(StepCheckNote(*q).find("within -10%..+7% (worst: gpt-small-cpu training step mbs16, -10%), and 1 whole "
                                   "bf16 training step within -5%..-5%"),
            std::string::npos)
      << StepCheckNote(*q);
  p.compute.step_checks.erase(p.compute.step_checks.begin() + 1, p.compute.step_checks.end());
  EXPECT_NE(StepCheckNote(p).find("+7%..+7%"), std::string::npos) << StepCheckNote(p);  // one check: that point
  json bad = j;
  bad["compute"]["step_checks"][0]["precision"] = "fp16";
  EXPECT_FALSE(ProfileFromJson(bad, "bad").ok());
  j["compute"]["step_checks"][0]["measured_s"] = -1;
  EXPECT_FALSE(ProfileFromJson(j, "bad").ok());
}

TEST(ProfileTest, UnknownNameListsBundledNames) {
  StatusOr<HardwareProfile> p = LoadProfile("tpu-v9");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kNotFound);
  for (const char* n : {"tpu-v9", "A100-SXM4-80GB", "H100-SXM5-80GB", "cpu-generic"})
    EXPECT_NE(p.status().message().find(n), std::string::npos) << p.status().message();
  EXPECT_EQ(LoadProfile("/nonexistent/dir/p.json").status().code(), StatusCode::kNotFound);
}

TEST(ProfileTest, RoundTripsThroughJson) {
  for (const std::string& n : BundledProfileNames()) {
    HardwareProfile p = LoadProfile(n).value();
    json j = ToJson(p);
    StatusOr<HardwareProfile> q = ProfileFromJson(json::parse(j.dump()), "round trip");
    ASSERT_TRUE(q.ok()) << q.status().message();
    EXPECT_TRUE(*q == p) << n;
    EXPECT_EQ(ToJson(*q), j);
  }
  // The H100 profile carries a measured attention curve: it survives the trip.
  EXPECT_FALSE(LoadProfile("h100").value().compute.attention_efficiency_by_keys.empty());
  // With measured GEMM points and size curves, through a file path.
  HardwareProfile p = LoadProfile("a100").value();
  p.compute.gemm_points = {{1024, 1024, 1024, 1, 1e-5}, {4096, 4096, 4096, 2, 1e-3}};
  p.network.collectives[0].intra[0].points = MakeCurve({1e3, 1e6, 1e9}, {1e8, 5e10, 2e11});
  ASSERT_TRUE(PrepareProfile(&p, "test").ok());
  std::string path = testing::TempDir() + "/dt_profile_roundtrip.json";
  ASSERT_TRUE(WriteJsonFile(path, ToJson(p)).ok());
  StatusOr<HardwareProfile> q = LoadProfile(path);
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_TRUE(*q == p);
  EXPECT_EQ(q->compute.measured_gemm_seconds.size(), 2u);
  std::remove(path.c_str());
}

// Applies `edit` to the A100 profile's JSON and returns the parse status.
template <typename F>
Status ParseEdited(F edit) {
  json j = ToJson(LoadProfile("a100").value());
  edit(j);
  return ProfileFromJson(j, "profile 'x.json'").status();
}

void ExpectRejected(const Status& st, std::vector<std::string> words) {
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("x.json"), std::string::npos) << st.message();
  for (const std::string& w : words)
    EXPECT_NE(st.message().find(w), std::string::npos) << "'" << w << "' not in: " << st.message();
}

TEST(ProfileTest, RejectsMissingFields) {
  ExpectRejected(ParseEdited([](json& j) { j["device"].erase("peak_flops"); }),
                 {"missing", "peak_flops"});
  ExpectRejected(ParseEdited([](json& j) { j.erase("network"); }), {"missing", "network"});
  ExpectRejected(ParseEdited([](json& j) { j["network"]["collectives"].erase("send_recv"); }),
                 {"missing", "send_recv"});
  ExpectRejected(ParseEdited([](json& j) { j["compute"]["gemm_efficiency"].erase("points"); }),
                 {"missing", "points"});
  ExpectRejected(ParseEdited([](json& j) { j["network"]["collectives"]["all_gather"].erase("intra"); }),
                 {"all_gather.intra", "missing"});
}

TEST(ProfileTest, RejectsWrongTypes) {
  ExpectRejected(ParseEdited([](json& j) { j["device"]["memory_bytes"] = "lots"; }),
                 {"memory_bytes", "integer"});
  ExpectRejected(ParseEdited([](json& j) { j["compute"]["gemm_efficiency"]["points"][1] = "x"; }),
                 {"gemm_efficiency.points[1]"});
  ExpectRejected(ParseEdited([](json& j) { j["network"]["collectives"] = json::array(); }),
                 {"collectives", "object"});
  ExpectRejected(ParseEdited([](json& j) { j["sources"]["a100_datasheet"] = 3; }),
                 {"sources.a100_datasheet"});
}

TEST(ProfileTest, RejectsUnphysicalValues) {
  ExpectRejected(ParseEdited([](json& j) {
                   j["network"]["collectives"]["all_reduce"]["intra"][0]["busbw_Bps"] = -1.0;
                 }),
                 {"all_reduce.intra[0].busbw_Bps", "> 0"});
  ExpectRejected(ParseEdited([](json& j) { j["device"]["memory_bandwidth_Bps"] = 0.0; }),
                 {"memory_bandwidth_Bps"});
  ExpectRejected(ParseEdited([](json& j) {
                   j["network"]["collectives"]["send_recv"]["inter"][0]["latency_s"] = -1e-6;
                 }),
                 {"send_recv.inter[0].latency_s"});
  ExpectRejected(ParseEdited([](json& j) { j["device"]["fragmentation"] = 1.5; }),
                 {"fragmentation"});
  ExpectRejected(ParseEdited([](json& j) { j["device"]["dtype"] = "fp8"; }), {"dtype", "bf16"});
  ExpectRejected(ParseEdited([](json& j) { j["compute"]["attention_efficiency"] = 1.2; }),
                 {"attention_efficiency"});
  ExpectRejected(ParseEdited([](json& j) {
                   j["network"]["collectives"]["all_reduce"]["intra"][0]["group_size"] = 16;
                 }),
                 {"group_size", "gpus_per_node"});
}

TEST(ProfileTest, RejectsNonMonotoneCurves) {
  // Efficiency dropping with size.
  ExpectRejected(ParseEdited([](json& j) {
                   j["compute"]["gemm_efficiency"]["points"] = {{1e6, 0.5}, {1e9, 0.3}};
                 }),
                 {"gemm_efficiency", "non-monotone"});
  // Efficiency rising faster than size: a bigger GEMM would be faster.
  ExpectRejected(ParseEdited([](json& j) {
                   j["compute"]["gemm_efficiency"]["points"] = {{1e6, 0.01}, {2e6, 0.5}};
                 }),
                 {"gemm_efficiency", "faster"});
  ExpectRejected(ParseEdited([](json& j) {
                   j["compute"]["gemm_efficiency"]["points"] = {{1e9, 0.5}, {1e6, 0.6}};
                 }),
                 {"increasing"});
  // The attention curve over keys obeys the same rules.
  ExpectRejected(ParseEdited([](json& j) {
                   j["compute"]["attention_efficiency_by_keys"]["points"] = {{2048, 0.2}, {4096, 0.5}};
                 }),
                 {"attention_efficiency_by_keys", "faster"});
  ExpectRejected(ParseEdited([](json& j) {
                   j["compute"]["attention_efficiency_by_keys"]["points"] = {{2048, 0.5}, {4096, 1.5}};
                 }),
                 {"attention_efficiency_by_keys"});
  ExpectRejected(ParseEdited([](json& j) {
                   j["network"]["collectives"]["all_reduce"]["intra"][0]["points"] = {
                       {1e3, 1e8}, {2e3, 1e10}};
                 }),
                 {"all_reduce.intra[0].points[1]", "less time"});
  ExpectRejected(ParseEdited([](json& j) {
                   auto& intra = j["network"]["collectives"]["all_reduce"]["intra"];
                   std::swap(intra[0], intra[1]);
                 }),
                 {"sorted"});
}

}  // namespace
}  // namespace dt

namespace dt {
namespace {

// Measured CPU profiles name the machine they describe; the field survives
// the JSON round trip, and the bundled measured profile carries it.
TEST(ProfileMachine, RoundTripsAndIsBundled) {
  auto p = LoadProfile("local-cpu");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_FALSE(p->machine.cpu_model.empty());
  EXPECT_EQ(p->machine.ranks_per_node, p->network.gpus_per_node);
  HardwareProfile q = *p;
  q.machine.cpu_model = "Some CPU";
  q.machine.cores = 7;
  auto back = ProfileFromJson(ToJson(q), "round trip");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->machine.cpu_model, "Some CPU");
  EXPECT_EQ(back->machine.cores, 7);
  auto gpu = LoadProfile("A100-SXM4-80GB");
  ASSERT_TRUE(gpu.ok());
  EXPECT_TRUE(gpu->machine.cpu_model.empty());
  EXPECT_FALSE(ToJson(*gpu).contains("machine"));
}

// Every bundled profile round-trips through its JSON, and a misspelt field at
// any level (it would keep its default) is refused by name.
TEST(ProfileJson, BundledProfilesRoundTripAndUnknownFieldsAreRefused) {
  for (const std::string& name : BundledProfileNames()) {
    auto p = LoadProfile(name);
    ASSERT_TRUE(p.ok()) << name << ": " << p.status().message();
    auto back = ProfileFromJson(ToJson(*p), name + " round trip");
    ASSERT_TRUE(back.ok()) << name << ": " << back.status().message();
  }
  auto h100 = LoadProfile("H100-SXM5-80GB");
  ASSERT_TRUE(h100.ok());
  const json base = ToJson(*h100);
  const std::vector<std::pair<std::vector<std::string>, std::string>> typos = {
      {{}, "sourcez"}, {{"device"}, "peak_flop"}, {{"compute"}, "host_overhead"},
      {{"compute", "gemm_efficiency"}, "pionts"}, {{"compute", "fp8"}, "peak"}, {{"network"}, "gpu_per_node"}};
  for (const auto& [path, key] : typos) {
    json j = base;
    json* at = &j;
    for (const std::string& k : path) at = &(*at)[k];
    (*at)[key] = 1;
    auto bad = ProfileFromJson(j, "typo");
    ASSERT_FALSE(bad.ok()) << key;
    EXPECT_NE(bad.status().message().find("unknown field '" + key + "'"), std::string::npos) << bad.status().message();
  }
}

}  // namespace
}  // namespace dt
