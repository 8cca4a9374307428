#include "planner/validate/published_accuracy.h"

#include <cstdio>

namespace dt {

std::string MoeAccuracyNote() {
  const PublishedAccuracy& a = kMoeAccuracy;
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "MoE step times are less certain than dense ones: against %d published Megatron-LM MoE runs on "
                "H100 (%s) they are off by %.0f%% on average, %.0f%% at worst. The host time and token-count "
                "synchronisation of an eager MoE block are priced as measured with Megatron-Core without "
                "Transformer Engine; fine-grained models run without CUDA graphs still took up to %.2fx the "
                "predicted step, and attention kernels newer than the profile's are not priced (long-context "
                "runs took down to 1/%.2f of it). docs/validation.md, \"Mixture of experts\".",
                a.cases, a.file, 100 * a.mape, 100 * a.max_error, a.slowest_ratio, a.fastest_ratio);
  return buf;
}

}  // namespace dt
