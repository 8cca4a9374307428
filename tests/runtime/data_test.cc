// Tests of the token sources (Markov entropy rate, file validation) and of
// the DP slicing of the data loader.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>

#include "runtime/data/data_loader.h"
#include "runtime/data/file_source.h"
#include "runtime/data/markov_source.h"

namespace dt::rt {
namespace {

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/dt_data_" + name;
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST(MarkovSource, TransitionRowsAreDistributions) {
  auto src = MarkovSource::Create({16, 3, 0.1, 7});
  ASSERT_TRUE(src.ok());
  for (int i = 0; i < 16; ++i) {
    double row = 0.0;
    for (int j = 0; j < 16; ++j) row += src->Prob(i, j);
    EXPECT_NEAR(row, 1.0, 1e-12);
  }
  double total = 0.0;
  for (double p : src->stationary()) total += p;
  EXPECT_NEAR(total, 1.0, 1e-12);
  // Bounds: between 0 and the uniform chain's ln V.
  EXPECT_GT(src->EntropyRateNats(), 0.0);
  EXPECT_LT(src->EntropyRateNats(), std::log(16.0));
}

TEST(MarkovSource, EntropyRateMatchesEmpiricalEstimate) {
  auto src = MarkovSource::Create({32, 3, 0.05, 99});
  ASSERT_TRUE(src.ok());
  // Plug-in conditional entropy from transition counts of ~1M tokens.
  std::vector<double> counts(32 * 32, 0.0), from(32, 0.0);
  std::vector<int32_t> seq(5000);
  double total = 0.0;
  for (int g = 0; g < 200; ++g) {
    src->Sample(/*seed=*/5, g, static_cast<int64_t>(seq.size()), seq.data());
    for (size_t t = 1; t < seq.size(); ++t) {
      counts[seq[t - 1] * 32 + seq[t]] += 1.0;
      from[seq[t - 1]] += 1.0;
      total += 1.0;
    }
  }
  double h = 0.0;
  for (int i = 0; i < 32; ++i)
    for (int j = 0; j < 32; ++j) {
      double c = counts[i * 32 + j];
      if (c > 0) h -= c / total * std::log(c / from[i]);
    }
  const double analytic = src->EntropyRateNats();
  EXPECT_NEAR(h, analytic, 0.02 * analytic) << "empirical " << h << " analytic " << analytic;
}

TEST(MarkovSource, RejectsBadOptions) {
  EXPECT_FALSE(MarkovSource::Create({1, 1, 0.1, 1}).ok());
  EXPECT_FALSE(MarkovSource::Create({8, 9, 0.1, 1}).ok());
  EXPECT_FALSE(MarkovSource::Create({8, 2, 0.0, 1}).ok());
}

TEST(DataLoader, DpSlicesUnionIsTheDp1Batch) {
  auto markov = MarkovSource::Create({50, 4, 0.05, 3});
  ASSERT_TRUE(markov.ok());
  auto src = std::make_shared<MarkovSource>(*markov);
  // DP=1 with 4 microbatches of 2 == DP=2 with 2 microbatches of 2 (same global batch 8).
  BatchShape one{2, 4, 16, 1, 0, 42};
  auto l1 = DataLoader::Create(src, one);
  ASSERT_TRUE(l1.ok());
  for (int64_t step : {0, 3}) {
    std::vector<int32_t> all_in, all_tg, in, tg;
    for (int m = 0; m < 4; ++m) {
      l1->Microbatch(step, m, &in, &tg);
      all_in.insert(all_in.end(), in.begin(), in.end());
      all_tg.insert(all_tg.end(), tg.begin(), tg.end());
    }
    std::vector<int32_t> dp_in, dp_tg;
    for (int r = 0; r < 2; ++r) {
      auto l2 = DataLoader::Create(src, BatchShape{2, 2, 16, 2, r, 42});
      ASSERT_TRUE(l2.ok());
      for (int m = 0; m < 2; ++m) {
        l2->Microbatch(step, m, &in, &tg);
        dp_in.insert(dp_in.end(), in.begin(), in.end());
        dp_tg.insert(dp_tg.end(), tg.begin(), tg.end());
      }
    }
    EXPECT_EQ(dp_in, all_in);
    EXPECT_EQ(dp_tg, all_tg);
    EXPECT_EQ(all_in[1], all_tg[0]);  // targets are inputs shifted by one
  }
  // Different steps read different samples.
  std::vector<int32_t> a, b, t;
  l1->Microbatch(0, 0, &a, &t);
  l1->Microbatch(1, 0, &b, &t);
  EXPECT_NE(a, b);
}

TEST(FileTokenSource, TextFileIsBytes) {
  const std::string path = TempPath("text.txt");
  WriteBytes(path, "hello world, hello tokens");
  auto src = FileTokenSource::OpenTextFile(path);
  ASSERT_TRUE(src.ok()) << src.status().message();
  EXPECT_EQ((*src)->vocab(), 256);
  EXPECT_EQ((*src)->num_tokens(), 25);
  std::vector<int32_t> out(5);
  (*src)->Sample(0, 0, 5, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{'h', 'e', 'l', 'l', 'o'}));
  auto loader = DataLoader::Create(std::shared_ptr<const TokenSource>(std::move(*src)),
                                   BatchShape{1, 1, 30, 1, 0, 0});
  EXPECT_FALSE(loader.ok());  // 25 tokens < 31
}

TEST(FileTokenSource, TokenFileValidation) {
  const std::string good = TempPath("good.bin");
  WriteBytes(good, std::string("\x01\x00\x02\x00\x03\x01", 6));  // ids 1, 2, 259
  auto ok = FileTokenSource::OpenTokenFile(good, 300);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  std::vector<int32_t> out(3);
  (*ok)->Sample(0, 0, 3, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{1, 2, 259}));

  auto too_big = FileTokenSource::OpenTokenFile(good, 200);
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(too_big.status().message().find("byte offset 4"), std::string::npos) << too_big.status().message();
  EXPECT_NE(too_big.status().message().find(good), std::string::npos);

  const std::string odd = TempPath("odd.bin");
  WriteBytes(odd, std::string("\x01\x00\x02", 3));
  auto truncated = FileTokenSource::OpenTokenFile(odd, 300);
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("truncated"), std::string::npos);

  auto missing = FileTokenSource::OpenTokenFile(TempPath("nope.bin"), 300);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

// The in-memory entry points (the fuzz harness's) check what the file
// loaders check and name the given path.
TEST(FileTokenSource, FromBytesMatchesTheFileLoaders) {
  auto ok = FileTokenSource::FromTokenBytes(std::string("\x01\x00\x02\x00", 4), "mem.bin", 300);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ((*ok)->num_tokens(), 2);
  auto bad = FileTokenSource::FromTokenBytes(std::string("\xff\x00", 2), "mem.bin", 200);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("token file 'mem.bin'"), std::string::npos);
  EXPECT_FALSE(FileTokenSource::FromTokenBytes("", "mem.bin", 300).ok());
  EXPECT_FALSE(FileTokenSource::FromTextBytes("", "mem.txt").ok());
  auto text = FileTokenSource::FromTextBytes("ab", "mem.txt");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ((*text)->num_tokens(), 2);
}

}  // namespace
}  // namespace dt::rt
