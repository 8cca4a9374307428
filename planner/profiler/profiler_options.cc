#include "planner/profiler/profiler_options.h"

#include <cstdlib>
#include <sstream>

#ifndef DT_SOURCE_DIR
#define DT_SOURCE_DIR "."
#endif

namespace dt {
namespace {

bool ParseInt(const std::string& s, int64_t* v) {
  char* end = nullptr;
  long long x = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0') return false;
  *v = x;
  return true;
}

// "256M", "4K", "1G" or plain bytes.
bool ParseBytes(const std::string& s, int64_t* v) {
  if (s.empty()) return false;
  int64_t mult = 1;
  std::string num = s;
  char last = s.back();
  if (last == 'K' || last == 'k') mult = 1LL << 10;
  if (last == 'M' || last == 'm') mult = 1LL << 20;
  if (last == 'G' || last == 'g') mult = 1LL << 30;
  if (mult != 1) num.pop_back();
  if (!ParseInt(num, v) || *v <= 0) return false;
  *v *= mult;
  return true;
}

}  // namespace

std::string ProfilerUsage() {
  return "usage: dtplan profile [--device cpu|cuda] [--model FILE]... [--out FILE] [--quick]\n"
         "       [--ranks N] [--seq-length S] [--micro-batches 1,2,4] [--max-tp T]\n"
         "       [--max-gemm-gflop G] [--max-message-bytes 256M] [--reps R] [--warmup W]\n"
         "       [--name NAME] [--no-progress] [--speed-check PROFILE]\n"
         "Measures this machine with the runtime's own GEMM, kernels and collectives and\n"
         "writes a hardware profile (docs/profiler.md). Run it under `mpirun -np N` with the\n"
         "ranks per node to measure, or let `dtplan profile --ranks N` launch them.\n"
         "--speed-check PROFILE re-measures only that profile's whole-step checks and prints\n"
         "one JSON line: how fast this machine runs them now against when it was profiled.\n"
         "Exit codes: 0 ok, 1 internal error, 2 bad input, 3 device unavailable.\n"
         "Or, from the cluster's nccl-tests output (nothing measured; docs/profiles.md):\n"
         "       dtplan profile --from-nccl-tests DIR --base PROFILE [--out FILE] [--name NAME]\n";
}

void ApplyProfilerDefaults(ProfilerOptions* o) {
  if (o->models.empty()) {
    o->models.push_back(std::string(DT_SOURCE_DIR) + "/examples/models/gpt-tiny.json");
    if (!o->quick) {
      o->models.push_back(std::string(DT_SOURCE_DIR) + "/examples/models/gpt-small-cpu.json");
      o->models.push_back(std::string(DT_SOURCE_DIR) + "/examples/models/gpt2-124m.json");
    }
  }
  if (o->micro_batches.empty()) o->micro_batches = o->quick ? std::vector<int>{1, 2}
                                                            : std::vector<int>{1, 2, 4, 8, 16};
  if (o->max_gemm_flops <= 0) o->max_gemm_flops = o->quick ? 0.5e9 : 16e9;
  if (o->max_message_bytes <= 0) o->max_message_bytes = o->quick ? (4LL << 20) : (256LL << 20);
  if (o->reps <= 0) o->reps = o->quick ? 3 : 5;
  if (o->name.empty()) {
    std::string stem = o->out.substr(o->out.rfind('/') + 1);
    if (stem.size() > 5 && stem.compare(stem.size() - 5, 5, ".json") == 0) stem.resize(stem.size() - 5);
    o->name = stem.empty() ? "local" : stem;
  }
}

StatusOr<ProfilerOptions> ParseProfilerArgs(const std::vector<std::string>& args) {
  ProfilerOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string* v) -> Status {
      if (i + 1 >= args.size()) return InvalidArgument(a + ": missing value (see --help)");
      *v = args[++i];
      return Status::Ok();
    };
    auto int_value = [&](int64_t lo, int64_t hi, int64_t* v) -> Status {
      std::string s;
      DT_RETURN_IF_ERROR(value(&s));
      if (!ParseInt(s, v) || *v < lo || *v > hi)
        return InvalidArgument(a + " " + s + ": use an integer in [" + std::to_string(lo) + ", " +
                               std::to_string(hi) + "]");
      return Status::Ok();
    };
    std::string s;
    int64_t v = 0;
    if (a == "--help" || a == "-h") return NotFound(ProfilerUsage());
    if (a == "--device") {
      DT_RETURN_IF_ERROR(value(&o.device));
      if (o.device == "gpu") o.device = "cuda";
      if (o.device != "cpu" && o.device != "cuda")
        return InvalidArgument("--device " + o.device + ": use cpu or cuda");
    } else if (a == "--model") {
      DT_RETURN_IF_ERROR(value(&s));
      o.models.push_back(s);
    } else if (a == "--out") {
      DT_RETURN_IF_ERROR(value(&o.out));
    } else if (a == "--name") {
      DT_RETURN_IF_ERROR(value(&o.name));
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a == "--no-progress") {
      o.progress = false;
    } else if (a == "--speed-check") {
      DT_RETURN_IF_ERROR(value(&o.speed_check));
    } else if (a == "--ranks") {
      DT_RETURN_IF_ERROR(int_value(1, 1024, &v));
      o.ranks = static_cast<int>(v);
    } else if (a == "--seq-length") {
      DT_RETURN_IF_ERROR(int_value(1, 1 << 20, &v));
      o.seq_length = static_cast<int>(v);
    } else if (a == "--max-tp") {
      DT_RETURN_IF_ERROR(int_value(1, 1024, &v));
      o.max_tp = static_cast<int>(v);
    } else if (a == "--reps") {
      DT_RETURN_IF_ERROR(int_value(1, 1000, &v));
      o.reps = static_cast<int>(v);
    } else if (a == "--warmup") {
      DT_RETURN_IF_ERROR(int_value(0, 1000, &v));
      o.warmup = static_cast<int>(v);
    } else if (a == "--max-gemm-gflop") {
      DT_RETURN_IF_ERROR(value(&s));
      char* end = nullptr;
      double g = std::strtod(s.c_str(), &end);
      if (*end != '\0' || !(g > 0)) return InvalidArgument("--max-gemm-gflop " + s + ": use a number > 0");
      o.max_gemm_flops = g * 1e9;
    } else if (a == "--max-message-bytes") {
      DT_RETURN_IF_ERROR(value(&s));
      if (!ParseBytes(s, &v) || v < 1024)
        return InvalidArgument("--max-message-bytes " + s + ": use bytes >= 1K, e.g. 64M or 256M");
      o.max_message_bytes = v;
    } else if (a == "--micro-batches") {
      DT_RETURN_IF_ERROR(value(&s));
      std::stringstream ss(s);
      std::string tok;
      while (std::getline(ss, tok, ',')) {
        if (!ParseInt(tok, &v) || v < 1 || v > 4096)
          return InvalidArgument("--micro-batches " + s + ": use a comma list of sizes >= 1, e.g. 1,2,4");
        o.micro_batches.push_back(static_cast<int>(v));
      }
    } else {
      return InvalidArgument("unknown option '" + a + "' (see --help)");
    }
  }
  ApplyProfilerDefaults(&o);
  return o;
}

}  // namespace dt
