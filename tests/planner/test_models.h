// Model specs and plans shared by the planner's unit tests: a GPT of a given shape
// (FFN 4h, vocabulary 51200, sequence 2048, as in Narayanan et al. SC21)
// and Llama-3 8B (Meta's published config). Header-only test fixtures.
#pragma once

#include "planner/spec/model_spec.h"
#include "planner/spec/plan_spec.h"

namespace dt::testing_models {

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
