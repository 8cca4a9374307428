// CUDA managed memory for tensors: the training path's memory on a GPU.
// UseCudaManagedTensors(device) makes every tensor the runtime allocates
// from then on (runtime/tensor/allocator.h) CUDA managed memory on `device`,
// which kernels and host code can both address, and makes
// DeviceSynchronize() a cudaDeviceSynchronize: the runtime's host code
// synchronises before every access to tensor memory (runtime/ops/host_ops.h;
// proven on CPU by the deferred backend, ctest -R dtrun_deferred), so the
// host never touches memory a kernel is still using. Host-loop ops then run
// correctly but migrate pages; kernels for them are what makes it fast.
// Call once per process, before the first tensor is allocated, on the
// thread that trains; blocks from host memory allocated before are still
// freed correctly. Fails (Status) without a usable device.
// Built only with CUDA (DT_HAVE_CUDA). Compiled and linked here, never run
// yet: this project has had no GPU (docs/runtime.md); scripts/gpu-check.sh
// runs it against the CPU oracle.
#pragma once

#include "base/status.h"

namespace dt::rt {

Status UseCudaManagedTensors(int device);

}  // namespace dt::rt
