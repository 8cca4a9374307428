#include "planner/cost/flops.h"

#include <gtest/gtest.h>

#include "tests/planner/test_models.h"

namespace dt {
namespace {

using testing_models::Gpt;

PlanSpec Plan(const ModelSpec& m, int dp, int tp, int pp, int cp, int mbs, int nmb) {
  PlanSpec p;
  p.dp = dp;
  p.tp = tp;
  p.pp = pp;
  p.cp = cp;
  p.micro_batch = mbs;
  p.num_microbatches = nmb;
  p.seq_length = m.seq_length;
  p.sequence_parallel = tp > 1;
  p.layers_per_chunk = EvenSplit(m.num_layers, pp);
  return p;
}

void ExpectMatchesEq3(const ModelSpec& m, PlanSpec p) {
  const int64_t B = p.global_batch();
  p.recompute = Recompute::kFull;
  const double with_rc = StepFlops(m, p, true);
  const double eq3_rc = NarayananEq3Flops(m, B, p.seq_length, true);
  EXPECT_NEAR(with_rc / eq3_rc, 1.0, 0.01);
  const double without = StepFlops(m, p, false);
  const double eq3 = NarayananEq3Flops(m, B, p.seq_length, false);
  EXPECT_NEAR(without / eq3, 1.0, 0.01);
  // With FFN = 4h, MHA and vocab % tp == 0 the op lists reproduce Eq. 3
  // exactly (docs/flops.md): biases and elementwise ops carry no flops.
  EXPECT_NEAR(with_rc / eq3_rc, 1.0, 1e-12);
  EXPECT_NEAR(without / eq3, 1.0, 1e-12);
}

TEST(Flops, Gpt7BMatchesNarayananEq3) {
  const ModelSpec m = Gpt(4096, 32, 36);
  ExpectMatchesEq3(m, Plan(m, 4, 8, 4, 1, 1, 16));
  ExpectMatchesEq3(m, Plan(m, 2, 2, 3, 2, 2, 8));
}

TEST(Flops, Gpt175BMatchesNarayananEq3) {
  const ModelSpec m = Gpt(12288, 96, 96);
  ExpectMatchesEq3(m, Plan(m, 8, 8, 12, 1, 1, 192));
  ExpectMatchesEq3(m, Plan(m, 1, 8, 8, 1, 1, 64));
}

TEST(Flops, Eq3ClosedFormHandValues) {
  // 175B, B = 1536, s = 2048: Eq. 3 evaluated by hand
  // 96*1536*2048*96*12288^2 * (1 + 2048/73728 + 51200/18874368).
  const ModelSpec m = Gpt(12288, 96, 96);
  const double base = 96.0 * 1536 * 2048 * 96 * 12288.0 * 12288.0;
  EXPECT_DOUBLE_EQ(NarayananEq3Flops(m, 1536, 2048, true),
                   base * (1 + 2048.0 / 73728 + 51200.0 / 18874368));
  // No recompute: 3 passes over the layers instead of 4, LM head unchanged:
  // F_rc - F_norc = one forward of the layers = 24 B s l h^2 (1 + s/(6h)).
  const double diff = NarayananEq3Flops(m, 1536, 2048, true) - NarayananEq3Flops(m, 1536, 2048, false);
  EXPECT_NEAR(diff / (24.0 * 1536 * 2048 * 96 * 12288.0 * 12288.0 * (1 + 2048.0 / 73728)), 1.0, 1e-12);
}

// Megatron-LM's causal count halves the attention core and nothing else:
// model minus causal FLOPs = half of the core's 3 passes (QK^T and AV,
// 2 x 2 B s^2 h forward, twice that backward) over the l layers.
TEST(Flops, CausalCountHalvesOnlyTheAttentionCore) {
  const ModelSpec m = Gpt(4096, 32, 36);
  for (const PlanSpec& p : {Plan(m, 4, 8, 4, 1, 1, 16), Plan(m, 2, 2, 3, 2, 2, 8)}) {
    const double B = static_cast<double>(p.global_batch()), s = p.seq_length;
    const double core = 3.0 * 4.0 * B * s * s * m.hidden * m.num_layers;
    EXPECT_NEAR((StepFlops(m, p, false) - StepFlops(m, p, false, true)) / (0.5 * core), 1.0, 1e-12);
    PlanSpec rc = p;
    rc.recompute = Recompute::kFull;  // the recompute forward's core is halved too: 4 passes
    EXPECT_NEAR((StepFlops(m, rc, true) - StepFlops(m, rc, true, true)) / (0.5 * core * 4.0 / 3.0), 1.0, 1e-12);
  }
}

TEST(Flops, InvariantToThePlanAtFixedGlobalBatch) {
  const ModelSpec m = Gpt(4096, 32, 36);
  const double a = StepFlops(m, Plan(m, 8, 1, 1, 1, 4, 4), false);
  const double b = StepFlops(m, Plan(m, 1, 4, 4, 2, 1, 128), false);
  EXPECT_NEAR(a / b, 1.0, 1e-12);
}

TEST(Flops, FfnGapAndSelectiveRecompute) {
  // Eq. 3 assumes FFN = 4h: a wider FFN adds flops Eq. 3 cannot see.
  ModelSpec m = Gpt(4096, 32, 36);
  m.ffn_hidden = 5 * 4096;
  PlanSpec p = Plan(m, 1, 4, 2, 1, 1, 8);
  EXPECT_GT(StepFlops(m, p, false), 1.05 * NarayananEq3Flops(m, p.global_batch(), 2048, false));
  // Selective recompute costs only the attention core again.
  p.recompute = Recompute::kSelective;
  const double none = StepFlops(m, p, false), sel = StepFlops(m, p, true);
  const double attn = 4.0 * p.global_batch() * 2048.0 * 2048.0 * 4096 * 36;  // one attention-core forward
  EXPECT_NEAR((sel - none) / attn, 1.0, 1e-12);
}

}  // namespace
}  // namespace dt
