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

TEST(CheckDeathTest, AbortsWithFileAndLine) {
  EXPECT_DEATH({ DT_CHECK(1 == 2) << "boom"; }, "status_test.cc:[0-9]+ \\[rank -1\\] check failed: 1 == 2: boom");
}

}  // namespace
}  // namespace dt
