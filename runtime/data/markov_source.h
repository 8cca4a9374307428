// MarkovSource: a synthetic token stream with an analytically known entropy
// rate, so a training run can be judged against the best achievable loss.
//
// The chain over vocab V: from token i, with probability `mix` the next
// token is uniform over V; otherwise it is one of `branching` distinct
// successors S_i with weights w_ij (fixed by matrix_seed). So
//   P_ij = mix/V + (1-mix) w_ij   (j in S_i),   P_ij = mix/V otherwise,
// which makes the chain irreducible and aperiodic (mix > 0). Its stationary
// distribution pi is computed by power iteration and the entropy rate is
//   H = sum_i pi_i * ( -sum_j P_ij ln P_ij )  nats/token,
// the expected next-token cross-entropy of the true model — the loss floor.
// Each sample starts from a pi-distributed token, so every position of every
// sample has the stationary marginal. Immutable; thread-safe.
#pragma once

#include <vector>

#include "base/status.h"
#include "runtime/data/token_source.h"

namespace dt::rt {

struct MarkovOptions {
  int vocab = 256;
  int branching = 4;       // successors per token (besides the uniform mix)
  double mix = 0.05;       // probability of a uniform jump, in (0, 1]
  uint64_t matrix_seed = 1234;
};

class MarkovSource : public TokenSource {
 public:
  // Fails on vocab < 2, branching outside [1, vocab], mix outside (0, 1].
  static StatusOr<MarkovSource> Create(const MarkovOptions& opts);

  int vocab() const override { return opts_.vocab; }
  int64_t num_tokens() const override { return -1; }
  void Sample(uint64_t seed, int64_t global_sample, int64_t len, int32_t* out) const override;
  std::string Describe() const override;

  double EntropyRateNats() const { return entropy_rate_; }
  double Prob(int from, int to) const;  // P_ij
  const std::vector<double>& stationary() const { return pi_; }

 private:
  explicit MarkovSource(const MarkovOptions& o) : opts_(o) {}
  int Next(int from, uint64_t* state) const;
  MarkovOptions opts_;
  std::vector<int> succ_;        // V * branching successor ids
  std::vector<double> cum_w_;    // V * branching cumulative weights (row ends at 1)
  std::vector<double> pi_, cum_pi_;
  double entropy_rate_ = 0.0;
};

}  // namespace dt::rt
