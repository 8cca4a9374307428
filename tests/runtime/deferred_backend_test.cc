// The deferred backend (runtime/backend/deferred_backend.h) behaves like a
// device stream: kernels run at a synchronisation, in call order; a free and
// DeviceSynchronize() drain the queue; HostAccess drains it and refuses a
// backend whose memory the host cannot touch.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/backend/deferred_backend.h"
#include "runtime/ops/host_ops.h"
#include "runtime/tensor/allocator.h"
#include "runtime/tensor/tensor.h"

namespace dt::rt {
namespace {

TEST(DeferredBackend, KernelsRunAtSynchronisationInOrder) {
  auto be = MakeDeferredBackend(MakeCpuBackend());
  EXPECT_TRUE(be->host_accessible());
  Tensor x({4}), y({4});
  x.Fill(1.0f);
  be->Scale(x.data(), 3.0f, 4);           // x = 3
  be->Add(x.data(), x.data(), y.data(), 4);  // y = 6, only after the scale
  EXPECT_FLOAT_EQ(x[0], 1.0f);  // nothing ran yet: a host read here is the race the test finds
  EXPECT_FLOAT_EQ(y[0], 0.0f);
  HostAccess(*be, "test");
  EXPECT_FLOAT_EQ(x[0], 3.0f);
  EXPECT_FLOAT_EQ(y[3], 6.0f);
}

TEST(DeferredBackend, FreeAndDeviceSynchronizeDrainTheQueue) {
  auto be = MakeDeferredBackend(MakeCpuBackend());
  Tensor keep({2});
  {
    Tensor tmp({2});
    tmp.Fill(5.0f);
    be->Axpy(1.0f, tmp.data(), keep.data(), 2);  // reads tmp, which is freed before any sync
  }  // the free ran the queued Axpy first (as cudaFree waits for the device)
  EXPECT_FLOAT_EQ(keep[1], 5.0f);
  be->Fill(keep.data(), 2.0f, 2);
  EXPECT_FLOAT_EQ(keep[0], 5.0f);
  DeviceSynchronize();  // host code without the backend at hand
  EXPECT_FLOAT_EQ(keep[0], 2.0f);
  be.reset();  // uninstalls its hook: later frees and syncs are plain
  DeviceSynchronize();
}

TEST(DeferredBackend, EagerCpuBackendIsHostAccessibleAndNeedsNoSync) {
  auto be = MakeCpuBackend();
  EXPECT_TRUE(be->host_accessible());
  Tensor x({3});
  be->Fill(x.data(), 7.0f, 3);
  EXPECT_FLOAT_EQ(x[2], 7.0f);  // eager: done when the call returns
  HostAccess(*be, "test");
}

}  // namespace
}  // namespace dt::rt
