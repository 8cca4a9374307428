// ValidationCase: one measured training configuration to check the
// simulator against: the model, the cluster, the plan (fully or partly
// fixed: unset dimensions are searched, as a user of the published number
// would have to), the hardware deviations from the bundled profile, and the
// measured iteration time.
//
// Readers: ReadJsonCases (schema of shared/validation/published-calibration.json)
// and ReadVtrainCsv (vTrain's ground_truth_*.csv, run settings from its
// README). A file that cannot be read as a whole (missing, not JSON, no
// header) is an error; a bad case is not: it is returned with `invalid` set
// (the message names the file, the line or case id and the field) so one bad
// case never stops the others being scored. A case whose setting dtplan does
// not model comes back with `not_modeled` set: listed, not scored. A case's
// `precision` ("bf16", "fp16", "mixed" or "fp8") becomes constraints.precision.
//
// The measurement is an iteration time, or a throughput converted to one:
// tokens/s per GPU at read time (t = global batch x seq / (tokens/s x GPUs)),
// TFLOP/s per GPU once the plan is known (t = step FLOPs / (TFLOP/s x GPUs),
// step FLOPs from planner/cost/flops.h: "model" without, "hardware" with the
// recompute forward). docs/validation.md has the formulas. A case may also
// give the peak memory its framework's allocator reported
// (measured.peak_allocated_gib), scored apart from the time.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "planner/profile/profile.h"
#include "planner/search/constraints.h"
#include "planner/spec/plan_spec.h"

namespace dt {

// Physical differences of the measured cluster from the profile's nodes.
struct HardwareOverride {
  // The measured cluster's own network tables (replacing the profile's
  // network section before the line-rate override below applies); shared by
  // the cases of one file. Null: the profile's network.
  std::shared_ptr<const NetworkProfile> network;
  std::optional<double> inter_node_Bps_per_node;  // total NIC line rate per node
};

// TFLOP/s kinds: "model" (no recompute), "model_causal" (no recompute, the
// attention core at half its square: Megatron-LM's logged TFLOP/s since it
// counts causal masking) and "hardware" (the recompute forward counted).
enum class MeasuredKind { kIterationTime, kModelTflopsPerGpu, kModelCausalTflopsPerGpu, kHardwareTflopsPerGpu };

struct ValidationCase {
  std::string id;
  std::string group;    // cases of one model: Spearman is computed within a group
  std::string source;   // where the measurement comes from (cross-validation folds)
  std::string profile;  // bundled profile name for the case's GPU
  ModelSpec model;
  ClusterSpec cluster;
  SearchConstraints constraints;  // fixed fields; the rest searched
  int64_t dp_bucket_bytes = 0;    // 0: plan default
  // plan.pipeline_layout (a Megatron-LM layout string): the layers of each
  // model chunk; empty: the even split. Needs the plan fully fixed.
  std::vector<int> layers_per_chunk;
  HardwareOverride hardware;
  double measured_s = 0;  // iteration time (kIterationTime; tokens/s already converted)
  // measured.peak_allocated_gib x 2^30: the framework allocator's peak on
  // pipeline rank 0 (torch.cuda.max_memory_allocated, Megatron-LM's "max
  // allocated"); 0: not given. Scored against AllocatedBytes of stage 0.
  double measured_peak_allocated_bytes = 0;
  MeasuredKind measured_kind = MeasuredKind::kIterationTime;
  double measured_tflops_per_gpu = 0;  // the TFLOP/s kinds
  std::string measured_from;           // how measured_s was obtained, when not given directly
  std::string invalid;                 // input error: reported, not scored
  std::string not_modeled;             // a setting dtplan does not model: listed, not scored
  std::string note;
};

StatusOr<std::vector<ValidationCase>> ReadJsonCases(const std::string& path);
StatusOr<std::vector<ValidationCase>> ReadVtrainCsv(const std::string& path);
// The same readers on a file's content, no file access; `path` names the
// source in errors (and, for vTrain, in each case's `source`).
StatusOr<std::vector<ValidationCase>> JsonCasesFromText(const std::string& text, const std::string& path);
StatusOr<std::vector<ValidationCase>> VtrainCasesFromCsvText(const std::string& text, const std::string& path);
// Picks the reader by extension (.csv or .json).
StatusOr<std::vector<ValidationCase>> ReadCases(const std::string& path);

}  // namespace dt
