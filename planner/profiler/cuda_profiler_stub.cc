// RunCudaProfiler for builds without CUDA (dt_runtime_cuda not built).
#include <iostream>

#include "planner/profiler/run_profiler.h"

namespace dt {

int RunCudaProfiler(const ProfilerOptions&, rt::MpiComm& world, const std::string&) {
  if (world.rank() == 0)
    std::cerr << "dtplan: error: --device cuda: this build has no CUDA support (dt_runtime_cuda "
                 "was not built: no nvcc at configure time); rebuild with CUDA or use --device cpu\n";
  return 3;
}

}  // namespace dt
