// ModelSpec: the architecture of a decoder-only transformer (GPT or Llama),
// dense or mixture-of-experts (every layer's MLP replaced by routed experts,
// optionally with shared experts; docs/formats.md "Mixture of experts").
//
// Loaded from our own JSON schema (docs/formats.md) or from a HuggingFace
// config.json as it is. Pure data plus derived counts; no I/O except in
// LoadModel. Errors are Status values naming the file and field.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
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
  // HF `rope_scaling` present (Llama-3.1 and other context extensions): the
  // same shapes and cost, but the runtime applies plain RoPE only, so it is
  // a model variant for the capability table.
  bool rope_scaled = false;
  // Llama: the share of each head's dimensions RoPE rotates (HF
  // `partial_rotary_factor`, Megatron-LM `--rotary-percent`; GLM-4.5: 0.5).
  // Same shapes and cost (the rotation is priced as a pass over q and k);
  // the runtime rotates whole heads, so < 1 is a model variant.
  double rotary_fraction = 1.0;

  // Layout details beyond the family's (HuggingFace configs: docs/formats.md
  // lists the mapping per model_type). Unset = the family's layout: GPT-2
  // (LayerNorm with bias, biases on every linear, learned positions,
  // dropout, 2 norms per layer) or Llama (RMSNorm, no biases, rotary, none).
  int head_dim_set = 0;                  // explicit head_dim (Gemma); 0: hidden / heads
  std::optional<bool> learned_pos_set;   // learned absolute positions (Falcon: rotary)
  std::optional<bool> linear_bias_set;   // biases on every linear layer (Falcon: none)
  std::optional<bool> dropout_set;       // trains with dropout when the plan has it
  bool qkv_bias = false;                 // biases on Q, K, V only (Qwen2)
  int norms_per_layer = 2;               // 1: Falcon's parallel block; 4: Gemma-2 pre+post norms
  int position_offset = 0;               // extra learned position rows (OPT: 2)
  // Sliding-window attention (Mistral, Gemma-2, GPT-OSS): a query attends to
  // the sliding_window keys ending at itself (0: no window). Which layers:
  // sliding_window_pattern 0 = every layer; P >= 2 = every layer except
  // those with index % P == P - 1, which attend to the whole causal prefix
  // (Gemma-2 and GPT-OSS alternate, P = 2; HF's `sliding_window_pattern`,
  // Megatron-LM's --window-attn-skip-freq). Priced in layer_ops.h.
  int sliding_window = 0;
  int sliding_window_pattern = 0;
  // The windowed layers attend in aligned chunks instead (Llama 4's
  // attention_chunk_size): a query meets the keys from the start of its own
  // block of sliding_window tokens up to itself (ChunkTileFraction).
  bool window_chunked = false;
  // A learned per-head logit added to every softmax denominator (GPT-OSS's
  // attention sinks, Megatron-LM's softmax_type "learnable"): heads
  // parameters per layer; the fused attention kernel applies it at no
  // measurable cost.
  bool attention_sinks = false;
  std::string source_type;               // HF model_type it was read from ("" for our schema)
  bool qk_norm = false;                  // RMSNorm over each head's q and k (Qwen3): 2 head_dim weights

  // Mixture of experts (num_experts > 0): every layer's MLP is a router
  // (h x E, no bias), num_experts gated (llama) or plain (gpt) expert MLPs of
  // width moe_ffn_hidden of which each token uses moe_top_k, plus, when
  // shared_ffn_hidden > 0, a shared MLP of that width every token uses
  // (DeepSeek's n_shared experts of width w: n*w), scaled by a sigmoid gate
  // (h weights) when shared_expert_gate (Qwen2-MoE). ffn_hidden is then the
  // width of the model's dense-MLP layers, if it has any (below).
  int num_experts = 0;
  int moe_top_k = 0;
  int moe_ffn_hidden = 0;
  int shared_ffn_hidden = 0;
  bool shared_expert_gate = false;
  // MoE models whose first `first_dense_layers` layers have a dense MLP of
  // width ffn_hidden instead (DeepSeek's first_k_dense_replace).
  int first_dense_layers = 0;
  // MoE models with dense layers between the MoE layers: layer i (past the
  // dense leading ones) is an MoE layer when i % moe_layer_step ==
  // moe_layer_step - 1 (HF Llama 4's interleave_moe_layer_step and
  // Qwen2-MoE's decoder_sparse_step place them so), a dense MLP of
  // ffn_hidden otherwise. 1: every layer MoE.
  int moe_layer_step = 1;

  // Multi-head latent attention (DeepSeek-V2/V3; mla() when kv_lora_rank > 0):
  // Q = W_uq rmsnorm(W_dq x) (or W_q x when q_lora_rank is 0), the latent
  // c_kv = rmsnorm(W_dkv x) of kv_lora_rank plus one shared RoPE key of
  // qk_rope_head_dim, per-head K_nope and V up-projected from c_kv; heads
  // of qk_nope + qk_rope for QK^T and v_head_dim for AV. head_dim() is then
  // the QK head dimension (head_dim_set = qk_nope + qk_rope).
  // Multi-token prediction (DeepSeek-V3's num_nextn_predict_layers,
  // Megatron-LM's --mtp-num-layers): mtp_layers modules, each predicting one
  // more token ahead from the previous depth's hidden state and the
  // embedding of the next token: two RMSNorms (enorm, hnorm) of the two
  // inputs, a projection eh_proj (2h -> h, no bias), one transformer layer
  // of the model's kind (an MoE layer for MoE models), a final norm, and the
  // main model's LM head and embedding (shared, not counted again). Held by
  // the last pipeline stage, as Megatron-LM places them. Not part of
  // TotalParams (the main model's count, as published); MtpParams() apart.
  int mtp_layers = 0;

  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;

  int head_dim() const { return head_dim_set > 0 ? head_dim_set : hidden / heads; }
  int q_dim() const { return heads * head_dim(); }
  int kv_dim() const { return kv_heads * head_dim(); }
  bool gated_mlp() const { return family == ModelFamily::kLlama; }  // SwiGLU/GeGLU: 3 matrices
  bool layer_norm() const { return family == ModelFamily::kGpt; }   // else RMSNorm (weight only)
  bool learned_positions() const { return learned_pos_set.value_or(family == ModelFamily::kGpt); }
  bool linear_bias() const { return linear_bias_set.value_or(family == ModelFamily::kGpt); }
  bool uses_dropout() const { return dropout_set.value_or(family == ModelFamily::kGpt); }
  bool moe() const { return num_experts > 0; }
  bool mla() const { return kv_lora_rank > 0; }
  int v_dim() const { return mla() ? v_head_dim : head_dim(); }  // per-head width of V (AV, output projection)
  // True when layer `layer` (0-based) of an MoE model has a dense MLP.
  bool DenseLayer(int layer) const {
    return moe() && (layer < first_dense_layers || (moe_layer_step > 1 && layer % moe_layer_step != moe_layer_step - 1));
  }
  // Dense-MLP layers among layers [first, first + count) (0 for dense models).
  int DenseLayers(int first, int count) const;
  bool has_dense_layers() const { return moe() && (first_dense_layers > 0 || moe_layer_step > 1); }
  int moe_layers() const { return moe() ? num_layers - DenseLayers(0, num_layers) : 0; }
  // True when the window is shorter than `seq` tokens (else it changes nothing).
  bool WindowApplies(int seq) const { return sliding_window > 0 && seq > sliding_window; }
  // True when layer `layer` (0-based) attends through the window (a model
  // with one; see sliding_window_pattern).
  bool WindowedLayer(int layer) const;
  // Windowed layers among layers [first, first + count).
  int WindowedLayers(int first, int count) const;
  int position_rows() const { return std::max(max_position, seq_length) + position_offset; }
  // True when every layout detail is the family's own (what the bundled
  // runtime's GPT and Llama implement).
  bool FamilyLayout() const;

  // Parameters of one transformer layer (weights + biases + norms); an MoE
  // layer for MoE models (DenseLayerParams: one of the dense leading layers).
  int64_t LayerParams() const;
  int64_t DenseLayerParams() const;
  int64_t AttentionParams() const;  // attention block weights (+ MLA's latent norms), no biases
  int64_t EmbeddingParams() const;  // token (+ learned position) embedding
  int64_t OutputParams() const;     // untied LM head + final norm
  int64_t TotalParams() const;
  // MoE: the parameters one token uses (router, top_k experts, shared
  // experts, attention, embedding, head). Dense: TotalParams().
  int64_t ActiveLayerParams() const;
  int64_t ActiveParams() const;
  // One expert MLP's parameters (0 for a dense model).
  int64_t ExpertParams() const;
  // Parameters of the multi-token-prediction modules (0 without them): per
  // module one layer (LayerParams), eh_proj 2h x h and three norms.
  int64_t MtpParams() const;
};

// The dense leading layers of an MoE model as a dense model of the same
// attention (num_experts 0, MLP of ffn_hidden): what their op lists and
// per-rank sizes are computed from.
ModelSpec DenseLayerModel(const ModelSpec& m);

// Validates consistency (heads divide hidden, kv_heads divide heads, ...).
Status Validate(const ModelSpec& m, const std::string& where);

// Whether a sequence of `seq_length` tokens fits the model's positions: a
// learned position table (GPT, OPT) has one row per position and bounds it;
// rotary positions have no table (a longer sequence is a context extension,
// the user's choice) and never fail. The message names no field: callers
// prefix theirs (plan Validate, dtplan's --seq-length).
Status CheckSequenceFits(const ModelSpec& m, int64_t seq_length);

// Parses our schema or a HuggingFace config (detected by "model_type" or
// "num_hidden_layers"; see planner/spec/hf_config.h).
StatusOr<ModelSpec> ModelFromJson(const json& j, const std::string& where);
// A model file's content (dtplan's format or a HuggingFace config.json):
// ParseJsonText + ModelFromJson, no file access. `path` names the source in
// errors, and its stem names a model that has no "name". LoadModel is this
// on the file's content.
StatusOr<ModelSpec> ModelFromJsonText(const std::string& text, const std::string& path);
StatusOr<ModelSpec> LoadModel(const std::string& path);
json ToJson(const ModelSpec& m);

}  // namespace dt
