#include "planner/spec/model_spec.h"

#include <algorithm>
#include <filesystem>

namespace dt {

const char* ToString(ModelFamily f) { return f == ModelFamily::kGpt ? "gpt" : "llama"; }

int64_t ModelSpec::LayerParams() const {
  const int64_t h = hidden, f = ffn_hidden, kv = kv_dim();
  int64_t attn = h * (h + 2 * kv) + h * h;  // QKV + output projection
  int64_t mlp = gated_mlp() ? 3 * h * f : 2 * h * f;
  int64_t norms = 0, biases = 0;
  if (family == ModelFamily::kGpt) {
    norms = 2 * 2 * h;                  // two LayerNorms, weight + bias
    biases = (h + 2 * kv) + h + f + h;  // QKV, proj, fc1, fc2
  } else {
    norms = 2 * h;  // two RMSNorms, weight only
  }
  return attn + mlp + norms + biases;
}

int64_t ModelSpec::EmbeddingParams() const {
  int64_t e = static_cast<int64_t>(vocab) * hidden;
  // Megatron and the runtime allocate every learned position, not just seq_length.
  if (learned_positions()) e += static_cast<int64_t>(std::max(max_position, seq_length)) * hidden;
  return e;
}

int64_t ModelSpec::OutputParams() const {
  int64_t final_norm = family == ModelFamily::kGpt ? 2 * hidden : hidden;
  int64_t head = tied_embeddings ? 0 : static_cast<int64_t>(vocab) * hidden;
  return final_norm + head;
}

int64_t ModelSpec::TotalParams() const {
  return EmbeddingParams() + num_layers * LayerParams() + OutputParams();
}

Status Validate(const ModelSpec& m, const std::string& where) {
  auto bad = [&](const std::string& s) { return InvalidArgument(where + ": " + s); };
  if (m.num_layers < 1) return bad("'num_layers' must be >= 1");
  if (m.hidden < 1) return bad("'hidden_size' must be >= 1");
  if (m.heads < 1) return bad("'num_attention_heads' must be >= 1");
  if (m.hidden % m.heads != 0)
    return bad("'hidden_size' (" + std::to_string(m.hidden) + ") must be divisible by " +
               "'num_attention_heads' (" + std::to_string(m.heads) + ")");
  if (m.kv_heads < 1 || m.heads % m.kv_heads != 0)
    return bad("'num_kv_heads' (" + std::to_string(m.kv_heads) +
               ") must divide 'num_attention_heads' (" + std::to_string(m.heads) + ")");
  if (m.ffn_hidden < 1) return bad("'ffn_hidden_size' must be >= 1");
  if (m.vocab < 1) return bad("'vocab_size' must be >= 1");
  if (!(m.rope_theta > 0)) return bad("'rope_theta' must be > 0");
  if (!(m.rms_norm_eps > 0)) return bad("'rms_norm_eps' must be > 0");
  if (m.seq_length < 1) return bad("'seq_length' must be >= 1");
  if (m.learned_positions() && m.seq_length > m.max_position)
    return bad("'seq_length' (" + std::to_string(m.seq_length) + ") exceeds 'max_position' (" +
               std::to_string(m.max_position) + "); lower --seq-length or raise max_position");
  return Status::Ok();
}

StatusOr<ModelSpec> ModelFromJson(const json& j, const std::string& where) {
  FieldReader r(j, where);
  if (!r.ok()) return r.status();
  ModelSpec m;
  if (r.Has("num_hidden_layers")) {
    // HuggingFace config.json.
    std::string mt = r.StrOr("model_type", "llama");
    m.family = (mt == "gpt2" || mt == "gpt" || mt == "gpt_neox" || mt == "opt") ? ModelFamily::kGpt
                                                                               : ModelFamily::kLlama;
    m.name = r.StrOr("_name_or_path", r.StrOr("name", ""));  // LoadModel falls back to the file name
    m.num_layers = static_cast<int>(r.Int("num_hidden_layers"));
    m.hidden = static_cast<int>(r.Int("hidden_size"));
    m.heads = static_cast<int>(r.Int("num_attention_heads"));
    m.kv_heads = static_cast<int>(r.IntOr("num_key_value_heads", m.heads));
    m.ffn_hidden = static_cast<int>(r.IntOr("intermediate_size", 4LL * m.hidden));
    m.vocab = static_cast<int>(r.Int("vocab_size"));
    m.max_position = static_cast<int>(r.IntOr("max_position_embeddings", 2048));
    // HF configs carry no training length; long-context models would default
    // to 128k tokens, so cap the default at 8192 (override with --seq-length).
    m.seq_length = static_cast<int>(r.IntOr("seq_length", std::min(m.max_position, 8192)));
    m.tied_embeddings = r.BoolOr("tie_word_embeddings", m.family == ModelFamily::kGpt);
    m.rope_theta = r.NumOr("rope_theta", m.rope_theta);
    m.rms_norm_eps = r.NumOr("rms_norm_eps", m.rms_norm_eps);
  } else {
    std::string fam = r.StrOr("family", "gpt");
    if (fam == "gpt") {
      m.family = ModelFamily::kGpt;
    } else if (fam == "llama") {
      m.family = ModelFamily::kLlama;
    } else {
      r.Fail("field 'family' = \"" + fam + "\" is unknown; use \"gpt\" or \"llama\"");
    }
    m.name = r.StrOr("name", "model");
    m.num_layers = static_cast<int>(r.Int("num_layers"));
    m.hidden = static_cast<int>(r.Int("hidden_size"));
    m.heads = static_cast<int>(r.Int("num_attention_heads"));
    m.kv_heads = static_cast<int>(r.IntOr("num_kv_heads", m.heads));
    m.ffn_hidden = static_cast<int>(r.IntOr("ffn_hidden_size", 4LL * m.hidden));
    m.vocab = static_cast<int>(r.Int("vocab_size"));
    m.seq_length = static_cast<int>(r.Int("seq_length"));
    m.max_position = static_cast<int>(r.IntOr("max_position", m.seq_length));
    m.tied_embeddings = r.BoolOr("tie_word_embeddings", m.family == ModelFamily::kGpt);
    m.rope_theta = r.NumOr("rope_theta", m.rope_theta);
    m.rms_norm_eps = r.NumOr("rms_norm_eps", m.rms_norm_eps);
  }
  if (!r.ok()) return r.status();
  DT_RETURN_IF_ERROR(Validate(m, where));
  return m;
}

StatusOr<ModelSpec> LoadModel(const std::string& path) {
  DT_ASSIGN_OR_RETURN(json j, ReadJsonFile(path));
  auto m = ModelFromJson(j, "model file '" + path + "'");
  if (m.ok() && (m->name.empty() || m->name == "model"))  // unnamed: use the file's stem
    m->name = std::filesystem::path(path).stem().string();
  return m;
}

json ToJson(const ModelSpec& m) {
  return json{{"name", m.name},
              {"family", ToString(m.family)},
              {"num_layers", m.num_layers},
              {"hidden_size", m.hidden},
              {"num_attention_heads", m.heads},
              {"num_kv_heads", m.kv_heads},
              {"ffn_hidden_size", m.ffn_hidden},
              {"vocab_size", m.vocab},
              {"seq_length", m.seq_length},
              {"max_position", m.max_position},
              {"tie_word_embeddings", m.tied_embeddings},
              {"rope_theta", m.rope_theta},
              {"rms_norm_eps", m.rms_norm_eps}};
}

}  // namespace dt
