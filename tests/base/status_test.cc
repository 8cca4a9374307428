#include "base/status.h"

#include <gtest/gtest.h>

#include "base/json_fields.h"

namespace dt {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2) return InvalidArgument("odd");
  return x / 2;
}

Status UseHalf(int x, int* out) {
  DT_ASSIGN_OR_RETURN(*out, Half(x));
  return Status::Ok();
}

TEST(Status, PropagatesErrorsAndValues) {
  int v = 0;
  EXPECT_TRUE(UseHalf(4, &v).ok());
  EXPECT_EQ(v, 2);
  Status s = UseHalf(3, &v);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "odd");
}

TEST(FieldReader, NamesMissingAndMistypedFields) {
  json j = {{"a", 3}, {"b", "x"}};
  FieldReader r(j, "file 'f.json'");
  EXPECT_EQ(r.Int("a"), 3);
  EXPECT_TRUE(r.ok());
  r.Int("b");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'b' must be an integer"), std::string::npos);
  FieldReader r2(j, "file 'f.json'");
  r2.Int("zz");
  EXPECT_NE(r2.status().message().find("missing field 'zz'"), std::string::npos);
  EXPECT_NE(r2.status().message().find("f.json"), std::string::npos);
}

// A field no reader asked for is refused by name (a typo would otherwise be
// ignored); fields read only in some cases are passed as also_known.
TEST(FieldReader, RejectsFieldsNoReaderAskedFor) {
  json j = {{"tp", 2}, {"tpp", 4}, {"note", "x"}};
  FieldReader r(j, "plan 'p.json'");
  EXPECT_EQ(r.IntOr("tp", 1), 2);
  EXPECT_FALSE(r.Has("dp"));
  r.RejectUnknown({"note"});
  ASSERT_FALSE(r.ok());
  const std::string msg = r.status().message();
  EXPECT_NE(msg.find("unknown field 'tpp'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("known fields: dp, note, tp"), std::string::npos) << msg;
  FieldReader all(j, "plan 'p.json'");
  all.Int("tp");
  all.Int("tpp");
  all.RejectUnknown({"note"});
  EXPECT_TRUE(all.ok()) << all.status().message();
}

// Regression (tests/fuzz, crash inputs in tests/fuzz/corpus/{model,plan,cases}/
// int64_range_*): a number outside int64 is an error naming the field, not
// undefined behaviour (double -> int64 cast) or a silent wrap (uint64 above
// 2^63 - 1); integral doubles inside the range are still integers.
TEST(FieldReader, IntegersOutsideInt64AreErrors) {
  json j = json::parse(R"({"big": 8.05e36, "neg": -1e19, "huge": 18446744073709551615,
                           "max": 9223372036854775807, "min": -9223372036854775808,
                           "whole": 4.0e18, "frac": 1024.7, "edge": 9223372036854775808.0})");
  FieldReader ok(j, "f");
  EXPECT_EQ(ok.Int("max"), INT64_MAX);
  EXPECT_EQ(ok.Int("min"), INT64_MIN);
  EXPECT_EQ(ok.Int("whole"), int64_t{4000000000000000000});
  EXPECT_TRUE(ok.ok());
  for (const char* key : {"big", "neg", "huge", "edge"}) {
    FieldReader r(j, "file 'f.json'");
    EXPECT_EQ(r.Int(key), 0) << key;
    ASSERT_FALSE(r.ok()) << key;
    EXPECT_NE(r.status().message().find(std::string("'") + key + "' must be an integer"), std::string::npos);
    EXPECT_NE(r.status().message().find("outside the 64-bit integer range"), std::string::npos)
        << r.status().message();
  }
  FieldReader frac(j, "f");
  frac.Int("frac");
  EXPECT_FALSE(frac.ok());
}

TEST(CheckDeathTest, AbortsWithFileAndLine) {
  EXPECT_DEATH({ DT_CHECK(1 == 2) << "boom"; }, "status_test.cc:[0-9]+ \\[rank -1\\] check failed: 1 == 2: boom");
}

}  // namespace
}  // namespace dt
