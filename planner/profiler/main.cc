// dtplan-profile: the measuring executable behind `dtplan profile`, one
// process per MPI rank (mpirun -np N dtplan-profile ...). See
// planner/profiler/run_profiler.h and docs/profiler.md.
// Exit codes: 0 ok, 1 internal/write failure, 2 bad input, 3 device unavailable.
#include <iostream>
#include <string>
#include <vector>

#include "planner/profiler/profiler_options.h"
#include "planner/profiler/run_profiler.h"
#include "runtime/backend/bf16_gemm.h"
#include "runtime/backend/cpu_gemm.h"
#include "runtime/comm/mpi_comm.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  dt::StatusOr<dt::ProfilerOptions> opts = dt::ParseProfilerArgs(args);
  if (!opts.ok()) {  // before MPI: every rank prints the same, so only print once when possible
    const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
    bool root = rank == nullptr || std::string(rank) == "0";
    if (opts.status().code() == dt::StatusCode::kNotFound) {
      if (root) std::cout << opts.status().message();
      return 0;
    }
    if (root) std::cerr << "dtplan: error: " << opts.status().message() << "\n";
    return 2;
  }
  std::string command = "dtplan profile";
  for (const std::string& a : args) command += " " + a;
  dt::rt::MpiWorld mpi(&argc, &argv);
  dt::rt::MpiComm world(MPI_COMM_WORLD, /*owned=*/false);
  if (opts->device == "cuda") return dt::RunCudaProfiler(*opts, world, command);
  dt::StatusOr<dt::rt::GemmLibrary> gemm = dt::rt::GemmLibraryFromEnv();
  if (!gemm.ok()) {
    if (world.rank() == 0) std::cerr << "dtplan: error: " << gemm.status().message() << "\n";
    return 2;
  }
  std::unique_ptr<dt::rt::Backend> be = dt::rt::MakeCpuBackend(*gemm);
  dt::ProfilerDevice dev;
  dev.be = be.get();
  dev.kind = "cpu";
  dev.gemm_library = dt::rt::GemmLibraryDescription(*gemm);
  // precision=bf16 plans run their GEMMs on bf16 operands (bf16_gemm.h): measured too.
  std::unique_ptr<dt::rt::Backend> bf16 = dt::rt::MakeCpuBackend(*gemm, dt::rt::GemmInputs::kBf16);
  dev.bf16_be = bf16.get();
  dev.bf16_gemm = *gemm == dt::rt::GemmLibrary::kEigen ? "emulated (DT_GEMM=eigen): Eigen fp32 GEMM on bf16-rounded operands"
                                                        : dt::rt::Bf16GemmDescription();
  dev.make_comm = [](MPI_Comm group) { return std::make_unique<dt::rt::MpiComm>(group, /*owned=*/false); };
  return dt::RunProfiler(*opts, dev, world, command);
}
