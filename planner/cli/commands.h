// The dtplan subcommands. Each takes parsed options and returns the process
// exit code: 0 success, 2 bad input or no feasible plan (message printed to
// stderr as one line naming the field and the fix), 1 internal failure.
// CLI11 and JSON exceptions never escape: main() catches them at the edge.
#pragma once

#include <optional>
#include <string>

#include "base/json_fields.h"
#include "planner/search/constraints.h"
#include "planner/search/search.h"

namespace dt::cli {

struct CommonOptions {
  std::string model;
  int nodes = 1;
  int gpus = 8;
  std::string device = "gpu";
  std::string profile;  // empty: A100-SXM4-80GB for gpu, cpu-generic for cpu
  int threads = 0;
  bool json = false;
};

// Plan dimensions a user may fix (dtplan and validate --execute); unset
// ones are searched.
struct DimensionOptions {
  std::optional<int> dp, tp, pp, cp, vpp, mbs, zero, ep, etp;
  std::string schedule, recompute;
  std::string recompute_modules;  // "" (Megatron's default, core_attn) or "layernorm,moe_act"
  int recompute_layers = 0;       // --recompute-layers N (with --recompute full); 0: every layer
  std::string precision;  // "" (the profile's dtype), fp32, bf16 or fp8
  std::string moe_dispatcher;  // "" (alltoall), alltoall or deduplicated
  std::optional<bool> sp;
  bool sp_on = false, sp_off = false;  // the --sp / --no-sp flags as parsed
  bool fp8_param_gather = false;  // --fp8-param-gather
  std::string fp8_recipe;         // --fp8-recipe: "" (delayed), delayed or tensorwise
  std::string adam_moments;       // --adam-moments fp32|bf16
  bool moe_a2a_overlap = false;  // --moe-a2a-overlap
  bool moe_shared_expert_overlap = false;  // --moe-shared-expert-overlap
  bool delay_wgrad_compute = false;        // --delay-wgrad-compute
  bool overlap_dispatch_backward_wgrad = false;  // --overlap-dispatch-backward-with-experts-wgrad
  double moe_capacity_factor = 0;     // --moe-capacity-factor (0: dropless)
  bool moe_pad_to_capacity = false;   // --moe-pad-to-capacity
  bool tp_comm_overlap = false;  // --tp-comm-overlap
  bool moe_router_cuda_graph = false;  // --moe-router-cuda-graph
  std::string attention_kernel;  // --attention-kernel: "" / default, or cudnn
  bool no_overlap_grad_reduce = false;  // --no-overlap-grad-reduce
  bool no_overlap_p2p_comm = false;     // --no-overlap-p2p-comm
};
// Copies the fixed dimensions into k; InvalidArgument for a bad
// --schedule / --recompute value.
Status ApplyDimensions(const DimensionOptions& d, SearchConstraints* k);

struct PlanOptions {
  CommonOptions common;
  int64_t global_batch = 0;  // 0: 8 sequences per device
  int seq_length = 0;        // 0: the model's
  int top = 5;
  DimensionOptions dims;
  std::string attention;  // flash | unfused; default flash on gpu, unfused on cpu
  std::string cross_entropy;  // fused (default) | unfused
  std::string out = "plan.json";
  std::string trace;
  std::string report;         // self-contained HTML report of the search
  std::string framework;      // megatron | torchtitan | deepspeed; "" = any plan
  std::string from_megatron;  // a Megatron-LM argv (or @file): price it next to the best
  bool global_batch_set = false, seq_length_set = false;  // given on the command line
  bool cluster_set = false;   // --nodes or --gpus given
};

struct ExportOptions {
  std::string plan;
  std::string to;   // megatron | torchtitan | deepspeed
  std::string out;  // write the config here instead of stdout
};

struct SimulateOptions {
  CommonOptions common;
  std::string plan;
  std::string trace;
  // Which of --nodes, --gpus, --device were given: each replaces that field
  // of the plan file's cluster (a what-if on the same plan).
  bool nodes_set = false, gpus_set = false, device_set = false;
};

struct ValidateOptions {
  std::vector<std::string> cases;  // case files, read in order
  bool cv = false;                 // leave-one-source-out cross-validation of the calibrated knobs
  std::string profile;  // overrides the per-case hardware
  int threads = 0;
  bool json = false;
  // --execute: run plans with dtrun and compare (closed loop).
  bool execute = false;
  CommonOptions common;      // --model, --nodes, --gpus, --device (with --execute)
  int64_t global_batch = 0;  // 0: 8 per device
  DimensionOptions dims;     // with --execute: fixed dimensions
  int top = 8;               // plans to run, spread over the ranking (best always included)
  int steps = 6;
  int rounds = 5;            // runs per plan, in rounds over all plans (ExecuteOptions::rounds)
  bool speed_check = false;  // run `dtplan profile --speed-check` beside every plan (ExecuteOptions::speed_check)
  std::string dtrun;         // default: next to dtplan
  std::string work_dir;      // default: a fresh temp dir
  std::string report;        // self-contained HTML: predicted-vs-measured scatter plots
  std::string argv0;
};

int RunPlan(const PlanOptions& o);
int RunSimulate(const SimulateOptions& o);
int RunValidate(const ValidateOptions& o);
int RunValidateExecute(const ValidateOptions& o);
int RunCapabilities(bool as_json);
int RunExport(const ExportOptions& o);
// dtplan --from-megatron: the imported job priced next to the best plan.
int RunFromMegatron(const PlanOptions& o);

// dtplan profile --from-nccl-tests: argv[0] is "profile". Wants... is true
// when the arguments ask for it (then no MPI profiler is launched).
bool WantsNcclTestsProfile(int argc, char** argv);
int RunNcclTestsProfile(int argc, char** argv);

// Writes the files of a search's best plan, as dtplan and --from-megatron
// do: its trace (`trace`, when set; simulated again with task names, the same
// deterministic run), the HTML report (`report`, when set; from that trace)
// and the plan file `out`. Returns the best plan's prediction; errors name
// the flag (--report:, --out:).
StatusOr<Prediction> WriteBestPlanFiles(const ModelSpec& m, const ClusterSpec& cluster, const HardwareProfile& hw,
                                        const SearchResult& r, const RankedPlan& best, const std::string& out,
                                        const std::string& trace, const std::string& report);

// Prints "dtplan: error: <message>" to stderr and returns 2.
int Fail(const std::string& message);

}  // namespace dt::cli
