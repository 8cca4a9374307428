// DataLoader: this DP rank's slice of each step's global batch.
//
// A step's global batch is dp * micro_batch * num_microbatches samples of
// seq_length + 1 tokens (inputs are tokens [0, L), targets [1, L]). DP rank r
// takes samples [r * B, (r + 1) * B), B = micro_batch * num_microbatches, in
// microbatch order. Sample i of step t is global sample t * global_batch + i
// of the source, a function of (seed, t, i) only: DP=2 and DP=1 see the same
// global batch, and tokens per step are fixed by the plan's global batch.
// CP ranks of one DP rank read the same samples and split the sequence.
// position() is the next step to read (saved in checkpoints); Microbatch
// reads at an explicit step and is const (thread-safe).
#pragma once

#include <memory>
#include <vector>

#include "base/status.h"
#include "planner/spec/plan_spec.h"
#include "runtime/data/token_source.h"

namespace dt::rt {

struct BatchShape {
  int64_t micro_batch = 1;
  int64_t num_microbatches = 1;
  int64_t seq_length = 1;
  int dp_size = 1;
  int dp_rank = 0;
  uint64_t seed = 0;
  int64_t global_batch() const { return dp_size * micro_batch * num_microbatches; }
};

// The batch shape a plan's rank at data-parallel coordinate dp_rank reads.
inline BatchShape BatchShapeFor(const PlanSpec& p, int dp_rank, uint64_t seed) {
  BatchShape s;
  s.micro_batch = p.micro_batch;
  s.num_microbatches = p.num_microbatches;
  s.seq_length = p.seq_length;
  s.dp_size = p.dp;
  s.dp_rank = dp_rank;
  s.seed = seed;
  return s;
}

class DataLoader {
 public:
  // Fails when the source is shorter than seq_length + 1 tokens or the shape
  // is not positive.
  static StatusOr<DataLoader> Create(std::shared_ptr<const TokenSource> source, const BatchShape& shape);

  // inputs/targets get micro_batch * seq_length ids, row-major [micro_batch, seq_length].
  void Microbatch(int64_t step, int64_t microbatch, std::vector<int32_t>* inputs,
                  std::vector<int32_t>* targets) const;
  int64_t GlobalSampleIndex(int64_t step, int64_t microbatch, int64_t row) const;

  int64_t position() const { return position_; }
  void set_position(int64_t step) { position_ = step; }
  void Advance() { ++position_; }
  const BatchShape& shape() const { return shape_; }
  const TokenSource& source() const { return *source_; }

 private:
  DataLoader(std::shared_ptr<const TokenSource> s, const BatchShape& b) : source_(std::move(s)), shape_(b) {}
  std::shared_ptr<const TokenSource> source_;
  BatchShape shape_;
  int64_t position_ = 0;
};

}  // namespace dt::rt
