// dtplan simulate: the prediction for exactly one plan, as JSON.
#include <iostream>

#include "planner/cli/commands.h"
#include "planner/cli/report.h"
#include "planner/cli/setup.h"
#include "planner/lower/simulate.h"

namespace dt::cli {

int RunSimulate(const SimulateOptions& o) {
  auto file = ReadJsonFile(o.plan);
  if (!file.ok()) return Fail("--plan: " + file.status().message());
  const json& j = *file;
  const std::string where = "plan file '" + o.plan + "'";
  if (!j.is_object() || !j.contains("plan"))
    return Fail(where + ": expected an object with a \"plan\" field (write one with dtplan --out)");
  if (Status s = CheckPlanFileFields(j, where); !s.ok()) return Fail(s.message());
  // The model: --model if given, else the one embedded in the plan file.
  ModelSpec model;
  if (!o.common.model.empty()) {
    auto m = LoadModel(o.common.model);
    if (!m.ok()) return Fail("--model: " + m.status().message());
    model = *m;
  } else if (j.contains("model")) {
    auto m = ModelFromJson(j["model"], where + " field 'model'");
    if (!m.ok()) return Fail(m.status().message());
    model = *m;
  } else {
    return Fail("no model: pass --model or use a plan file written by dtplan --out");
  }
  auto plan = PlanFromJson(j["plan"], model, where + " field 'plan'");
  if (!plan.ok()) return Fail(plan.status().message());
  model.seq_length = plan->seq_length;
  // The cluster: the plan file's, each of --nodes / --gpus / --device given
  // replacing its field (without a cluster in the file: the flags or their
  // defaults).
  ClusterSpec cluster;
  const bool from_file = j.contains("cluster");
  if (from_file) {
    auto c = ClusterFromJson(j["cluster"], where + " field 'cluster'");
    if (!c.ok()) return Fail(c.status().message());
    cluster = *c;
  }
  if (!from_file || o.nodes_set) cluster.nodes = o.common.nodes;
  if (!from_file || o.gpus_set) cluster.gpus_per_node = o.common.gpus;
  if (!from_file || o.device_set) cluster.device = o.common.device;
  if (static_cast<int64_t>(cluster.nodes) * cluster.gpus_per_node != plan->world())
    return Fail("the plan needs " + std::to_string(plan->world()) + " devices (dp x tp x pp x cp), the cluster has " +
                std::to_string(cluster.nodes) + " nodes x " + std::to_string(cluster.gpus_per_node) +
                (from_file && (o.nodes_set || o.gpus_set) ? " (--nodes / --gpus replace the plan file's)" : "") +
                "; give --nodes and --gpus whose product is " + std::to_string(plan->world()));
  std::string profile = o.common.profile;
  if (profile.empty() && j.contains("profile") && j["profile"].is_string())
    profile = j["profile"].get<std::string>();
  auto hw = LoadProfileFor(profile, cluster.device, cluster.gpus_per_node);
  if (!hw.ok()) return Fail(hw.status().message());
  dt::SimulateOptions so;
  so.trace_path = o.trace;
  auto pred = SimulatePlan(model, cluster, *plan, *hw, so);
  if (!pred.ok()) return Fail(pred.status().message());
  json out = PlanFileJson(model, cluster, *hw, *plan, *pred);
  std::cout << out.dump(2) << "\n";
  return 0;
}

}  // namespace dt::cli
