// HugePageAllocator: a std::allocator for large, long-lived arrays (the
// simulator's per-task arrays, millions of entries for a 1024-microbatch
// plan) that asks the kernel to back them with transparent huge pages.
//
// Why: on a virtual machine every first touch of a 4 KiB page traps to the
// hypervisor. The 1T search touched ~230 MB in 60k page faults, and handling
// them was 18-21% of its time (perf, docs/simulator.md "Search speed"). A 2 MiB
// page takes one fault for 512 of those.
//
// What it does: requests of at least kHugePageBytes are mmap'ed anonymous,
// rounded up to whole huge pages, and marked MADV_HUGEPAGE; smaller ones go
// to operator new. Under THP "madvise" (Debian's default) that is what turns
// huge pages on; under "always" it changes nothing, under "never" the kernel
// ignores the advice and the memory is ordinary pages. Values and results are
// the same either way: only the page size differs. Memory never touched is
// still never backed.
//
// Ownership: memory returned by allocate() goes back through deallocate()
// with the same count (as std::allocator requires). Failure: an mmap that
// fails throws std::bad_alloc, as operator new does. Stateless; thread-safe.
// Off Linux it is std::allocator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace dt {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

template <typename T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}  // NOLINT: rebinding, as std::allocator

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
#if defined(__linux__)
    if (bytes >= kHugePageBytes) {
      // One huge page more than needed, then the unaligned head and tail
      // returned: huge pages cover only 2 MiB-aligned ranges.
      const size_t size = Rounded(bytes);
      void* raw = mmap(nullptr, size + kHugePageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (raw == MAP_FAILED) throw std::bad_alloc();
      const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
      const uintptr_t aligned = (start + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
      if (aligned > start) munmap(raw, aligned - start);
      if (const size_t tail = start + kHugePageBytes - aligned; tail > 0)
        munmap(reinterpret_cast<void*>(aligned + size), tail);
      madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);  // advice only: its failure changes nothing
      return reinterpret_cast<T*>(aligned);
    }
#endif
    return static_cast<T*>(::operator new(bytes));
  }
  void deallocate(T* p, size_t n) {
    const size_t bytes = n * sizeof(T);
#if defined(__linux__)
    if (bytes >= kHugePageBytes) {
      munmap(p, Rounded(bytes));
      return;
    }
#endif
    ::operator delete(p);
  }
  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const { return true; }
  template <typename U>
  bool operator!=(const HugePageAllocator<U>&) const { return false; }

 private:
  static size_t Rounded(size_t bytes) { return (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes; }
};

}  // namespace dt
