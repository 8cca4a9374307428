// NcclComm on one rank: all-reduce (sum, max), all-gather, reduce-scatter, all-to-all(v),
// the non-blocking all-reduce and a send/receive to itself, each compared
// with the CPU in-process Comm (LocalComm) on the same data. Skips with
// "no CUDA device: ..." when no device is visible, and when the build has
// no NCCL.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "runtime/comm/local_comm.h"
#include "runtime/cuda/cuda_backend.h"
#ifdef DT_HAVE_NCCL
#include "runtime/cuda/nccl_comm.h"
#endif

#include "tests/runtime/test_util.h"

namespace dt::rt {
namespace {

using testing_util::Random;
using testing_util::Vec;

#ifdef DT_HAVE_NCCL
class NcclOneRank : public ::testing::Test {
 protected:
  void SetUp() override {
    auto count = CudaDeviceCount();  // its error message starts "no CUDA device: "
    if (!count.ok()) GTEST_SKIP() << count.status().message();
    if (*count == 0) GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount returned 0";
    auto be = MakeCudaBackend(0);
    ASSERT_TRUE(be.ok()) << be.status().message();
    gpu = std::move(*be);
    ncclUniqueId id;
    DT_NCCL_CHECK(ncclGetUniqueId(&id));
    nccl = std::make_unique<NcclComm>(id, /*size=*/1, /*rank=*/0, /*device=*/0);
    cpu = LocalGroupHandle(1).Member(0);
  }
  void TearDown() override {
    for (auto& [p, n] : owned) gpu->Free(p, n);
  }
  float* Up(const Vec& v) {
    float* p = gpu->Alloc(v.size());
    gpu->CopyToDevice(p, v.data(), v.size());
    owned.push_back({p, v.size()});
    return p;
  }
  Vec Down(const float* p, size_t n) {
    Vec v(n);
    gpu->CopyToHost(v.data(), p, n);
    return v;
  }
  std::unique_ptr<Backend> gpu;
  std::unique_ptr<NcclComm> nccl;
  std::unique_ptr<Comm> cpu;
  std::vector<std::pair<float*, size_t>> owned;
};

TEST_F(NcclOneRank, AllReduceMatchesCpu) {
  const size_t n = 1000;
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
    Vec host = Random(n, 1);
    float* dev = Up(host);
    gpu->Synchronize();
    nccl->AllReduce(dev, n, op);
    cpu->AllReduce(host.data(), n, op);
    EXPECT_EQ(Down(dev, n), host);
  }
  Vec host = Random(n, 2);
  float* dev = Up(host);
  nccl->IAllReduce(dev, n)->Wait();
  cpu->IAllReduce(host.data(), n)->Wait();
  EXPECT_EQ(Down(dev, n), host);
}

// One rank: the all-to-all is a copy through grouped ncclSend / ncclRecv to itself.
TEST_F(NcclOneRank, AllToAllVMatchesCpu) {
  const size_t n = 333;
  Vec in = Random(n, 7), out_cpu(n);
  float* din = Up(in);
  float* dout = Up(Vec(n, 0.0f));
  gpu->Synchronize();
  nccl->AllToAllV(din, &n, dout, &n);
  cpu->AllToAllV(in.data(), &n, out_cpu.data(), &n);
  EXPECT_EQ(Down(dout, n), out_cpu);
}

TEST_F(NcclOneRank, AllGatherAndReduceScatterMatchCpu) {
  const size_t n = 257;
  Vec in = Random(n, 3), out_cpu(n);
  float* din = Up(in);
  float* dout = Up(Vec(n, 0.0f));
  nccl->AllGather(din, dout, n);
  cpu->AllGather(in.data(), out_cpu.data(), n);
  EXPECT_EQ(Down(dout, n), out_cpu);
  nccl->ReduceScatter(din, dout, n);
  cpu->ReduceScatter(in.data(), out_cpu.data(), n);
  EXPECT_EQ(Down(dout, n), out_cpu);
  nccl->Barrier();
}

TEST_F(NcclOneRank, SendToSelf) {
  const size_t n = 64;
  Vec in = Random(n, 4);
  float* din = Up(in);
  float* dout = Up(Vec(n, 0.0f));
  auto s = nccl->ISend(din, n, 0, 7);
  auto r = nccl->IRecv(dout, n, 0, 7);
  r->Wait();
  s->Wait();
  EXPECT_EQ(Down(dout, n), in);
}
#else
TEST(NcclOneRank, Skipped) { GTEST_SKIP() << "dt_runtime_cuda was built without NCCL"; }
#endif

}  // namespace
}  // namespace dt::rt
