// SearchConstraints: which plan dimensions the user fixed; unset ones are
// searched. Plain data.
#pragma once

#include <cstdint>
#include <optional>

#include "planner/frameworks/framework.h"
#include "planner/spec/plan_spec.h"

namespace dt {

struct SearchConstraints {
  int64_t global_batch = 0;  // sequences per step (required, > 0)
  int seq_length = 0;        // tokens per sequence (required, > 0)
  std::optional<int> dp, tp, pp, cp, vpp, micro_batch, zero_stage;
  std::optional<int> ep;  // expert parallelism (MoE models; unset: searched over divisors of experts and dp)
  // Expert tensor parallelism (MoE; PlanSpec::etp). Unset: searched over tp
  // (EP over DP) and 1 (EP folded over tp*dp, when tp > 1 and cp == 1).
  std::optional<int> etp;
  std::optional<Schedule> schedule;
  std::optional<Recompute> recompute;
  std::optional<bool> sequence_parallel;
  bool flash_attention = true;  // a software choice, not searched
  Precision precision = Precision::kProfile;  // copied into every plan, not searched
  bool force_balanced_routing = false;     // copied into every plan (PlanSpec), not searched
  MoeDispatcher moe_dispatcher = MoeDispatcher::kAllToAll;  // copied into every plan, not searched
  // Combined 1F1B (PlanSpec::moe_a2a_overlap): copied into every plan, not
  // searched; plans it cannot run with (ep 1, full recompute, pp > 1 without
  // the interleaved schedule) are rejected with the reason.
  bool moe_a2a_overlap = false;
  // --fp8-param-gather (PlanSpec::fp8_param_gather). Unset: on in every FP8
  // plan with the distributed optimizer (zero 1), off elsewhere -- it needs
  // less memory, moves fewer all-gather bytes and casts less than the same
  // plan without it, so searching both would always pick it. false: never;
  // true: FP8 plans with zero 1 only (the others are rejected with why).
  std::optional<bool> fp8_param_gather;
  bool dropout = true;          // GPT dropout (the bundled CPU runtime has none)
  int max_micro_batch = 16;  // searched microbatch sizes are divisors up to this
  int max_vpp = 8;           // searched virtual stages per rank
  // Only plans this framework can express (planner/frameworks/framework.h);
  // the others are counted among the rejections with the reason.
  Framework framework = Framework::kAny;
  int grad_bytes = 0;  // copied into every plan (PlanSpec::grad_bytes)
};

// PlanSpec::fp8_param_gather for a plan of these constraints with the given
// ZeRO stage (see SearchConstraints::fp8_param_gather).
inline bool Fp8ParamGatherFor(const SearchConstraints& k, int zero_stage) {
  return k.precision == Precision::kFp8 && zero_stage == 1 && k.fp8_param_gather.value_or(true);
}

}  // namespace dt
