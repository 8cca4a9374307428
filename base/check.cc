#include "base/check.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace dt {
namespace {
std::atomic<int> g_rank{-1};
}

void SetCheckRank(int rank) { g_rank.store(rank); }
int CheckRank() { return g_rank.load(); }

namespace internal {
CheckFailure::CheckFailure(const char* file, int line, const char* cond) {
  os_ << "FATAL " << file << ":" << line << " [rank " << g_rank.load() << "] check failed: " << cond
      << ": ";
}
CheckFailure::~CheckFailure() {
  std::fprintf(stderr, "%s\n", os_.str().c_str());
  std::fflush(stderr);
  std::abort();
}
}  // namespace internal
}  // namespace dt
