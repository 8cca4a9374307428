#include "base/huge_page_allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

namespace dt {
namespace {

// Large requests are mmap'ed at a huge-page boundary; small ones come from
// operator new. Both must hold and return exactly what was written.
TEST(HugePageAllocator, LargeRequestsAreAlignedAndHoldTheirValues) {
  HugePageAllocator<int64_t> a;
  const size_t n = kHugePageBytes / sizeof(int64_t) * 3 + 5;  // 3 huge pages and a bit: rounded up to 4
  int64_t* p = a.allocate(n);
  ASSERT_NE(p, nullptr);
#if defined(__linux__)
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHugePageBytes, 0u);
#endif
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<int64_t>(i) * 7 - 3;
  int64_t sum = 0;
  for (size_t i = 0; i < n; ++i) sum += p[i] - (static_cast<int64_t>(i) * 7 - 3);
  EXPECT_EQ(sum, 0);
  a.deallocate(p, n);

  int32_t* q = HugePageAllocator<int32_t>().allocate(10);
  for (int i = 0; i < 10; ++i) q[i] = i;
  EXPECT_EQ(q[9], 9);
  HugePageAllocator<int32_t>().deallocate(q, 10);
}

// A vector grows across the threshold (operator new, then mmap) and
// shrinks back by clearing and reserving: the values survive every
// reallocation, as with std::allocator.
TEST(HugePageAllocator, VectorGrowsAcrossTheThresholdLikeStdVector) {
  std::vector<int32_t, HugePageAllocator<int32_t>> v;
  std::vector<int32_t> ref;
  for (int32_t i = 0; i < 3'000'000; ++i) {
    v.push_back(i ^ 0x5a5a);
    ref.push_back(i ^ 0x5a5a);
  }
  ASSERT_EQ(v.size(), ref.size());
  EXPECT_TRUE(std::equal(v.begin(), v.end(), ref.begin()));
  auto copy = v;  // copy-construct through the allocator
  EXPECT_TRUE(std::equal(copy.begin(), copy.end(), ref.begin()));
  v.clear();
  v.shrink_to_fit();
  EXPECT_EQ(v.capacity(), 0u);
  v.reserve(kHugePageBytes);  // 4x the threshold in bytes
  v.assign(ref.begin(), ref.begin() + 1000);
  EXPECT_EQ(std::accumulate(v.begin(), v.end(), int64_t{0}), std::accumulate(ref.begin(), ref.begin() + 1000, int64_t{0}));
}

}  // namespace
}  // namespace dt
