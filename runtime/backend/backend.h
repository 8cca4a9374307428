// Backend: the compute seam of the runtime. A small table of primitives
// (memory, row-major GEMM, the elementwise / normalisation / softmax
// kernels the ops need) implemented once per device: CpuBackend (Eigen +
// OpenMP, the oracle) and CudaBackend (cuBLAS + our kernels, runtime/cuda/).
//
// Pointers are in the backend's memory space (host for CPU, device for
// CUDA); the caller owns them. Every matrix is row-major with an explicit
// leading dimension (elements between consecutive rows), so sub-blocks of
// larger buffers (one attention head inside a QKV activation) can be used
// without copies. "Accumulate" outputs add into what is there; others
// overwrite. Calls are issued in order on one stream; a Backend object is
// not thread-safe. Misuse (null pointers, bad sizes) aborts via DT_CHECK,
// device errors abort with the library's message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace dt::rt {

enum class Trans { kNo, kYes };

// What a backend's GEMMs do with their fp32 operands. kFp32: use them as
// they are. kBf16: round every element of A and B to bf16 (nearest even)
// and accumulate the exact products in fp32 -- tensor-core arithmetic, which
// the CPU backend runs for `precision: bf16` plans (runtime/backend/bf16_gemm.h).
enum class GemmInputs { kFp32, kBf16 };

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

  // --- memory (counted by runtime/tensor/allocator.h) ---
  virtual float* Alloc(size_t n) = 0;  // zero-filled
  virtual void Free(float* p, size_t n) = 0;
  virtual void CopyToDevice(float* dst, const float* host_src, size_t n) = 0;
  virtual void CopyToHost(float* host_dst, const float* src, size_t n) = 0;
  virtual void Copy(float* dst, const float* src, size_t n) = 0;  // within the device
  virtual void Fill(float* x, float v, size_t n) = 0;
  // Waits until every kernel issued so far has run (a no-op on the eager CPU
  // backend). Host code that reads or writes kernel memory calls it first
  // (runtime/ops/host_ops.h HostAccess).
  virtual void Synchronize() {}
  // Whether the host may read and write this backend's memory (after
  // Synchronize): host memory, or memory the device shares with the host.
  // Ops written as host loops run only on such backends.
  virtual bool host_accessible() const { return false; }

  // --- GEMM: C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C ---
  // op(A) = A (A stored [m, k], lda >= k) or A^T (A stored [k, m], lda >= m).
  // Operands are rounded as gemm_inputs() says (fixed when the backend is made).
  virtual GemmInputs gemm_inputs() const { return GemmInputs::kFp32; }
  virtual void Gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                    float* c, int64_t ldc) = 0;

  // --- elementwise ---
  virtual void Add(const float* a, const float* b, float* out, int64_t n) = 0;  // out = a + b
  virtual void Axpy(float alpha, const float* x, float* y, int64_t n) = 0;      // y += alpha*x
  virtual void Scale(float* x, float alpha, int64_t n) = 0;                     // x *= alpha
  // y[r, :] += bias (y is [rows, cols]).
  virtual void AddBias(float* y, const float* bias, int64_t rows, int64_t cols) = 0;
  // db += sum over rows of dy ([rows, cols]); accumulate.
  virtual void BiasGrad(const float* dy, float* db, int64_t rows, int64_t cols) = 0;
  // GeLU, tanh approximation: y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
  virtual void GeluForward(const float* x, float* y, int64_t n) = 0;
  virtual void GeluBackward(const float* x, const float* dy, float* dx, int64_t n) = 0;

  // --- LayerNorm over the last dimension of x [rows, cols] ---
  // y = (x - mean) * rstd * gamma + beta; writes mean[rows], rstd[rows].
  virtual void LayerNormForward(const float* x, const float* gamma, const float* beta, float* y,
                                float* mean, float* rstd, int64_t rows, int64_t cols,
                                float eps) = 0;
  // dx overwritten; dgamma, dbeta accumulated.
  virtual void LayerNormBackward(const float* x, const float* gamma, const float* mean,
                                 const float* rstd, const float* dy, float* dx, float* dgamma,
                                 float* dbeta, int64_t rows, int64_t cols) = 0;

  // --- softmax over rows of x [rows, cols], of scale * x ---
  // causal_period > 0: row r may only see columns c <= r % causal_period
  // (masked entries get probability 0); 0 = no mask.
  virtual void SoftmaxForward(const float* x, float* y, int64_t rows, int64_t cols, float scale,
                              int64_t causal_period) = 0;
  // dx = scale * y * (dy - sum_c(dy * y)) (the grad w.r.t. the unscaled x). dx may alias dy.
  virtual void SoftmaxBackward(const float* y, const float* dy, float* dx, int64_t rows,
                               int64_t cols, float scale) = 0;
};

// The CPU oracle. Memory is host memory from the runtime allocator.
std::unique_ptr<Backend> MakeCpuBackend();

}  // namespace dt::rt
