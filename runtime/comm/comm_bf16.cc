#include <vector>

#include "runtime/comm/comm.h"
#include "runtime/tensor/allocator.h"
#include "runtime/tensor/bf16.h"

namespace dt::rt {

// The widening defaults: plain (untracked) fp32 scratch, used by the
// in-process test comm; MpiComm overrides all three.
void Comm::AllReduceBf16(uint16_t* buf, size_t n) {
  DeviceSynchronize();  // host buffers: kernels that wrote them must have run
  std::vector<float> f(n);
  WidenFromBf16(buf, f.data(), static_cast<int64_t>(n));
  AllReduce(f.data(), n);
  NarrowToBf16(f.data(), buf, static_cast<int64_t>(n));
}

void Comm::ReduceScatterBf16(const uint16_t* in, uint16_t* out, size_t n) {
  DeviceSynchronize();  // host buffers: kernels that wrote them must have run
  const size_t total = n * static_cast<size_t>(size());
  std::vector<float> f(total), part(n);
  WidenFromBf16(in, f.data(), static_cast<int64_t>(total));
  ReduceScatter(f.data(), part.data(), n);
  NarrowToBf16(part.data(), out, static_cast<int64_t>(n));
}

void Comm::AllGatherBf16(const uint16_t* in, uint16_t* out, size_t n) {
  DeviceSynchronize();  // host buffers: kernels that wrote them must have run
  const size_t total = n * static_cast<size_t>(size());
  std::vector<float> f(n), all(total);
  WidenFromBf16(in, f.data(), static_cast<int64_t>(n));
  AllGather(f.data(), all.data(), n);
  NarrowToBf16(all.data(), out, static_cast<int64_t>(total));
}

}  // namespace dt::rt
