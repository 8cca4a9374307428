// Fuzz target: a model file (dtplan's format, or a HuggingFace config.json
// through ModelFromJson's model_type dispatch) and, when it loads, the
// planner's size arithmetic on it.
#include "planner/memory/param_count.h"
#include "planner/spec/hf_config.h"
#include "planner/spec/model_spec.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto m = dt::LoadModel(dt::fuzz::InputFile(data, size, "model.json"));
  if (m.ok()) (void)m->TotalParams();
  dt::json j = dt::json::parse(dt::fuzz::Text(data, size), nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) (void)dt::ModelFromHfConfig(j, "fuzz");
  return 0;
}
