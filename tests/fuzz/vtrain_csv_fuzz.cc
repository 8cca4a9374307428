// Fuzz target: a vTrain ground-truth CSV.
#include "planner/validate/case.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)dt::VtrainCasesFromCsvText(dt::fuzz::Text(data, size), "fuzz/cases.csv");
  return 0;
}
