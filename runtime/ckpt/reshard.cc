#include "runtime/ckpt/reshard.h"

#include <cstring>

#include "base/check.h"

namespace dt::rt {
namespace {

// Visits the contiguous runs of the shard: (offset in full, offset in local, length).
template <typename F>
void ForEachRun(const Param& p, F&& run) {
  const int64_t full = FullNumel(p);
  if (p.shard == ShardKind::kReplicated || p.tp_size == 1) {
    DT_CHECK_EQ(p.numel, full) << p.name;
    run(0, 0, full);
    return;
  }
  DT_CHECK(!p.full_shape.empty()) << p.name;
  if (p.shard == ShardKind::kSplitDim0) {
    const int64_t d0 = p.full_shape[0];
    DT_CHECK_EQ(d0 % p.tp_size, 0) << p.name;
    const int64_t chunk = full / p.tp_size;
    DT_CHECK_EQ(p.numel, chunk) << p.name;
    run(p.tp_rank * chunk, 0, chunk);
    return;
  }
  DT_CHECK_GE(p.full_shape.size(), 2u) << p.name << ": kSplitDim1 needs 2+ dims";
  const int64_t d0 = p.full_shape[0], d1 = p.full_shape[1];
  DT_CHECK_EQ(d1 % p.tp_size, 0) << p.name;
  const int64_t inner = full / (d0 * d1);  // elements per dim-1 index
  const int64_t local_d1 = d1 / p.tp_size;
  const int64_t len = local_d1 * inner;
  DT_CHECK_EQ(p.numel, d0 * len) << p.name;
  for (int64_t i = 0; i < d0; ++i) run(i * d1 * inner + p.tp_rank * len, i * len, len);
}

}  // namespace

int64_t FullNumel(const Param& p) {
  int64_t n = 1;
  for (int64_t d : p.full_shape) n *= d;
  return n;
}

void SliceShard(const Param& p, const float* full, float* local) {
  ForEachRun(p, [&](int64_t f, int64_t l, int64_t n) {
    std::memcpy(local + l, full + f, sizeof(float) * n);
  });
}

void PlaceShard(const Param& p, const float* local, float* full) {
  ForEachRun(p, [&](int64_t f, int64_t l, int64_t n) {
    std::memcpy(full + f, local + l, sizeof(float) * n);
  });
}

}  // namespace dt::rt
