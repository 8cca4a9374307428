#include "runtime/backend/deferred_backend.h"

#include <functional>
#include <utility>
#include <vector>

#include "base/check.h"
#include "runtime/tensor/allocator.h"

namespace dt::rt {
namespace {

class DeferredBackend final : public Backend {
 public:
  explicit DeferredBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {
    DT_CHECK(inner_ != nullptr) << "deferred backend: no backend to wrap";
    DT_CHECK(active_ == nullptr) << "deferred backend: one instance at a time";
    active_ = this;
    SetDeviceSyncHook(&FlushActive);
  }
  ~DeferredBackend() override {
    Synchronize();
    SetDeviceSyncHook(nullptr);
    active_ = nullptr;
  }
  const char* name() const override { return "deferred-cpu"; }
  GemmInputs gemm_inputs() const override { return inner_->gemm_inputs(); }
  bool host_accessible() const override { return true; }

  float* Alloc(size_t n) override { return inner_->Alloc(n); }
  void Free(float* p, size_t n) override {
    Synchronize();
    inner_->Free(p, n);
  }
  void CopyToDevice(float* dst, const float* src, size_t n) override {
    Synchronize();
    inner_->CopyToDevice(dst, src, n);
  }
  void CopyToHost(float* dst, const float* src, size_t n) override {
    Synchronize();
    inner_->CopyToHost(dst, src, n);
  }
  void Copy(float* dst, const float* src, size_t n) override {
    Record([=](Backend& b) { b.Copy(dst, src, n); });
  }
  void Fill(float* x, float v, size_t n) override {
    Record([=](Backend& b) { b.Fill(x, v, n); });
  }
  void Synchronize() override {
    // Kernels never enqueue kernels, but a kernel's temporary may be freed
    // (the before-free hook): drain by swapping the queue out first.
    while (!queue_.empty()) {
      std::vector<std::function<void(Backend&)>> run;
      run.swap(queue_);
      for (auto& k : run) k(*inner_);
    }
    inner_->Synchronize();
  }

  void Gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
            const float* b, int64_t ldb, float beta, float* c, int64_t ldc) override {
    Record([=](Backend& be) { be.Gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); });
  }
  void Add(const float* a, const float* b, float* out, int64_t n) override {
    Record([=](Backend& be) { be.Add(a, b, out, n); });
  }
  void Axpy(float alpha, const float* x, float* y, int64_t n) override {
    Record([=](Backend& be) { be.Axpy(alpha, x, y, n); });
  }
  void Scale(float* x, float alpha, int64_t n) override {
    Record([=](Backend& be) { be.Scale(x, alpha, n); });
  }
  void AddBias(float* y, const float* bias, int64_t rows, int64_t cols) override {
    Record([=](Backend& be) { be.AddBias(y, bias, rows, cols); });
  }
  void BiasGrad(const float* dy, float* db, int64_t rows, int64_t cols) override {
    Record([=](Backend& be) { be.BiasGrad(dy, db, rows, cols); });
  }
  void GeluForward(const float* x, float* y, int64_t n) override {
    Record([=](Backend& be) { be.GeluForward(x, y, n); });
  }
  void GeluBackward(const float* x, const float* dy, float* dx, int64_t n) override {
    Record([=](Backend& be) { be.GeluBackward(x, dy, dx, n); });
  }
  void LayerNormForward(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd,
                        int64_t rows, int64_t cols, float eps) override {
    Record([=](Backend& be) { be.LayerNormForward(x, gamma, beta, y, mean, rstd, rows, cols, eps); });
  }
  void LayerNormBackward(const float* x, const float* gamma, const float* mean, const float* rstd, const float* dy,
                         float* dx, float* dgamma, float* dbeta, int64_t rows, int64_t cols) override {
    Record([=](Backend& be) { be.LayerNormBackward(x, gamma, mean, rstd, dy, dx, dgamma, dbeta, rows, cols); });
  }
  void SoftmaxForward(const float* x, float* y, int64_t rows, int64_t cols, float scale,
                      int64_t causal_period) override {
    Record([=](Backend& be) { be.SoftmaxForward(x, y, rows, cols, scale, causal_period); });
  }
  void SoftmaxBackward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                       float scale) override {
    Record([=](Backend& be) { be.SoftmaxBackward(y, dy, dx, rows, cols, scale); });
  }

 private:
  void Record(std::function<void(Backend&)> k) { queue_.push_back(std::move(k)); }
  static void FlushActive() {
    if (active_ != nullptr) active_->Synchronize();
  }

  static DeferredBackend* active_;
  std::unique_ptr<Backend> inner_;
  std::vector<std::function<void(Backend&)>> queue_;
};

DeferredBackend* DeferredBackend::active_ = nullptr;

}  // namespace

std::unique_ptr<Backend> MakeDeferredBackend(std::unique_ptr<Backend> inner) {
  return std::make_unique<DeferredBackend>(std::move(inner));
}

}  // namespace dt::rt
