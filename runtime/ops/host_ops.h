// Guard for ops written as host loops (RMSNorm, SwiGLU, RoPE): they read and
// write their pointers directly, so they run only on a backend whose memory
// is host memory (the CPU backend). Aborts (DT_CHECK) naming the op and the
// backend otherwise; the capability table keeps such models off the CUDA
// column until the CUDA backend has kernels for them.
#pragma once

#include "runtime/backend/backend.h"

namespace dt::rt {

void CheckHostBackend(const Backend& be, const char* op);

}  // namespace dt::rt
