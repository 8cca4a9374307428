#include "runtime/model/tp_ops.h"

#include <cstring>

namespace dt::rt {

void TpAllReduce(Comm* tp, float* buf, int64_t n) {
  if (HasTp(tp)) tp->AllReduce(buf, static_cast<size_t>(n), ReduceOp::kSum);
}

void SpAllGather(Comm* tp, const float* in, int64_t local_rows, int64_t hidden, float* out) {
  const size_t n = static_cast<size_t>(local_rows * hidden);
  if (HasTp(tp)) {
    tp->AllGather(in, out, n);
  } else if (out != in) {
    std::memcpy(out, in, n * sizeof(float));
  }
}

void SpReduceScatter(Comm* tp, const float* in, int64_t local_rows, int64_t hidden, float* out) {
  const size_t n = static_cast<size_t>(local_rows * hidden);
  if (HasTp(tp)) {
    tp->ReduceScatter(in, out, n);
  } else if (out != in) {
    std::memcpy(out, in, n * sizeof(float));
  }
}

}  // namespace dt::rt
