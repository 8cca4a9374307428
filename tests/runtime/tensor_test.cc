#include <gtest/gtest.h>

#include "runtime/model/param_store.h"
#include "runtime/tensor/allocator.h"
#include "runtime/tensor/tensor.h"

namespace dt::rt {
namespace {

TEST(Allocator, CountsCurrentAndPeakBytes) {
  const int64_t base = CurrentBytes();
  ResetPeakBytes();
  {
    Tensor a({4, 8});
    EXPECT_EQ(CurrentBytes(), base + 4 * 8 * 4);
    {
      Tensor b({100});
      EXPECT_EQ(CurrentBytes(), base + (32 + 100) * 4);
    }
    EXPECT_EQ(CurrentBytes(), base + 32 * 4);
  }
  EXPECT_EQ(CurrentBytes(), base);
  EXPECT_EQ(PeakBytes(), base + (32 + 100) * 4);
}

TEST(Tensor, ZeroFilledMoveAndViews) {
  Tensor a({3, 4});
  for (int64_t i = 0; i < a.numel(); ++i) EXPECT_EQ(a[i], 0.0f);
  for (int64_t i = 0; i < a.numel(); ++i) a[i] = static_cast<float>(i);
  Tensor s = a.Slice(1, 3);
  EXPECT_EQ(s.shape(), (Shape{2, 4}));
  EXPECT_EQ(s[0], 4.0f);
  EXPECT_FALSE(s.owning());
  Tensor c = a.Clone();
  c[0] = 42;
  EXPECT_EQ(a[0], 0.0f);
  const int64_t before = CurrentBytes();
  Tensor moved = std::move(c);
  EXPECT_EQ(CurrentBytes(), before);  // a move allocates nothing
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(moved[0], 42.0f);
  Tensor r = a.Reshaped({12});
  EXPECT_EQ(r[11], 11.0f);
  EXPECT_EQ(a.ShapeString(), "[3, 4]");
}

TEST(ParamStore, BuffersGoThroughAllocator) {
  const int64_t base = CurrentBytes();
  {
    ParamStore store;
    Param p;
    p.name = "w";
    p.full_shape = p.local_shape = {10, 10};
    store.Add(p);
    p.name = "b";
    p.full_shape = p.local_shape = {10};
    store.Add(p);
    store.Finalize();
    EXPECT_EQ(store.numel(), 110);
    EXPECT_EQ(store.params()[1].offset, 100);
    EXPECT_EQ(CurrentBytes(), base + 2 * 110 * 4);
    store.grad(1)[3] = 1.0f;
    store.ZeroGrads();
    EXPECT_EQ(store.grad(1)[3], 0.0f);
  }
  EXPECT_EQ(CurrentBytes(), base);
}

}  // namespace
}  // namespace dt::rt
