// Invariant checks that abort loudly.
//
// DT_CHECK(cond) << "context"; prints "FATAL file:line [rank R] check failed:
// cond: context" to stderr and calls std::abort(). Use it for broken
// invariants (bugs), never for bad user input (return a Status instead).
// The rank printed is whatever SetCheckRank() last stored (-1 when unset);
// the runtime sets it once after MPI initialisation.
#pragma once

#include <sstream>

namespace dt {

void SetCheckRank(int rank);
int CheckRank();

namespace internal {
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* cond);
  [[noreturn]] ~CheckFailure();
  std::ostream& stream() { return os_; }

 private:
  std::ostringstream os_;
};
// Makes `DT_CHECK(c) << x` an expression of type void.
struct Voidify {
  void operator&(std::ostream&) {}
};
}  // namespace internal
}  // namespace dt

#define DT_CHECK(cond)                \
  (cond) ? (void)0                    \
         : ::dt::internal::Voidify() & \
               ::dt::internal::CheckFailure(__FILE__, __LINE__, #cond).stream()

#define DT_CHECK_EQ(a, b) DT_CHECK((a) == (b)) << #a "=" << (a) << " " #b "=" << (b) << " "
#define DT_CHECK_LT(a, b) DT_CHECK((a) < (b)) << #a "=" << (a) << " " #b "=" << (b) << " "
#define DT_CHECK_LE(a, b) DT_CHECK((a) <= (b)) << #a "=" << (a) << " " #b "=" << (b) << " "
#define DT_CHECK_GE(a, b) DT_CHECK((a) >= (b)) << #a "=" << (a) << " " #b "=" << (b) << " "
#define DT_CHECK_GT(a, b) DT_CHECK((a) > (b)) << #a "=" << (a) << " " #b "=" << (b) << " "
