// NcclComm: the Comm seam (runtime/comm/comm.h) over NCCL, for ranks that
// each drive one CUDA device. Built into dt_runtime_cuda only, and only
// when NCCL was found (DT_HAVE_NCCL).
//
// Buffers are DEVICE pointers (cudaMalloc'd on this communicator's device,
// e.g. from CudaBackend::Alloc), never host pointers. Operations run on the
// communicator's own CUDA stream:
//  - inputs written by kernels on another stream (the backend's) must be
//    complete before the call: synchronize that stream first
//    (Backend::Synchronize), or results will race;
//  - blocking calls (AllReduce, ReduceScatter, AllGather, Barrier) return
//    when the result is in device memory (the stream is synchronized);
//  - ISend / IRecv / IAllReduce return a Request whose Wait() / Test()
//    follow a CUDA event recorded after the operation.
// Point-to-point: ISend / IRecv are batched, not launched at once: pending
// sends and receives are issued together in one ncclGroupStart/ncclGroupEnd
// when any of their Requests is waited on or tested, or before the next
// collective. So the usual exchange (ISend to p, IRecv from p, then Wait)
// cannot deadlock on one stream. NCCL has no tags: messages between a pair
// of ranks match in issue order, so `tag` is ignored and both sides must
// post matching operations in the same order (the runtime's schedules do).
// Requests refer to their NcclComm, which must outlive them.
//
// Errors: every CUDA, NCCL and MPI call is checked; failures abort with
// file:line, the rank (dt::SetCheckRank) and the library's message. A
// Request's Wait polls ncclCommGetAsyncError, so a peer failure that NCCL
// detects aborts instead of hanging. Not thread-safe (one thread per Comm).
#pragma once

#ifdef DT_HAVE_NCCL

#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>
#include <vector>

#include "runtime/comm/comm.h"
#include "runtime/comm/mpi_comm.h"

// Aborts with file:line:rank and ncclGetErrorString when an NCCL call fails.
#define DT_NCCL_CHECK(expr)                                                         \
  do {                                                                              \
    ncclResult_t _dt_r = (expr);                                                    \
    DT_CHECK(_dt_r == ncclSuccess) << #expr << ": " << ncclGetErrorString(_dt_r);   \
  } while (0)

namespace dt::rt {

struct NcclBatch;
class NcclP2PRequest;

class NcclComm : public Comm {
 public:
  // Joins the NCCL communicator `id` as `rank` of `size` on CUDA `device`
  // (cudaSetDevice is called). Collective over the `size` processes.
  NcclComm(const ncclUniqueId& id, int size, int rank, int device);
  ~NcclComm() override;  // ncclCommDestroy, frees the stream
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  ncclComm_t handle() const { return comm_; }

  void AllReduce(float* buf, size_t n, ReduceOp op = ReduceOp::kSum) override;
  std::unique_ptr<Request> IAllReduce(float* buf, size_t n) override;
  void ReduceScatter(const float* in, float* out, size_t n) override;
  void AllGather(const float* in, float* out, size_t n) override;
  std::unique_ptr<Request> ISend(const float* buf, size_t n, int peer, int tag) override;
  std::unique_ptr<Request> IRecv(float* buf, size_t n, int peer, int tag) override;
  void Barrier() override;
  // Grouped ncclSend / ncclRecv to and from every member (one NCCL group).
  void AllToAllV(const float* in, const size_t* send_counts, float* out, const size_t* recv_counts) override;

 private:
  struct P2POp {
    bool send;
    float* buf;
    size_t n;
    int peer;
  };
  friend class NcclP2PRequest;
  void SyncStream();  // waits for the stream, polling NCCL's async error state
  // Issues the pending point-to-point batch (one NCCL group) and records its event.
  void FlushP2P();

  ncclComm_t comm_ = nullptr;
  std::vector<P2POp> pending_;
  std::shared_ptr<NcclBatch> batch_;  // the batch pending_ belongs to
  cudaStream_t stream_ = nullptr;
  float* scratch_ = nullptr;  // one device float for Barrier
  int size_ = 1, rank_ = 0, device_ = 0;
};

// Creates an NcclComm spanning the ranks of `mpi_comm`: its rank 0 makes the
// ncclUniqueId and MPI_Bcasts it. Collective over `mpi_comm`; each process
// passes the CUDA device it drives (commonly its node-local rank).
std::unique_ptr<NcclComm> MakeNcclComm(MPI_Comm mpi_comm, int device);

}  // namespace dt::rt

#endif  // DT_HAVE_NCCL
