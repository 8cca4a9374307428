// HfConfig: a HuggingFace config.json read into a ModelSpec, field by field,
// for an explicit list of model_types (SupportedHfTypes). Honest by
// construction:
//   * an unknown model_type is refused, listing the supported ones;
//   * a mixture-of-experts or latent-attention model_type (mixtral,
//     qwen2_moe, qwen3_moe, deepseek_v2, deepseek_v3) is refused: experts are
//     not modeled yet and it would be planned as a far smaller dense model;
//   * every key of the file must be either mapped (it sets a ModelSpec
//     field), known to leave parameters, FLOPs and memory unchanged (token
//     ids, dropout rates, norm epsilons, rotary base, ...), or it is refused
//     by name - a key that may change size or cost is never ignored.
// Pure; errors are InvalidArgument values naming `where`, the key and the fix.
#pragma once

#include <string>
#include <vector>

#include "base/json_fields.h"
#include "planner/spec/model_spec.h"

namespace dt {

// True when j looks like a HuggingFace config (has "model_type", or the
// GPT-2 / Llama layer-count keys) rather than our schema.
bool IsHfConfig(const json& j);

StatusOr<ModelSpec> ModelFromHfConfig(const json& j, const std::string& where);

// The model_types ModelFromHfConfig maps, in the order errors list them.
const std::vector<std::string>& SupportedHfTypes();

}  // namespace dt
