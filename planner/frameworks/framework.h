// Framework: the training frameworks a plan can be handed to (Megatron-LM,
// torchtitan, DeepSpeed) and which plans each can express. One rule table,
// read by the search (--framework X keeps only plans X can run, counting the
// rest by reason), by `dtplan export` (a plan X cannot express is refused
// with the reason and the fix) and by docs/frameworks.md, which names the
// source file and version of every rule.
//
// Pure functions over (ModelSpec, PlanSpec); no I/O, never aborts.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "planner/spec/model_spec.h"
#include "planner/spec/plan_spec.h"

namespace dt {

enum class Framework { kAny, kMegatron, kTorchtitan, kDeepSpeed };

const char* ToString(Framework f);  // "any", "megatron", "torchtitan", "deepspeed"
const char* DisplayName(Framework f);  // "Megatron-LM", "torchtitan", "DeepSpeed"
// "megatron" | "torchtitan" | "deepspeed" | "any" (or ""): the framework;
// anything else InvalidArgument listing the choices.
StatusOr<Framework> ParseFramework(const std::string& name);

// DeepSpeed (commit 38327e0) reduces gradients during the backward only
// under ZeRO (zero_optimization.overlap_comm) and without its pipeline
// engine, which reduces after the last microbatch; plain data parallelism
// all-reduces after the backward.
bool DeepSpeedOverlapsGradReduce(int zero_stage, int pp);

// Why framework f cannot run (m, p): one short reason per plan or model
// feature it has no way to express ("no GPipe schedule"), in a fixed order.
// Empty when f can run it (always empty for kAny).
std::vector<std::string> Inexpressible(Framework f, const ModelSpec& m, const PlanSpec& p);

// Ok, or InvalidArgument "<Framework> cannot express this plan: <reason>;
// replan with --framework <f>" naming the first reason.
Status CheckExpressible(Framework f, const ModelSpec& m, const PlanSpec& p);

// The framework's gradient element size when it differs from the training
// dtype's (PlanSpec::grad_bytes; 0: the dtype's). With bf16: Megatron-LM
// accumulates and all-reduces fp32 main gradients by default
// (arguments.py: accumulate_allreduce_grads_in_fp32), torchtitan's FSDP
// reduces in fp32 (training.mixed_precision_reduce, "float32" only): 4.
// docs/frameworks.md cites each.
int FrameworkGradBytes(Framework f, bool bf16);

}  // namespace dt
