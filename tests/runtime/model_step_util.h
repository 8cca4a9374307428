// Helpers shared by the runtime's model tests (model_test.cc,
// llama_model_test.cc): a two-layer plan of 1..2 pipeline chunks, a seeded
// random batch, one forward + backward of a model chunk, and a
// finite-difference check of its gradients. Header-only.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
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

// Sets every parameter to N(0, 0.3), plus 1 for the norm weights (names
// containing `norm_key` and "weight"): larger than at init, so every
// gradient is well above fp32 noise.
inline void SpreadParams(ParamStore& ps, const std::string& norm_key) {
  std::mt19937 g(5);
  std::normal_distribution<float> d(0.0f, 0.3f);
  for (size_t i = 0; i < ps.params().size(); ++i) {
    const std::string& n = ps.params()[i].name;
    const bool norm_w = n.find(norm_key) != std::string::npos && n.find("weight") != std::string::npos;
    for (int64_t k = 0; k < ps.params()[i].numel; ++k) ps.value(i)[k] = (norm_w ? 1.0f : 0.0f) + d(g);
  }
}

// Central differences (step 1e-2) of loss_at() against `grads` (the
// store's gradients of that loss) at the elements `at(numel)` of every
// parameter but those `skip(name, k)` names; returns how many were checked.
inline int ExpectFiniteDifferences(ParamStore& ps, const std::vector<float>& grads,
                                   const std::function<double()>& loss_at,
                                   const std::function<std::vector<int64_t>(int64_t)>& at,
                                   const std::function<bool(const std::string&, int64_t)>& skip = nullptr) {
  int checked = 0;
  for (size_t i = 0; i < ps.params().size(); ++i) {
    const Param& prm = ps.params()[i];
    for (int64_t k : at(prm.numel)) {
      if (skip && skip(prm.name, k)) continue;
      float* v = ps.value(i) + k;
      const float orig = *v;
      const float eps = 1e-2f;
      *v = orig + eps;
      const double lp = loss_at();
      *v = orig - eps;
      const double lm = loss_at();
      *v = orig;
      const double numeric = (lp - lm) / (2 * eps);
      EXPECT_NEAR(grads[prm.offset + k], numeric, 2e-3 + 3e-2 * std::fabs(numeric)) << prm.name << "[" << k << "]";
      ++checked;
    }
  }
  return checked;
}

}  // namespace dt::rt::testing_util
