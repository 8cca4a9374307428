#include "runtime/model/init.h"

#include <cmath>

#include "base/check.h"
#include "base/mix64.h"

namespace dt::rt {
namespace {

uint64_t NameHash(const std::string& name) {  // FNV-1a
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Uniform in (0, 1].
double Uniform(uint64_t bits) { return (static_cast<double>(bits >> 11) + 1.0) * 0x1.0p-53; }

}  // namespace

float HashNormal(uint64_t seed, const std::string& name, int64_t index) {
  const uint64_t key = SplitMix64(seed ^ SplitMix64(NameHash(name)));
  const uint64_t a = SplitMix64(key ^ SplitMix64(2 * static_cast<uint64_t>(index)));
  const uint64_t b = SplitMix64(key ^ SplitMix64(2 * static_cast<uint64_t>(index) + 1));
  const double u1 = Uniform(a), u2 = Uniform(b);
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

int64_t GlobalIndex(const Param& p, int64_t i) {
  if (p.shard == ShardKind::kReplicated) return i;
  const auto& full = p.full_shape;
  const auto& local = p.local_shape;
  DT_CHECK(!full.empty() && full.size() == local.size()) << p.name;
  if (full.size() == 1) {
    DT_CHECK(p.shard == ShardKind::kSplitDim0) << p.name << ": 1-D tensors split on dim 0 only";
    return ShardBegin(full[0], p.tp_rank, p.tp_size) + i;
  }
  DT_CHECK_EQ(full.size(), 2u) << p.name;
  const int64_t row = i / local[1], col = i % local[1];
  if (p.shard == ShardKind::kSplitDim0) return (ShardBegin(full[0], p.tp_rank, p.tp_size) + row) * full[1] + col;
  return row * full[1] + ShardBegin(full[1], p.tp_rank, p.tp_size) + col;
}

void InitNormal(const Param& p, uint64_t seed, float stddev, float* values) {
  for (int64_t i = 0; i < p.numel; ++i) values[i] = stddev * HashNormal(seed, p.name, GlobalIndex(p, i));
}

void InitConstant(const Param& p, float v, float* values) {
  for (int64_t i = 0; i < p.numel; ++i) values[i] = v;
}

}  // namespace dt::rt
