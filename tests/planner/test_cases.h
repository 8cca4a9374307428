// One-case validation files for planner tests: a tiny GPT on A100s with
// the given source string, plan fields and layer count, as the text
// JsonCasesFromText reads (planner/validate/json_cases.cc). The plan
// fields follow "global_batch_size": 64 inside "plan", each with a
// leading comma (e.g. R"(, "tp": 1, "pp": 2, "dp": 4)").
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "planner/validate/case.h"

namespace dt::testing_cases {

inline std::string OneJsonCase(const std::string& source, const std::string& plan_fields, int num_layers) {
  return R"({"cases": [{"id": "x", "source": ")" + source + R"(",
      "hardware": {"gpu": "A100-SXM4-80GB", "gpus_per_node": 8},
      "model": {"family": "gpt", "num_layers": )" +
         std::to_string(num_layers) + R"(, "hidden_size": 256, "num_attention_heads": 4,
                "vocab_size": 512, "seq_length": 128},
      "plan": {"global_batch_size": 64)" +
         plan_fields + R"(}, "measured": {"iteration_time_s": 1}}]})";
}

// The search constraints JsonCasesFromText reads from that one case; a
// parse error fails the calling test (and returns the defaults).
inline SearchConstraints OneCaseConstraints(const std::string& source, const std::string& plan_fields,
                                            int num_layers) {
  auto cases = JsonCasesFromText(OneJsonCase(source, plan_fields, num_layers), "t.json");
  EXPECT_TRUE(cases.ok()) << cases.status().message();
  if (!cases.ok() || cases->size() != 1) {
    ADD_FAILURE() << "expected one case from source '" << source << "'";
    return SearchConstraints{};
  }
  return (*cases)[0].constraints;
}

}  // namespace dt::testing_cases
