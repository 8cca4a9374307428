#include "runtime/data/data_loader.h"

#include <algorithm>

#include "base/check.h"

namespace dt::rt {

StatusOr<DataLoader> DataLoader::Create(std::shared_ptr<const TokenSource> source, const BatchShape& b) {
  if (!source) return InvalidArgument("data loader: no token source");
  if (b.micro_batch < 1 || b.num_microbatches < 1 || b.seq_length < 1 || b.dp_size < 1 ||
      b.dp_rank < 0 || b.dp_rank >= b.dp_size)
    return InvalidArgument("data loader: micro_batch, num_microbatches, seq_length, dp_size must be >= 1 "
                           "and 0 <= dp_rank < dp_size");
  if (source->num_tokens() >= 0 && source->num_tokens() < b.seq_length + 1)
    return InvalidArgument(source->Describe() + " has fewer than seq_length + 1 = " +
                           std::to_string(b.seq_length + 1) + " tokens; use a longer file or shorter sequences");
  return DataLoader(std::move(source), b);
}

int64_t DataLoader::GlobalSampleIndex(int64_t step, int64_t microbatch, int64_t row) const {
  const int64_t per_rank = shape_.micro_batch * shape_.num_microbatches;
  return step * shape_.global_batch() + shape_.dp_rank * per_rank + microbatch * shape_.micro_batch + row;
}

void DataLoader::Microbatch(int64_t step, int64_t microbatch, std::vector<int32_t>* inputs,
                            std::vector<int32_t>* targets) const {
  DT_CHECK(microbatch >= 0 && microbatch < shape_.num_microbatches) << "microbatch " << microbatch;
  const int64_t L = shape_.seq_length;
  inputs->resize(static_cast<size_t>(shape_.micro_batch * L));
  targets->resize(static_cast<size_t>(shape_.micro_batch * L));
  std::vector<int32_t> buf(static_cast<size_t>(L + 1));
  for (int64_t j = 0; j < shape_.micro_batch; ++j) {
    source_->Sample(shape_.seed, GlobalSampleIndex(step, microbatch, j), L + 1, buf.data());
    std::copy(buf.begin(), buf.begin() + L, inputs->begin() + j * L);
    std::copy(buf.begin() + 1, buf.end(), targets->begin() + j * L);
  }
}

}  // namespace dt::rt
