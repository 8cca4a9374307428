#include "planner/lower/prediction.h"

namespace dt {

json ToJson(const Prediction& p) {
  json stages = json::array();
  for (const auto& s : p.stages) {
    const StageMemory& m = s.memory;
    stages.push_back({{"stage", s.stage},
                      {"in_flight_microbatches", s.in_flight},
                      {"total_bytes", m.total},
                      {"weights_bytes", m.weights},
                      {"gradients_bytes", m.gradients},
                      {"optimizer_bytes", m.optimizer},
                      {"activations_bytes", m.activations},
                      {"temporary_bytes", m.temporary},
                      {"reserved_bytes", m.reserved}});
  }
  return json{{"step_time_s", p.step_time_s},
              {"breakdown_s",
               {{"compute", p.time.compute},
                {"tp_comm_exposed", p.time.tp_exposed},
                {"pp_comm_exposed", p.time.pp_exposed},
                {"dp_comm_exposed", p.time.dp_exposed},
                {"pipeline_bubble", p.time.bubble},
                {"optimizer", p.time.optimizer}}},
              {"tokens_per_s", p.tokens_per_s},
              {"mfu", p.mfu},
              {"model_flops_per_step", p.model_flops_per_step},
              {"hardware_flops_per_step", p.hardware_flops_per_step},
              {"peak_memory_bytes", p.peak_memory_bytes},
              {"capacity_bytes", p.capacity_bytes},
              {"fits", p.fits},
              {"memory_per_stage", stages},
              {"outside_measured_profile", p.approximated_points},
              {"host_wait_share", p.host_wait_share}};
}

}  // namespace dt
