// Dropout masks (runtime/ops/dropout.h): the keep rate and independence of
// the counter-based hash, inverted scaling, and that a mask depends on what
// an element is (its key and column), not on how the row is cut.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "runtime/ops/dropout.h"

namespace dt::rt {
namespace {

TEST(Dropout, KeepRateIsOneMinusRate) {
  for (float rate : {0.1f, 0.5f}) {
    DropoutRng rng;
    rng.rate = rate;
    rng.seed = 42;
    const int64_t rows = 1000, cols = 1000;
    std::vector<uint8_t> m(cols);
    int64_t kept = 0, both = 0, pairs = 0, row_pairs = 0;
    std::vector<uint8_t> prev(cols);
    for (int64_t r = 0; r < rows; ++r) {
      DrawMaskRow(rng, rng.RowKey(DropoutSite::kMlpOut, 3, r / 10, r % 10), 0, cols, m.data());
      for (int64_t c = 0; c < cols; ++c) {
        kept += m[c];
        if (c > 0) both += m[c] && m[c - 1], ++pairs;
        if (r > 0) row_pairs += m[c] && prev[c];
      }
      prev = m;
    }
    const double n = static_cast<double>(rows * cols), keep = 1.0 - rate;
    // 1e6 draws: the standard error of the rate is < 5e-4; allow 4 sigma.
    EXPECT_NEAR(kept / n, keep, 2e-3) << "rate " << rate;
    // Neighbours (columns, and rows with consecutive keys) are independent.
    EXPECT_NEAR(both / static_cast<double>(pairs), keep * keep, 3e-3) << "rate " << rate;
    EXPECT_NEAR(row_pairs / (n - cols), keep * keep, 3e-3) << "rate " << rate;
  }
}

TEST(Dropout, MaskDependsOnKeyAndColumnOnly) {
  DropoutRng rng;
  rng.rate = 0.3f;
  rng.seed = 9;
  const uint64_t key = rng.RowKey(DropoutSite::kAttentionProbs, 2, 17, 3, 40);
  std::vector<uint8_t> whole(64), parts(64);
  DrawMaskRow(rng, key, 0, 64, whole.data());
  DrawMaskRow(rng, key, 0, 24, parts.data());  // a row cut as CP blocks are
  DrawMaskRow(rng, key, 24, 40, parts.data() + 24);
  EXPECT_EQ(whole, parts);
  // Every key part matters.
  std::vector<uint8_t> other(64);
  for (uint64_t k : {rng.RowKey(DropoutSite::kAttentionOut, 2, 17, 3, 40), rng.RowKey(DropoutSite::kAttentionProbs, 1, 17, 3, 40),
                     rng.RowKey(DropoutSite::kAttentionProbs, 2, 16, 3, 40), rng.RowKey(DropoutSite::kAttentionProbs, 2, 17, 4, 40),
                     rng.RowKey(DropoutSite::kAttentionProbs, 2, 17, 3, 41)}) {
    DrawMaskRow(rng, k, 0, 64, other.data());
    EXPECT_NE(other, whole);
  }
  DropoutRng reseeded = rng;
  reseeded.seed = 10;
  DrawMaskRow(reseeded, reseeded.RowKey(DropoutSite::kAttentionProbs, 2, 17, 3, 40), 0, 64, other.data());
  EXPECT_NE(other, whole);
}

TEST(Dropout, InvertedScalingKeepsTheMean) {
  DropoutRng rng;
  rng.rate = 0.25f;
  const int64_t n = 200000;
  std::vector<uint8_t> m(n);
  DrawMaskRow(rng, rng.RowKey(DropoutSite::kEmbedding, -1, 0, 0), 0, n, m.data());
  std::vector<float> x(n, 2.0f), y(n);
  ApplyMask(x.data(), m.data(), rng.scale(), n, y.data());
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_TRUE(y[i] == 0.0f || std::fabs(y[i] - 2.0f / 0.75f) < 1e-6f);
    sum += y[i];
  }
  EXPECT_NEAR(sum / n, 2.0, 0.02);
  DropoutRng off;
  EXPECT_FALSE(off.on());
  EXPECT_EQ(off.threshold(), 0u);  // rate 0 keeps everything
}

TEST(Dropout, TokenMaskRowsFollowSampleAndPosition) {
  DropoutRng rng;
  rng.rate = 0.5f;
  rng.seed = 1;
  // Rows are sequence-major (row = t * batch + b); a shard of positions
  // {6, 7} draws what the whole sequence draws at those positions.
  const std::vector<int64_t> samples = {3, 8};
  std::vector<int64_t> all(8);
  for (int64_t t = 0; t < 8; ++t) all[t] = t;
  const int64_t h = 16;
  std::vector<uint8_t> whole(8 * 2 * h), shard(2 * 2 * h);
  DrawTokenMask(rng, DropoutSite::kMlpOut, 1, samples, all, 16, h, whole.data());
  DrawTokenMask(rng, DropoutSite::kMlpOut, 1, samples, {6, 7}, 4, h, shard.data());
  EXPECT_TRUE(std::equal(shard.begin(), shard.end(), whole.begin() + 6 * 2 * h));
}

}  // namespace
}  // namespace dt::rt
