#include "runtime/tensor/allocator.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include <malloc.h>

#include "base/check.h"

namespace dt::rt {
namespace {
std::atomic<int64_t> g_current{0};
std::atomic<int64_t> g_peak{0};

void RaisePeak(int64_t now) {
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}
}  // namespace

void TrackAlloc(int64_t bytes) {
  int64_t now = g_current.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  RaisePeak(now);
}

void TrackFree(int64_t bytes) {
  int64_t now = g_current.fetch_sub(bytes, std::memory_order_relaxed) - bytes;
  DT_CHECK_GE(now, 0) << "allocator: freed more bytes than allocated";
}

int64_t CurrentBytes() { return g_current.load(std::memory_order_relaxed); }
int64_t PeakBytes() { return g_peak.load(std::memory_order_relaxed); }
void ResetPeakBytes() { g_peak.store(g_current.load(std::memory_order_relaxed)); }

namespace {
// Tensors are allocated and freed every step. With glibc's defaults, blocks
// above 128 KiB are mmap'ed and unmapped per call and a freed heap top is
// trimmed, so every step page-faults its large tensors in again; the
// threshold adapts only after the process happens to free a large block, so
// two processes doing the same work could run at different speeds. Fix the
// thresholds once, like a caching device allocator keeps its blocks.
void ConfigureHeapOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
#ifdef M_MMAP_THRESHOLD
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
#endif
  });
}
}  // namespace

namespace {
std::atomic<const TensorMemory*> g_memory{nullptr};
}  // namespace

void SetTensorMemory(const TensorMemory* hooks) { g_memory.store(hooks); }

float* AllocFloatsUninitialized(size_t n) {
  if (n == 0) return nullptr;
  ConfigureHeapOnce();
  size_t bytes = (n * sizeof(float) + 63) / 64 * 64;  // aligned_alloc needs a multiple
  const TensorMemory* mem = g_memory.load();
  void* p = mem != nullptr ? mem->alloc(bytes) : std::aligned_alloc(64, bytes);
  DT_CHECK(p != nullptr) << "out of " << (mem != nullptr ? mem->name : "host") << " memory allocating "
                         << n * sizeof(float) << " bytes";
  TrackAlloc(static_cast<int64_t>(n * sizeof(float)));
  return static_cast<float*>(p);
}

float* AllocFloats(size_t n) {
  float* p = AllocFloatsUninitialized(n);
  if (p != nullptr) std::memset(p, 0, n * sizeof(float));
  return p;
}

namespace {
std::atomic<void (*)()> g_device_sync{nullptr};
std::atomic<std::thread::id> g_hook_thread{};
}  // namespace

void SetDeviceSyncHook(void (*hook)()) {
  g_hook_thread.store(std::this_thread::get_id());
  g_device_sync.store(hook);
}

void DeviceSynchronize() {
  if (void (*hook)() = g_device_sync.load(); hook != nullptr && g_hook_thread.load() == std::this_thread::get_id())
    hook();
}

void FreeFloats(float* p, size_t n) {
  if (p == nullptr) return;
  DeviceSynchronize();
  if (const TensorMemory* mem = g_memory.load(); mem != nullptr) mem->free(p);
  else std::free(p);
  TrackFree(static_cast<int64_t>(n * sizeof(float)));
}

}  // namespace dt::rt
