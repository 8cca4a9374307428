// The profiler driver run by every rank of dtplan-profile: measures compute
// (GEMMs at the models' plan shapes, attention, memory-bound kernels,
// optimizer, stream copy, a tiny kernel) and the collectives of every group
// size 2..ranks-per-node, then rank 0 assembles and writes the profile.
//
// The device is injected: a Backend, and a factory for the communicator to
// measure over an MPI group (MpiComm on CPU, NCCL on CUDA). Collective over
// `world`: every rank calls it with the same options. Returns the process
// exit code (0 ok, 2 bad input such as an unreadable model, 1 write
// failure), the same on every rank; messages go to rank 0's stderr.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "planner/profiler/profiler_options.h"
#include "runtime/backend/backend.h"
#include "runtime/comm/mpi_comm.h"

namespace dt {

struct ProfilerDevice {
  rt::Backend* be = nullptr;
  std::string kind = "cpu";        // profile device.kind: cpu | gpu
  std::string name;                // CPU model / GPU name for the description
  std::string gemm_library;        // the backend's GEMM ("OpenBLAS", "Eigen", "cuBLAS")
  int64_t memory_bytes = 0;        // per rank; 0 = MemTotal / ranks per node
  bool host_optimizer = true;      // measure the (host) AdamW step
  // The backend precision=bf16 plans run on (GEMM operands rounded to bf16;
  // runtime/backend/bf16_gemm.h) and its GEMM's description: its GEMMs and
  // attention are measured again into compute.bf16. Null: not measured.
  rt::Backend* bf16_be = nullptr;
  std::string bf16_gemm;
  // Communicator measured over the MPI group `group` (collective call).
  std::function<std::unique_ptr<rt::Comm>(MPI_Comm group)> make_comm;
};

int RunProfiler(const ProfilerOptions& o, const ProfilerDevice& dev, rt::MpiComm& world,
                const std::string& command);

// --device cuda (cuda_profiler.cc; a stub without CUDA). Exit code 3 when no
// GPU is usable or the build has no CUDA, with a message on rank 0.
int RunCudaProfiler(const ProfilerOptions& o, rt::MpiComm& world, const std::string& command);

}  // namespace dt
