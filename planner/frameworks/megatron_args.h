// Megatron-LM command-line arguments <-> (ModelSpec, PlanSpec), for
// Megatron-LM core_v0.14.0 (megatron/training/arguments.py).
//
// MegatronArgs: the flags that make Megatron-LM's pretrain_gpt.py train
// model m with plan p (model shape, parallel dims, batch, recompute,
// distributed optimizer / Megatron-FSDP, precision). Refuses, with the
// reason and fix, a plan Megatron cannot express (framework.h).
//
// ImportMegatron: the inverse. Reads a job's argv (optionally with its
// launcher prefix, e.g. "torchrun --nnodes 8 --nproc-per-node 8
// pretrain_gpt.py ..."), maps every flag that sets the model's shape or the
// plan, ignores (with a note) the flags that change neither memory nor step
// time (logging, data paths, learning rate ...), and refuses by name any
// other flag: dtplan cannot price what it does not understand.
// ImportMegatron(MegatronArgs(m, p)) gives back (m, p).
//
// Pure functions, no I/O; errors are InvalidArgument naming the flag.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "planner/spec/model_spec.h"
#include "planner/spec/plan_spec.h"

namespace dt {

struct CliFlag {
  std::string name;   // "--tensor-model-parallel-size"
  std::string value;  // "" for a store_true flag
  // value holds several words of a nargs='*' flag ("layernorm moe_act"),
  // written unquoted so that the shell passes them as separate arguments.
  bool words = false;
};

// bf16: the plan trains in mixed precision (GPU profiles); false: fp32 (CPU).
// notes (may be null) receives what the user should know (vocab padding).
StatusOr<std::vector<CliFlag>> MegatronArgs(const ModelSpec& m, const PlanSpec& p, bool bf16,
                                            std::vector<std::string>* notes = nullptr);
// Megatron pads the vocabulary to a multiple of --make-vocab-size-divisible-by
// (default 128) x tensor-parallel size (tokenizer.py _vocab_size_with_padding).
int64_t MegatronPaddedVocab(int64_t vocab, int64_t divisible_by, int tp);

// "--name value \\\n" lines, ready to paste after pretrain_gpt.py.
std::string FormatFlags(const std::vector<CliFlag>& flags);

struct MegatronJob {
  ModelSpec model;
  PlanSpec plan;           // dp set from the world size; layers split as Megatron does
  bool bf16 = true;        // --bf16 or --fp16 given
  int launcher_nodes = 0;  // from a torchrun/srun prefix (0: not given)
  int launcher_gpus_per_node = 0;
  std::vector<std::string> ignored;  // harmless flags skipped, by name
  std::vector<std::string> notes;    // what was assumed, one sentence each
};

// Splits a command line as a POSIX shell would for words: whitespace,
// '...' and "..." quotes, backslash escapes and line continuations. No
// variable expansion (a '$' stays literal). InvalidArgument on an
// unterminated quote.
StatusOr<std::vector<std::string>> SplitCommandLine(const std::string& text);

// A Megatron-LM pipeline layout (--pipeline-model-parallel-layout, e.g.
// "Et|(tt|)*30mL"): stages split by '|', E the embedding (first stage), t
// (or t*N) decoder layers, m multi-token-prediction layers (last stage
// only), L the loss (last stage), (...)*N a repeated group. Returns the
// layers of each model chunk and sets *mtp to the m count; an error names
// what dtplan does not read.
StatusOr<std::vector<int>> ParseMegatronLayout(const std::string& layout, int* mtp);

// world: total ranks (0: take it from the launcher prefix; an error when
// neither gives it). name: the model's name in the result.
StatusOr<MegatronJob> ImportMegatron(const std::vector<std::string>& argv, int world, const std::string& name);

}  // namespace dt
