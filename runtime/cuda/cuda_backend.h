// CudaBackend: the Backend seam on one CUDA device: cuBLAS SGEMM (row-major
// through the transposed-product identity) and our kernels (runtime/cuda/
// kernels.h) on one stream. Pointers are device pointers; Alloc/Free use
// cudaMalloc/cudaFree and report bytes to the runtime allocator counters.
// Built only when CUDA is available (DT_HAVE_CUDA). Not thread-safe.
// Every CUDA / cuBLAS call is checked and aborts with the library's message.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "runtime/backend/backend.h"

namespace dt::rt {

// Number of visible CUDA devices, or an error carrying cudaGetErrorString
// (e.g. "no CUDA-capable device is detected") — how tests decide to skip.
StatusOr<int> CudaDeviceCount();

// Fails (Status) when `device` does not exist. managed_tensors: the
// runtime's tensors live in CUDA managed memory (managed_memory.h), so the
// backend reports host_accessible() and host-loop ops may run on them.
StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(int device = 0, bool managed_tensors = false);

}  // namespace dt::rt
