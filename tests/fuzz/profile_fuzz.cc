// Fuzz target: a hardware profile file (parsed, then checked and prepared).
#include "planner/profile/profile.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)dt::ProfileFromJsonText(dt::fuzz::Text(data, size), "fuzz/profile.json");
  return 0;
}
