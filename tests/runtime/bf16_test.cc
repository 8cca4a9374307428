// bf16 storage (runtime/tensor/bf16.h), bf16 tensors, the bf16 parameter
// store (runtime/model/bf16_params.h) and AdamW's fp32 master weights.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "runtime/model/bf16_params.h"
#include "runtime/optim/adamw.h"
#include "runtime/tensor/allocator.h"
#include "runtime/tensor/bf16.h"
#include "runtime/tensor/tensor.h"
#include "tests/runtime/test_util.h"

namespace dt::rt {
namespace {

using testing_util::MakeParam;

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f)), 1.0f);
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(-2.5f)), -2.5f);
  const float ulp = std::ldexp(1.0f, -7);  // bf16 spacing at 1
  // Ties go to the even mantissa: 1 + ulp/2 -> 1; 1 + 3ulp/2 -> 1 + 2ulp.
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + ulp / 2)), 1.0f);
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + 3 * ulp / 2)), 1.0f + 2 * ulp);
  // Above the tie rounds up, below rounds down.
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + ulp * 0.51f)), 1.0f + ulp);
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + ulp * 0.49f)), 1.0f);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::infinity()))));
  // Relative error of any normal value is at most 2^-9.
  for (float x : {0.1f, 3.14159f, -1e-3f, 12345.678f, 6.02e23f}) {
    const float r = Bf16ToFloat(FloatToBf16(x));
    EXPECT_LE(std::fabs(r - x), std::fabs(x) * std::ldexp(1.0f, -9)) << x;
  }
}

TEST(Bf16, AccumulateAndScaleRoundOnce) {
  bf16_t acc[2] = {FloatToBf16(1.0f), FloatToBf16(-4.0f)};
  const float add[2] = {0.25f, 1.0f};
  AccumulateIntoBf16(add, acc, 2);
  EXPECT_EQ(Bf16ToFloat(acc[0]), 1.25f);
  EXPECT_EQ(Bf16ToFloat(acc[1]), -3.0f);
  ScaleBf16(acc, 0.5f, 2);
  EXPECT_EQ(Bf16ToFloat(acc[0]), 0.625f);
  EXPECT_EQ(Bf16ToFloat(acc[1]), -1.5f);
}

TEST(Bf16, TensorNarrowsToHalfTheBytes) {
  const int64_t before = CurrentBytes();
  Tensor f({3, 5});
  for (int64_t i = 0; i < f.numel(); ++i) f[i] = 0.1f * static_cast<float>(i) - 0.7f;
  EXPECT_EQ(CurrentBytes() - before, 15 * 4);
  {
    Tensor h = f.NarrowedToBf16();
    EXPECT_TRUE(h.is_bf16());
    EXPECT_EQ(h.bytes(), 15 * 2);
    EXPECT_EQ(CurrentBytes() - before, 15 * 4 + 8 * 4);  // ceil(15 / 2) floats
    Tensor w = h.WidenedToFp32();
    EXPECT_EQ(w.shape(), f.shape());
    for (int64_t i = 0; i < f.numel(); ++i) EXPECT_EQ(w[i], Bf16ToFloat(FloatToBf16(f[i])));
    Tensor moved = std::move(h);
    EXPECT_TRUE(moved.is_bf16());
    EXPECT_FALSE(h.is_bf16());
  }
  EXPECT_EQ(CurrentBytes() - before, 15 * 4);
}

TEST(Bf16DeathTest, KernelsNeverReadBf16Storage) {
  Tensor f({4});
  Tensor h = f.NarrowedToBf16();
  EXPECT_DEATH(h.data(), "fp32 access to bf16 storage");
  EXPECT_DEATH(h.Slice(0, 1), "Slice of a bf16 tensor");
}

TEST(Bf16Params, UnitsWidenUseAndAccumulateGradients) {
  ParamStore s;
  s.BeginUnit("a");
  s.Add(MakeParam("a.w", {2, 2}));
  s.BeginUnit("b");
  s.Add(MakeParam("b.bias", {3}));
  s.Finalize();
  for (int i = 0; i < 7; ++i) s.values()[i] = 1.0f + 0.001f * static_cast<float>(i);
  Bf16Params b(&s);
  EXPECT_EQ(s.bf16(), &b);
  EXPECT_FALSE(s.has_grads());
  EXPECT_EQ(Bf16ToFloat(b.values()[3]), Bf16ToFloat(FloatToBf16(1.003f)));
  b.Gather(1);
  b.BeginGrads(1);
  EXPECT_EQ(s.value(1)[0], Bf16ToFloat(FloatToBf16(1.004f)));
  s.grad(1)[2] = 0.5f;
  b.EndGrads(1);
  b.Release(1);
  EXPECT_FALSE(s.unit_values_bound(1));
  EXPECT_FALSE(s.unit_grads_bound(1));
  EXPECT_EQ(Bf16ToFloat(b.grads()[6]), 0.5f);
  b.BeginGrads(1);  // a second microbatch accumulates in bf16
  s.grad(1)[2] = 0.25f;
  b.EndGrads(1);
  EXPECT_EQ(Bf16ToFloat(b.grads()[6]), 0.75f);
  s.ZeroGrads();
  EXPECT_EQ(Bf16ToFloat(b.grads()[6]), 0.0f);
}

TEST(Bf16Params, AdamWStepsFp32MasterAndWritesBf16Copy) {
  ParamStore s, ref;
  for (ParamStore* st : {&s, &ref}) {
    st->Add(MakeParam("w", {4, 2}));
    st->Finalize();
    for (int i = 0; i < 8; ++i) st->values()[i] = 0.3f - 0.05f * static_cast<float>(i);
  }
  Bf16Params b(&s);
  AdamWShard adam(s, 0, 8);
  EXPECT_TRUE(adam.has_master());
  s.DropValues();
  AdamWShard adam_ref(ref, 0, 8);
  AdamWConfig cfg;
  for (int t = 1; t <= 3; ++t) {
    for (int i = 0; i < 8; ++i) {
      const float g = Bf16ToFloat(FloatToBf16(0.01f * static_cast<float>(i - 3) * static_cast<float>(t)));
      b.grads()[i] = FloatToBf16(g);
      ref.grads()[i] = g;
    }
    adam.Update(s, cfg, t, 1e-2f, 1.0f);
    adam_ref.Update(ref, cfg, t, 1e-2f, 1.0f);
  }
  // The master follows the fp32 update exactly (same gradients); the
  // model copy is the master rounded to bf16, not a bf16-accumulated value.
  for (int i = 0; i < 8; ++i) EXPECT_EQ(Bf16ToFloat(b.values()[i]), Bf16ToFloat(FloatToBf16(ref.values()[i]))) << i;
}

}  // namespace
}  // namespace dt::rt
