// ExportPlan: what a user pastes to run a dtplan plan in a training
// framework, with the launch lines (torchrun, srun, mpirun).
//
//   megatron:   a bash array of Megatron-LM core_v0.14.0 flags for
//               pretrain_gpt.py, then the launch lines using it;
//   torchtitan: a torchtitan v0.2.2 job TOML, then the launch lines;
//   deepspeed:  a ds_config.json (DeepSpeed 0.16), then what the model code
//               must do (PipelineModule stages, checkpointing) and the
//               launch lines.
// Option names are the frameworks' own (tests check each against the
// frameworks' source, kept as data in tests/planner/framework_names/).
//
// Pure; errors: InvalidArgument naming what the framework cannot express
// (framework.h) and the fix. The plan must be valid for the model.
#pragma once

#include <string>
#include <vector>

#include "planner/frameworks/framework.h"
#include "planner/spec/plan_spec.h"

namespace dt {

struct FrameworkExport {
  std::string config;        // the text to paste (flags array, TOML or JSON)
  std::string config_file;   // suggested file name ("" for Megatron: inline)
  std::string launch;        // launch lines (torchrun / srun / mpirun)
  std::vector<std::string> notes;  // what the user must know, one sentence each
};

StatusOr<FrameworkExport> ExportPlan(Framework f, const PlanFile& file);

// Launch lines for `entry` (e.g. "pretrain_gpt.py \"${MEGATRON_ARGS[@]}\"")
// on the cluster: torchrun on one node or every node, srun and mpirun each
// starting one torchrun per node.
std::string TorchrunLaunchLines(const ClusterSpec& c, const std::string& entry);

}  // namespace dt
