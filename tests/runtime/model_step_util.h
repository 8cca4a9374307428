// Helpers shared by the runtime's model tests (model_test.cc,
// llama_model_test.cc): a two-layer plan of 1..2 pipeline chunks, a seeded
// random batch, and one forward + backward of a model chunk. Header-only.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "planner/spec/model_spec.h"
#include "planner/spec/plan_spec.h"
#include "runtime/model/model_chunk.h"

namespace dt::rt::testing_util {

// Two layers over `chunks` pipeline chunks, microbatch 2 of 8 tokens.
inline PlanSpec TinyPlan(int chunks = 1, Recompute rc = Recompute::kNone) {
  PlanSpec p;
  p.pp = chunks;
  p.micro_batch = 2;
  p.num_microbatches = 1;
  p.seq_length = 8;
  p.recompute = rc;
  p.layers_per_chunk = EvenSplit(2, chunks);
  return p;
}

struct Batch {
  std::vector<int32_t> tokens, targets;
};

// One microbatch of uniformly random token ids and targets from `seed`.
inline Batch MakeBatch(const ModelSpec& m, const PlanSpec& p, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int32_t> d(0, m.vocab - 1);
  Batch b;
  for (int i = 0; i < p.micro_batch * p.seq_length; ++i) {
    b.tokens.push_back(d(g));
    b.targets.push_back(d(g));
  }
  return b;
}

// Forward + backward of microbatch 0 on a 1-chunk model; returns the loss
// (the gradients are left in the chunk's store).
inline float RunStep(ModelChunk& c, const Batch& b, float scale = 1.0f) {
  float loss = 0;
  c.Forward(0, nullptr, b.tokens.data(), b.targets.data(), &loss);
  c.Backward(0, nullptr, scale);
  return loss;
}

}  // namespace dt::rt::testing_util
