#include "runtime/cuda/nccl_comm.h"

#ifdef DT_HAVE_NCCL

#include <thread>

#include "base/check.h"
#include "runtime/cuda/cuda_check.h"

namespace dt::rt {
namespace {

ncclRedOp_t ToNccl(ReduceOp op) { return op == ReduceOp::kMax ? ncclMax : ncclSum; }

// Spins on `done` (cudaEventQuery / cudaStreamQuery) until it stops
// reporting cudaErrorNotReady; meanwhile an asynchronous NCCL error (a peer
// died, a network failure) aborts rather than waiting forever.
template <typename Query>
void PollUntilDone(ncclComm_t comm, Query done) {
  for (;;) {
    const cudaError_t e = done();
    if (e == cudaSuccess) return;
    DT_CHECK(e == cudaErrorNotReady) << "CUDA error while waiting for NCCL: "
                                     << cudaGetErrorString(e);
    ncclResult_t async = ncclSuccess;
    DT_NCCL_CHECK(ncclCommGetAsyncError(comm, &async));
    DT_CHECK(async == ncclSuccess) << "NCCL asynchronous error: " << ncclGetErrorString(async);
    std::this_thread::yield();
  }
}

// A CUDA event recorded on the stream after some operations; Wait polls it.
class EventRequest : public Request {
 public:
  EventRequest(ncclComm_t comm, cudaStream_t stream) : comm_(comm) {
    DT_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
    DT_CUDA_CHECK(cudaEventRecord(event_, stream));
  }
  ~EventRequest() override {
    Wait();  // never leave an operation on a buffer the caller may free
    cudaEventDestroy(event_);
  }
  void Wait() override {
    if (done_) return;
    PollUntilDone(comm_, [&] { return cudaEventQuery(event_); });
    done_ = true;
  }
  bool Test() override {
    if (done_) return true;
    const cudaError_t e = cudaEventQuery(event_);
    if (e == cudaErrorNotReady) return false;
    DT_CUDA_CHECK(e);
    done_ = true;
    return true;
  }

 private:
  ncclComm_t comm_;
  cudaEvent_t event_ = nullptr;
  bool done_ = false;
};

}  // namespace

// One group of point-to-point operations; `done` is set once it is launched.
struct NcclBatch {
  std::unique_ptr<Request> done;
};

class NcclP2PRequest : public Request {
 public:
  NcclP2PRequest(NcclComm* comm, std::shared_ptr<NcclBatch> batch)
      : comm_(comm), batch_(std::move(batch)) {}
  ~NcclP2PRequest() override { Wait(); }
  void Wait() override {
    Launch();
    batch_->done->Wait();
  }
  bool Test() override {
    Launch();
    return batch_->done->Test();
  }

 private:
  void Launch() {
    if (batch_->done == nullptr) comm_->FlushP2P();
  }
  NcclComm* comm_;
  std::shared_ptr<NcclBatch> batch_;
};

NcclComm::NcclComm(const ncclUniqueId& id, int size, int rank, int device)
    : size_(size), rank_(rank), device_(device) {
  DT_CHECK(size >= 1 && rank >= 0 && rank < size) << "NCCL rank " << rank << " of " << size;
  DT_CUDA_CHECK(cudaSetDevice(device));
  DT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  DT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&scratch_), sizeof(float)));
  DT_NCCL_CHECK(ncclCommInitRank(&comm_, size, id, rank));
}

NcclComm::~NcclComm() {
  // Best effort: a destructor must not abort on a communicator that already failed.
  if (comm_ != nullptr) ncclCommDestroy(comm_);
  if (scratch_ != nullptr) cudaFree(scratch_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void NcclComm::SyncStream() {
  PollUntilDone(comm_, [&] { return cudaStreamQuery(stream_); });
}

void NcclComm::FlushP2P() {
  if (pending_.empty()) return;
  DT_NCCL_CHECK(ncclGroupStart());
  for (const P2POp& op : pending_) {
    if (op.send) DT_NCCL_CHECK(ncclSend(op.buf, op.n, ncclFloat32, op.peer, comm_, stream_));
    else DT_NCCL_CHECK(ncclRecv(op.buf, op.n, ncclFloat32, op.peer, comm_, stream_));
  }
  DT_NCCL_CHECK(ncclGroupEnd());
  batch_->done = std::make_unique<EventRequest>(comm_, stream_);
  pending_.clear();
  batch_.reset();
}

void NcclComm::AllReduce(float* buf, size_t n, ReduceOp op) {
  FlushP2P();  // keep issue order
  DT_NCCL_CHECK(ncclAllReduce(buf, buf, n, ncclFloat32, ToNccl(op), comm_, stream_));
  SyncStream();
}

std::unique_ptr<Request> NcclComm::IAllReduce(float* buf, size_t n) {
  FlushP2P();  // keep issue order
  DT_NCCL_CHECK(ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, comm_, stream_));
  return std::make_unique<EventRequest>(comm_, stream_);
}

void NcclComm::ReduceScatter(const float* in, float* out, size_t n) {
  FlushP2P();  // keep issue order
  DT_NCCL_CHECK(ncclReduceScatter(in, out, n, ncclFloat32, ncclSum, comm_, stream_));
  SyncStream();
}

void NcclComm::AllGather(const float* in, float* out, size_t n) {
  FlushP2P();  // keep issue order
  DT_NCCL_CHECK(ncclAllGather(in, out, n, ncclFloat32, comm_, stream_));
  SyncStream();
}

std::unique_ptr<Request> NcclComm::ISend(const float* buf, size_t n, int peer, int /*tag*/) {
  DT_CHECK(peer >= 0 && peer < size_) << "NCCL send to peer " << peer << " of " << size_;
  if (batch_ == nullptr) batch_ = std::make_shared<NcclBatch>();
  pending_.push_back({true, const_cast<float*>(buf), n, peer});
  return std::make_unique<NcclP2PRequest>(this, batch_);
}

std::unique_ptr<Request> NcclComm::IRecv(float* buf, size_t n, int peer, int /*tag*/) {
  DT_CHECK(peer >= 0 && peer < size_) << "NCCL recv from peer " << peer << " of " << size_;
  if (batch_ == nullptr) batch_ = std::make_shared<NcclBatch>();
  pending_.push_back({false, buf, n, peer});
  return std::make_unique<NcclP2PRequest>(this, batch_);
}

void NcclComm::Barrier() {
  // A one-float all-reduce completes on no rank before every rank joined it.
  FlushP2P();  // keep issue order
  DT_NCCL_CHECK(ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, stream_));
  SyncStream();
}

void NcclComm::AllToAllV(const float* in, const size_t* send_counts, float* out, const size_t* recv_counts) {
  FlushP2P();  // keep issue order
  size_t s_off = 0, r_off = 0;
  DT_NCCL_CHECK(ncclGroupStart());
  for (int p = 0; p < size_; ++p) {
    if (send_counts[p] > 0)
      DT_NCCL_CHECK(ncclSend(in + s_off, send_counts[p], ncclFloat32, p, comm_, stream_));
    if (recv_counts[p] > 0) DT_NCCL_CHECK(ncclRecv(out + r_off, recv_counts[p], ncclFloat32, p, comm_, stream_));
    s_off += send_counts[p];
    r_off += recv_counts[p];
  }
  DT_NCCL_CHECK(ncclGroupEnd());
  SyncStream();
}

std::unique_ptr<NcclComm> MakeNcclComm(MPI_Comm mpi_comm, int device) {
  int rank = 0, size = 1;
  DT_MPI_CHECK(MPI_Comm_rank(mpi_comm, &rank));
  DT_MPI_CHECK(MPI_Comm_size(mpi_comm, &size));
  ncclUniqueId id;
  if (rank == 0) DT_NCCL_CHECK(ncclGetUniqueId(&id));
  DT_MPI_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, mpi_comm));
  return std::make_unique<NcclComm>(id, size, rank, device);
}

}  // namespace dt::rt

#endif  // DT_HAVE_NCCL
