// Bf16 GEMM inputs: C[m,n] = alpha * op(A) op(B) + beta * C where every
// element of A and B is first rounded to bf16 (nearest even) and the
// products are accumulated in fp32 -- what a GPU's tensor cores do with bf16
// operands, and what the CPU backend runs for `precision: bf16` plans
// (Backend::gemm_inputs(), backend.h).
//
// Two kernels give that result (they differ only in summation order, i.e.
// within fp32 rounding of the same exact products):
//  - oneDNN's bf16 matmul (Debian libdnnl, found at configure time:
//    DT_HAVE_DNNL) on a CPU with AVX512-BF16 (vdpbf16ps: two bf16 products
//    per fp32 lane, about twice the fp32 FMA rate), when oneDNN picks a
//    native kernel for it on this CPU ("brg:avx512_core_bf16" on Zen 4 and
//    Cooper Lake / Sapphire Rapids);
//  - otherwise emulation: the rounded operands widened back to fp32 and the
//    fp32 GEMM of the backend's library (exact products, so the same
//    mathematics at fp32 speed). DT_GEMM=eigen always emulates (the
//    reference).
// Bf16GemmNative() says which one this process uses (decided once, by
// creating one oneDNN primitive). Calls are single-threaded (oneDNN's
// OpenMP threads are held to 1 around each call) and deterministic: the
// same call gives the same bits. Thread-safe: concurrent calls on disjoint C
// blocks are fine (primitives and scratchpads are per thread). oneDNN's
// exceptions are caught here; a failure after the capability check aborts
// with the library's message (an invariant break: the same primitive
// worked at the check).
#pragma once

#include <cstdint>
#include <string>

#include "runtime/backend/backend.h"
#include "runtime/tensor/bf16.h"

namespace dt::rt {

// True when oneDNN is linked and runs bf16 matmuls natively on this CPU.
bool Bf16GemmNative();
// "oneDNN 2.6.3, brg:avx512_core_bf16" or why the backend emulates
// ("emulated: this build has no oneDNN (apt-get install libdnnl-dev)").
std::string Bf16GemmDescription();

// The native kernel, one call on the calling thread. Operands are dense bf16:
// op(A) is [m, k] stored as A[m, k] (ta = kNo, row stride a_rs) or A[k, *]
// with columns r.. (ta = kYes, row stride a_rs); op(B) is [k, n] stored as
// B[k, n] (tb = kNo) or B[n, k] (tb = kYes), dense. C is fp32 with row
// stride ldc. Requires Bf16GemmNative() and m, n, k > 0.
void Bf16GemmSerial(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
                    const bf16_t* a, int64_t a_rs, const bf16_t* b, float beta, float* c,
                    int64_t ldc);

}  // namespace dt::rt
