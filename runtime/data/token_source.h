// TokenSource: where training tokens come from. A source maps a global sample
// index to a sequence of token ids, deterministically: the tokens of sample g
// depend only on (seed, g, len), never on which rank asks or in what order,
// so every plan (any DP size) sees the same global batch.
//
// Implementations:
//   MarkovSource   synthetic first-order Markov chain with a KNOWN entropy
//                  rate (markov_source.h): the loss floor a model can reach.
//   FileTokenSource text file (bytes, vocab 256) or binary uint16 ids
//                  (file_source.h), validated on open.
// Sources are immutable after construction; Sample is thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace dt::rt {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  virtual int vocab() const = 0;
  // Tokens available (-1: unbounded). Sample needs len <= num_tokens().
  virtual int64_t num_tokens() const = 0;
  // Writes `len` ids of global sample `global_sample` into out[0..len).
  virtual void Sample(uint64_t seed, int64_t global_sample, int64_t len, int32_t* out) const = 0;
  virtual std::string Describe() const = 0;
};

}  // namespace dt::rt
