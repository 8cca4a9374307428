#include "planner/spec/hf_config.h"

#include <algorithm>
#include <set>

namespace dt {
namespace {

// Keys that change nothing the planner prices: token ids, dropout rates
// (except a GPT-family config's all-zero rates, GptDropout below), norm epsilons, the rotary base and
// context-extension scaling (same shapes), initialisation, activation
// names (GeLU / SiLU / ReLU cost the same elementwise pass), attention
// score scalars, bookkeeping of transformers itself, and GPT-2's
// sequence-summary head (classification only, not part of the LM).
const std::set<std::string>& NeutralKeys() {
  static const std::set<std::string> k = {
      "architectures", "model_type", "_name_or_path", "name", "torch_dtype", "dtype", "transformers_version",
      "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id",
      "use_cache", "initializer_range", "init_std", "initializer_factor", "attention_dropout",
      "hidden_dropout", "resid_pdrop", "embd_pdrop", "attn_pdrop", "dropout", "activation_dropout",
      "layerdrop", "summary_first_dropout", "hidden_act", "activation_function", "hidden_activation",
      "rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "rope_theta", "rope_scaling", "rope_type",
      "original_max_position_embeddings", "partial_rotary_factor", "pretraining_tp", "auto_map",
      "id2label", "label2id", "torchscript", "return_dict", "output_attentions", "output_hidden_states",
      "problem_type", "tokenizer_class", "prefix", "task_specific_params", "summary_type",
      "summary_use_proj", "summary_activation", "summary_proj_to_labels", "scale_attn_weights",
      "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "do_layer_norm_before",
      "query_pre_attn_scalar", "cache_implementation", "attn_logit_softcapping", "final_logit_softcapping",
      "is_decoder", "use_return_dict", "chunk_size_feed_forward", "bias_dropout_fusion",
      "max_window_layers", "use_sliding_window", "rope_interleaved", "embed_dropout", "mlp_dropout",
      "rope_local_base_freq"};
  return k;
}

// Mixture-of-experts / latent-attention keys: refused on a dense model_type
// (where a dense reading would under-count the model).
const std::vector<std::string>& ExpertKeys() {
  static const std::vector<std::string> k = {
      "num_local_experts", "num_experts", "n_routed_experts", "n_shared_experts", "moe_intermediate_size",
      "num_experts_per_tok", "shared_expert_intermediate_size", "decoder_sparse_step", "q_lora_rank",
      "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "first_k_dense_replace",
      "moe_layer_freq", "router_aux_loss_coef"};
  return k;
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// Reads keys of one config and remembers which it used.
class Keys {
 public:
  Keys(const json& j, const std::string& where) : j_(j), r_(j, where), where_(where) {}
  bool Has(const char* k) const { return r_.Has(k); }
  int Int(const char* k) { used_.insert(k); return Checked(k, r_.Int(k)); }
  int IntOr(const char* k, int64_t d) { used_.insert(k); return Checked(k, r_.IntOr(k, d)); }
  bool BoolOr(const char* k, bool d) { used_.insert(k); return r_.BoolOr(k, d); }
  std::string StrOr(const char* k, const std::string& d) { used_.insert(k); return r_.StrOr(k, d); }
  double NumOr(const char* k, double d) { used_.insert(k); return r_.NumOr(k, d); }
  bool NonNull(const char* k) const { return j_.is_object() && j_.contains(k) && !j_[k].is_null(); }
  // The value itself (NonNull(k) first), marked used.
  const json& Value(const char* k) { used_.insert(k); return j_.at(k); }
  // The first of several spellings present (GPT-2 / old Falcon names).
  const char* Alias(std::initializer_list<const char*> names) {
    for (const char* n : names)
      if (r_.Has(n)) return n;
    return *names.begin();
  }
  void Use(const char* k) { used_.insert(k); }
  void Fail(const std::string& m) { r_.Fail(m); }
  Status status() const { return r_.status(); }
  bool ok() const { return r_.ok(); }
  // First key neither used nor neutral, or "".
  std::string Unclaimed() const {
    for (auto it = j_.begin(); it != j_.end(); ++it)
      if (!used_.count(it.key()) && !NeutralKeys().count(it.key()) && !it.value().is_null()) return it.key();
    return "";
  }

 private:
  int Checked(const char* k, int64_t v) {
    if (v < 0 || v > (1LL << 30)) r_.Fail(std::string("field '") + k + "' = " + std::to_string(v) +
                                          " is outside 0 .. 2^30");
    return static_cast<int>(v);
  }
  const json& j_;
  FieldReader r_;
  std::string where_;
  std::set<std::string> used_;
};

// A GPT-family config's dropout rates (GPT-2: resid/embd/attn_pdrop; OPT:
// dropout, attention_dropout, activation_dropout): all given ones 0 means
// the model trains without dropout (no masks, no passes: dropout_set false);
// any rate above 0 keeps the family's dropout (the rate itself is dtrun's
// --dropout, the same cost). Dropout is priced at every site or none: a
// config that turns off only some sites (OPT's attention_dropout 0 with
// dropout 0.1) is priced with all of them, which over-counts the unfused
// attention's score masks (a fused kernel stores none; docs/formats.md).
void GptDropout(Keys& k, ModelSpec* m, std::initializer_list<const char*> keys) {
  bool any = false, nonzero = false;
  for (const char* key : keys)
    if (k.NonNull(key)) {
      any = true;
      const double rate = k.NumOr(key, 0.0);
      if (!(rate >= 0.0 && rate < 1.0)) k.Fail(std::string("'") + key + "' must be a rate in [0, 1)");
      nonzero = nonzero || rate > 0.0;
    }
  if (any && !nonzero) m->dropout_set = false;
}

// transformers 5's `rope_parameters` (rope_theta and the scaling in one
// object, or one such object per layer type): same shapes and cost; a
// rope_type other than "default" is a scaled RoPE (ModelSpec::rope_scaled).
void ReadRopeParameters(Keys& k, ModelSpec* m) {
  if (!k.NonNull("rope_parameters")) return k.Use("rope_parameters");
  const json& rp = k.Value("rope_parameters");
  if (!rp.is_object()) return k.Fail("'rope_parameters' must be an object");
  auto read = [&](const json& o) {
    if (o.contains("rope_theta") && o["rope_theta"].is_number()) m->rope_theta = o["rope_theta"].get<double>();
    if (o.contains("rope_type") && o["rope_type"].is_string() && o["rope_type"].get<std::string>() != "default")
      m->rope_scaled = true;
  };
  if (rp.contains("rope_type") || rp.contains("rope_theta")) return read(rp);
  for (auto it = rp.begin(); it != rp.end(); ++it)
    if (it.value().is_object()) read(it.value());
}

// linear_biases: biases on every linear (GPT-OSS). qkv_bias_key: the
// config's attention_bias puts biases on q, k and v only (GLM-4.5), as
// Qwen2 always has them; otherwise attention_bias: true is refused.
void LlamaLike(Keys& k, ModelSpec* m, bool tied_default, bool linear_biases = false, bool qkv_bias_key = false) {
  m->family = ModelFamily::kLlama;
  m->num_layers = k.Int("num_hidden_layers");
  m->hidden = k.Int("hidden_size");
  m->heads = k.Int("num_attention_heads");
  m->kv_heads = k.IntOr("num_key_value_heads", m->heads);
  m->ffn_hidden = k.Int("intermediate_size");
  m->vocab = k.Int("vocab_size");
  m->max_position = k.IntOr("max_position_embeddings", 2048);
  m->tied_embeddings = k.BoolOr("tie_word_embeddings", tied_default);
  if (k.Has("head_dim")) m->head_dim_set = k.Int("head_dim");
  // Same shapes and costs whatever their values; the runtime uses both.
  m->rope_theta = k.NumOr("rope_theta", m->rope_theta);
  m->rms_norm_eps = k.NumOr("rms_norm_eps", m->rms_norm_eps);
  m->rope_scaled = k.NonNull("rope_scaling");
  ReadRopeParameters(k, m);
  m->rotary_fraction = k.NumOr("partial_rotary_factor", 1.0);
  if (linear_biases) {
    m->linear_bias_set = true;
  } else if (qkv_bias_key) {
    m->qkv_bias = k.BoolOr("attention_bias", false);
  } else if (k.BoolOr("attention_bias", false)) {
    k.Fail("'attention_bias': true (biases on q, k, v and o) is not modeled; remove it or use a model without");
  }
  if (k.BoolOr("mlp_bias", false)) k.Fail("'mlp_bias': true is not modeled; remove it or use a model without");
}

// Keys of MoE configs that change neither size nor cost: the auxiliary
// load-balancing loss coefficient (a scalar term of the loss), whether the
// router logits are returned, the router's input jitter, and whether the
// top-k probabilities are renormalised (an elementwise op on b*s*k values).
void UseMoeNeutralKeys(Keys& k) {
  for (const char* key : {"router_aux_loss_coef", "output_router_logits", "router_jitter_noise", "norm_topk_prob"})
    k.Use(key);
}

// Qwen2-MoE / Qwen3-MoE layer pattern: every decoder_sparse_step-th layer
// sparse (ModelSpec::moe_layer_step); mlp_only_layers must be empty.
void QwenMoeLayers(const json& j, Keys& k, ModelSpec* m) {
  // Layer i is sparse when (i + 1) % decoder_sparse_step == 0 (HF
  // Qwen2MoeDecoderLayer), a dense MLP of intermediate_size otherwise.
  m->moe_layer_step = k.IntOr("decoder_sparse_step", 1);
  if (m->moe_layer_step < 1) k.Fail("'decoder_sparse_step' must be >= 1");
  k.Use("mlp_only_layers");
  if (j.contains("mlp_only_layers") && j["mlp_only_layers"].is_array() && !j["mlp_only_layers"].empty())
    k.Fail("'mlp_only_layers' is not empty (dense MLP layers among MoE layers) is not modeled yet");
}

// DeepSeek-V2 / V3 (deepseek-ai/DeepSeek-V2-Lite, DeepSeek-V3 config.json):
// multi-head latent attention, first_k_dense_replace dense SwiGLU layers of
// intermediate_size, then MoE layers of n_routed_experts experts of
// moe_intermediate_size (top num_experts_per_tok) plus n_shared_experts
// shared experts of the same width. Routing policy keys (group-limited
// top-k, sigmoid or softmax scores, the scaling factor, noaux_tc's
// correction bias of E floats per layer) choose which experts a token uses,
// not how many: same FLOPs and sizes, so they are read and ignored.
// num_nextn_predict_layers: DeepSeek-V3's multi-token-prediction modules
// (ModelSpec::mtp_layers): trained with the model and priced, but not part
// of the published 671B (TotalParams), as the model card counts them.
// The expert layout DeepSeek-V3 introduced and GLM-4.5 shares: first_k_dense_replace
// dense SwiGLU layers of intermediate_size, then MoE layers of n_routed_experts
// experts of moe_intermediate_size (top num_experts_per_tok) plus
// n_shared_experts shared experts of the same width, and
// num_nextn_predict_layers multi-token-prediction modules. Group-limited
// routing (n_group, topk_group) and the routed scaling factor choose and
// weight a token's experts, not how many.
void DeepSeekStyleExperts(Keys& k, ModelSpec* m) {
  m->num_experts = k.Int("n_routed_experts");
  m->moe_top_k = k.Int("num_experts_per_tok");
  m->moe_ffn_hidden = k.Int("moe_intermediate_size");
  // n shared experts of moe_intermediate_size: one shared MLP of n times that
  // width (in 64 bits: two in-range fields can multiply past an int, found
  // by fuzzing).
  const int64_t shared = static_cast<int64_t>(k.IntOr("n_shared_experts", 0)) * m->moe_ffn_hidden;
  if (shared < 0 || shared > (int64_t{1} << 30))
    k.Fail("'n_shared_experts' x 'moe_intermediate_size' = " + std::to_string(shared) + " is outside 0 .. 2^30");
  m->shared_ffn_hidden = k.ok() ? static_cast<int>(shared) : 0;
  m->first_dense_layers = k.IntOr("first_k_dense_replace", 0);
  m->mtp_layers = k.IntOr("num_nextn_predict_layers", 0);
  for (const char* key : {"n_group", "topk_group", "routed_scaling_factor"}) k.Use(key);
  UseMoeNeutralKeys(k);
}

void DeepSeek(Keys& k, ModelSpec* m, const json& j) {
  LlamaLike(k, m, false);
  m->kv_heads = m->heads;  // num_key_value_heads: MLA up-projects K and V for every head
  m->q_lora_rank = k.NonNull("q_lora_rank") ? k.Int("q_lora_rank") : (k.Use("q_lora_rank"), 0);
  m->kv_lora_rank = k.Int("kv_lora_rank");
  m->qk_nope_head_dim = k.Int("qk_nope_head_dim");
  m->qk_rope_head_dim = k.Int("qk_rope_head_dim");
  m->v_head_dim = k.Int("v_head_dim");
  const int64_t qk = static_cast<int64_t>(m->qk_nope_head_dim) + m->qk_rope_head_dim;
  if (qk > (int64_t{1} << 30)) k.Fail("'qk_nope_head_dim' + 'qk_rope_head_dim' is outside 0 .. 2^30");
  m->head_dim_set = k.ok() ? static_cast<int>(qk) : 0;
  DeepSeekStyleExperts(k, m);
  if (k.IntOr("moe_layer_freq", 1) != 1)
    k.Fail("'moe_layer_freq' != 1 (dense MLP layers between MoE layers) is not modeled yet");
  for (const char* key : {"topk_method", "scoring_func", "aux_loss_alpha", "seq_aux", "ep_size"}) k.Use(key);
  (void)j;
}

// GLM-4.5 / GLM-4.5-Air (zai-org config.json, HF Glm4Moe): grouped-query
// attention of num_attention_heads x head_dim (q width != hidden_size),
// biases on q, k and v when attention_bias is set (not on o), RMSNorm over
// each head's q and k when use_qk_norm is set, and DeepSeek-V3's expert
// layout (DeepSeekStyleExperts) without latent attention. partial_rotary_factor
// rotates part of each head: same shapes and cost.
void GlmMoe(Keys& k, ModelSpec* m) {
  LlamaLike(k, m, false, /*linear_biases=*/false, /*qkv_bias_key=*/true);
  m->qk_norm = k.BoolOr("use_qk_norm", false);
  DeepSeekStyleExperts(k, m);
}

// Qwen2-family sliding windows: HF applies the window to layers
// max_window_layers .. L-1 when use_sliding_window is set.
void QwenWindow(Keys& k, ModelSpec* m) {
  const bool sw = k.BoolOr("use_sliding_window", false);
  const int window = k.IntOr("sliding_window", 0);
  const int from = k.IntOr("max_window_layers", m->num_layers);
  if (!sw || from >= m->num_layers) return;  // no layer is windowed
  if (from > 0)
    k.Fail("'max_window_layers' = " + std::to_string(from) + " with 'use_sliding_window': only some layers windowed "
           "(full attention below that layer, windowed above) is not modeled; set max_window_layers to 0 (every "
           "layer windowed) or use_sliding_window to false");
  m->sliding_window = window;
}

// GPT-OSS (openai/gpt-oss-120b and -20b config.json; Megatron-Bridge's
// gpt_oss bridge maps the same model): grouped-query attention of
// num_attention_heads heads of head_dim (q width heads*head_dim, not
// hidden_size), biases on every linear (q, k, v, o, router, experts), one
// learned sink logit per head, sliding-window attention on the layers that
// layer_types names "sliding_attention" (every other one, window
// sliding_window; ReadLayerTypes) and full causal attention on the others, and
// num_local_experts SwiGLU experts of intermediate_size, top
// num_experts_per_tok, with an untied LM head. swiglu_limit clamps the
// activation and initial_context_length parameterises YaRN: neither changes
// a size or a cost.
void GptOss(Keys& k, ModelSpec* m, const json& j) {
  if (!k.BoolOr("attention_bias", true))
    k.Fail("'attention_bias': false on gpt_oss (biases on the experts and router only) is not modeled");
  LlamaLike(k, m, false, /*linear_biases=*/true);
  m->attention_sinks = true;
  m->num_experts = k.Int("num_local_experts");
  m->moe_top_k = k.Int("num_experts_per_tok");
  if (k.Has("experts_per_token") && k.Int("experts_per_token") != m->moe_top_k)
    k.Fail("'experts_per_token' differs from 'num_experts_per_tok'; give one value");
  m->moe_ffn_hidden = m->ffn_hidden;
  m->sliding_window = k.IntOr("sliding_window", 0);
  // Without layer_types (ReadLayerTypes), the released models' layout:
  // windowed, full, windowed, ...
  if ((!j.contains("layer_types") || j["layer_types"].is_null()) && m->sliding_window > 0)
    m->sliding_window_pattern = 2;
  for (const char* key : {"swiglu_limit", "initial_context_length"}) k.Use(key);
  UseMoeNeutralKeys(k);
}

// Llama 4's language model (meta-llama/Llama-4-Scout-17B-16E, the
// `text_config` of its config.json; HF Llama4TextConfig): grouped-query
// attention of head_dim; MoE layers of num_local_experts SwiGLU experts of
// intermediate_size (top num_experts_per_tok, a sigmoid router of h x E)
// plus one shared expert of the same width every token uses. Layer i uses
// RoPE when no_rope_layers[i] is 1 (default: all but every
// no_rope_layer_interval-th, 4), and those layers attend in aligned chunks
// of attention_chunk_size tokens (ModelSpec::window_chunked, layer_types
// "chunked_attention"); the others are NoPE layers with full causal
// attention whose queries get a temperature (attn_temperature_tuning,
// floor_scale, attn_scale: one scaling of q, not priced). use_qk_norm: a
// weightless L2 norm of q and k on the RoPE layers, priced as the q/k
// RMSNorm of Qwen3 on every layer (whose 2 x head_dim weights per layer the
// model does not have: 12,288 parameters on Scout). Maverick: dense layers
// between the MoE layers (interleave_moe_layer_step 2, ModelSpec::
// moe_layer_step).
void Llama4(Keys& k, ModelSpec* m, const json& j) {
  LlamaLike(k, m, false);
  m->num_experts = k.Int("num_local_experts");
  m->moe_top_k = k.Int("num_experts_per_tok");
  m->moe_ffn_hidden = m->ffn_hidden;
  m->shared_ffn_hidden = m->ffn_hidden;
  // Every interleave_moe_layer_step-th layer is an MoE layer (HF: layers
  // step-1, 2 step-1, ...), the others dense SwiGLUs of intermediate_size_mlp
  // (Maverick: step 2).
  m->moe_layer_step = k.IntOr("interleave_moe_layer_step", 1);
  if (m->moe_layer_step < 1) k.Fail("'interleave_moe_layer_step' must be >= 1");
  if (m->moe_layer_step > 1) m->ffn_hidden = k.Int("intermediate_size_mlp");
  else k.Use("intermediate_size_mlp");  // the dense layers' width: there are none at step 1
  k.Use("moe_layers");
  if (j.contains("moe_layers") && j["moe_layers"].is_array()) {
    const json& moe = j["moe_layers"];
    std::vector<int> want;
    for (int i = 0; i < m->num_layers; ++i)
      if (!m->DenseLayer(i)) want.push_back(i);
    bool same = moe.size() == want.size();
    for (size_t i = 0; i < want.size() && same; ++i) same = moe[i].is_number_integer() && moe[i].get<int>() == want[i];
    if (!same)
      k.Fail("'moe_layers' is not every " + std::to_string(m->moe_layer_step) + "-th layer from layer " +
             std::to_string(m->moe_layer_step - 1) + " ('interleave_moe_layer_step'); other layouts are not modeled");
  }
  m->qk_norm = k.BoolOr("use_qk_norm", true);
  const int interval = k.IntOr("no_rope_layer_interval", 4);
  if (interval < 1) return k.Fail("'no_rope_layer_interval' must be >= 1");
  k.Use("no_rope_layers");
  if (j.contains("no_rope_layers") && j["no_rope_layers"].is_array() && !j["no_rope_layers"].empty()) {
    const json& rope = j["no_rope_layers"];
    bool regular = static_cast<int>(rope.size()) == m->num_layers;
    for (int i = 0; i < m->num_layers && regular; ++i)
      regular = rope[i].is_number_integer() && rope[i].get<int>() == ((i + 1) % interval != 0 ? 1 : 0);
    if (!regular)
      k.Fail("'no_rope_layers' is not the repeating pattern of 'no_rope_layer_interval' " + std::to_string(interval) +
             " (RoPE and chunked attention on all but every " + std::to_string(interval) +
             "-th layer); other layouts are not modeled");
  }
  if (k.NonNull("attention_chunk_size") && interval != 1) {
    m->sliding_window = k.Int("attention_chunk_size");
    m->window_chunked = true;
    m->sliding_window_pattern = interval;  // (interval 1: every layer NoPE, none chunked)
  }
  k.Use("attention_chunk_size");
  // for_llm_compressor: a loading switch of transformers (the experts as separate modules), same model.
  for (const char* key : {"attn_temperature_tuning", "floor_scale", "attn_scale", "for_llm_compressor"}) k.Use(key);
  UseMoeNeutralKeys(k);
}

// HF `layer_types` (written by recent transformers for many model types,
// and GPT-OSS's own layout): which layers attend through the window. Read
// for every type; it overrides the type's default layout. Only repeating
// patterns are modeled (every layer windowed, or every P-th layer full).
void ReadLayerTypes(Keys& k, const json& j, ModelSpec* m) {
  k.Use("layer_types");
  if (!j.contains("layer_types") || j["layer_types"].is_null()) return;
  const json& types = j["layer_types"];
  std::vector<bool> windowed;
  if (types.is_array())
    for (const json& t : types) {
      const std::string name = t.is_string() ? t.get<std::string>() : "";
      const bool chunked = m->window_chunked && name == "chunked_attention";  // Llama 4
      if (name != "sliding_attention" && name != "full_attention" && !chunked) {
        windowed.clear();
        break;
      }
      windowed.push_back(name == "sliding_attention" || chunked);
    }
  if (static_cast<int>(windowed.size()) != m->num_layers) {
    k.Fail("'layer_types' must list \"sliding_attention\" or \"full_attention\" for each of the " +
           std::to_string(m->num_layers) + " layers");
    return;
  }
  int full = 0, first_full = -1;
  for (int i = 0; i < m->num_layers; ++i)
    if (!windowed[i]) {
      ++full;
      if (first_full < 0) first_full = i;
    }
  if (full == m->num_layers) {  // no layer windowed
    m->sliding_window = 0;
    m->sliding_window_pattern = 0;
    return;
  }
  // Windowed layers need the window, whatever use_sliding_window says.
  if (m->sliding_window <= 0) m->sliding_window = k.IntOr("sliding_window", 0);
  if (m->sliding_window <= 0) {
    k.Fail("'layer_types' names sliding_attention layers but 'sliding_window' is not set");
    return;
  }
  m->sliding_window_pattern = full == 0 ? 0 : first_full + 1;
  bool regular = m->sliding_window_pattern != 1;
  for (int i = 0; i < m->num_layers && regular; ++i) regular = windowed[i] == m->WindowedLayer(i);
  if (!regular)
    k.Fail("'layer_types' does not repeat one pattern (every layer windowed, or every P-th layer full "
           "attention, P >= 2); other layouts are not modeled");
}

Status MapType(const std::string& t, Keys& k, ModelSpec* m, const json& j) {
  if (t == "llama" || t == "mistral" || t == "phi3") {
    LlamaLike(k, m, false);
    m->sliding_window = k.IntOr("sliding_window", 0);
  } else if (t == "qwen3") {
    // Qwen3 dense (Qwen/Qwen3-8B, -0.6B config.json): Llama layout with an
    // explicit head_dim, RMSNorm over each head's q and k, no biases.
    LlamaLike(k, m, false);
    m->qk_norm = true;
    QwenWindow(k, m);
  } else if (t == "olmo2" || t == "olmoe") {
    // OLMo 2 (allenai/OLMo-2-1124-7B config.json) and OLMoE
    // (allenai/OLMoE-1B-7B-0924): Llama layout with the norms after the
    // attention and MLP blocks instead of before (the same two norms and
    // passes) and an RMSNorm over the whole q and k projections, priced as
    // q/k RMSNorms per head (same passes; the per-head count has 2 x
    // head_dim weights where the model has q_dim + kv_dim: 7,936 fewer per
    // layer on OLMo-2-7B, and under TP the norm's statistic would also be
    // summed over the TP group, a few bytes per token, not priced).
    // clip_qkv clamps q, k and v (one elementwise pass, not priced).
    // OLMoE: num_experts SwiGLU experts of intermediate_size, top
    // num_experts_per_tok, no shared expert.
    LlamaLike(k, m, false);
    m->qk_norm = true;
    k.Use("clip_qkv");
    if (t == "olmoe") {
      m->num_experts = k.Int("num_experts");
      m->moe_top_k = k.Int("num_experts_per_tok");
      m->moe_ffn_hidden = m->ffn_hidden;
      UseMoeNeutralKeys(k);
    }
  } else if (t == "smollm3") {
    // SmolLM3 (HuggingFaceTB/SmolLM3-3B config.json): the Llama layout with
    // GQA and tied embeddings, and RoPE left out of the layers whose
    // no_rope_layers entry is 0 (every no_rope_layer_interval-th, 4). Those
    // layers' shapes and costs are a Llama layer's but for the rotation
    // (one elementwise pass over q and k, priced on every layer); the
    // runtime rotates every layer, so it is a model variant there. Windows
    // as qwen2 (use_sliding_window, max_window_layers).
    LlamaLike(k, m, true);
    QwenWindow(k, m);
    k.Use("no_rope_layer_interval");
    k.Use("no_rope_layers");
    if (k.NonNull("no_rope_layers")) {
      const json& rope = k.Value("no_rope_layers");
      if (!rope.is_array()) k.Fail("'no_rope_layers' must be a list of 0 / 1, one per layer");
      else if (static_cast<int>(rope.size()) != m->num_layers)
        k.Fail("'no_rope_layers' has " + std::to_string(rope.size()) + " entries for " +
               std::to_string(m->num_layers) + " layers");
    }
  } else if (t == "qwen2") {
    LlamaLike(k, m, false);
    m->qkv_bias = true;  // Qwen2 attention: biases on q, k, v (not o)
    QwenWindow(k, m);
  } else if (t == "mixtral") {
    // Mixtral (mistralai/Mixtral-8x7B-v0.1 config.json): every layer's MLP is
    // num_local_experts SwiGLU experts of intermediate_size, top-k routed.
    LlamaLike(k, m, false);
    m->sliding_window = k.IntOr("sliding_window", 0);
    m->num_experts = k.Int("num_local_experts");
    m->moe_top_k = k.Int("num_experts_per_tok");
    m->moe_ffn_hidden = m->ffn_hidden;
    UseMoeNeutralKeys(k);
  } else if (t == "phimoe") {
    // Phi-3.5-MoE (microsoft/Phi-3.5-MoE-instruct config.json): Mixtral's
    // layout (num_local_experts SwiGLU experts of intermediate_size, top
    // num_experts_per_tok) with LayerNorms (weight and bias) instead of
    // RMSNorms, biases on q, k, v and o (attention_bias) and on the LM head
    // (lm_head_bias). Priced as RMSNorms with q/k/v biases: the o, norm and
    // head biases (429,376 weights of 41.87B, 0.001%) are not counted, the
    // LayerNorm's mean is not priced, and neither is the router's sparsemixer
    // (it picks the same top 2) nor the input jitter (one elementwise pass).
    LlamaLike(k, m, false, /*linear_biases=*/false, /*qkv_bias_key=*/true);
    (void)k.BoolOr("lm_head_bias", false);  // checked a bool; not counted either way (above)
    k.Use("input_jitter_noise");
    m->sliding_window = k.IntOr("sliding_window", 0);
    m->num_experts = k.Int("num_local_experts");
    m->moe_top_k = k.Int("num_experts_per_tok");
    m->moe_ffn_hidden = m->ffn_hidden;
    UseMoeNeutralKeys(k);
  } else if (t == "qwen2_moe" || t == "qwen3_moe") {
    // Qwen2-MoE (Qwen/Qwen1.5-MoE-A2.7B): QKV biases, routed experts of
    // moe_intermediate_size, one shared expert of
    // shared_expert_intermediate_size scaled by a sigmoid gate (h -> 1).
    // Qwen3-MoE (Qwen/Qwen3-30B-A3B): no biases, explicit head_dim, RMSNorm
    // over q and k per head, no shared expert.
    LlamaLike(k, m, false);
    if (t == "qwen2_moe") m->qkv_bias = true;
    else m->qk_norm = true;
    QwenWindow(k, m);
    m->num_experts = k.Int("num_experts");
    m->moe_top_k = k.Int("num_experts_per_tok");
    m->moe_ffn_hidden = k.Int("moe_intermediate_size");
    m->shared_ffn_hidden = k.IntOr("shared_expert_intermediate_size", 0);
    m->shared_expert_gate = m->shared_ffn_hidden > 0;
    QwenMoeLayers(j, k, m);
    UseMoeNeutralKeys(k);
  } else if (t == "gpt_oss") {
    GptOss(k, m, j);
  } else if (t == "deepseek_v2" || t == "deepseek_v3" || t == "kimi_k2") {
    // kimi_k2 (moonshotai/Kimi-K2-Instruct, -Base, -Thinking config.json):
    // DeepseekV3ForCausalLM itself under its own model_type (Moonshot's
    // deployment guide: set model_type to deepseek_v3 where kimi_k2 is not
    // known), so the same mapping, key for key.
    DeepSeek(k, m, j);
  } else if (t == "llama4_text") {
    Llama4(k, m, j);
  } else if (t == "glm4_moe") {
    GlmMoe(k, m);
  } else if (t == "gemma" || t == "gemma2") {
    LlamaLike(k, m, true);  // GeGLU MLP: gated like SwiGLU; tied embeddings
    if (t == "gemma2") {
      m->norms_per_layer = 4;  // input, post-attention, pre- and post-feedforward RMSNorms
      m->sliding_window = k.IntOr("sliding_window", 4096);
      m->sliding_window_pattern = 2;  // HF Gemma-2: even layers windowed, odd layers full
    }
  } else if (t == "gemma3_text") {
    // Gemma 3 language model (google/gemma-3-1b-pt config.json; the larger
    // sizes' text_config): Gemma-2's four norms per layer and GeGLU MLP,
    // RMSNorm over each head's q and k, tied embeddings, and a window on
    // every layer but each sliding_window_pattern-th (HF: layer i is global
    // when (i + 1) % pattern == 0), or as layer_types lists them.
    LlamaLike(k, m, true);
    m->norms_per_layer = 4;
    m->qk_norm = true;
    m->sliding_window = k.IntOr("sliding_window", 4096);
    const int pattern = k.IntOr("sliding_window_pattern", 6);
    if (pattern == 1) m->sliding_window = 0;  // every layer global
    else m->sliding_window_pattern = pattern;
    if (k.BoolOr("use_bidirectional_attention", false))
      k.Fail("'use_bidirectional_attention': true (non-causal attention) is not modeled; dtplan plans causal "
             "language-model training");
  } else if (t == "gpt2") {
    m->family = ModelFamily::kGpt;
    m->num_layers = k.Int(k.Alias({"n_layer", "num_hidden_layers"}));
    m->hidden = k.Int(k.Alias({"n_embd", "hidden_size"}));
    m->heads = k.Int(k.Alias({"n_head", "num_attention_heads"}));
    m->kv_heads = m->heads;
    const char* inner = k.Alias({"n_inner"});
    m->ffn_hidden = k.Has(inner) ? k.Int(inner) : (k.Use(inner), m->hidden <= (1 << 28) ? 4 * m->hidden : 0);
    m->vocab = k.Int("vocab_size");
    m->max_position = k.IntOr(k.Alias({"n_positions", "max_position_embeddings"}), 1024);
    k.Use("n_ctx");
    m->tied_embeddings = k.BoolOr("tie_word_embeddings", true);
    GptDropout(k, m, {"resid_pdrop", "embd_pdrop", "attn_pdrop"});
  } else if (t == "opt") {
    m->family = ModelFamily::kGpt;
    m->num_layers = k.Int("num_hidden_layers");
    m->hidden = k.Int("hidden_size");
    m->heads = k.Int("num_attention_heads");
    m->kv_heads = m->heads;
    m->ffn_hidden = k.Int("ffn_dim");
    m->vocab = k.Int("vocab_size");
    m->max_position = k.IntOr("max_position_embeddings", 2048);
    m->position_offset = 2;  // OPT's learned positions start at row 2
    m->tied_embeddings = k.BoolOr("tie_word_embeddings", true);
    GptDropout(k, m, {"dropout", "attention_dropout", "activation_dropout"});
    if (k.Has("word_embed_proj_dim") && k.Int("word_embed_proj_dim") != m->hidden)
      k.Fail("'word_embed_proj_dim' != hidden_size (project_in/out layers) is not modeled");
    k.Use("word_embed_proj_dim");
    if (!k.BoolOr("enable_bias", true)) k.Fail("'enable_bias': false is not modeled");
    if (k.BoolOr("_remove_final_layer_norm", false)) k.Fail("'_remove_final_layer_norm': true is not modeled");
  } else if (t == "falcon" || t == "RefinedWeb" || t == "RefinedWebModel") {
    m->family = ModelFamily::kGpt;  // LayerNorm with bias, GeLU MLP (4h)
    m->num_layers = k.Int(k.Alias({"num_hidden_layers", "n_layer"}));
    m->hidden = k.Int("hidden_size");
    m->heads = k.Int(k.Alias({"num_attention_heads", "n_head"}));
    m->vocab = k.Int("vocab_size");
    m->max_position = k.IntOr("max_position_embeddings", 2048);
    m->ffn_hidden = k.IntOr("ffn_hidden_size", 4LL * m->hidden);
    if (k.BoolOr("new_decoder_architecture", false))
      k.Fail("'new_decoder_architecture': true (Falcon-40B/180B layout) is not modeled yet");
    if (k.BoolOr("alibi", false)) k.Fail("'alibi': true (ALiBi positions) is not modeled yet");
    m->kv_heads = k.BoolOr("multi_query", true) ? 1 : m->heads;
    k.Use("num_kv_heads");
    m->norms_per_layer = k.BoolOr("parallel_attn", true) ? 1 : 2;
    m->linear_bias_set = k.BoolOr("bias", false);
    m->learned_pos_set = false;  // rotary
    m->dropout_set = false;
    m->tied_embeddings = k.BoolOr("tie_word_embeddings", true);
    k.Use("apply_residual_connection_post_layernorm");  // where the residual is taken: same cost
  } else {
    return InvalidArgument("internal: no mapping for '" + t + "'");
  }
  return Status::Ok();
}

}  // namespace

const std::vector<std::string>& SupportedHfTypes() {
  static const std::vector<std::string> t = {"llama",       "mistral",     "qwen2",     "qwen3",   "phi3",
                                             "gemma",       "gemma2",      "gemma3_text", "gpt2",  "opt",
                                             "falcon",      "mixtral",     "qwen2_moe", "qwen3_moe", "deepseek_v2",
                                             "deepseek_v3", "kimi_k2",  "glm4_moe",    "gpt_oss",   "llama4_text",
                                             "olmo2",       "olmoe",       "phimoe",      "smollm3"};
  return t;
}

bool IsHfConfig(const json& j) {
  return j.is_object() && (j.contains("model_type") || j.contains("num_hidden_layers") || j.contains("n_layer"));
}

StatusOr<ModelSpec> ModelFromHfConfig(const json& j, const std::string& where) {
  Keys k(j, where);
  if (!k.ok()) return k.status();
  if (!j.contains("model_type"))
    return InvalidArgument(where + ": HuggingFace config without 'model_type'; add it (one of: " +
                           Join(SupportedHfTypes()) + ")");
  const std::string t = k.StrOr("model_type", "");
  const bool known = std::find(SupportedHfTypes().begin(), SupportedHfTypes().end(), t) != SupportedHfTypes().end() ||
                     t == "RefinedWeb" || t == "RefinedWebModel";
  if (!known && j.contains("text_config") && j["text_config"].is_object())
    return InvalidArgument(where + ": model_type '" + t + "' is a multimodal config (it has a 'text_config'); its "
                           "vision or audio tower is not modeled. To plan its language model, save the "
                           "'text_config' object as its own config.json (it names its own model_type, e.g. "
                           "gemma3_text); supported model_types: " + Join(SupportedHfTypes()));
  if (!known)
    return InvalidArgument(where + ": model_type '" + t + "' is not supported; supported model_types: " +
                           Join(SupportedHfTypes()) + " (or write the model in dtplan's own schema, docs/formats.md)");
  ModelSpec m;
  m.source_type = t;
  m.name = k.StrOr("_name_or_path", k.StrOr("name", ""));  // LoadModel falls back to the file name
  DT_RETURN_IF_ERROR(MapType(t, k, &m, j));
  ReadLayerTypes(k, j, &m);
  // HF configs carry no training length; long-context models would default
  // to 128k tokens, so cap the default at 8192 (override with --seq-length).
  m.seq_length = k.IntOr("seq_length", std::min(m.max_position, 8192));
  if (!k.ok()) return k.status();
  for (const std::string& key : ExpertKeys())
    if (!m.moe() && j.contains(key) && !j[key].is_null())
      return InvalidArgument(where + ": key '" + key + "' (mixture-of-experts / latent attention) on model_type '" +
                             t + "' is not modeled by dtplan; it changes the model's size and cost, so the config "
                             "is refused (MoE is mapped for mixtral, qwen2_moe, qwen3_moe, deepseek_v2, deepseek_v3, kimi_k2, "
                           "glm4_moe, gpt_oss, llama4_text, olmoe and phimoe only)");
  if (j.contains("quantization_config"))
    return InvalidArgument(where + ": key 'quantization_config' (quantized weights) is not modeled; dtplan plans "
                           "bf16/fp32 training - remove it for a full-precision plan");
  if (std::string key = k.Unclaimed(); !key.empty())
    return InvalidArgument(where + ": key '" + key + "' is not known to dtplan's '" + t +
                           "' mapping and may change the model's size or cost, so it is refused rather than "
                           "ignored; if it does not (a tokenizer or logging setting), delete it from your copy");
  DT_RETURN_IF_ERROR(Validate(m, where));
  return m;
}

}  // namespace dt
