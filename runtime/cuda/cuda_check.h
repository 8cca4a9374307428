// Checks for every CUDA runtime and cuBLAS call: on failure, abort with
// file, line, rank and the library's message (DT_CHECK). Header-only.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "base/check.h"

#define DT_CUDA_CHECK(expr)                                                        \
  do {                                                                             \
    cudaError_t _dt_e = (expr);                                                    \
    DT_CHECK(_dt_e == cudaSuccess) << #expr << ": " << cudaGetErrorString(_dt_e);  \
  } while (0)

#define DT_CUBLAS_CHECK(expr)                                                           \
  do {                                                                                  \
    cublasStatus_t _dt_s = (expr);                                                      \
    DT_CHECK(_dt_s == CUBLAS_STATUS_SUCCESS) << #expr << ": " << cublasGetStatusString(_dt_s); \
  } while (0)
