// Our CUDA kernels. Row-wise ops (LayerNorm, softmax) use one block per row
// with a shared-memory tree reduction; column reductions (bias and
// LayerNorm parameter grads) use one thread per column looping over rows in
// order, so results are deterministic.
#include <cmath>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/kernels.h"

namespace dt::rt::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kGeluC = 0.7978845608028654f;
constexpr float kGeluA = 0.044715f;

unsigned Blocks(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }
void CheckLaunch() { DT_CUDA_CHECK(cudaGetLastError()); }

// Reduces v over the block (kThreads threads); every thread gets the result.
__device__ float BlockSum(float v, float* sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  float r = sh[0];
  __syncthreads();
  return r;
}
__device__ float BlockMax(float v, float* sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + s]);
    __syncthreads();
  }
  float r = sh[0];
  __syncthreads();
  return r;
}

__global__ void FillK(float* x, float v, int64_t n) {
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) x[i] = v;
}
__global__ void AddK(const float* a, const float* b, float* o, int64_t n) {
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) o[i] = a[i] + b[i];
}
__global__ void AxpyK(float alpha, const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) y[i] += alpha * x[i];
}
__global__ void ScaleK(float* x, float alpha, int64_t n) {
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) x[i] *= alpha;
}
__global__ void AddBiasK(float* y, const float* b, int64_t rows, int64_t cols) {
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < rows * cols) y[i] += b[i % cols];
}
__global__ void BiasGradK(const float* dy, float* db, int64_t rows, int64_t cols) {
  int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= cols) return;
  float s = 0;
  for (int64_t r = 0; r < rows; ++r) s += dy[r * cols + c];
  db[c] += s;
}
__global__ void GeluK(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  float u = kGeluC * (v + kGeluA * v * v * v);
  y[i] = 0.5f * v * (1.0f + tanhf(u));
}
__global__ void GeluBackK(const float* x, const float* dy, float* dx, int64_t n) {
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  float u = kGeluC * (v + kGeluA * v * v * v);
  float t = tanhf(u);
  float du = kGeluC * (1.0f + 3.0f * kGeluA * v * v);
  dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
}
__global__ void LayerNormK(const float* x, const float* g, const float* b, float* y, float* mean,
                           float* rstd, int64_t cols, float eps) {
  __shared__ float sh[kThreads];
  const float* xr = x + blockIdx.x * cols;
  float s = 0;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) s += xr[c];
  const float mu = BlockSum(s, sh) / cols;
  float v = 0;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) v += (xr[c] - mu) * (xr[c] - mu);
  const float rs = rsqrtf(BlockSum(v, sh) / cols + eps);
  float* yr = y + blockIdx.x * cols;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) yr[c] = (xr[c] - mu) * rs * g[c] + b[c];
  if (threadIdx.x == 0) {
    mean[blockIdx.x] = mu;
    rstd[blockIdx.x] = rs;
  }
}
__global__ void LayerNormBackDxK(const float* x, const float* g, const float* mean,
                                 const float* rstd, const float* dy, float* dx, int64_t cols) {
  __shared__ float sh[kThreads];
  const int64_t r = blockIdx.x;
  const float* xr = x + r * cols;
  const float* dyr = dy + r * cols;
  const float mu = mean[r], rs = rstd[r];
  float sg = 0, sgx = 0;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) {
    float gg = dyr[c] * g[c];
    sg += gg;
    sgx += gg * (xr[c] - mu) * rs;
  }
  const float mg = BlockSum(sg, sh) / cols;
  const float mgx = BlockSum(sgx, sh) / cols;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads)
    dx[r * cols + c] = rs * (dyr[c] * g[c] - mg - (xr[c] - mu) * rs * mgx);
}
__global__ void LayerNormBackParamK(const float* x, const float* mean, const float* rstd,
                                    const float* dy, float* dg, float* db, int64_t rows,
                                    int64_t cols) {
  int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= cols) return;
  float sg = 0, sb = 0;
  for (int64_t r = 0; r < rows; ++r) {
    float d = dy[r * cols + c];
    sg += d * (x[r * cols + c] - mean[r]) * rstd[r];
    sb += d;
  }
  dg[c] += sg;
  db[c] += sb;
}
__global__ void SoftmaxK(const float* x, float* y, int64_t cols, float scale, int64_t period) {
  __shared__ float sh[kThreads];
  const int64_t r = blockIdx.x;
  const float* xr = x + r * cols;
  float* yr = y + r * cols;
  const int64_t valid = period > 0 ? min(cols, r % period + 1) : cols;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < valid; c += kThreads) m = fmaxf(m, scale * xr[c]);
  m = BlockMax(m, sh);
  float s = 0;
  for (int64_t c = threadIdx.x; c < valid; c += kThreads) s += __expf(scale * xr[c] - m);
  const float inv = 1.0f / BlockSum(s, sh);
  for (int64_t c = threadIdx.x; c < cols; c += kThreads)
    yr[c] = c < valid ? __expf(scale * xr[c] - m) * inv : 0.0f;
}
__global__ void SoftmaxBackK(const float* y, const float* dy, float* dx, int64_t cols, float scale) {
  __shared__ float sh[kThreads];
  const int64_t r = blockIdx.x;
  float d = 0;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) d += dy[r * cols + c] * y[r * cols + c];
  d = BlockSum(d, sh);
  for (int64_t c = threadIdx.x; c < cols; c += kThreads)
    dx[r * cols + c] = scale * y[r * cols + c] * (dy[r * cols + c] - d);
}

}  // namespace

void Fill(float* x, float v, int64_t n, cudaStream_t s) {
  if (n > 0) FillK<<<Blocks(n), kThreads, 0, s>>>(x, v, n);
  CheckLaunch();
}
void Add(const float* a, const float* b, float* o, int64_t n, cudaStream_t s) {
  if (n > 0) AddK<<<Blocks(n), kThreads, 0, s>>>(a, b, o, n);
  CheckLaunch();
}
void Axpy(float alpha, const float* x, float* y, int64_t n, cudaStream_t s) {
  if (n > 0) AxpyK<<<Blocks(n), kThreads, 0, s>>>(alpha, x, y, n);
  CheckLaunch();
}
void Scale(float* x, float alpha, int64_t n, cudaStream_t s) {
  if (n > 0) ScaleK<<<Blocks(n), kThreads, 0, s>>>(x, alpha, n);
  CheckLaunch();
}
void AddBias(float* y, const float* b, int64_t rows, int64_t cols, cudaStream_t s) {
  if (rows * cols > 0) AddBiasK<<<Blocks(rows * cols), kThreads, 0, s>>>(y, b, rows, cols);
  CheckLaunch();
}
void BiasGrad(const float* dy, float* db, int64_t rows, int64_t cols, cudaStream_t s) {
  if (cols > 0) BiasGradK<<<Blocks(cols), kThreads, 0, s>>>(dy, db, rows, cols);
  CheckLaunch();
}
void GeluForward(const float* x, float* y, int64_t n, cudaStream_t s) {
  if (n > 0) GeluK<<<Blocks(n), kThreads, 0, s>>>(x, y, n);
  CheckLaunch();
}
void GeluBackward(const float* x, const float* dy, float* dx, int64_t n, cudaStream_t s) {
  if (n > 0) GeluBackK<<<Blocks(n), kThreads, 0, s>>>(x, dy, dx, n);
  CheckLaunch();
}
void LayerNormForward(const float* x, const float* g, const float* b, float* y, float* mean,
                      float* rstd, int64_t rows, int64_t cols, float eps, cudaStream_t s) {
  if (rows > 0) LayerNormK<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(x, g, b, y, mean, rstd, cols, eps);
  CheckLaunch();
}
void LayerNormBackward(const float* x, const float* g, const float* mean, const float* rstd,
                       const float* dy, float* dx, float* dg, float* db, int64_t rows,
                       int64_t cols, cudaStream_t s) {
  if (rows == 0) return;
  LayerNormBackDxK<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(x, g, mean, rstd, dy, dx, cols);
  CheckLaunch();
  LayerNormBackParamK<<<Blocks(cols), kThreads, 0, s>>>(x, mean, rstd, dy, dg, db, rows, cols);
  CheckLaunch();
}
void SoftmaxForward(const float* x, float* y, int64_t rows, int64_t cols, float scale,
                    int64_t period, cudaStream_t s) {
  if (rows > 0) SoftmaxK<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(x, y, cols, scale, period);
  CheckLaunch();
}
void SoftmaxBackward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                     float scale, cudaStream_t s) {
  if (rows > 0) SoftmaxBackK<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(y, dy, dx, cols, scale);
  CheckLaunch();
}

}  // namespace dt::rt::cuda
