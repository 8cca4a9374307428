// DeferredBackend: a test instrument for the runtime's host/device
// synchronisation, on CPU. It wraps a Backend (the CPU oracle) and behaves
// like one GPU stream: a kernel call (GEMM, elementwise, norm, softmax, Fill,
// device-to-device Copy) is recorded, not run; the recorded kernels run in
// call order at Synchronize(), at a host copy (CopyToHost / CopyToDevice), and
// before any tensor memory is freed (as cudaFree waits for the device).
//
// Host code that reads a kernel's output without synchronising first sees
// the value from before the kernel; host code that writes a buffer a queued
// kernel still has to read changes that kernel's input. Those are exactly the
// races an asynchronous device stream has, but here they are deterministic:
// a run under this backend is bit-identical to the eager CPU backend if and
// only if every host access to kernel memory is preceded by a
// Synchronize() (runtime/ops/host_ops.h HostAccess). dtrun selects it with
// DT_DEFERRED_KERNELS=1 (tests/runtime/dtrun_check.py "deferred").
//
// Memory is host memory from the wrapped backend. Owns the wrapped backend.
// While it exists it installs its Synchronize as the allocator's device-sync
// hook (runtime/tensor/allocator.h DeviceSynchronize, also run before every
// free); one instance at a time. Not thread-safe (one
// stream, one thread), like every Backend.
#pragma once

#include <memory>

#include "runtime/backend/backend.h"

namespace dt::rt {

std::unique_ptr<Backend> MakeDeferredBackend(std::unique_ptr<Backend> inner);

}  // namespace dt::rt
