// RunCudaProfiler: the profiler on CUDA devices: cuBLAS GEMMs and the
// runtime's kernels through the CUDA Backend (runtime/cuda), collectives
// over NCCL. One GPU per rank (node-local rank modulo the visible devices).
// Without a usable GPU it exits 3 with the CUDA error message.
#include <cuda_runtime.h>

#include <iostream>
#include <vector>

#include "base/check.h"

#include "planner/profiler/run_profiler.h"
#include "runtime/cuda/cuda_backend.h"

#ifdef DT_HAVE_NCCL
#include <nccl.h>
#endif

namespace dt {
namespace {

#define DT_CUDA_OK(call)                                                              \
  do {                                                                                \
    cudaError_t _e = (call);                                                          \
    DT_CHECK(_e == cudaSuccess) << #call << ": " << cudaGetErrorString(_e);           \
  } while (0)

#ifdef DT_HAVE_NCCL
#define DT_NCCL_OK(call)                                                              \
  do {                                                                                \
    ncclResult_t _r = (call);                                                         \
    DT_CHECK(_r == ncclSuccess) << #call << ": " << ncclGetErrorString(_r);           \
  } while (0)

class DoneRequest final : public rt::Request {
 public:
  explicit DoneRequest(cudaStream_t s) : s_(s) {}
  void Wait() override { DT_CUDA_OK(cudaStreamSynchronize(s_)); }
  bool Test() override { return cudaStreamQuery(s_) == cudaSuccess; }

 private:
  cudaStream_t s_;
};

// The Comm seam over one NCCL communicator, for measuring only: every
// operation is issued on one stream and completed before returning, except
// point-to-point: an IRecv is held until the next ISend, and both are issued
// in one NCCL group (the order measure_comm uses), so two ranks exchanging
// messages cannot deadlock.
class NcclProfComm final : public rt::Comm {
 public:
  explicit NcclProfComm(MPI_Comm group) {
    DT_MPI_CHECK(MPI_Comm_rank(group, &rank_));
    DT_MPI_CHECK(MPI_Comm_size(group, &size_));
    ncclUniqueId id;
    if (rank_ == 0) DT_NCCL_OK(ncclGetUniqueId(&id));
    DT_MPI_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, group));
    DT_CUDA_OK(cudaStreamCreate(&stream_));
    DT_NCCL_OK(ncclCommInitRank(&comm_, size_, id, rank_));
  }
  ~NcclProfComm() override {
    ncclCommDestroy(comm_);
    cudaStreamDestroy(stream_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void AllReduce(float* buf, size_t n, rt::ReduceOp op) override {
    DT_NCCL_OK(ncclAllReduce(buf, buf, n, ncclFloat, op == rt::ReduceOp::kMax ? ncclMax : ncclSum, comm_, stream_));
    Sync();
  }
  std::unique_ptr<rt::Request> IAllReduce(float* buf, size_t n) override {
    DT_NCCL_OK(ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, comm_, stream_));
    return std::make_unique<DoneRequest>(stream_);
  }
  void ReduceScatter(const float* in, float* out, size_t n) override {
    DT_NCCL_OK(ncclReduceScatter(in, out, n, ncclFloat, ncclSum, comm_, stream_));
    Sync();
  }
  void AllGather(const float* in, float* out, size_t n) override {
    DT_NCCL_OK(ncclAllGather(in, out, n, ncclFloat, comm_, stream_));
    Sync();
  }
  std::unique_ptr<rt::Request> ISend(const float* buf, size_t n, int peer, int) override {
    DT_NCCL_OK(ncclGroupStart());
    for (const PendingRecv& r : recvs_) DT_NCCL_OK(ncclRecv(r.buf, r.n, ncclFloat, r.peer, comm_, stream_));
    recvs_.clear();
    DT_NCCL_OK(ncclSend(buf, n, ncclFloat, peer, comm_, stream_));
    DT_NCCL_OK(ncclGroupEnd());
    return std::make_unique<DoneRequest>(stream_);
  }
  std::unique_ptr<rt::Request> IRecv(float* buf, size_t n, int peer, int) override {
    recvs_.push_back({buf, n, peer});
    return std::make_unique<DoneRequest>(stream_);
  }
  void AllToAllV(const float* in, const size_t* send_counts, float* out, const size_t* recv_counts) override {
    size_t s_off = 0, r_off = 0;
    DT_NCCL_OK(ncclGroupStart());
    for (int p = 0; p < size_; ++p) {
      if (send_counts[p] > 0) DT_NCCL_OK(ncclSend(in + s_off, send_counts[p], ncclFloat, p, comm_, stream_));
      if (recv_counts[p] > 0) DT_NCCL_OK(ncclRecv(out + r_off, recv_counts[p], ncclFloat, p, comm_, stream_));
      s_off += send_counts[p];
      r_off += recv_counts[p];
    }
    DT_NCCL_OK(ncclGroupEnd());
    Sync();
  }
  void Barrier() override {
    float* one = nullptr;
    DT_CUDA_OK(cudaMalloc(&one, sizeof(float)));
    AllReduce(one, 1, rt::ReduceOp::kSum);
    DT_CUDA_OK(cudaFree(one));
  }

 private:
  struct PendingRecv {
    float* buf;
    size_t n;
    int peer;
  };
  void Sync() { DT_CUDA_OK(cudaStreamSynchronize(stream_)); }
  int rank_ = 0, size_ = 1;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::vector<PendingRecv> recvs_;
};
#endif  // DT_HAVE_NCCL

}  // namespace

int RunCudaProfiler(const ProfilerOptions& o, rt::MpiComm& world, const std::string& command) {
  const bool root = world.rank() == 0;
  StatusOr<int> count = rt::CudaDeviceCount();
  bool usable = count.ok() && *count > 0;
  float bad = usable ? 0.0f : 1.0f;
  world.AllReduce(&bad, 1, rt::ReduceOp::kMax);
  if (bad != 0.0f) {
    if (root)
      std::cerr << "dtplan: error: --device cuda: no usable GPU ("
                << (count.ok() ? std::string("0 CUDA devices visible") : count.status().message())
                << "); run on a machine with NVIDIA GPUs or use --device cpu\n";
    return 3;
  }
#ifndef DT_HAVE_NCCL
  if (root) std::cerr << "dtplan: error: --device cuda: built without NCCL; collectives cannot be measured\n";
  return 3;
#else
  MPI_Comm node_raw;
  DT_MPI_CHECK(MPI_Comm_split_type(world.handle(), MPI_COMM_TYPE_SHARED, world.rank(), MPI_INFO_NULL, &node_raw));
  rt::MpiComm node(node_raw);
  const int device = node.rank() % *count;
  StatusOr<std::unique_ptr<rt::Backend>> be = rt::MakeCudaBackend(device);
  if (!be.ok()) {
    if (root) std::cerr << "dtplan: error: --device cuda: " << be.status().message() << "\n";
    return 3;
  }
  cudaDeviceProp prop;
  DT_CUDA_OK(cudaGetDeviceProperties(&prop, device));
  size_t free_b = 0, total_b = 0;
  DT_CUDA_OK(cudaMemGetInfo(&free_b, &total_b));
  ProfilerDevice dev;
  dev.be = be->get();
  dev.kind = "gpu";
  dev.name = std::string(prop.name) + " (fp32 SGEMM via cuBLAS)";
  dev.gemm_library = "cuBLAS";
  dev.memory_bytes = static_cast<int64_t>(total_b);
  dev.host_optimizer = false;  // the runtime's AdamW is a host op
  dev.make_comm = [](MPI_Comm group) { return std::make_unique<NcclProfComm>(group); };
  return RunProfiler(o, dev, world, command);
#endif
}

}  // namespace dt
