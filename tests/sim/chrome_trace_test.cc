#include "sim/chrome_trace.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace dt::sim {
namespace {

using nlohmann::json;

Engine MakeEngine(bool trace) {
  Engine e;
  e.EnableTrace(trace);
  StreamId c0 = e.AddStream("rank0", "compute");
  StreamId m0 = e.AddStream("rank0", "comm \"pp\"");  // needs escaping
  StreamId c1 = e.AddStream("rank1", "compute");
  TaskId f = e.AddTask(c0, 1e-3, 0, "F0.0");
  TaskId s = e.AddTask(m0, 2e-4, 1, "SA0.0");
  TaskId g = e.AddTask(c1, 1e-3, 0, "F0.1");
  e.AddDep(f, s);
  e.AddDep(s, g);
  return e;
}

TEST(ChromeTraceTest, WritesParsableJsonWithMetadata) {
  Engine e = MakeEngine(true);
  ASSERT_TRUE(e.Run().ok());
  const std::string path = testing::TempDir() + "sim_trace_" + std::to_string(getpid()) + ".json";
  ASSERT_TRUE(WriteChromeTrace(e, path, {"compute", "comm"}).ok());
  std::ifstream in(path);
  ASSERT_TRUE(in.good());
  json j = json::parse(in);  // throws (fails the test) if not JSON
  std::remove(path.c_str());
  ASSERT_TRUE(j["traceEvents"].is_array());
  int process_names = 0, thread_names = 0, complete = 0;
  for (const json& ev : j["traceEvents"]) {
    if (ev["ph"] == "M" && ev["name"] == "process_name") ++process_names;
    if (ev["ph"] == "M" && ev["name"] == "thread_name") ++thread_names;
    if (ev["ph"] == "X") {
      ++complete;
      if (ev["name"] == "SA0.0") {
        EXPECT_EQ(ev["cat"], "comm");
        EXPECT_NEAR(ev["ts"].get<double>(), 1000.0, 1e-6);  // microseconds
        EXPECT_NEAR(ev["dur"].get<double>(), 200.0, 1e-6);
        EXPECT_EQ(ev["pid"], 1);
        EXPECT_EQ(ev["tid"], 2);
      }
      if (ev["name"] == "F0.1") {
        EXPECT_EQ(ev["pid"], 2);
      }
    }
    if (ev["name"] == "thread_name" && ev["tid"] == 2) {
      EXPECT_EQ(ev["args"]["name"], "comm \"pp\"");
    }
  }
  EXPECT_EQ(process_names, 2);
  EXPECT_EQ(thread_names, 3);
  EXPECT_EQ(complete, 3);
}

TEST(ChromeTraceTest, WithoutTracingUsesCategoryNames) {
  Engine e = MakeEngine(false);
  ASSERT_TRUE(e.Run().ok());
  StatusOr<std::string> text = ChromeTraceJson(e, {"compute"});  // no name for category 1
  ASSERT_TRUE(text.ok());
  json j = json::parse(*text);
  int cat1 = 0;
  for (const json& ev : j["traceEvents"]) {
    if (ev["ph"] == "X" && ev["cat"] == "cat1") {
      EXPECT_EQ(ev["name"], "cat1");
      ++cat1;
    }
  }
  EXPECT_EQ(cat1, 1);
}

TEST(ChromeTraceTest, FailsBeforeRunAndOnBadPath) {
  Engine e = MakeEngine(true);
  EXPECT_FALSE(ChromeTraceJson(e, {}).ok());
  ASSERT_TRUE(e.Run().ok());
  Status st = WriteChromeTrace(e, "/nonexistent_dir_dtplan/x.json", {});
  EXPECT_EQ(st.code(), StatusCode::kIoError);
}

}  // namespace
}  // namespace dt::sim
