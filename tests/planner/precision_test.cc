// Precision as a plan property (PlanSpec::precision): its JSON form, the
// memory constants it selects (planner/lower/memory_params_for.h), the CPU
// runtime's bf16 memory terms and the capability entries that gate it.
#include <gtest/gtest.h>

#include "planner/cost/compute_cost.h"
#include "planner/lower/memory_params_for.h"
#include "planner/lower/plan_costs.h"
#include "planner/memory/activation_memory.h"
#include "planner/memory/stage_memory.h"
#include "planner/memory/zero_units.h"
#include "planner/profile/profile.h"
#include "planner/spec/capabilities.h"
#include "planner/spec/plan_spec.h"
#include "tests/planner/test_models.h"

namespace dt {
namespace {

ModelSpec TinyGpt() {
  ModelSpec m = testing_models::Gpt(64, 4, 4);
  m.vocab = 256;
  m.seq_length = m.max_position = 64;
  return m;
}

PlanSpec CpuPlan(Precision precision) {
  PlanSpec p;
  p.seq_length = 64;
  p.micro_batch = 8;
  p.layers_per_chunk = {4};
  p.flash_attention = false;
  p.dropout = false;
  p.precision = precision;
  return p;
}

TEST(Precision, JsonRoundTripAndRefusal) {
  const ModelSpec m = TinyGpt();
  PlanSpec p = CpuPlan(Precision::kBf16);
  auto back = PlanFromJson(ToJson(p), m, "plan");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->precision, Precision::kBf16);
  // Absent: the profile's dtype, and not written back.
  p.precision = Precision::kProfile;
  EXPECT_FALSE(ToJson(p).contains("precision"));
  EXPECT_EQ(PlanFromJson(ToJson(p), m, "plan")->precision, Precision::kProfile);
  json j = ToJson(p);
  j["precision"] = "fp16";
  auto bad = PlanFromJson(j, m, "plan");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("precision 'fp16' is unknown"), std::string::npos) << bad.status().message();
}

TEST(Precision, PlanPrecisionOverridesTheProfileDtype) {
  const HardwareProfile cpu = LoadProfile("cpu-generic").value();
  const HardwareProfile gpu = LoadProfile("A100-SXM4-80GB").value();
  ASSERT_EQ(cpu.device.dtype, "fp32");
  const MemoryParams cpu_default = MemoryParamsFor(cpu, CpuPlan(Precision::kProfile));
  EXPECT_EQ(cpu_default.weight_bytes, 4);
  EXPECT_EQ(cpu_default.optimizer_bytes, 8);
  EXPECT_EQ(cpu_default.working_bytes, 0);
  const MemoryParams cpu_bf16 = MemoryParamsFor(cpu, CpuPlan(Precision::kBf16));
  EXPECT_EQ(cpu_bf16.weight_bytes, 2);
  EXPECT_EQ(cpu_bf16.grad_bytes, 2);
  EXPECT_EQ(cpu_bf16.optimizer_bytes, 12);
  EXPECT_EQ(cpu_bf16.activation_bytes, 2);
  EXPECT_EQ(cpu_bf16.working_bytes, 4);        // the CPU runtime computes in fp32
  EXPECT_EQ(cpu_bf16.unit_working_bytes, 8);   // fp32 values + grads of the unit in use
  EXPECT_EQ(cpu_bf16.reserved_bytes, cpu_default.reserved_bytes);
  // GPU plans: bf16 is the profile's dtype; no CPU working-copy terms.
  const MemoryParams gpu_bf16 = MemoryParamsFor(gpu, CpuPlan(Precision::kBf16));
  EXPECT_EQ(gpu_bf16.weight_bytes, 2);
  EXPECT_EQ(gpu_bf16.working_bytes, 0);
  EXPECT_EQ(gpu_bf16.unit_working_bytes, 0);
  EXPECT_EQ(MemoryParamsFor(gpu, CpuPlan(Precision::kFp32)).weight_bytes, 4);
}

TEST(Precision, CpuBf16StageMemory) {
  const ModelSpec m = TinyGpt();
  const HardwareProfile cpu = LoadProfile("cpu-generic").value();
  const PlanSpec p32 = CpuPlan(Precision::kFp32), p16 = CpuPlan(Precision::kBf16);
  const StageMemory s32 = EstimateStageMemory(m, p32, MemoryParamsFor(cpu, p32), 0, 1);
  const MemoryParams mp16 = MemoryParamsFor(cpu, p16);
  const StageMemory s16 = EstimateStageMemory(m, p16, mp16, 0, 1);
  EXPECT_DOUBLE_EQ(s16.weights, s32.weights / 2);
  EXPECT_DOUBLE_EQ(s16.gradients, s32.gradients / 2);
  EXPECT_DOUBLE_EQ(s16.optimizer, s32.optimizer * 12 / 8);
  // Stored activations halve but the fp32 logits (4 T v) stay.
  EXPECT_LT(s16.activations, 0.6 * s32.activations);
  EXPECT_GT(s16.activations, 0.5 * s32.activations);
  // The unit working copies: without them the temporaries shrink by exactly
  // the larger of one layer's and the head's 8 bytes per parameter.
  MemoryParams no_units = mp16;
  no_units.unit_working_bytes = 0;
  const StageMemory s16n = EstimateStageMemory(m, p16, no_units, 0, 1);
  const ChunkUnits cu = ZeroChunkUnits(m, p16, 0);
  const double layer = 8.0 * cu.layer, head = 8.0 * cu.head_use;
  EXPECT_GT(s16.temporary, s16n.temporary);
  EXPECT_LE(s16.temporary - s16n.temporary, std::max(layer, head) + 1e-6);
  EXPECT_GE(s16.temporary - s16n.temporary, std::min(layer, head) - 1e-6);
}

// bf16 under ZeRO-2/3 on CPU (runtime/model/sharded_params.h): the model
// states shard as on a GPU (bf16 value and gradient shards, 12 B of
// optimizer per owned element), and the unit in backward holds its fp32
// values (4 B per element) and its padded fp32 gradient buffer (4 B,
// narrowed in place for bf16 gradients); ZeRO-3's gathered bf16 values are
// freed once widened. So the temporaries are those of ZeRO-0's unit copies
// (8 B per element) up to the padding, whatever the stage and gradient type.
TEST(Precision, CpuBf16ShardedStageMemory) {
  const ModelSpec m = TinyGpt();
  const HardwareProfile cpu = LoadProfile("cpu-generic").value();
  PlanSpec p0 = CpuPlan(Precision::kBf16);
  p0.dp = 2;
  const StageMemory s0 = EstimateStageMemory(m, p0, MemoryParamsFor(cpu, p0), 0, 1);
  const ChunkUnits cu = ZeroChunkUnits(m, p0, 0);
  for (int z : {2, 3}) {
    for (int g : {0, 4}) {
      PlanSpec p = p0;
      p.zero_stage = z;
      p.grad_bytes = g;
      const StageMemory s = EstimateStageMemory(m, p, MemoryParamsFor(cpu, p), 0, 1);
      double kept = 0;
      for (int64_t n : cu.units) kept += static_cast<double>(UnitShard(n, 2));
      EXPECT_DOUBLE_EQ(s.gradients, kept * (g == 4 ? 4 : 2)) << z << " " << g;
      EXPECT_DOUBLE_EQ(s.optimizer, kept * 12) << z << " " << g;
      EXPECT_DOUBLE_EQ(s.weights, z == 3 ? kept * 2 : s0.weights) << z << " " << g;
      // Padding: at most one element per unit (dp 2), 4 B each; the head's
      // side has two units (final norm, LM head).
      EXPECT_GE(s.temporary, s0.temporary) << z << " " << g;
      EXPECT_LE(s.temporary, s0.temporary + 2 * 4.0) << z << " " << g;
    }
  }
}

// The CPU runtime's bf16 GEMMs hold bf16 copies of both operands: 2 bytes x
// (|A| + |B|) of the layer's largest GEMM call, here the MLP's (T x f + f x h
// for fc2's forward, T x f + T x h for fc1's weight gradient), on top of the
// temporaries; the head's only beyond the fp32 logits it frees first.
TEST(Precision, CpuBf16GemmOperandCopies) {
  const ModelSpec m = TinyGpt();  // h 64, f 256, vocab 256
  const HardwareProfile cpu = LoadProfile("cpu-generic").value();
  const PlanSpec p16 = CpuPlan(Precision::kBf16);
  const MemoryParams mp16 = MemoryParamsFor(cpu, p16);
  ASSERT_EQ(mp16.gemm_operand_copy_bytes, 2);
  EXPECT_EQ(MemoryParamsFor(cpu, CpuPlan(Precision::kFp32)).gemm_operand_copy_bytes, 0);
  EXPECT_EQ(MemoryParamsFor(LoadProfile("h100").value(), p16).gemm_operand_copy_bytes, 0);
  MemoryParams no_copies = mp16;
  no_copies.gemm_operand_copy_bytes = 0;
  const StageMemory with = EstimateStageMemory(m, p16, mp16, 0, 1);
  const StageMemory without = EstimateStageMemory(m, p16, no_copies, 0, 1);
  const double T = 8.0 * 64, h = 64, f = 4 * h;
  EXPECT_DOUBLE_EQ(with.temporary - without.temporary, 2 * (T * f + std::max(T, h) * h));
}

// The CPU runtime's bf16 storage traffic is priced: per microbatch, 6 B per
// parameter used in the forward (widening) and 18 B in the backward
// (widening, gradient buffer, accumulation into bf16), 6 B per stashed
// element each way. On a CPU profile without bf16 GEMM data (same GEMM and
// memory-bound prices as fp32) that is exactly what a bf16 chunk costs more.
// TinyGpt's 1-rank fp32 and bf16 plans priced on `cpu`, with the parameter
// uses and stashed elements per microbatch that dtrun's bf16 storage converts.
struct StorageCase {
  ModelSpec m = TinyGpt();
  ClusterSpec c;
  PlanSpec p32 = CpuPlan(Precision::kFp32), p16 = CpuPlan(Precision::kBf16);
  PlanCosts k32, k16;
  double uses = 0, stash = 0;
  explicit StorageCase(const HardwareProfile& cpu) {
    c.nodes = 1;
    c.gpus_per_node = 1;
    k32 = ComputePlanCosts(m, c, p32, cpu);
    k16 = ComputePlanCosts(m, c, p16, cpu);
    for (int64_t u : ZeroChunkUnits(m, p16, 0).uses) uses += static_cast<double>(u);
    stash = ActivationBytesPerLayer(m, p16, 2) / 2.0 * 4;  // 4 layers
  }
};

TEST(Precision, CpuBf16StorageTrafficIsPriced) {
  const HardwareProfile cpu = LoadProfile("cpu-generic").value();
  ASSERT_FALSE(cpu.compute.bf16.available());
  const StorageCase s(cpu);
  EXPECT_NEAR(s.k16.chunks[0].fwd_compute - s.k32.chunks[0].fwd_compute,
              OpTime(MemoryOp("x", 6.0 * s.uses + 6.0 * s.stash), cpu), 1e-12);
  EXPECT_NEAR(s.k16.chunks[0].bwd_compute - s.k32.chunks[0].bwd_compute,
              OpTime(MemoryOp("x", 18.0 * s.uses + 6.0 * s.stash), cpu), 1e-12);
  EXPECT_GT(s.k16.chunks[0].fwd_compute, s.k32.chunks[0].fwd_compute);
  // fp32 main gradients (grad_bytes 4): the backward adds into them itself,
  // so neither the gradient buffer nor the bf16 accumulation is streamed,
  // and the unit in use holds only its fp32 values (4 B, not 8).
  PlanSpec g4 = s.p16;
  g4.grad_bytes = 4;
  const PlanCosts kg4 = ComputePlanCosts(s.m, s.c, g4, cpu);
  EXPECT_NEAR(kg4.chunks[0].fwd_compute, s.k16.chunks[0].fwd_compute, 1e-12);
  EXPECT_NEAR(kg4.chunks[0].bwd_compute - s.k32.chunks[0].bwd_compute,
              OpTime(MemoryOp("x", 6.0 * s.uses + 6.0 * s.stash), cpu), 1e-12);
  EXPECT_EQ(MemoryParamsFor(cpu, g4).unit_working_bytes, 4);
  EXPECT_EQ(MemoryParamsFor(cpu, s.p16).unit_working_bytes, 8);
  EXPECT_EQ(MemoryParamsFor(cpu, g4).grad_bytes, 4);
}

// A profile that timed the runtime's conversions prices each pass at its
// measured rate (seconds per element; constant curves here, so the sizes
// that pick the rate do not matter): forward = unit widening + stash
// narrowing; backward = unit widening + gradient buffer (zero fill priced as
// memory traffic, accumulation = a narrowing and a widening per element)
// + stash widening. fp32 main gradients drop the gradient buffer.
TEST(Precision, CpuBf16StorageAtMeasuredConversionRates) {
  HardwareProfile cpu = LoadProfile("cpu-generic").value();
  const double tn = 3e-10, tw = 1e-10;
  cpu.compute.bf16.narrow_s_per_element = Curve{{1, 1e9}, {tn, tn}};
  cpu.compute.bf16.widen_s_per_element = Curve{{1, 1e9}, {tw, tw}};
  const StorageCase s(cpu);
  EXPECT_NEAR(s.k16.chunks[0].fwd_compute - s.k32.chunks[0].fwd_compute, s.uses * tw + s.stash * tn, 1e-12);
  const double zero_fill = OpTime(MemoryOp("x", 4.0 * s.uses), cpu);
  EXPECT_NEAR(s.k16.chunks[0].bwd_compute - s.k32.chunks[0].bwd_compute,
              s.uses * tw + zero_fill + s.uses * (tn + tw) + s.stash * tw, 1e-12);
  PlanSpec g4 = s.p16;
  g4.grad_bytes = 4;
  const PlanCosts kg4 = ComputePlanCosts(s.m, s.c, g4, cpu);
  EXPECT_NEAR(kg4.chunks[0].bwd_compute - s.k32.chunks[0].bwd_compute, s.uses * tw + s.stash * tw, 1e-12);
  // Slower conversions price a slower step.
  cpu.compute.bf16.narrow_s_per_element.y = {2 * tn, 2 * tn};
  EXPECT_GT(ComputePlanCosts(s.m, s.c, s.p16, cpu).chunks[0].fwd_compute, s.k16.chunks[0].fwd_compute);
}

TEST(Precision, CapabilitiesGateBf16) {
  const ModelSpec m = TinyGpt();
  PlanSpec p = CpuPlan(Precision::kBf16);
  EXPECT_TRUE(CheckExecutable(m, p, RuntimeDevice::kCpu).ok());
  p.dp = 2;
  p.zero_stage = 1;
  EXPECT_TRUE(CheckExecutable(m, p, RuntimeDevice::kCpu).ok());
  for (int g : {0, 4}) {  // bf16 or fp32 main gradients (Megatron-LM's default), every ZeRO stage
    p.grad_bytes = g;
    for (int z : {0, 1, 2, 3}) {
      p.zero_stage = z;
      EXPECT_TRUE(CheckExecutable(m, p, RuntimeDevice::kCpu).ok()) << z << " " << g;
    }
  }
  EXPECT_FALSE(Executes(RuntimeDevice::kCuda, Feature::kBf16Fp32Grads));
  EXPECT_FALSE(Executes(RuntimeDevice::kCuda, Feature::kBf16ZeroSharded));
  p.grad_bytes = 0;
  EXPECT_FALSE(Executes(RuntimeDevice::kCuda, Feature::kBf16));
}

}  // namespace
}  // namespace dt
