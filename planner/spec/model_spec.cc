#include "planner/spec/model_spec.h"

#include "planner/spec/hf_config.h"

#include <algorithm>
#include <filesystem>

namespace dt {

const char* ToString(ModelFamily f) { return f == ModelFamily::kGpt ? "gpt" : "llama"; }

bool ModelSpec::FamilyLayout() const {
  // Dropout on or off is within both families' layouts (the runtime's GPT
  // layer trains with or without it), except dropout in a Llama model.
  const bool dropout_in_layout = !dropout_set || !*dropout_set || family == ModelFamily::kGpt;
  return (head_dim_set == 0 || head_dim_set * heads == hidden) && !learned_pos_set && !linear_bias_set &&
         dropout_in_layout && !qkv_bias && norms_per_layer == 2 && position_offset == 0 && sliding_window == 0 &&
         !qk_norm && !attention_sinks && rotary_fraction == 1.0;
}

bool ModelSpec::WindowedLayer(int layer) const {
  if (sliding_window <= 0) return false;
  const int p = sliding_window_pattern;
  return p < 2 || layer % p != p - 1;
}

int ModelSpec::DenseLayers(int first, int count) const {
  if (!has_dense_layers()) return 0;
  int n = 0;
  for (int i = first; i < first + count; ++i) n += DenseLayer(i) ? 1 : 0;
  return n;
}

int ModelSpec::WindowedLayers(int first, int count) const {
  int n = 0;
  for (int i = first; i < first + count; ++i) n += WindowedLayer(i) ? 1 : 0;
  return n;
}

namespace {
// A layer's parameters with `experts_used` of its routed experts (MoE); the
// dense MLP otherwise. Linear biases never combine with experts (Validate).
int64_t LayerParamsWith(const ModelSpec& m, int64_t experts_used) {
  const int64_t h = m.hidden, f = m.ffn_hidden, q = m.q_dim(), kv = m.kv_dim();
  const int64_t attn = m.AttentionParams();
  const int64_t mats = m.gated_mlp() ? 3 : 2;
  int64_t mlp = mats * h * f;
  if (m.moe()) {
    mlp = static_cast<int64_t>(m.num_experts) * h                  // router
          + experts_used * m.ExpertParams()                        // routed experts
          + mats * h * m.shared_ffn_hidden                         // shared experts
          + (m.shared_expert_gate ? h : 0);                        // shared-expert gate
  }
  int64_t norms = static_cast<int64_t>(m.norms_per_layer) * (m.layer_norm() ? 2 : 1) * h;
  if (m.qk_norm) norms += 2LL * m.head_dim();
  int64_t biases = 0;
  if (m.linear_bias()) {
    biases = (q + 2 * kv) + h;  // QKV, proj
    if (!m.moe()) biases += (m.gated_mlp() ? 2 : 1) * f + h;  // fc1 (+gate), fc2
    else biases += m.num_experts + (m.shared_ffn_hidden > 0 ? 2 * m.shared_ffn_hidden + h : 0);  // router, shared
  } else if (m.qkv_bias) {
    biases = q + 2 * kv;
  }
  const int64_t sinks = m.attention_sinks ? m.heads : 0;
  return attn + mlp + norms + biases + sinks;
}
}  // namespace

int64_t ModelSpec::AttentionParams() const {
  const int64_t h = hidden, a = heads;
  if (!mla()) return h * (q_dim() + 2 * kv_dim()) + q_dim() * h;  // QKV + output projection
  const int64_t qk = qk_nope_head_dim + qk_rope_head_dim;
  const int64_t q = q_lora_rank > 0 ? h * q_lora_rank + q_lora_rank + q_lora_rank * a * qk  // W_dq, norm, W_uq
                                    : h * a * qk;                                          // W_q
  const int64_t kv = h * (kv_lora_rank + qk_rope_head_dim) + kv_lora_rank +  // W_dkv (+ RoPE key), norm
                     static_cast<int64_t>(kv_lora_rank) * a * (qk_nope_head_dim + v_head_dim);  // W_ukv
  return q + kv + a * v_head_dim * h;  // + output projection
}

ModelSpec DenseLayerModel(const ModelSpec& m) {
  ModelSpec d = m;
  d.num_experts = d.moe_top_k = d.moe_ffn_hidden = d.shared_ffn_hidden = 0;
  d.shared_expert_gate = false;
  d.first_dense_layers = 0;
  d.moe_layer_step = 1;
  return d;
}

int64_t ModelSpec::DenseLayerParams() const { return DenseLayerModel(*this).LayerParams(); }

int64_t ModelSpec::ExpertParams() const {
  if (!moe()) return 0;
  const int64_t weights = (gated_mlp() ? 3 : 2) * static_cast<int64_t>(hidden) * moe_ffn_hidden;
  // Biases (GPT-OSS): fc1's gate and up, and fc2's.
  const int64_t biases = linear_bias() ? 2LL * moe_ffn_hidden + hidden : 0;
  return weights + biases;
}

int64_t ModelSpec::LayerParams() const { return LayerParamsWith(*this, num_experts); }
int64_t ModelSpec::ActiveLayerParams() const { return LayerParamsWith(*this, moe() ? moe_top_k : 0); }

int64_t ModelSpec::EmbeddingParams() const {
  int64_t e = static_cast<int64_t>(vocab) * hidden;
  // Megatron and the runtime allocate every learned position, not just seq_length.
  if (learned_positions()) e += static_cast<int64_t>(position_rows()) * hidden;
  return e;
}

int64_t ModelSpec::OutputParams() const {
  int64_t final_norm = layer_norm() ? 2 * hidden : hidden;
  int64_t head = tied_embeddings ? 0 : static_cast<int64_t>(vocab) * hidden;
  return final_norm + head;
}

int64_t ModelSpec::MtpParams() const {
  const int64_t h = hidden, norm = layer_norm() ? 2 * h : h;
  return static_cast<int64_t>(mtp_layers) * (LayerParams() + 2 * h * h + 3 * norm);
}

int64_t ModelSpec::TotalParams() const {
  const int64_t moe_l = moe() ? moe_layers() : num_layers;
  return EmbeddingParams() + moe_l * LayerParams() + (num_layers - moe_l) * DenseLayerParams() + OutputParams();
}

int64_t ModelSpec::ActiveParams() const {
  const int64_t moe_l = moe() ? moe_layers() : num_layers;
  return EmbeddingParams() + moe_l * ActiveLayerParams() + (num_layers - moe_l) * DenseLayerParams() +
         OutputParams();
}

Status Validate(const ModelSpec& m, const std::string& where) {
  auto bad = [&](const std::string& s) { return InvalidArgument(where + ": " + s); };
  if (m.num_layers < 1) return bad("'num_layers' must be >= 1");
  if (m.hidden < 1) return bad("'hidden_size' must be >= 1");
  if (m.heads < 1) return bad("'num_attention_heads' must be >= 1");
  // Without an explicit head_dim a head is hidden / heads wide (with one,
  // e.g. GLM-4.5's 96 heads of 128 over hidden 4096, the q width differs).
  if (m.head_dim_set <= 0 && m.hidden % m.heads != 0)
    return bad("'hidden_size' (" + std::to_string(m.hidden) + ") must be divisible by " +
               "'num_attention_heads' (" + std::to_string(m.heads) + "), or give 'head_dim'");
  if (m.kv_heads < 1 || m.heads % m.kv_heads != 0)
    return bad("'num_kv_heads' (" + std::to_string(m.kv_heads) +
               ") must divide 'num_attention_heads' (" + std::to_string(m.heads) + ")");
  if (m.ffn_hidden < 1) return bad("'ffn_hidden_size' must be >= 1");
  if (m.vocab < 1) return bad("'vocab_size' must be >= 1");
  if (!(m.rope_theta > 0)) return bad("'rope_theta' must be > 0");
  if (!(m.rotary_fraction > 0 && m.rotary_fraction <= 1))
    return bad("'rotary_fraction' (partial_rotary_factor) must be in (0, 1]");
  if (!(m.rms_norm_eps > 0)) return bad("'rms_norm_eps' must be > 0");
  if (m.seq_length < 1) return bad("'seq_length' must be >= 1");
  if (m.head_dim_set < 0) return bad("'head_dim' must be >= 1");
  // q_dim() and kv_dim() are int products: keep them (and the MLA widths)
  // in range, as every single field is.
  if (static_cast<int64_t>(m.heads) * std::max(m.head_dim(), std::max(m.v_head_dim, 1)) > (int64_t{1} << 30))
    return bad("'num_attention_heads' x 'head_dim' = " +
               std::to_string(static_cast<int64_t>(m.heads) * m.head_dim()) + " is outside 1 .. 2^30");
  if (m.norms_per_layer < 1 || m.norms_per_layer > 4) return bad("'norms_per_layer' must be 1..4");
  if (m.sliding_window < 0) return bad("'sliding_window' must be >= 0 (0: no window)");
  if (m.sliding_window_pattern < 0 || m.sliding_window_pattern == 1)
    return bad("'sliding_window_pattern' (" + std::to_string(m.sliding_window_pattern) +
               ") must be 0 (every layer windowed) or >= 2 (every P-th layer attends to the whole prefix)");
  if (m.sliding_window_pattern > 0 && m.sliding_window == 0)
    return bad("'sliding_window_pattern' needs 'sliding_window' > 0");
  if (m.window_chunked && m.sliding_window == 0)
    return bad("'window_chunked' needs 'sliding_window' > 0 (the chunk length)");
  if (m.num_experts < 0 || m.moe_top_k < 0 || m.moe_ffn_hidden < 0 || m.shared_ffn_hidden < 0)
    return bad("MoE fields must be >= 0");
  if (m.moe()) {
    if (m.moe_top_k < 1 || m.moe_top_k > m.num_experts)
      return bad("'moe_top_k' (" + std::to_string(m.moe_top_k) + ") must be 1 .. 'num_experts' (" +
                 std::to_string(m.num_experts) + ")");
    if (m.moe_ffn_hidden < 1) return bad("'moe_ffn_hidden_size' must be >= 1 when 'num_experts' > 0");
    if (m.linear_bias() && !m.gated_mlp())
      return bad("biases in GeLU (GPT-family) expert MLPs are not modeled; use family \"llama\" or "
                 "\"linear_bias\": false");
  } else if (m.moe_top_k != 0 || m.moe_ffn_hidden != 0 || m.shared_ffn_hidden != 0 || m.shared_expert_gate) {
    return bad("'moe_top_k', 'moe_ffn_hidden_size', 'shared_expert_ffn_hidden_size' and 'shared_expert_gate' "
               "need 'num_experts' > 0");
  }
  if (m.first_dense_layers < 0 || (m.first_dense_layers > 0 && !m.moe()) || m.first_dense_layers >= m.num_layers)
    return bad("'first_dense_layers' (" + std::to_string(m.first_dense_layers) +
               ") needs an MoE model and must be below 'num_layers'");
  if (m.moe_layer_step < 1 || (m.moe_layer_step > 1 && !m.moe()) || m.moe_layer_step > m.num_layers)
    return bad("'moe_layer_step' (" + std::to_string(m.moe_layer_step) +
               ") must be 1 (every layer MoE) or, for an MoE model, 2 .. 'num_layers' (an MoE layer every that many)");
  if (m.moe() && m.moe_layers() < 1) return bad("an MoE model needs at least one MoE layer");
  if (m.mtp_layers < 0 || m.mtp_layers > 16)
    return bad("'mtp_layers' (" + std::to_string(m.mtp_layers) + ") must be 0 .. 16 (multi-token prediction modules)");
  if (m.q_lora_rank < 0 || m.kv_lora_rank < 0 || m.qk_nope_head_dim < 0 || m.qk_rope_head_dim < 0 || m.v_head_dim < 0)
    return bad("MLA fields must be >= 0");
  if (m.mla()) {
    if (m.qk_nope_head_dim < 1 || m.qk_rope_head_dim < 1 || m.v_head_dim < 1)
      return bad("MLA ('kv_lora_rank' > 0) needs 'qk_nope_head_dim', 'qk_rope_head_dim' and 'v_head_dim' >= 1");
    if (m.head_dim() != m.qk_nope_head_dim + m.qk_rope_head_dim || m.kv_heads != m.heads)
      return bad("MLA: 'head_dim' must be qk_nope_head_dim + qk_rope_head_dim and 'num_kv_heads' = heads");
    if (m.linear_bias() || m.qkv_bias) return bad("MLA with linear biases is not modeled");
  } else if (m.q_lora_rank || m.qk_nope_head_dim || m.qk_rope_head_dim || m.v_head_dim) {
    return bad("'q_lora_rank', 'qk_nope_head_dim', 'qk_rope_head_dim' and 'v_head_dim' need 'kv_lora_rank' > 0 (MLA)");
  }
  if (m.learned_positions() && m.seq_length > m.max_position)
    return bad("'seq_length' (" + std::to_string(m.seq_length) + ") exceeds 'max_position' (" +
               std::to_string(m.max_position) + "); lower --seq-length or raise max_position");
  return Status::Ok();
}

namespace {
// Integer fields are ints: range-checked in the int64 they were read as, so
// 4294967328 is an error, not 32 layers.
constexpr int64_t kMaxModelInt = 1LL << 30;
int Int32(FieldReader& r, const char* key) {
  const int64_t v = r.Int(key);
  r.Range(key, v, 0, kMaxModelInt);
  return r.ok() ? static_cast<int>(v) : 0;
}
int Int32Or(FieldReader& r, const char* key, int64_t dflt) {
  const int64_t v = r.IntOr(key, dflt);
  r.Range(key, v, 0, kMaxModelInt);
  return r.ok() ? static_cast<int>(v) : 0;
}
}  // namespace

StatusOr<ModelSpec> ModelFromJson(const json& j, const std::string& where) {
  FieldReader r(j, where);
  if (!r.ok()) return r.status();
  ModelSpec m;
  if (IsHfConfig(j)) return ModelFromHfConfig(j, where);
  {
    std::string fam = r.StrOr("family", "gpt");
    if (fam == "gpt") {
      m.family = ModelFamily::kGpt;
    } else if (fam == "llama") {
      m.family = ModelFamily::kLlama;
    } else {
      r.Fail("field 'family' = \"" + fam + "\" is unknown; use \"gpt\" or \"llama\"");
    }
    m.name = r.StrOr("name", "model");
    m.num_layers = Int32(r, "num_layers");
    m.hidden = Int32(r, "hidden_size");
    m.heads = Int32(r, "num_attention_heads");
    m.kv_heads = Int32Or(r, "num_kv_heads", m.heads);
    m.ffn_hidden = Int32Or(r, "ffn_hidden_size", 4LL * m.hidden);
    m.vocab = Int32(r, "vocab_size");
    m.seq_length = Int32(r, "seq_length");
    m.max_position = Int32Or(r, "max_position", m.seq_length);
    m.tied_embeddings = r.BoolOr("tie_word_embeddings", m.family == ModelFamily::kGpt);
    m.rope_theta = r.NumOr("rope_theta", m.rope_theta);
    m.rms_norm_eps = r.NumOr("rms_norm_eps", m.rms_norm_eps);
    m.rope_scaled = r.BoolOr("rope_scaling", false);
    m.rotary_fraction = r.NumOr("rotary_fraction", 1.0);
    m.head_dim_set = Int32Or(r, "head_dim", 0);
    if (r.Has("learned_positions")) m.learned_pos_set = r.BoolOr("learned_positions", true);
    if (r.Has("linear_bias")) m.linear_bias_set = r.BoolOr("linear_bias", true);
    if (r.Has("dropout")) m.dropout_set = r.BoolOr("dropout", true);
    m.qkv_bias = r.BoolOr("qkv_bias", false);
    m.norms_per_layer = Int32Or(r, "norms_per_layer", 2);
    m.position_offset = Int32Or(r, "position_offset", 0);
    m.sliding_window = Int32Or(r, "sliding_window", 0);
    m.sliding_window_pattern = Int32Or(r, "sliding_window_pattern", 0);
    m.window_chunked = r.BoolOr("window_chunked", false);
    m.attention_sinks = r.BoolOr("attention_sinks", false);
    m.source_type = r.StrOr("source_type", "");
    m.qk_norm = r.BoolOr("qk_norm", false);
    m.num_experts = Int32Or(r, "num_experts", 0);
    m.moe_top_k = Int32Or(r, "moe_top_k", 0);
    m.moe_ffn_hidden = Int32Or(r, "moe_ffn_hidden_size", 0);
    m.shared_ffn_hidden = Int32Or(r, "shared_expert_ffn_hidden_size", 0);
    m.shared_expert_gate = r.BoolOr("shared_expert_gate", false);
    m.first_dense_layers = Int32Or(r, "first_dense_layers", 0);
    m.moe_layer_step = Int32Or(r, "moe_layer_step", 1);
    m.mtp_layers = Int32Or(r, "mtp_layers", 0);
    m.q_lora_rank = Int32Or(r, "q_lora_rank", 0);
    m.kv_lora_rank = Int32Or(r, "kv_lora_rank", 0);
    m.qk_nope_head_dim = Int32Or(r, "qk_nope_head_dim", 0);
    m.qk_rope_head_dim = Int32Or(r, "qk_rope_head_dim", 0);
    m.v_head_dim = Int32Or(r, "v_head_dim", 0);
    r.RejectUnknown();
  }
  if (!r.ok()) return r.status();
  DT_RETURN_IF_ERROR(Validate(m, where));
  return m;
}

namespace {

StatusOr<ModelSpec> ModelFromFileJson(const json& j, const std::string& path) {
  auto m = ModelFromJson(j, "model file '" + path + "'");
  if (m.ok() && (m->name.empty() || m->name == "model"))  // unnamed: use the file's stem
    m->name = std::filesystem::path(path).stem().string();
  return m;
}

}  // namespace

StatusOr<ModelSpec> ModelFromJsonText(const std::string& text, const std::string& path) {
  DT_ASSIGN_OR_RETURN(json j, ParseJsonText(text, path));
  return ModelFromFileJson(j, path);
}

StatusOr<ModelSpec> LoadModel(const std::string& path) {
  DT_ASSIGN_OR_RETURN(json j, ReadJsonFile(path));
  return ModelFromFileJson(j, path);
}

json ToJson(const ModelSpec& m) {
  json j{{"name", m.name},
              {"family", ToString(m.family)},
              {"num_layers", m.num_layers},
              {"hidden_size", m.hidden},
              {"num_attention_heads", m.heads},
              {"num_kv_heads", m.kv_heads},
              {"ffn_hidden_size", m.ffn_hidden},
              {"vocab_size", m.vocab},
              {"seq_length", m.seq_length},
              {"max_position", m.max_position},
              {"tie_word_embeddings", m.tied_embeddings}};
  if (m.family == ModelFamily::kLlama) {  // RoPE base and RMSNorm epsilon (the runtime uses both)
    j["rope_theta"] = m.rope_theta;
    j["rms_norm_eps"] = m.rms_norm_eps;
    if (m.rope_scaled) j["rope_scaling"] = true;
    if (m.rotary_fraction != 1.0) j["rotary_fraction"] = m.rotary_fraction;
  }
  // Layout details only when they differ from the family's (so plan files
  // and checkpoints of family-layout models keep their exact form).
  if (m.head_dim_set > 0 && m.head_dim_set * m.heads != m.hidden) j["head_dim"] = m.head_dim_set;
  if (m.learned_pos_set) j["learned_positions"] = *m.learned_pos_set;
  if (m.linear_bias_set) j["linear_bias"] = *m.linear_bias_set;
  if (m.dropout_set) j["dropout"] = *m.dropout_set;
  if (m.qkv_bias) j["qkv_bias"] = true;
  if (m.norms_per_layer != 2) j["norms_per_layer"] = m.norms_per_layer;
  if (m.position_offset != 0) j["position_offset"] = m.position_offset;
  if (m.sliding_window != 0) j["sliding_window"] = m.sliding_window;
  if (m.sliding_window_pattern != 0) j["sliding_window_pattern"] = m.sliding_window_pattern;
  if (m.window_chunked) j["window_chunked"] = true;
  if (m.attention_sinks) j["attention_sinks"] = true;
  if (!m.source_type.empty()) j["source_type"] = m.source_type;
  if (m.qk_norm) j["qk_norm"] = true;
  if (m.moe()) {
    j["num_experts"] = m.num_experts;
    j["moe_top_k"] = m.moe_top_k;
    j["moe_ffn_hidden_size"] = m.moe_ffn_hidden;
    if (m.shared_ffn_hidden > 0) j["shared_expert_ffn_hidden_size"] = m.shared_ffn_hidden;
    if (m.shared_expert_gate) j["shared_expert_gate"] = true;
    if (m.first_dense_layers > 0) j["first_dense_layers"] = m.first_dense_layers;
    if (m.moe_layer_step > 1) j["moe_layer_step"] = m.moe_layer_step;
  }
  if (m.mtp_layers > 0) j["mtp_layers"] = m.mtp_layers;
  if (m.mla()) {
    j["q_lora_rank"] = m.q_lora_rank;
    j["kv_lora_rank"] = m.kv_lora_rank;
    j["qk_nope_head_dim"] = m.qk_nope_head_dim;
    j["qk_rope_head_dim"] = m.qk_rope_head_dim;
    j["v_head_dim"] = m.v_head_dim;
  }
  return j;
}

Status CheckSequenceFits(const ModelSpec& m, int64_t seq_length) {
  if (!m.learned_positions() || seq_length <= m.max_position) return Status::Ok();
  return InvalidArgument(std::to_string(seq_length) + " exceeds the model's " + std::to_string(m.max_position) +
                         " learned positions; use at most " + std::to_string(m.max_position));
}

}  // namespace dt
