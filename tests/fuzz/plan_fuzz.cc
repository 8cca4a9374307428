// Fuzz target: a plan file (model, cluster and plan, as dtplan --out writes).
#include "planner/spec/plan_spec.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)dt::PlanFileFromJsonText(dt::fuzz::Text(data, size), "fuzz/plan.json");
  return 0;
}
