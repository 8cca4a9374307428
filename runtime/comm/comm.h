// Comm: the runtime's narrow communication seam. One Comm is one process
// group (a TP, CP, DP or PP group, or the world) seen from one rank.
//
// Implementations: MpiComm (CPU, Open MPI), NcclComm (CUDA), and an
// in-process fake for unit tests. Buffers are owned by the caller and must
// stay alive until the operation (or its Request) completes. Collectives
// are called by every member in the same order. On a transport failure an
// implementation aborts with file, line and rank (DT_CHECK): a broken group
// cannot be recovered from inside a step. Not thread-safe: one thread per Comm.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace dt::rt {

enum class ReduceOp { kSum, kMax };

// Completion handle of a non-blocking operation.
class Request {
 public:
  virtual ~Request() = default;
  virtual void Wait() = 0;
  virtual bool Test() = 0;  // true when complete
};

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;  // rank within this group
  virtual int size() const = 0;

  // In place: every member ends with the reduction of all members' buf[0..n).
  virtual void AllReduce(float* buf, size_t n, ReduceOp op = ReduceOp::kSum) = 0;
  virtual std::unique_ptr<Request> IAllReduce(float* buf, size_t n) = 0;
  // in has n*size() floats; out (n floats) gets block rank() of the sum.
  virtual void ReduceScatter(const float* in, float* out, size_t n) = 0;
  // in has n floats; out (n*size() floats) gets every member's block in rank order.
  virtual void AllGather(const float* in, float* out, size_t n) = 0;
  // Point-to-point within this group; `tag` disambiguates concurrent messages.
  virtual std::unique_ptr<Request> ISend(const float* buf, size_t n, int peer, int tag) = 0;
  virtual std::unique_ptr<Request> IRecv(float* buf, size_t n, int peer, int tag) = 0;
  virtual void Barrier() = 0;
  // All-to-all with per-member counts (MPI_Alltoallv semantics, blocking):
  // `in` holds send_counts[p] floats for each member p, in member order,
  // back to back; `out` receives recv_counts[p] floats from each member p,
  // in member order, back to back. recv_counts[p] must equal member p's
  // send_counts[rank()] (exchange the counts first, e.g. with AllToAll);
  // a mismatch aborts where the transport can tell. Counts may be zero.
  virtual void AllToAllV(const float* in, const size_t* send_counts, float* out,
                         const size_t* recv_counts) = 0;
  // Fixed-size all-to-all: block p of `in` (n floats) goes to member p;
  // block p of `out` comes from member p.
  void AllToAll(const float* in, float* out, size_t n) {
    std::vector<size_t> counts(static_cast<size_t>(size()), n);
    AllToAllV(in, counts.data(), out, counts.data());
  }

  // bf16 collectives (bf16 mixed precision: gradients, ZeRO-1 value shards),
  // with the contracts of the float ones above. The defaults widen to fp32,
  // run the float collective and narrow the result (one rounding per
  // element); MpiComm moves bf16 on the wire and adds in fp32, rounding each
  // partial sum to bf16 (identical to the default for 2 members).
  virtual void AllReduceBf16(uint16_t* buf, size_t n);
  virtual void ReduceScatterBf16(const uint16_t* in, uint16_t* out, size_t n);
  virtual void AllGatherBf16(const uint16_t* in, uint16_t* out, size_t n);
};

}  // namespace dt::rt
