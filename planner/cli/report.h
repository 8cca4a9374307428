// Human-readable and JSON renderings of search results and predictions for
// the dtplan CLI. Pure formatting; no I/O beyond the returned strings.
#pragma once

#include <string>

#include "planner/lower/prediction.h"
#include "planner/profile/profile.h"
#include "planner/search/search.h"

namespace dt::cli {

std::string Gib(double bytes);  // "12.3"
std::string FormatSearch(const ModelSpec& m, const ClusterSpec& c, const HardwareProfile& hw,
                         const SearchConstraints& k, const SearchResult& r);
json SearchToJson(const ModelSpec& m, const ClusterSpec& c, const HardwareProfile& hw,
                  const SearchConstraints& k, const SearchResult& r);
// A plan whose device waits for the host's launches for at least 5% of a
// stage's kernel time (Prediction::host_wait_share): one sentence saying so
// and what would shrink it; empty below that.
std::string LaunchBoundNote(const Prediction& p, const HardwareProfile& hw);
// A GPU plan priced at the profile's default attention rate on a profile
// that also has cuDNN's (compute.attention_efficiency_by_keys_cudnn): the
// plan simulated again with cudnn_attention, and, when its step is at least
// 5% shorter, one sentence giving that step and the flag; empty otherwise
// (or when the second simulation fails). Which rate a framework's stack
// reaches depends on its cuDNN release (docs/validation.md), so the
// difference is the prediction's uncertainty from the attention kernel.
std::string AttentionKernelNote(const ModelSpec& m, const ClusterSpec& c, const HardwareProfile& hw,
                                const PlanSpec& p, const Prediction& pred);
// A plan of a model that trains with dropout (ModelSpec::uses_dropout) but
// without it (PlanSpec::dropout false, e.g. a plan file that sets it): one
// sentence saying that the plan's time, memory and run leave the model's
// dropout out; empty otherwise.
std::string DropoutNote(const ModelSpec& m, const PlanSpec& p);
// The plan file dtplan --out writes: model, cluster, profile, plan, prediction.
json PlanFileJson(const ModelSpec& m, const ClusterSpec& c, const HardwareProfile& hw,
                  const PlanSpec& p, const Prediction& pred);

}  // namespace dt::cli
