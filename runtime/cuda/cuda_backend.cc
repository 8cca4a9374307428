#include "runtime/cuda/cuda_backend.h"

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/kernels.h"
#include "runtime/tensor/allocator.h"

namespace dt::rt {
namespace {

cublasOperation_t Op(Trans t) { return t == Trans::kYes ? CUBLAS_OP_T : CUBLAS_OP_N; }

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, bool managed_tensors) : managed_tensors_(managed_tensors) {
    DT_CUDA_CHECK(cudaSetDevice(device));
    DT_CUDA_CHECK(cudaStreamCreate(&stream_));
    DT_CUBLAS_CHECK(cublasCreate(&blas_));
    DT_CUBLAS_CHECK(cublasSetStream(blas_, stream_));
    // Plain fp32 math (no TF32) so results stay close to the CPU oracle.
    DT_CUBLAS_CHECK(cublasSetMathMode(blas_, CUBLAS_PEDANTIC_MATH));
  }
  ~CudaBackend() override {
    cublasDestroy(blas_);
    cudaStreamDestroy(stream_);
  }
  const char* name() const override { return "cuda"; }
  bool host_accessible() const override { return managed_tensors_; }

  float* Alloc(size_t n) override {
    if (n == 0) return nullptr;
    void* p = nullptr;
    DT_CUDA_CHECK(cudaMalloc(&p, n * sizeof(float)));
    DT_CUDA_CHECK(cudaMemsetAsync(p, 0, n * sizeof(float), stream_));
    TrackAlloc(static_cast<int64_t>(n * sizeof(float)));
    return static_cast<float*>(p);
  }
  void Free(float* p, size_t n) override {
    if (p == nullptr) return;
    DT_CUDA_CHECK(cudaStreamSynchronize(stream_));
    DT_CUDA_CHECK(cudaFree(p));
    TrackFree(static_cast<int64_t>(n * sizeof(float)));
  }
  void CopyToDevice(float* dst, const float* src, size_t n) override {
    DT_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyHostToDevice, stream_));
    DT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void CopyToHost(float* dst, const float* src, size_t n) override {
    DT_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToHost, stream_));
    DT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void Copy(float* dst, const float* src, size_t n) override {
    DT_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
  }
  void Fill(float* x, float v, size_t n) override { cuda::Fill(x, v, static_cast<int64_t>(n), stream_); }
  void Synchronize() override { DT_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, and a
  // row-major matrix with leading dimension ld is its transpose in column
  // major with the same ld: so swap the operands and keep the op flags.
  void Gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
            int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) override {
    if (m == 0 || n == 0) return;
    DT_CUBLAS_CHECK(cublasSgemm(blas_, Op(tb), Op(ta), static_cast<int>(n), static_cast<int>(m),
                                static_cast<int>(k), &alpha, b, static_cast<int>(ldb), a,
                                static_cast<int>(lda), &beta, c, static_cast<int>(ldc)));
  }

  void Add(const float* a, const float* b, float* out, int64_t n) override { cuda::Add(a, b, out, n, stream_); }
  void Axpy(float alpha, const float* x, float* y, int64_t n) override { cuda::Axpy(alpha, x, y, n, stream_); }
  void Scale(float* x, float alpha, int64_t n) override { cuda::Scale(x, alpha, n, stream_); }
  void AddBias(float* y, const float* bias, int64_t rows, int64_t cols) override {
    cuda::AddBias(y, bias, rows, cols, stream_);
  }
  void BiasGrad(const float* dy, float* db, int64_t rows, int64_t cols) override {
    cuda::BiasGrad(dy, db, rows, cols, stream_);
  }
  void GeluForward(const float* x, float* y, int64_t n) override { cuda::GeluForward(x, y, n, stream_); }
  void GeluBackward(const float* x, const float* dy, float* dx, int64_t n) override {
    cuda::GeluBackward(x, dy, dx, n, stream_);
  }
  void LayerNormForward(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                        float* rstd, int64_t rows, int64_t cols, float eps) override {
    cuda::LayerNormForward(x, gamma, beta, y, mean, rstd, rows, cols, eps, stream_);
  }
  void LayerNormBackward(const float* x, const float* gamma, const float* mean, const float* rstd,
                         const float* dy, float* dx, float* dgamma, float* dbeta, int64_t rows,
                         int64_t cols) override {
    cuda::LayerNormBackward(x, gamma, mean, rstd, dy, dx, dgamma, dbeta, rows, cols, stream_);
  }
  void SoftmaxForward(const float* x, float* y, int64_t rows, int64_t cols, float scale,
                      int64_t causal_period) override {
    cuda::SoftmaxForward(x, y, rows, cols, scale, causal_period, stream_);
  }
  void SoftmaxBackward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                       float scale) override {
    cuda::SoftmaxBackward(y, dy, dx, rows, cols, scale, stream_);
  }

 private:
  bool managed_tensors_ = false;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
};

}  // namespace

StatusOr<int> CudaDeviceCount() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return Internal(std::string("no CUDA device: ") + cudaGetErrorString(e));
  return n;
}

StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(int device, bool managed_tensors) {
  auto count = CudaDeviceCount();
  if (!count.ok()) return count.status();
  if (device < 0 || device >= *count)
    return InvalidArgument("CUDA device " + std::to_string(device) + " does not exist (" +
                           std::to_string(*count) + " visible)");
  return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(device, managed_tensors));
}

}  // namespace dt::rt
