// Fuzz target: a model file (dtplan's format, or a HuggingFace config.json
// through ModelFromJson's model_type dispatch) and, when it loads, the
// planner's size arithmetic on it. The HF reader is also called directly, so
// its checks are reached for inputs the dispatch would send elsewhere.
#include "planner/memory/param_count.h"
#include "planner/spec/hf_config.h"
#include "planner/spec/model_spec.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = dt::fuzz::Text(data, size);
  auto m = dt::ModelFromJsonText(text, "fuzz/model.json");
  if (m.ok()) (void)m->TotalParams();
  dt::json j = dt::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) (void)dt::ModelFromHfConfig(j, "fuzz");
  return 0;
}
