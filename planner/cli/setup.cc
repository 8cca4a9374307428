#include "planner/cli/setup.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "planner/cost/comm_cost.h"
#include "planner/profile/machine_info.h"
#include "planner/profile/machine_speed.h"

namespace dt::cli {

StatusOr<HardwareProfile> LoadProfileFor(const std::string& name, const std::string& device, int ranks_per_node) {
  // CPU default: the profile measured on this kind of machine (committed as
  // profiles/local-cpu.json, 2 ranks per node, and local-cpu-1rank.json for
  // one rank, whose kernels run with twice the threads; remeasure with
  // `dtplan profile`), else the placeholder estimate.
  std::string n = name;
  if (n.empty() && device == "cpu") {
    const std::vector<std::string> bundled = BundledProfileNames();
    auto has = [&](const char* b) { return std::find(bundled.begin(), bundled.end(), b) != bundled.end(); };
    n = ranks_per_node == 1 && has("local-cpu-1rank") ? "local-cpu-1rank" : has("local-cpu") ? "local-cpu" : "cpu-generic";
  }
  if (n.empty()) n = "A100-SXM4-80GB";
  auto hw = LoadProfile(n);
  if (!hw.ok()) return Status(hw.status().code(), "--profile: " + hw.status().message());
  if (hw->device.kind != device)
    return InvalidArgument("--profile " + n + " describes a " + hw->device.kind +
                           " but --device is " + device + "; pass a matching --profile or --device");
  return hw;
}

StatusOr<Setup> LoadSetup(const CommonOptions& o) {
  Setup s;
  if (o.model.empty()) return InvalidArgument("--model is required (e.g. --model examples/models/gpt3-175b.json)");
  auto m = LoadModel(o.model);
  if (!m.ok()) return Status(m.status().code(), "--model: " + m.status().message());
  s.model = *m;
  s.cluster.nodes = o.nodes;
  s.cluster.gpus_per_node = o.gpus;
  s.cluster.device = o.device;
  DT_ASSIGN_OR_RETURN(s.hw, LoadProfileFor(o.profile, o.device, o.gpus));
  Status fits = CheckClusterFitsProfile(s.cluster, s.hw);
  if (!fits.ok() && o.profile.empty() && o.device == "cpu" && s.hw.name != "cpu-generic") {
    // The measured default covers one node of this machine; a larger CPU
    // cluster (e.g. 4 oversubscribed ranks as 2 nodes x 2) falls back to
    // the placeholder estimate, said out loud.
    auto generic = LoadProfileFor("cpu-generic", o.device);
    if (generic.ok() && CheckClusterFitsProfile(s.cluster, *generic).ok()) {
      s.note = "profile " + s.hw.name + " cannot price this cluster (" + fits.message() +
               "); using cpu-generic (estimates, not measurements) - measure one with `dtplan profile --device cpu "
               "--ranks " + std::to_string(s.cluster.world()) + "`";
      s.hw = *generic;
      fits = Status::Ok();
    }
  }
  DT_RETURN_IF_ERROR(fits);
  // A measured CPU profile describes one CPU model: say so when this
  // machine is another one (speeds differ 2x between CPU generations).
  if (s.hw.device.kind == "cpu" && !s.hw.machine.cpu_model.empty()) {
    const MachineInfo here = ReadMachineInfo();
    if (here.cpu_model != s.hw.machine.cpu_model) {
      if (!s.note.empty()) s.note += "; ";
      s.note += "profile " + s.hw.name + " was measured on '" + s.hw.machine.cpu_model + "' but this machine is '" +
                here.cpu_model + "': its predictions may be far off here; " +
                RemeasureCpuProfile(s.cluster.gpus_per_node);
    } else {
      // The same model can still be a busier or another host: a 30 ms copy
      // probe against the profile's own copy rate (planner/profile/machine_speed.h).
      const int ranks = std::max(1, std::min(s.hw.machine.ranks_per_node > 0 ? s.hw.machine.ranks_per_node : 1,
                                             here.cores > 0 ? here.cores : 1));
      const std::string slow = SpeedMismatchNote(ProbeCopyBandwidthPerRank(ranks), s.hw.device.memory_bandwidth_Bps,
                                                 s.hw.name, s.hw.created, s.cluster.gpus_per_node);
      if (!slow.empty()) {
        if (!s.note.empty()) s.note += "; ";
        s.note += slow;
      }
    }
  }
  // A measured CPU profile's kernel rates hold for its own ranks per node:
  // dtrun gives each rank cores / ranks threads, and the ranks share the
  // memory bus, so another rank count runs other kernels (1 rank of
  // gpt-tiny on a 2-rank profile, 2 threads instead of 1: 6-30% slower
  // than predicted on an AMD EPYC, docs/validation.md).
  if (s.hw.device.kind == "cpu" && s.hw.machine.ranks_per_node > 0 &&
      s.cluster.gpus_per_node != s.hw.machine.ranks_per_node) {
    if (!s.note.empty()) s.note += "; ";
    const int g = s.cluster.gpus_per_node;
    s.note += "profile " + s.hw.name + " was measured with " + std::to_string(s.hw.machine.ranks_per_node) +
              " ranks per node but --gpus is " + std::to_string(g) + ": dtrun gives each rank another share of the " +
              "cores and memory bus, so the measured kernel rates may be far off (tens of percent); " +
              RemeasureCpuProfile(g);
  }
  // A measured profile's own end check: how far its predictions of whole
  // training steps were from the steps it ran, the error to expect here.
  if (const std::string check = StepCheckNote(s.hw); !check.empty()) {
    if (!s.note.empty()) s.note += "; ";
    s.note += check;
  }
  return s;
}

}  // namespace dt::cli
