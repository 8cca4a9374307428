// Issue 13: output writes are checked. /dev/full accepts open() and fails
// every write with ENOSPC, like a full disk.
#include "base/checked_write.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "base/json_fields.h"

namespace dt {
namespace {

TEST(CheckedWrite, FullDiskIsAnErrorNamingTheFile) {
  OutputFile out;
  ASSERT_TRUE(out.Open("/dev/full", /*append=*/false).ok());
  Status s = out.Append("{\"step\": 1}\n");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("'/dev/full'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("No space left on device"), std::string::npos) << s.message();
  EXPECT_TRUE(out.Close().ok());
  Status w = WriteWholeFile("/dev/full", "abc", 3, /*fsync=*/false);
  EXPECT_NE(w.message().find("No space left on device"), std::string::npos) << w.message();
}

TEST(CheckedWrite, TextFileInAMissingDirectoryLeavesNothing) {
  const std::string dir = ::testing::TempDir() + "/dt_checked_write_missing";
  std::filesystem::remove_all(dir);
  Status s = WriteTextFile(dir + "/plan.json", "{}");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("plan.json.tmp"), std::string::npos) << s.message();
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(CheckedWrite, AppendsAndTruncates) {
  const std::string path = ::testing::TempDir() + "/dt_checked_write.txt";
  OutputFile out;
  ASSERT_TRUE(out.Open(path, false).ok());
  ASSERT_TRUE(out.Append("a\n").ok());
  ASSERT_TRUE(out.Close().ok());
  ASSERT_TRUE(out.Open(path, true).ok());
  ASSERT_TRUE(out.Append("b\n").ok());
  ASSERT_TRUE(out.Close().ok());
  EXPECT_EQ(std::filesystem::file_size(path), 4u);
  ASSERT_TRUE(out.Open(path, false).ok());
  ASSERT_TRUE(out.Close().ok());
  EXPECT_EQ(std::filesystem::file_size(path), 0u);
}

}  // namespace
}  // namespace dt
