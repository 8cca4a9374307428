// Model specs and plans shared by the planner's unit tests: a GPT of a given shape
// (FFN 4h, vocabulary 51200, sequence 2048, as in Narayanan et al. SC21)
// and Llama-3 8B (Meta's published config); the bundled H100 profile, loaded
// once. Header-only test fixtures.
#pragma once

#include "planner/profile/profile.h"
#include "planner/spec/model_spec.h"
#include "planner/spec/plan_spec.h"

namespace dt::testing_models {

// The bundled H100-SXM5-80GB profile (aborts if it does not load).
inline const HardwareProfile& H100() {
  static const HardwareProfile p = LoadProfile("h100").value();
  return p;
}

// The bundled H100 profile without its eager MoE block's host time
// (compute.moe_host) only: what that part adds (tests/planner/moe_host_test.cc).
inline const HardwareProfile& H100WithoutMoeHost() {
  static const HardwareProfile p = [] {
    HardwareProfile h = H100();
    h.compute.moe_host = MoeHostProfile{};
    return h;
  }();
  return p;
}

// The bundled H100 profile without host time (no compute.host_overhead_s,
// no eager MoE block's compute.moe_host): for tests of the kernels' and
// collectives' schedule, which the host's launch clock and the dispatcher's
// synchronisation would mix into (tests/planner/moe_host_test.cc and
// host_ahead_test.cc test those).
inline const HardwareProfile& H100WithoutHostTime() {
  static const HardwareProfile p = [] {
    HardwareProfile h = H100();
    h.compute.host_overhead_s = 0;
    h.compute.moe_host = MoeHostProfile{};
    return h;
  }();
  return p;
}

// The bundled CPU profile (measured on an Intel Xeon; no measured curves).
inline const HardwareProfile& LocalCpu() {
  static const HardwareProfile p = LoadProfile("local-cpu").value();
  return p;
}

inline ModelSpec Gpt(int h, int a, int layers) {
  ModelSpec m;
  m.family = ModelFamily::kGpt;
  m.num_layers = layers;
  m.hidden = h;
  m.heads = a;
  m.kv_heads = a;
  m.ffn_hidden = 4 * h;
  m.vocab = 51200;
  m.seq_length = 2048;
  m.max_position = 2048;
  return m;
}

// A Llama-style MoE of 4 layers, 8 heads, 8 SwiGLU experts top-2 of width
// moe_ffn (a dense FFN of 2 * hidden), an untied head, vocabulary 1024, and
// a shared expert of width `shared` (0: none).
inline ModelSpec SmallMoe(const char* name, int hidden, int seq, int moe_ffn, int shared) {
  ModelSpec m;
  m.family = ModelFamily::kLlama;
  m.name = name;
  m.num_layers = 4;
  m.hidden = hidden;
  m.heads = 8;
  m.kv_heads = 8;
  m.ffn_hidden = 2 * hidden;
  m.vocab = 1024;
  m.seq_length = seq;
  m.max_position = seq;
  m.tied_embeddings = false;
  m.num_experts = 8;
  m.moe_top_k = 2;
  m.moe_ffn_hidden = moe_ffn;
  m.shared_ffn_hidden = shared;
  return m;
}

// A cluster of `nodes` x `gpus` devices.
inline ClusterSpec Cluster(int nodes, int gpus) {
  ClusterSpec c;
  c.nodes = nodes;
  c.gpus_per_node = gpus;
  return c;
}

inline ModelSpec Llama8B() {
  ModelSpec m;
  m.family = ModelFamily::kLlama;
  m.num_layers = 32;
  m.hidden = 4096;
  m.heads = 32;
  m.kv_heads = 8;
  m.ffn_hidden = 14336;
  m.vocab = 128256;
  m.seq_length = 8192;
  m.max_position = 8192;
  m.tied_embeddings = false;
  return m;
}

// Mixtral-8x7B's MoE shape on Llama8B's layers, 8 of them at seq 4096:
// 8 experts of 14336, top 2 (EP all-to-alls of 4096-wide tokens).
inline ModelSpec Mixtral8Layers() {
  ModelSpec m = Llama8B();
  m.num_layers = 8;
  m.num_experts = 8;
  m.moe_top_k = 2;
  m.moe_ffn_hidden = 14336;
  m.seq_length = 4096;
  return m;
}

// One pipeline stage with tensor and sequence parallelism over the whole
// model, fused attention, selective recompute (cost tests).
inline PlanSpec TpSpPlan(const ModelSpec& m, int tp, int seq, int mbs = 1, int nmb = 2) {
  PlanSpec p;
  p.tp = tp;
  p.sequence_parallel = tp > 1;
  p.micro_batch = mbs;
  p.num_microbatches = nmb;
  p.seq_length = seq;
  p.flash_attention = true;
  p.recompute = Recompute::kSelective;
  p.layers_per_chunk = {m.num_layers};
  return p;
}

// What dtplan --device cpu plans for a tiny model on dp ranks: unfused
// attention, no dropout, one microbatch of 1 sequence per step and rank x 4
// (capability tests).
inline PlanSpec TinyCpuPlan(const ModelSpec& m, int dp) {
  PlanSpec p;
  p.dp = dp;
  p.micro_batch = 1;
  p.num_microbatches = 4;
  p.seq_length = 64;
  p.flash_attention = false;
  p.dropout = false;
  p.layers_per_chunk = {m.num_layers};
  return p;
}

// A pipeline-only plan with one layer per model chunk (schedule tests).
inline PlanSpec PipelinePlan(Schedule s, int pp, int vpp, int m, int zero = 0) {
  PlanSpec p;
  p.schedule = s;
  p.pp = pp;
  p.vpp = vpp;
  p.num_microbatches = m;
  p.zero_stage = zero;
  p.seq_length = 8;
  p.layers_per_chunk.assign(pp * vpp, 1);
  return p;
}

}  // namespace dt::testing_models
