// Bare Eigen GEMM timing for the runtime benchmark: the reference rate the
// runtime's training step is compared with. A GEMM of a recorded shape
// (same transposes, m, n, k, leading dimensions, overwrite/accumulate) is
// run directly on Eigen::Map row-major matrices, single-threaded Eigen
// (EIGEN_DONT_PARALLELIZE, as the CPU backend), with C's rows split into
// `threads` equal contiguous parts over OpenMP threads (one part = one
// product). Buffers are owned here and filled with random values.
// Thread-safe only in the sense that it touches no shared state.
#pragma once

#include "runtime/bench/profiling_backend.h"

namespace dt::rt::bench {

// Median wall seconds of one call of `shape` over `reps` timed calls (after
// one warm-up call), using `threads` OpenMP threads.
double BareGemmSeconds(const GemmShape& shape, int threads, int reps);

}  // namespace dt::rt::bench
