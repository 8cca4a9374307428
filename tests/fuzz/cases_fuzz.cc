// Fuzz target: a validation case file (JSON schema of shared/validation).
#include "planner/validate/case.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)dt::JsonCasesFromText(dt::fuzz::Text(data, size), "fuzz/cases.json");
  return 0;
}
