// Allocator: the one place the runtime allocates tensor memory, so that the
// process's current and peak tensor bytes can be measured and compared with
// the planner's memory prediction.
//
// Host memory comes from AllocFloats/FreeFloats (64-byte aligned, zero-filled).
// The first AllocFloats fixes glibc's mmap / trim thresholds (256 / 512 MiB)
// so per-step tensors are recycled from the heap instead of page-faulted in
// anew, the same in every process (dtrun, the profiler, benchmarks).
// Device backends allocate themselves and report their bytes through
// TrackAlloc/TrackFree so one counter pair covers whichever memory holds the
// tensors. Counters are atomic: every function here is thread-safe.
// Allocation failure is an invariant break (DT_CHECK): a step that runs out of
// memory cannot continue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>

namespace dt::rt {

float* AllocFloats(size_t n);           // n may be 0 (returns nullptr)
// As AllocFloats, but the contents are unspecified: for buffers the caller
// overwrites entirely before reading (saves the zero-fill's memory traffic).
float* AllocFloatsUninitialized(size_t n);
void FreeFloats(float* p, size_t n);    // n must be the allocated count

// Device synchronisation for host code that touches tensor memory without a
// Backend at hand (collectives over host buffers, the optimizer, checkpoints):
// an asynchronous backend installs its Synchronize as the hook (nullptr:
// none; replaces any previous one) and DeviceSynchronize() runs it, on the
// thread that installed it only (a no-op elsewhere and without a hook, as on
// the eager CPU backend). FreeFloats calls it before it frees, so no queued
// kernel outlives the memory it uses, as cudaFree waits for the device
// (runtime/backend/deferred_backend.h).
void SetDeviceSyncHook(void (*hook)());
void DeviceSynchronize();

// Where tensor memory comes from. Default (nullptr): host memory
// (aligned_alloc). A device backend whose memory the host may also touch
// installs its own, e.g. CUDA managed memory (runtime/cuda/managed_memory.h),
// before the first tensor is allocated; `free` must also release host
// blocks allocated before the switch. The counters above count either.
// `hooks` must outlive every allocation; nullptr restores the default.
struct TensorMemory {
  const char* name;
  void* (*alloc)(size_t bytes);  // nullptr on failure
  void (*free)(void* p);
};
void SetTensorMemory(const TensorMemory* hooks);

void TrackAlloc(int64_t bytes);
void TrackFree(int64_t bytes);
int64_t CurrentBytes();  // bytes allocated and not yet freed
int64_t PeakBytes();     // maximum of CurrentBytes() since start / last reset
void ResetPeakBytes();   // peak := current

// std-compatible allocator over AllocFloats (for std::vector<float>).
template <typename T>
struct TrackingAllocator {
  static_assert(sizeof(T) == sizeof(float), "TrackingAllocator is for 4-byte elements");
  using value_type = T;
  TrackingAllocator() = default;
  template <typename U>
  TrackingAllocator(const TrackingAllocator<U>&) {}  // NOLINT
  // std containers construct their elements themselves: no zero-fill needed.
  T* allocate(size_t n) { return reinterpret_cast<T*>(AllocFloatsUninitialized(n)); }
  void deallocate(T* p, size_t n) { FreeFloats(reinterpret_cast<float*>(p), n); }
  bool operator==(const TrackingAllocator&) const { return true; }
  bool operator!=(const TrackingAllocator&) const { return false; }
};

}  // namespace dt::rt
