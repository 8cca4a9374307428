// Host access to kernel memory. Ops written as host loops (RMSNorm, SwiGLU,
// RoPE, the embedding, cross entropy, the MoE permutations) and every other
// piece of host code that reads or writes tensors a backend's kernels use
// call HostAccess first: it aborts (DT_CHECK, naming the op and the backend)
// unless the backend's memory is host-accessible, then waits for the
// kernels issued so far (Backend::Synchronize; a no-op on the eager CPU
// backend). The capability table keeps models whose host ops a device
// backend cannot run off its column. runtime/backend/deferred_backend.h
// tests that no call is missing.
#pragma once

#include "runtime/backend/backend.h"

namespace dt::rt {

void HostAccess(Backend& be, const char* op);

}  // namespace dt::rt
