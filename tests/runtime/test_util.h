// Helpers shared by the runtime's unit tests: seeded random vectors and
// Param descriptors with TP sharding filled in. Header-only test fixtures.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "runtime/model/param_store.h"

namespace dt::rt::testing_util {

using Vec = std::vector<float>;

// n samples of N(0, scale^2) from a fixed seed.
inline Vec Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  Vec v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// A parameter of full shape `full`, sliced for TP rank `tp_rank` of `tp`.
inline Param MakeParam(const std::string& name, std::vector<int64_t> full,
                       ShardKind kind = ShardKind::kReplicated, int tp_rank = 0, int tp = 1,
                       bool tied = false) {
  Param p;
  p.name = name;
  p.full_shape = full;
  p.local_shape = full;
  p.shard = kind;
  p.tp_rank = tp_rank;
  p.tp_size = tp;
  p.tied = tied;
  if (kind == ShardKind::kSplitDim0) p.local_shape[0] /= tp;
  if (kind == ShardKind::kSplitDim1) p.local_shape[1] /= tp;
  p.numel = 1;
  for (int64_t d : p.local_shape) p.numel *= d;
  return p;
}

}  // namespace dt::rt::testing_util
