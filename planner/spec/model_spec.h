// ModelSpec: the architecture of a decoder-only transformer (GPT or Llama).
//
// Loaded from our own JSON schema (docs/formats.md) or from a HuggingFace
// config.json as it is. Pure data plus derived counts; no I/O except in
// LoadModel. Errors are Status values naming the file and field.
#pragma once

#include <cstdint>
#include <string>

#include "base/json_fields.h"

namespace dt {

enum class ModelFamily { kGpt, kLlama };
const char* ToString(ModelFamily f);

struct ModelSpec {
  std::string name;
  ModelFamily family = ModelFamily::kGpt;
  int num_layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;      // == heads for MHA; < heads for GQA
  int ffn_hidden = 0;    // GPT: 4*hidden by default; Llama: intermediate_size
  int vocab = 0;
  int seq_length = 0;    // training sequence length (default: max_position)
  int max_position = 0;
  bool tied_embeddings = true;
  double rope_theta = 10000.0;   // Llama: RoPE base (HF `rope_theta`)
  double rms_norm_eps = 1e-5;    // Llama: RMSNorm epsilon (HF `rms_norm_eps`)

  int head_dim() const { return hidden / heads; }
  int kv_dim() const { return kv_heads * head_dim(); }
  bool gated_mlp() const { return family == ModelFamily::kLlama; }  // SwiGLU: 3 matrices
  bool learned_positions() const { return family == ModelFamily::kGpt; }

  // Parameters of one transformer layer (weights + biases + norms).
  int64_t LayerParams() const;
  int64_t EmbeddingParams() const;  // token (+ learned position) embedding
  int64_t OutputParams() const;     // untied LM head + final norm
  int64_t TotalParams() const;
};

// Validates consistency (heads divide hidden, kv_heads divide heads, ...).
Status Validate(const ModelSpec& m, const std::string& where);

// Parses our schema or a HuggingFace config (detected by "num_hidden_layers").
StatusOr<ModelSpec> ModelFromJson(const json& j, const std::string& where);
StatusOr<ModelSpec> LoadModel(const std::string& path);
json ToJson(const ModelSpec& m);

}  // namespace dt
