// CP layout: which sequence positions a context-parallel rank holds
// (Megatron-LM's load-balanced causal assignment). The sequence of every
// microbatch is cut into 2*cp equal chunks; CP rank r holds chunks r and
// 2*cp-1-r, in that order, as its local sequence of seq_local = seq/cp
// positions. Pairing an early with a late chunk gives every rank the same
// causal attention work. With cp == 1 the mapping is the identity.
//
// Pure functions, thread-safe. Misuse (odd seq_local under cp > 1, t out
// of range) aborts via DT_CHECK.
#pragma once

#include <cstdint>

#include "base/check.h"

namespace dt::rt {

// Global position of local sequence index t (0 <= t < seq_local) on CP rank
// `rank` of a group of `size`.
inline int64_t CpGlobalPosition(int64_t t, int rank, int size, int64_t seq_local) {
  DT_CHECK(t >= 0 && t < seq_local) << "local index " << t << " of " << seq_local;
  if (size <= 1) return t;
  DT_CHECK_EQ(seq_local % 2, 0) << "context parallelism needs seq % (2 * cp) == 0";
  const int64_t chunk = seq_local / 2;
  return t < chunk ? rank * chunk + t : (2 * static_cast<int64_t>(size) - 1 - rank) * chunk + (t - chunk);
}

}  // namespace dt::rt
