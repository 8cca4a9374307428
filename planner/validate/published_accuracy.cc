#include "planner/validate/published_accuracy.h"

#include <cstdio>

namespace dt {

std::string MoeAccuracyNote() {
  const PublishedAccuracy& a = kMoeAccuracy;
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "MoE step times are less certain than dense ones: against %d published Megatron-LM MoE runs on "
                "H100 (%s) they are off by %.0f%% on average, %.0f%% at worst. Not priced: the host launch and "
                "token-count synchronisation time of MoE layers run eagerly (fine-grained models without CUDA "
                "graphs took up to %.2fx the predicted step), and attention kernels newer than the profile's "
                "(long-context runs took down to 1/%.2f of it). docs/validation.md, \"Mixture of experts\".",
                a.cases, a.file, 100 * a.mape, 100 * a.max_error, a.slowest_ratio, a.fastest_ratio);
  return buf;
}

}  // namespace dt
