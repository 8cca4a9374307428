// Launchers of our CUDA kernels (kernels.cu) for the CudaBackend. All take
// device pointers and a stream, launch asynchronously and check the launch
// (DT_CUDA_CHECK on cudaGetLastError). Semantics match runtime/backend/
// backend.h exactly (the CPU backend is the oracle in parity tests).
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

namespace dt::rt::cuda {

void Fill(float* x, float v, int64_t n, cudaStream_t s);
void Add(const float* a, const float* b, float* out, int64_t n, cudaStream_t s);
void Axpy(float alpha, const float* x, float* y, int64_t n, cudaStream_t s);
void Scale(float* x, float alpha, int64_t n, cudaStream_t s);
void AddBias(float* y, const float* bias, int64_t rows, int64_t cols, cudaStream_t s);
void BiasGrad(const float* dy, float* db, int64_t rows, int64_t cols, cudaStream_t s);
void GeluForward(const float* x, float* y, int64_t n, cudaStream_t s);
void GeluBackward(const float* x, const float* dy, float* dx, int64_t n, cudaStream_t s);
void LayerNormForward(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                      float* rstd, int64_t rows, int64_t cols, float eps, cudaStream_t s);
void LayerNormBackward(const float* x, const float* gamma, const float* mean, const float* rstd,
                       const float* dy, float* dx, float* dgamma, float* dbeta, int64_t rows,
                       int64_t cols, cudaStream_t s);
void SoftmaxForward(const float* x, float* y, int64_t rows, int64_t cols, float scale,
                    int64_t causal_period, cudaStream_t s);
void SoftmaxBackward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                     float scale, cudaStream_t s);

}  // namespace dt::rt::cuda
