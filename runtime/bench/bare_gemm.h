// Bare GEMM timing for the runtime benchmark: the reference rate the
// runtime's training step is compared with. A GEMM of a recorded shape
// (same transposes, m, n, k, leading dimensions, overwrite/accumulate) is
// run directly on a GEMM library's single-threaded kernel (CpuGemmSerial,
// runtime/backend/cpu_gemm.h), with C's rows split into `threads` equal
// contiguous parts over OpenMP threads (one part = one call). Buffers are
// owned here and filled with random values. Thread-safe only in the sense
// that it touches no shared state.
#pragma once

#include "runtime/backend/cpu_gemm.h"
#include "runtime/bench/profiling_backend.h"

namespace dt::rt::bench {

// Median wall seconds of one call of `shape` over `reps` timed calls (after
// one warm-up call), using `threads` OpenMP threads and library `lib`.
double BareGemmSeconds(const GemmShape& shape, int threads, int reps, GemmLibrary lib);

// The same for the native bf16 kernel (runtime/backend/bf16_gemm.h) on dense
// operands already rounded to bf16: the bare rate of the library a step with
// bf16 GEMM inputs uses (the step also rounds its operands; this does not).
// Requires Bf16GemmNative().
double BareBf16GemmSeconds(const GemmShape& shape, int threads, int reps);

}  // namespace dt::rt::bench
