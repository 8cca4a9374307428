// MpiComm: the Comm seam over one MPI communicator (CPU backend, Open MPI).
// MpiWorld: RAII MPI_Init_thread / MPI_Finalize for a runtime process.
// BuildGroups: the tp/cp/dp/pp/dp_cp/tied communicators of this rank.
//
// Error handling: MpiWorld sets MPI_ERRORS_RETURN on MPI_COMM_WORLD (and
// communicators split from it inherit it), so every MPI call returns a code;
// each call is checked with DT_CHECK, which prints file:line and the world
// rank (dt::SetCheckRank is called by MpiWorld) and aborts the process.
//
// A rank that dies: when any process exits abnormally (signal, abort,
// non-zero exit without MPI_Finalize) Open MPI's mpirun kills the remaining
// ranks and exits non-zero, so a crash never leaves the others blocked in a
// collective. A rank that *hangs* (deadlock, stuck peer) is not detected by
// MPI; use StepWatchdog (watchdog.h), which calls MPI_Abort when a step
// exceeds its timeout.
//
// Thread model: MPI_THREAD_FUNNELED; only the thread that built MpiWorld
// calls MPI (the watchdog's MPI_Abort is the one exception, documented there).
#pragma once

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1  // C bindings only
#endif
#include <mpi.h>

#include <string>
#include <vector>

#include "base/status.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/groups.h"

// Aborts with file:line:rank and MPI's error string when an MPI call fails.
#define DT_MPI_CHECK(call)                                                   \
  do {                                                                       \
    int _dt_mpi_rc = (call);                                                 \
    DT_CHECK(_dt_mpi_rc == MPI_SUCCESS) << #call << ": "                     \
                                        << ::dt::rt::MpiErrorString(_dt_mpi_rc); \
  } while (0)

namespace dt::rt {

std::string MpiErrorString(int code);

class MpiWorld {
 public:
  // Initialises MPI (FUNNELED), sets MPI_ERRORS_RETURN on the world and
  // dt::SetCheckRank(world rank). One per process.
  MpiWorld(int* argc, char*** argv);
  ~MpiWorld();  // MPI_Finalize
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  int rank_ = 0, size_ = 1;
};

class MpiComm : public Comm {
 public:
  // Takes ownership of `comm` (freed in the destructor) unless `owned` is false.
  explicit MpiComm(MPI_Comm comm, bool owned = true);
  ~MpiComm() override;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  MPI_Comm handle() const { return comm_; }

  void AllReduce(float* buf, size_t n, ReduceOp op = ReduceOp::kSum) override;
  std::unique_ptr<Request> IAllReduce(float* buf, size_t n) override;
  void ReduceScatter(const float* in, float* out, size_t n) override;
  void AllGather(const float* in, float* out, size_t n) override;
  std::unique_ptr<Request> ISend(const float* buf, size_t n, int peer, int tag) override;
  std::unique_ptr<Request> IRecv(float* buf, size_t n, int peer, int tag) override;
  void Barrier() override;
  void AllToAllV(const float* in, const size_t* send_counts, float* out, const size_t* recv_counts) override;
  void AllReduceBf16(uint16_t* buf, size_t n) override;
  void ReduceScatterBf16(const uint16_t* in, uint16_t* out, size_t n) override;
  void AllGatherBf16(const uint16_t* in, uint16_t* out, size_t n) override;

 private:
  MPI_Comm comm_;
  bool owned_;
  int rank_ = 0, size_ = 1;
  // The ring reduce-scatter's receive and partial-sum blocks, kept between
  // calls (ZeRO-2/3 reduce-scatter every unit of every microbatch).
  std::vector<unsigned char> ring_scratch_;
};

// Splits MPI_COMM_WORLD into this rank's groups (collective over the world:
// every rank calls it once, in the same order relative to other collectives).
// Fails when the world size differs from grid.world(), with the launch
// command to use ("plan needs 4 ranks: mpirun -np 4 ...").
StatusOr<Groups> BuildGroups(const RankGrid& grid, int world_rank, int ep = 1);

}  // namespace dt::rt
