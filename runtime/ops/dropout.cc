#include "runtime/ops/dropout.h"

#include <cmath>

#include "base/check.h"
#include "base/mix64.h"

namespace dt::rt {
namespace {

// A 32-bit integer finaliser (multiply-xorshift, the "lowbias32" constants
// of C. Wellons' hash-prospector search): vectorises with 32-bit multiplies.
inline uint32_t Mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

}  // namespace

uint32_t DropoutRng::threshold() const {
  DT_CHECK(rate >= 0.0f && rate < 1.0f) << "dropout rate " << rate << " outside [0, 1)";
  const double t = std::floor(static_cast<double>(rate) * 4294967296.0);
  return t >= 4294967295.0 ? 0xffffffffU : static_cast<uint32_t>(t);
}

uint64_t DropoutRng::RowKey(DropoutSite site, int64_t layer, int64_t sample, int64_t a, int64_t b) const {
  uint64_t k = SplitMix64(seed ^ 0x64726f706f7574ULL);  // "dropout"
  for (uint64_t v : {static_cast<uint64_t>(site), static_cast<uint64_t>(layer), static_cast<uint64_t>(sample),
                     static_cast<uint64_t>(a), static_cast<uint64_t>(b)})
    k = SplitMix64(k ^ v);
  return k;
}

void DrawMaskRow(const DropoutRng& rng, uint64_t row_key, int64_t col0, int64_t n, uint8_t* mask) {
  const uint32_t thr = rng.threshold();
  const uint32_t lo = static_cast<uint32_t>(row_key), hi = static_cast<uint32_t>(row_key >> 32);
  for (int64_t c = 0; c < n; ++c) {
    const uint32_t col = static_cast<uint32_t>(col0 + c);
    mask[c] = Mix32(Mix32(col ^ hi) ^ lo) >= thr ? 1 : 0;
  }
}

void ApplyMask(const float* x, const uint8_t* mask, float scale, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = mask[i] ? x[i] * scale : 0.0f;
}

void DrawTokenMask(const DropoutRng& rng, DropoutSite site, int64_t layer, const std::vector<int64_t>& samples,
                   const std::vector<int64_t>& positions, int64_t rows, int64_t cols, uint8_t* mask) {
  const int64_t batch = static_cast<int64_t>(samples.size());
  DT_CHECK(batch > 0 && rows % batch == 0 && rows / batch <= static_cast<int64_t>(positions.size()))
      << "dropout mask of " << rows << " rows over " << batch << " samples and " << positions.size()
      << " positions";
  for (int64_t r = 0; r < rows; ++r) {
    const uint64_t key = rng.RowKey(site, layer, samples[r % batch], positions[r / batch]);
    DrawMaskRow(rng, key, 0, cols, mask + r * cols);
  }
}

}  // namespace dt::rt
