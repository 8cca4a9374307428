#include "runtime/data/markov_source.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "base/mix64.h"

namespace dt::rt {

namespace {
// Uniform double in [0, 1) from a SplitMix64 stream.
double Uniform(uint64_t* state) {
  *state += 0x9e3779b97f4a7c15ULL;
  return static_cast<double>(SplitMix64(*state) >> 11) * (1.0 / 9007199254740992.0);
}
}  // namespace

StatusOr<MarkovSource> MarkovSource::Create(const MarkovOptions& o) {
  if (o.vocab < 2) return InvalidArgument("markov source: vocab must be >= 2, got " + std::to_string(o.vocab));
  if (o.branching < 1 || o.branching > o.vocab)
    return InvalidArgument("markov source: branching must be in [1, vocab], got " + std::to_string(o.branching));
  if (!(o.mix > 0.0 && o.mix <= 1.0))
    return InvalidArgument("markov source: mix must be in (0, 1] so the chain is ergodic");
  MarkovSource s(o);
  const int V = o.vocab, K = o.branching;
  uint64_t st = SplitMix64(o.matrix_seed);
  s.succ_.resize(static_cast<size_t>(V) * K);
  s.cum_w_.resize(static_cast<size_t>(V) * K);
  for (int i = 0; i < V; ++i) {
    int* row = &s.succ_[static_cast<size_t>(i) * K];
    for (int k = 0; k < K; ++k) {
      int j;
      do {
        j = static_cast<int>(Uniform(&st) * V);
      } while (std::find(row, row + k, j) != row + k);
      row[k] = j;
    }
    double* cw = &s.cum_w_[static_cast<size_t>(i) * K];
    double total = 0.0;
    for (int k = 0; k < K; ++k) total += cw[k] = 0.1 + Uniform(&st);
    double acc = 0.0;
    for (int k = 0; k < K; ++k) cw[k] = (acc += cw[k] / total);
    cw[K - 1] = 1.0;
  }
  // Stationary distribution: pi' = mix/V + (1-mix) * sum_i pi_i w_ij.
  std::vector<double> pi(V, 1.0 / V), next(V);
  for (int it = 0; it < 100000; ++it) {
    std::fill(next.begin(), next.end(), o.mix / V);
    for (int i = 0; i < V; ++i) {
      double prev = 0.0;
      for (int k = 0; k < K; ++k) {
        double w = s.cum_w_[static_cast<size_t>(i) * K + k] - prev;
        prev = s.cum_w_[static_cast<size_t>(i) * K + k];
        next[s.succ_[static_cast<size_t>(i) * K + k]] += (1.0 - o.mix) * pi[i] * w;
      }
    }
    double diff = 0.0;
    for (int j = 0; j < V; ++j) diff += std::fabs(next[j] - pi[j]);
    pi.swap(next);
    if (diff < 1e-14) break;
  }
  s.pi_ = pi;
  s.cum_pi_.resize(V);
  double acc = 0.0;
  for (int j = 0; j < V; ++j) s.cum_pi_[j] = (acc += pi[j]);
  s.cum_pi_[V - 1] = 1.0;
  // Entropy rate.
  double h = 0.0;
  const double base = o.mix / V;
  for (int i = 0; i < V; ++i) {
    double row = 0.0, prev = 0.0;
    for (int k = 0; k < K; ++k) {
      double w = s.cum_w_[static_cast<size_t>(i) * K + k] - prev;
      prev = s.cum_w_[static_cast<size_t>(i) * K + k];
      double p = base + (1.0 - o.mix) * w;
      row -= p * std::log(p);
    }
    row -= (V - K) * base * std::log(base);
    h += pi[i] * row;
  }
  s.entropy_rate_ = h;
  return s;
}

double MarkovSource::Prob(int from, int to) const {
  const int K = opts_.branching;
  double p = opts_.mix / opts_.vocab, prev = 0.0;
  for (int k = 0; k < K; ++k) {
    double c = cum_w_[static_cast<size_t>(from) * K + k];
    if (succ_[static_cast<size_t>(from) * K + k] == to) p += (1.0 - opts_.mix) * (c - prev);
    prev = c;
  }
  return p;
}

int MarkovSource::Next(int from, uint64_t* state) const {
  const int K = opts_.branching;
  if (Uniform(state) < opts_.mix) return std::min(opts_.vocab - 1, static_cast<int>(Uniform(state) * opts_.vocab));
  const double u = Uniform(state);
  const double* cw = &cum_w_[static_cast<size_t>(from) * K];
  int k = static_cast<int>(std::upper_bound(cw, cw + K, u) - cw);
  return succ_[static_cast<size_t>(from) * K + std::min(k, K - 1)];
}

void MarkovSource::Sample(uint64_t seed, int64_t global_sample, int64_t len, int32_t* out) const {
  if (len <= 0) return;
  uint64_t state = SplitMix64(seed ^ SplitMix64(static_cast<uint64_t>(global_sample) + 0x51ed27ULL));
  const double u = Uniform(&state);
  int x = static_cast<int>(std::upper_bound(cum_pi_.begin(), cum_pi_.end(), u) - cum_pi_.begin());
  x = std::min(x, opts_.vocab - 1);
  out[0] = x;
  for (int64_t t = 1; t < len; ++t) out[t] = x = Next(x, &state);
}

std::string MarkovSource::Describe() const {
  std::ostringstream os;
  os << "markov(vocab=" << opts_.vocab << ", branching=" << opts_.branching << ", mix=" << opts_.mix
     << ", entropy=" << entropy_rate_ << " nats/token)";
  return os.str();
}

}  // namespace dt::rt
