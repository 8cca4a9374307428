#include "planner/cost/layer_ops.h"

#include <gtest/gtest.h>

#include "tests/planner/test_models.h"

#include <algorithm>
#include <string>
#include <vector>

namespace dt {
namespace {

using testing_models::Gpt;

using testing_models::Llama8B;

PlanSpec Plan(const ModelSpec& m, int tp, int cp, bool sp) {
  PlanSpec p;
  p.tp = tp;
  p.cp = cp;
  p.sequence_parallel = sp;
  p.micro_batch = 2;
  p.seq_length = m.seq_length;
  p.layers_per_chunk = {m.num_layers};
  return p;
}

int Count(const std::vector<Op>& ops, CollKind c, GroupKind g) {
  int n = 0;
  for (const Op& op : ops)
    if (op.kind == OpKind::kCollective && op.coll == c && op.group == g) ++n;
  return n;
}

double KindFlops(const std::vector<Op>& ops, OpKind k) {
  double f = 0;
  for (const Op& op : ops)
    if (op.kind == k) f += op.flops;
  return f;
}

TEST(LayerOps, GptForwardFlopsMatchMegatronCount) {
  // Per layer, whole model: 24 b s h^2 + 4 b s^2 h (Narayanan et al. SC21).
  const ModelSpec m = Gpt(4096, 32, 36);
  const PlanSpec p = Plan(m, 1, 1, false);
  const LayerOps ops = TransformerLayerOps(m, p, 2);
  const double b = 2, s = 2048, h = 4096;
  EXPECT_DOUBLE_EQ(SumFlops(ops.forward), 24 * b * s * h * h + 4 * b * s * s * h);
  EXPECT_DOUBLE_EQ(KindFlops(ops.forward, OpKind::kAttention), 4 * b * s * s * h);
}

TEST(LayerOps, TensorParallelSplitsFlopsEvenly) {
  const ModelSpec m = Gpt(4096, 32, 36);
  const double one = SumFlops(TransformerLayerOps(m, Plan(m, 1, 1, false), 2).forward);
  const double eight = SumFlops(TransformerLayerOps(m, Plan(m, 8, 1, false), 2).forward);
  EXPECT_DOUBLE_EQ(eight * 8, one);
}

TEST(LayerOps, BackwardIsTwiceForwardGemmsWithTransposedShapes) {
  for (const ModelSpec& m : {Gpt(4096, 32, 36), Llama8B()}) {
    const LayerOps ops = TransformerLayerOps(m, Plan(m, 4, 2, true), 2);
    EXPECT_DOUBLE_EQ(KindFlops(ops.backward, OpKind::kGemm), 2 * KindFlops(ops.forward, OpKind::kGemm));
    EXPECT_DOUBLE_EQ(KindFlops(ops.backward, OpKind::kAttention),
                     2 * KindFlops(ops.forward, OpKind::kAttention));
    const Op* qkv = nullptr;
    const Op* dgrad = nullptr;
    const Op* wgrad = nullptr;
    for (const Op& op : ops.forward)
      if (std::string(op.name) == "qkv") qkv = &op;
    for (const Op& op : ops.backward) {
      if (std::string(op.name) == "qkv_dgrad") dgrad = &op;
      if (std::string(op.name) == "qkv_wgrad") wgrad = &op;
    }
    ASSERT_TRUE(qkv && dgrad && wgrad);
    EXPECT_EQ(dgrad->m, qkv->m);  // dX[T,h] = dY[T,n] W^T
    EXPECT_EQ(dgrad->n, qkv->k);
    EXPECT_EQ(dgrad->k, qkv->n);
    EXPECT_EQ(wgrad->m, qkv->k);  // dW[h,n] = X^T dY
    EXPECT_EQ(wgrad->n, qkv->n);
    EXPECT_EQ(wgrad->k, qkv->m);
  }
}

TEST(LayerOps, TensorParallelCollectivesWithoutSp) {
  const ModelSpec m = Gpt(4096, 32, 36);
  const LayerOps ops = TransformerLayerOps(m, Plan(m, 8, 1, false), 2);
  EXPECT_EQ(Count(ops.forward, CollKind::kAllReduce, GroupKind::kTp), 2);
  EXPECT_EQ(Count(ops.backward, CollKind::kAllReduce, GroupKind::kTp), 2);
  EXPECT_EQ(Count(ops.forward, CollKind::kAllGather, GroupKind::kTp), 0);
  for (const Op& op : ops.forward)
    if (op.kind == OpKind::kCollective) {
      EXPECT_DOUBLE_EQ(op.bytes, 2.0 * 2 * 2048 * 4096);
    }
  // The all-reduce follows the row-parallel proj GEMM.
  for (size_t i = 0; i + 1 < ops.forward.size(); ++i)
    if (std::string(ops.forward[i].name) == "proj") {
      EXPECT_EQ(ops.forward[i + 1].coll, CollKind::kAllReduce);
    }
  const LayerOps none = TransformerLayerOps(m, Plan(m, 1, 1, false), 2);
  for (const Op& op : none.forward) EXPECT_NE(op.kind, OpKind::kCollective);
}

TEST(LayerOps, SequenceParallelUsesAllGatherAndReduceScatter) {
  const ModelSpec m = Gpt(4096, 32, 36);
  const LayerOps ops = TransformerLayerOps(m, Plan(m, 8, 1, true), 2);
  EXPECT_EQ(Count(ops.forward, CollKind::kAllReduce, GroupKind::kTp), 0);
  EXPECT_EQ(Count(ops.forward, CollKind::kAllGather, GroupKind::kTp), 2);
  EXPECT_EQ(Count(ops.forward, CollKind::kReduceScatter, GroupKind::kTp), 2);
  // Backward: gradient all-gathers, input re-gathers for wgrad, reduce-scatters.
  EXPECT_EQ(Count(ops.backward, CollKind::kAllGather, GroupKind::kTp), 4);
  EXPECT_EQ(Count(ops.backward, CollKind::kReduceScatter, GroupKind::kTp), 2);
  EXPECT_EQ(Count(ops.backward, CollKind::kAllReduce, GroupKind::kTp), 0);
  // The first op is the norm on the sequence shard: T/t tokens.
  const LayerOps nosp = TransformerLayerOps(m, Plan(m, 8, 1, false), 2);
  EXPECT_DOUBLE_EQ(ops.forward[0].bytes * 8, nosp.forward[0].bytes);
  EXPECT_EQ(std::string(ops.forward[1].name), "sp_allgather_attn");
}

TEST(LayerOps, ContextParallelRingAndFullKeyLength) {
  const ModelSpec m = Llama8B();
  const LayerOps ops = TransformerLayerOps(m, Plan(m, 2, 4, false), 2);
  EXPECT_EQ(Count(ops.forward, CollKind::kSendRecv, GroupKind::kCp), 3);
  EXPECT_EQ(Count(ops.backward, CollKind::kSendRecv, GroupKind::kCp), 3);
  for (const Op& op : ops.forward) {
    if (op.kind == OpKind::kAttention) {
      EXPECT_EQ(op.m, 8192 / 4);
      EXPECT_EQ(op.n, 8192);
      EXPECT_EQ(op.k, 128);
      EXPECT_EQ(op.batch, 2 * 16);
    }
    if (op.kind == OpKind::kCollective && op.group == GroupKind::kCp) {
      EXPECT_EQ(op.group_size, 4);
      // K and V of 4 local KV heads (8/tp), 2*2048 tokens, bf16.
      EXPECT_DOUBLE_EQ(op.bytes, 2.0 * 2 * (2 * 2048) * 4 * 128);
    }
  }
  // CP splits flops evenly too.
  const double cp1 = SumFlops(TransformerLayerOps(m, Plan(m, 2, 1, false), 2).forward);
  EXPECT_DOUBLE_EQ(SumFlops(ops.forward) * 4, cp1);
}

// What the runtime's ring attention does: selective recompute under CP
// rebuilds block probabilities inside the backward ring (no extra ring), and
// the last stage all-reduces the microbatch loss over CP.
TEST(LayerOps, ContextParallelRecomputeAndLoss) {
  const ModelSpec m = Gpt(4096, 32, 36);
  PlanSpec p = Plan(m, 2, 4, false);
  p.recompute = Recompute::kSelective;
  const LayerOps sel = TransformerLayerOps(m, p, 2);
  EXPECT_EQ(Count(sel.recompute, CollKind::kSendRecv, GroupKind::kCp), 0);
  ASSERT_EQ(sel.recompute.size(), 1u);
  EXPECT_EQ(sel.recompute[0].kind, OpKind::kAttention);
  p.recompute = Recompute::kFull;
  EXPECT_EQ(Count(TransformerLayerOps(m, p, 2).recompute, CollKind::kSendRecv, GroupKind::kCp), 3);
  EXPECT_EQ(Count(HeadOps(m, p, 2).forward, CollKind::kAllReduce, GroupKind::kCp), 1);
  EXPECT_EQ(Count(HeadOps(m, Plan(m, 2, 1, false), 2).forward, CollKind::kAllReduce, GroupKind::kCp), 0);
}

TEST(LayerOps, LlamaHasThreeMlpGemmsAndSmallerKv) {
  const ModelSpec m = Llama8B();
  const LayerOps ops = TransformerLayerOps(m, Plan(m, 1, 1, false), 2);
  int mlp_gemms = 0;
  for (const Op& op : ops.forward) {
    const std::string n = op.name;
    if (n == "fc1_gate" || n == "fc1_up" || n == "fc2") ++mlp_gemms;
    if (n == "qkv") {
      EXPECT_EQ(op.n, 4096 + 2 * 1024);
    }
  }
  EXPECT_EQ(mlp_gemms, 3);
  const double T = 2 * 8192.0, h = 4096, f = 14336, kv = 1024;
  EXPECT_DOUBLE_EQ(KindFlops(ops.forward, OpKind::kGemm),
                   2 * T * (h * (h + 2 * kv) + h * h + 3 * h * f));
}

// What the CPU runtime's LlamaLayer executes for GQA: with tp > kv_heads the
// replicated K/V weight grads are all-reduced over TP in every backward
// (fp32, the full K and V weights); unfused ring attention carries K/V
// expanded to the query heads.
TEST(LayerOps, GqaReplicatedKvGradsAndUnfusedRing) {
  const ModelSpec m = Llama8B();  // 32 heads, 8 KV heads, head_dim 128
  // (count, bytes) of the replica-grad all-reduces over TP in one layer's backward.
  auto replica_ops = [&](int tp) {
    std::pair<int, double> r{0, 0.0};
    for (const Op& op : TransformerLayerOps(m, Plan(m, tp, 1, false), 2).backward)
      if (std::string(op.name) == "tp_allreduce_kv_replica_grads" && op.group == GroupKind::kTp &&
          op.coll == CollKind::kAllReduce) {
        ++r.first;
        r.second += op.bytes;
      }
    return r;
  };
  EXPECT_EQ(replica_ops(8).first, 0);
  EXPECT_EQ(replica_ops(16).first, 1);
  EXPECT_DOUBLE_EQ(replica_ops(16).second, 4.0 * 2 * 8 * 128 * 4096);
  PlanSpec p = Plan(m, 2, 4, false);
  p.flash_attention = false;
  for (const Op& op : TransformerLayerOps(m, p, 2).forward) {
    if (op.kind == OpKind::kCollective && op.group == GroupKind::kCp) {  // 16 local query heads, not 4 KV heads
      EXPECT_DOUBLE_EQ(op.bytes, 2.0 * 2 * (2 * 2048) * 16 * 128);
    }
  }
}

TEST(LayerOps, RecomputeLists) {
  const ModelSpec m = Gpt(4096, 32, 36);
  PlanSpec p = Plan(m, 8, 1, true);
  EXPECT_TRUE(TransformerLayerOps(m, p, 2).recompute.empty());
  p.recompute = Recompute::kFull;
  const LayerOps full = TransformerLayerOps(m, p, 2);
  ASSERT_EQ(full.recompute.size(), full.forward.size());
  for (size_t i = 0; i < full.forward.size(); ++i)
    EXPECT_STREQ(full.recompute[i].name, full.forward[i].name);
  p.recompute = Recompute::kSelective;
  const LayerOps sel = TransformerLayerOps(m, p, 2);
  ASSERT_EQ(sel.recompute.size(), 1u);
  EXPECT_EQ(sel.recompute[0].kind, OpKind::kAttention);
  EXPECT_DOUBLE_EQ(SumFlops(sel.recompute), KindFlops(sel.forward, OpKind::kAttention));
}

TEST(LayerOps, BytesScaleWithElementSize) {
  const ModelSpec m = Llama8B();
  const PlanSpec p = Plan(m, 4, 1, true);
  const LayerOps b16 = TransformerLayerOps(m, p, 2), b32 = TransformerLayerOps(m, p, 4);
  ASSERT_EQ(b16.forward.size(), b32.forward.size());
  for (size_t i = 0; i < b16.forward.size(); ++i) {
    EXPECT_DOUBLE_EQ(b32.forward[i].bytes, 2 * b16.forward[i].bytes) << b16.forward[i].name;
    EXPECT_DOUBLE_EQ(b32.forward[i].flops, b16.forward[i].flops);
  }
}

TEST(LayerOps, EmbeddingAndHeadAreVocabParallel) {
  const ModelSpec m = Gpt(4096, 32, 36);
  const PlanSpec p = Plan(m, 8, 1, false);
  const LayerOps emb = EmbeddingOps(m, p, 2);
  EXPECT_EQ(Count(emb.forward, CollKind::kAllReduce, GroupKind::kTp), 1);
  EXPECT_DOUBLE_EQ(SumFlops(emb.forward), 0);
  const LayerOps head = HeadOps(m, p, 2);
  EXPECT_DOUBLE_EQ(SumFlops(head.forward), 2.0 * 2 * 2048 * (51200 / 8) * 4096);
  EXPECT_DOUBLE_EQ(SumFlops(head.backward), 2 * SumFlops(head.forward));
  EXPECT_EQ(Count(head.forward, CollKind::kAllReduce, GroupKind::kTp), 3);  // cross-entropy
  EXPECT_EQ(Count(head.backward, CollKind::kAllReduce, GroupKind::kTp), 1);
  const LayerOps emb_sp = EmbeddingOps(m, Plan(m, 8, 1, true), 2);
  EXPECT_EQ(Count(emb_sp.forward, CollKind::kReduceScatter, GroupKind::kTp), 1);
  EXPECT_EQ(Count(emb_sp.backward, CollKind::kAllGather, GroupKind::kTp), 1);
  EXPECT_STREQ(ToString(CollKind::kReduceScatter), "reduce_scatter");
  EXPECT_STREQ(ToString(GroupKind::kCp), "cp");
}

// Megatron-LM's unfused vocab-parallel cross-entropy (its default before
// --cross-entropy-loss-fusion): the logits cast to fp32, then max,
// subtract, exp, sum and divide as PyTorch ops; backward scales the stored
// softmax and casts the gradient back. Same FLOPs and TP collectives as
// the fused loss, 38 + 14 bytes per logit instead of 10 + 6 (bf16).
TEST(LayerOps, UnfusedCrossEntropyMovesTheLogitsSixTimes) {
  const ModelSpec m = Gpt(4096, 32, 36);
  PlanSpec p = Plan(m, 8, 1, false);
  const LayerOps fused = HeadOps(m, p, 2);
  p.cross_entropy_fusion = false;
  const LayerOps unfused = HeadOps(m, p, 2);
  const double logits = 2.0 * 2048 * (51200 / 8);
  auto bytes = [](const std::vector<Op>& ops, bool loss_only) {
    double b = 0;
    for (const Op& op : ops) {
      const std::string n = op.name;
      if (op.kind == OpKind::kCollective) continue;
      if (!loss_only || n.rfind("ce_", 0) == 0 || n.rfind("cross_entropy", 0) == 0) b += op.bytes;
    }
    return b;
  };
  EXPECT_DOUBLE_EQ(bytes(fused.forward, true), logits * 10);
  EXPECT_DOUBLE_EQ(bytes(fused.backward, true), logits * 6);
  // The two [b, s] bookkeeping kernels (target logit, one-hot subtract) are tiny.
  EXPECT_NEAR(bytes(unfused.forward, true), logits * 38, logits * 0.01);
  EXPECT_NEAR(bytes(unfused.backward, true), logits * 14, logits * 0.01);
  EXPECT_EQ(unfused.forward.size(), fused.forward.size() + 6);
  EXPECT_EQ(unfused.backward.size(), fused.backward.size() + 2);
  EXPECT_DOUBLE_EQ(SumFlops(unfused.forward), SumFlops(fused.forward));
  EXPECT_DOUBLE_EQ(SumFlops(unfused.backward), SumFlops(fused.backward));
  EXPECT_EQ(Count(unfused.forward, CollKind::kAllReduce, GroupKind::kTp), 3);
  // fp32 logits need no cast either way.
  const LayerOps unfused32 = HeadOps(m, p, 4);
  EXPECT_NEAR(bytes(unfused32.forward, true), logits * 32, logits * 0.01);
  EXPECT_NEAR(bytes(unfused32.backward, true), logits * 8, logits * 0.01);
}

}  // namespace
}  // namespace dt

namespace dt {
namespace {

// Megatron's fused causal softmax takes b x local heads that are multiples
// of 4 (rows per block 4 for sk > 128, 8 for sk <= 128) and 16 < sk <= 4096
// with sq, sk multiples of 4 (megatron/core/fusions/fused_softmax.py).
TEST(MegatronSoftmax, FusedKernelShapeRules) {
  EXPECT_TRUE(MegatronFusedSoftmaxTakes(1, 4, 1024, 1024));
  EXPECT_TRUE(MegatronFusedSoftmaxTakes(2, 2, 1024, 1024));
  EXPECT_FALSE(MegatronFusedSoftmaxTakes(1, 2, 1024, 1024));  // 16 heads over tp 8, microbatch 1
  EXPECT_FALSE(MegatronFusedSoftmaxTakes(2, 3, 2048, 2048));  // 48 heads over tp 16, microbatch 2
  EXPECT_TRUE(MegatronFusedSoftmaxTakes(4, 3, 2048, 2048));
  EXPECT_TRUE(MegatronFusedSoftmaxTakes(1, 4, 4096, 4096));
  EXPECT_FALSE(MegatronFusedSoftmaxTakes(1, 4, 8192, 8192));  // sk > 4096
  EXPECT_FALSE(MegatronFusedSoftmaxTakes(1, 4, 16, 16));      // sk <= 16
  EXPECT_FALSE(MegatronFusedSoftmaxTakes(1, 4, 1022, 1022));  // not a multiple of 4
  EXPECT_FALSE(MegatronFusedSoftmaxTakes(1, 4, 128, 128));    // 8 rows per block at sk <= 128
  EXPECT_TRUE(MegatronFusedSoftmaxTakes(2, 4, 128, 128));
}

std::vector<std::string> Names(const std::vector<Op>& ops) {
  std::vector<std::string> n;
  for (const Op& op : ops) n.push_back(op.name);
  return n;
}

double Bytes(const std::vector<Op>& ops) {
  double b = 0;
  for (const Op& op : ops) b += op.bytes;
  return b;
}

// The unfused core of a GPU plan whose shape the fused softmax does not
// take runs Megatron's PyTorch fallback: five more ops forward, in the
// recompute and backward, and 32 more bytes per score element each way
// (bf16 scores, fp32 softmax: 36 for 4 forward, 40 for the fused kernel's
// 8 backward, which the core's backward counts as twice its forward). dtrun's kernels (kRuntime) and shapes the
// fused kernel takes are unchanged; flash attention never falls back.
TEST(MegatronSoftmax, FallbackAddsTorchOpsAndBytes) {
  const ModelSpec m = Gpt(1024, 16, 4);  // 16 heads
  PlanSpec p;
  p.tp = 8;  // 2 heads per rank
  p.micro_batch = 1;
  p.seq_length = 1024;
  p.layers_per_chunk = {m.num_layers};
  p.flash_attention = false;
  p.recompute = Recompute::kFull;
  const LayerOps runtime = TransformerLayerOps(m, p, 2);
  const LayerOps megatron = TransformerLayerOps(m, p, 2, false, AttentionKernels::kMegatron);
  const double scores = 1.0 * 2 * 1024 * 1024;
  EXPECT_EQ(megatron.forward.size(), runtime.forward.size() + 5);
  EXPECT_EQ(megatron.recompute.size(), runtime.recompute.size() + 5);
  EXPECT_EQ(megatron.backward.size(), runtime.backward.size() + 5);
  EXPECT_DOUBLE_EQ(Bytes(megatron.forward) - Bytes(runtime.forward), 32 * scores);
  EXPECT_DOUBLE_EQ(Bytes(megatron.backward) - Bytes(runtime.backward), 32 * scores);
  EXPECT_DOUBLE_EQ(SumFlops(megatron.forward), SumFlops(runtime.forward));
  const auto names = Names(megatron.forward);
  EXPECT_NE(std::find(names.begin(), names.end(), "softmax_fp32"), names.end());

  p.micro_batch = 2;  // 4 rows: the fused kernel takes it
  EXPECT_EQ(Names(TransformerLayerOps(m, p, 2, false, AttentionKernels::kMegatron).forward),
            Names(TransformerLayerOps(m, p, 2).forward));
  p.micro_batch = 1;
  p.flash_attention = true;
  EXPECT_EQ(Names(TransformerLayerOps(m, p, 2, false, AttentionKernels::kMegatron).forward),
            Names(TransformerLayerOps(m, p, 2).forward));
  EXPECT_FALSE(UsesMegatronTorchSoftmax(m, p, 2, AttentionKernels::kMegatron));  // flash
  p.flash_attention = false;
  EXPECT_TRUE(UsesMegatronTorchSoftmax(m, p, 2, AttentionKernels::kMegatron));
  EXPECT_FALSE(UsesMegatronTorchSoftmax(m, p, 2, AttentionKernels::kRuntime));
  EXPECT_FALSE(UsesMegatronTorchSoftmax(m, p, 4, AttentionKernels::kMegatron));
  // fp32 scores: not Megatron's mixed-precision path
  EXPECT_EQ(Names(TransformerLayerOps(m, p, 4, false, AttentionKernels::kMegatron).forward),
            Names(TransformerLayerOps(m, p, 4).forward));
}

}  // namespace
}  // namespace dt
