#include <gtest/gtest.h>

#include "tests/planner/test_models.h"

#include "planner/memory/activation_memory.h"
#include "planner/memory/memory_params.h"
#include "planner/memory/param_count.h"
#include "planner/memory/stage_memory.h"
#include "planner/schedule/in_flight.h"

namespace dt {
namespace {

using testing_models::Gpt;

using testing_models::Llama8B;

PlanSpec Plan(const ModelSpec& m, int tp, int b, bool sp, Recompute rc) {
  PlanSpec p;
  p.tp = tp;
  p.micro_batch = b;
  p.seq_length = m.seq_length;
  p.sequence_parallel = sp;
  p.recompute = rc;
  p.flash_attention = false;  // Korthikanti et al. analyse the unfused attention core
  p.layers_per_chunk = {m.num_layers};
  return p;
}

// Korthikanti et al. 2022, Table 2, evaluated by hand for their 22B
// (h=6144, a=64, s=2048, b=4, t=8) and 175B (h=12288, a=96, s=2048, b=1,
// t=8) configurations (Table 3). Bytes per layer per GPU, 16-bit.
struct Row {
  bool sp;
  Recompute rc;
  int tp;
  double bytes_22b, bytes_175b;
};

TEST(ActivationMemory, KorthikantiTable2For22BAnd175B) {
  const ModelSpec m22 = Gpt(6144, 64, 48), m175 = Gpt(12288, 96, 96);
  const Row rows[] = {
      {false, Recompute::kNone, 1, 7079985152.0, 2868903936.0},   // sbh(34 + 5as/h)
      {false, Recompute::kNone, 8, 1325400064.0, 578813952.0},    // sbh(10 + 24/t + 5as/(ht))
      {true, Recompute::kNone, 8, 884998144.0, 358612992.0},      // sbh/t (34 + 5as/h)
      {false, Recompute::kSelective, 8, 654311424.0, 327155712.0},  // sbh(10 + 24/t)
      {true, Recompute::kSelective, 8, 213909504.0, 106954752.0},   // 34 sbh/t
      {false, Recompute::kFull, 8, 100663296.0, 50331648.0},        // 2 sbh
  };
  for (const Row& r : rows) {
    EXPECT_DOUBLE_EQ(ActivationBytesPerLayer(m22, Plan(m22, r.tp, 4, r.sp, r.rc), 2), r.bytes_22b);
    EXPECT_DOUBLE_EQ(ActivationBytesPerLayer(m175, Plan(m175, r.tp, 1, r.sp, r.rc), 2), r.bytes_175b);
  }
  // Full recompute under SP keeps the sequence shard of the input: 2sbh/t.
  EXPECT_DOUBLE_EQ(ActivationBytesPerLayer(m175, Plan(m175, 8, 1, true, Recompute::kFull), 2),
                   6291456.0);
}

TEST(ActivationMemory, OrderingsAndScaling) {
  for (const ModelSpec& m : {Gpt(6144, 64, 48), Llama8B()}) {
    for (int tp : {2, 4, 8}) {
      for (bool sp : {false, true}) {
        const double none = ActivationBytesPerLayer(m, Plan(m, tp, 2, sp, Recompute::kNone), 2);
        const double sel = ActivationBytesPerLayer(m, Plan(m, tp, 2, sp, Recompute::kSelective), 2);
        const double full = ActivationBytesPerLayer(m, Plan(m, tp, 2, sp, Recompute::kFull), 2);
        EXPECT_LT(sel, none);
        EXPECT_LT(full, sel);
        if (sp) {
          const double nosp = ActivationBytesPerLayer(m, Plan(m, tp, 2, false, Recompute::kNone), 2);
          EXPECT_LT(none, nosp);
        }
      }
    }
    // fp32 stores every tensor at 4 bytes; 1-byte masks stay 1 byte.
    const PlanSpec p = Plan(m, 4, 1, true, Recompute::kSelective);
    const double b16 = ActivationBytesPerLayer(m, p, 2), b32 = ActivationBytesPerLayer(m, p, 4);
    if (m.family == ModelFamily::kLlama)
      EXPECT_DOUBLE_EQ(b32, 2 * b16);
    else
      EXPECT_LT(b32, 2 * b16);
  }
}

TEST(ActivationMemory, ContextParallelAndGqa) {
  const ModelSpec m = Llama8B();
  PlanSpec p = Plan(m, 2, 1, true, Recompute::kSelective);
  const double cp1 = ActivationBytesPerLayer(m, p, 2);
  p.cp = 4;
  // Linear terms: s -> s/cp; ring attention (unfused) adds the fp32
  // log-sum-exp per local query row and head.
  const double lse = 4.0 * p.micro_batch * (m.heads / p.tp) * (p.seq_length / 4);
  EXPECT_DOUBLE_EQ(ActivationBytesPerLayer(m, p, 2), cp1 / 4 + lse);
  p.recompute = Recompute::kNone;
  const double none_cp4 = ActivationBytesPerLayer(m, p, 2);
  p.cp = 1;
  // The score term is (s/cp) x s: it also shrinks by cp, not cp^2.
  EXPECT_DOUBLE_EQ((none_cp4 - lse) * 4, ActivationBytesPerLayer(m, p, 2));
  // GQA: under fused attention Llama-8B's K/V (8 heads) are 4x smaller
  // than an MHA variant's.
  ModelSpec mha = m;
  mha.kv_heads = 32;
  p.recompute = Recompute::kSelective;
  p.flash_attention = true;
  // K and V live in the TP region (8192 tokens): 2 tensors x (16 - 4) local heads.
  EXPECT_DOUBLE_EQ(ActivationBytesPerLayer(mha, p, 2) - ActivationBytesPerLayer(m, p, 2),
                   2.0 * 8192 * 128 * 2 * (16 - 4));
  // The unfused core stores K and V expanded to the query heads: no saving.
  p.flash_attention = false;
  EXPECT_DOUBLE_EQ(ActivationBytesPerLayer(mha, p, 2), ActivationBytesPerLayer(m, p, 2));
}

TEST(ParamCount, LayerShardsSumToTheModel) {
  for (const ModelSpec& m : {Gpt(4096, 32, 36), Llama8B()}) {
    const PlanSpec p1 = Plan(m, 1, 1, false, Recompute::kNone);
    EXPECT_EQ(LayerParamsPerRank(m, p1), m.LayerParams());
    EXPECT_EQ(StageParamsPerRank(m, p1, 0), m.TotalParams());
  }
}

TEST(StageMemory, MoreTensorParallelNeverRaisesWeights) {
  const ModelSpec m = Gpt(12288, 96, 96);
  const MemoryParams mp = MemoryParams::MixedPrecision(80e9);
  PlanSpec p = Plan(m, 1, 1, false, Recompute::kNone);
  p.pp = 8;
  p.layers_per_chunk = EvenSplit(96, 8);
  for (int stage : {0, 3, 7}) {
    double prev = 1e300;
    for (int tp : {1, 2, 4, 8}) {
      p.tp = tp;
      const double w = EstimateStageMemory(m, p, mp, stage, 1).weights;
      EXPECT_LE(w, prev) << "tp=" << tp << " stage=" << stage;
      prev = w;
    }
  }
}

TEST(StageMemory, ZeroStagesNeverRaiseMemory) {
  for (const ModelSpec& m : {Gpt(4096, 32, 36), Llama8B()}) {
    const MemoryParams mp = MemoryParams::MixedPrecision(80e9);
    PlanSpec p = Plan(m, 2, 1, true, Recompute::kSelective);
    p.dp = 8;
    p.pp = 4;
    p.layers_per_chunk = EvenSplit(m.num_layers, 4);
    for (int stage = 0; stage < 4; ++stage) {
      double prev = 1e300;
      for (int z = 0; z <= 3; ++z) {
        p.zero_stage = z;
        const StageMemory s = EstimateStageMemory(m, p, mp, stage, 4 - stage);
        EXPECT_LE(s.total, prev) << "zero=" << z << " stage=" << stage;
        prev = s.total;
      }
    }
    // Stage 1 shards exactly the optimizer states over dp*cp.
    p.zero_stage = 0;
    const StageMemory z0 = EstimateStageMemory(m, p, mp, 1, 3);
    p.zero_stage = 1;
    EXPECT_DOUBLE_EQ(EstimateStageMemory(m, p, mp, 1, 3).optimizer * 8, z0.optimizer);
  }
}

TEST(StageMemory, ModelStatesFollowZeroPaperBytesPerParameter) {
  // Rajbhandari et al. 2020: (2 + 2 + K) Psi bytes with K = 12, no sharding.
  const ModelSpec m = Gpt(4096, 32, 36);
  const PlanSpec p = Plan(m, 1, 1, false, Recompute::kNone);
  const StageMemory s = EstimateStageMemory(m, p, MemoryParams::MixedPrecision(80e9), 0, 1);
  const double psi = static_cast<double>(m.TotalParams());
  EXPECT_DOUBLE_EQ(s.weights + s.gradients + s.optimizer, 16 * psi);
  const StageMemory f = EstimateStageMemory(m, p, MemoryParams::Fp32(80e9), 0, 1);
  EXPECT_DOUBLE_EQ(f.weights + f.gradients + f.optimizer, 16 * psi);  // 4 + 4 + 8
}

// The allocator's slack is charged on what is freed and allocated again
// every microbatch (activations, temporaries), not on the model states,
// which are allocated once: more gradient bytes raise the total by exactly
// those bytes, more activations by (1 + fragmentation) times them.
TEST(StageMemory, FragmentationOnlyOnActivationsAndTemporaries) {
  const ModelSpec m = Gpt(4096, 32, 36);
  MemoryParams mp = MemoryParams::MixedPrecision(80e9);
  mp.fragmentation = 0.25;
  PlanSpec p = Plan(m, 2, 2, true, Recompute::kNone);
  p.dp = 4;
  p.zero_stage = 1;
  const StageMemory s = EstimateStageMemory(m, p, mp, 0, 1);
  EXPECT_DOUBLE_EQ(s.total, s.weights + s.gradients + s.optimizer + 1.25 * (s.activations + s.temporary) + s.reserved);
  MemoryParams mp4 = mp;
  mp4.grad_bytes = 4;
  const StageMemory g = EstimateStageMemory(m, p, mp4, 0, 1);
  EXPECT_DOUBLE_EQ(g.gradients, 2 * s.gradients);
  EXPECT_NEAR(g.total - s.total, s.gradients + 1.25 * (g.temporary - s.temporary), 1.0);
  p.micro_batch = 4;
  const StageMemory a = EstimateStageMemory(m, p, mp, 0, 1);
  EXPECT_DOUBLE_EQ(a.weights + a.gradients + a.optimizer, s.weights + s.gradients + s.optimizer);
  EXPECT_NEAR(a.total - s.total, 1.25 * (a.activations + a.temporary - s.activations - s.temporary), 1.0);
}

TEST(StageMemory, ActivationsScaleWithInFlightAndRecompute) {
  const ModelSpec m = Gpt(12288, 96, 96);
  const MemoryParams mp = MemoryParams::MixedPrecision(80e9);
  PlanSpec p = Plan(m, 8, 1, true, Recompute::kNone);
  p.pp = 8;
  p.layers_per_chunk = EvenSplit(96, 8);
  const double per_layer = ActivationBytesPerLayer(m, p, 2);
  const double a1 = EstimateStageMemory(m, p, mp, 3, 1).activations;
  const double a5 = EstimateStageMemory(m, p, mp, 3, 5).activations;
  EXPECT_DOUBLE_EQ(a5 - a1, 4 * 12 * per_layer);
  double prev = 1e300;
  for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    p.recompute = rc;
    const StageMemory s = EstimateStageMemory(m, p, mp, 0, 8);
    EXPECT_LT(s.activations, prev);
    prev = s.activations;
    EXPECT_GT(s.total, s.weights + s.gradients + s.optimizer + s.activations + s.temporary);
  }
  // The last stage holds fp32 logits: 4 b s V/t bytes.
  p.recompute = Recompute::kFull;
  const double last = EstimateStageMemory(m, p, mp, 7, 1).activations;
  const double mid = EstimateStageMemory(m, p, mp, 6, 1).activations;
  EXPECT_GT(last - mid, 4.0 * 2048 * 51200 / 8);
}

// Interleaved chunks of unequal size: the peak holds the rank's in-flight
// pairs of each chunk, not in_flight x the average chunk. gpt-tiny's plan
// pp 2 x vpp 2, m 4, layers 1,2,1,0 (measured under dtrun on 2026-11-27:
// stage 1 peaked at 8.6 MiB where the average-chunk count gave 5.5 MiB):
// rank 1 holds chunk 1 (2 layers) for three microbatches at its peak, six
// stored layers, where the average chunk (1 layer) x 3 in flight says three.
TEST(StageMemory, UnequalInterleavedChunksCountTheirOwnLayers) {
  const ModelSpec m = Gpt(1024, 16, 4);
  const MemoryParams mp = MemoryParams::MixedPrecision(80e9);
  PlanSpec p = Plan(m, 1, 4, false, Recompute::kNone);
  p.pp = 2;
  p.vpp = 2;
  p.schedule = Schedule::kInterleaved;
  p.num_microbatches = 4;
  p.layers_per_chunk = {1, 1, 1, 1};
  const double per_layer = ActivationBytesPerLayer(m, p, 2);
  const double even = EstimateStageMemory(m, p, mp, 1, InFlightMicrobatches(p, 1)).activations;
  p.layers_per_chunk = {1, 2, 1, 0};
  ASSERT_EQ(InFlightMicrobatches(p, 1), 3);
  const double uneven = EstimateStageMemory(m, p, mp, 1, InFlightMicrobatches(p, 1)).activations;
  // Even: 3 pairs x 1 layer; uneven: 3 pairs of the 2-layer chunk.
  EXPECT_NEAR(uneven - even, 3 * per_layer, 1e-6 * uneven);
}

TEST(StageMemory, TiedEmbeddingCopiedOntoLastStage) {
  ModelSpec m = Gpt(4096, 32, 36);
  PlanSpec p = Plan(m, 4, 1, false, Recompute::kNone);
  p.pp = 4;
  p.layers_per_chunk = EvenSplit(36, 4);
  const int64_t word = 51200 / 4 * 4096;
  EXPECT_EQ(StageParamsPerRank(m, p, 3) - StageParamsPerRank(m, p, 2), word + 2 * 4096);
  m.tied_embeddings = false;
  EXPECT_EQ(StageParamsPerRank(m, p, 3) - StageParamsPerRank(m, p, 2), word + 2 * 4096);
  p.pp = 1;
  p.layers_per_chunk = {36};
  m.tied_embeddings = true;
  const int64_t tied = StageParamsPerRank(m, p, 0);
  m.tied_embeddings = false;
  EXPECT_EQ(StageParamsPerRank(m, p, 0) - tied, word);
}

}  // namespace
}  // namespace dt

namespace dt {
namespace {

TEST(ActivationMemory, FlashAttentionDropsTheScoreMatrix) {
  json j = {{"family", "gpt"}, {"num_layers", 4}, {"hidden_size", 1024},
            {"num_attention_heads", 16}, {"vocab_size", 1000}, {"seq_length", 4096}};
  ModelSpec m = *ModelFromJson(j, "m");
  PlanSpec p;
  p.seq_length = 4096;
  p.layers_per_chunk = {4};
  p.flash_attention = false;
  const double unfused = ActivationBytesPerLayer(m, p, 2);
  p.flash_attention = true;
  const double flash = ActivationBytesPerLayer(m, p, 2);
  // The 5as/h term of Korthikanti et al. dominates at s = 4096: flash keeps
  // only a few bytes per (row, head) of it.
  EXPECT_LT(flash, 0.25 * unfused);
  p.recompute = Recompute::kSelective;
  p.flash_attention = false;
  EXPECT_NEAR(ActivationBytesPerLayer(m, p, 2), flash, 0.01 * flash);
}

// A fused core's backward works tile by tile: its temporaries grow with the
// tokens, not with the square of the sequence (the unfused core's dP, dS).
// Same tokens per microbatch (b x s), sequence 4x longer.
TEST(StageMemory, FlashBackwardHoldsNoScoreMatrix) {
  const ModelSpec m = Llama8B();
  const MemoryParams mp = MemoryParams::MixedPrecision(80e9);
  auto temporary = [&](bool flash, int b, int s) {
    PlanSpec p = Plan(m, 2, b, true, Recompute::kNone);
    p.flash_attention = flash;
    p.seq_length = s;
    p.pp = 2;  // the first stage: no LM head, whose logit gradients would set the peak
    p.layers_per_chunk = {16, 16};
    return EstimateStageMemory(m, p, mp, 0, 2).temporary;
  };
  EXPECT_NEAR(temporary(true, 1, 16384), temporary(true, 4, 4096), 0.01 * temporary(true, 4, 4096));
  EXPECT_GT(temporary(false, 1, 16384), 3 * temporary(false, 4, 4096));
  // 2 e b a_l s^2 bytes of dP and dS at s = 16384 (16 local heads): 17 GB.
  EXPECT_GT(temporary(false, 1, 16384) - temporary(true, 1, 16384), 0.9 * 2 * 2 * 16.0 * 16384 * 16384);
}

}  // namespace
}  // namespace dt

namespace dt {
namespace {

// Megatron's PyTorch softmax fallback (tp 8 over 16 heads, microbatch 1:
// 2 score rows per block, not a multiple of 4) keeps the fp32 softmax
// output beside the dropout's mask and output: 4 + 1 + 2 bytes per score
// instead of the fused kernel's 2 + 1 + 2. Only under Megatron's kernels
// (GPU memory params); dtrun's CPU kernels and shapes the fused kernel
// takes keep the fused count.
TEST(ActivationMemory, MegatronSoftmaxFallbackKeepsFp32Probabilities) {
  const ModelSpec m = Gpt(1024, 16, 4);
  PlanSpec p;
  p.tp = 8;
  p.micro_batch = 1;
  p.seq_length = m.seq_length;
  p.flash_attention = false;
  p.recompute = Recompute::kNone;
  p.layers_per_chunk = {m.num_layers};
  const double scores = 1.0 * 2 * m.seq_length * m.seq_length;
  EXPECT_DOUBLE_EQ(ActivationBytesPerLayer(m, p, 2, AttentionKernels::kMegatron) - ActivationBytesPerLayer(m, p, 2),
                   2 * scores);
  EXPECT_DOUBLE_EQ(AttentionScoreBytesPerLayer(m, p, 2, AttentionKernels::kMegatron), 7 * scores);
  MemoryParams gpu = MemoryParams::MixedPrecision(80e9);
  gpu.attention_kernels = AttentionKernels::kMegatron;
  const MemoryParams cpu = MemoryParams::MixedPrecision(80e9);
  const StageMemory with = EstimateStageMemory(m, p, gpu, 0, 1), without = EstimateStageMemory(m, p, cpu, 0, 1);
  EXPECT_GT(with.activations, without.activations);
  EXPECT_GE(with.temporary, without.temporary);  // the fallback's fp32 backward (when it is the largest)
  p.micro_batch = 2;  // 4 rows: the fused kernel takes it
  EXPECT_DOUBLE_EQ(ActivationBytesPerLayer(m, p, 2, AttentionKernels::kMegatron), ActivationBytesPerLayer(m, p, 2));
}

}  // namespace
}  // namespace dt
