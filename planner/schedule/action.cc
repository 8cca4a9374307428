#include "planner/schedule/action.h"

namespace dt {

const char* ToString(ActionKind k) {
  switch (k) {
    case ActionKind::kForward: return "F";
    case ActionKind::kBackward: return "B";
    case ActionKind::kSendAct: return "SA";
    case ActionKind::kRecvAct: return "RA";
    case ActionKind::kSendGrad: return "SG";
    case ActionKind::kRecvGrad: return "RG";
    case ActionKind::kGradSync: return "GS";
    case ActionKind::kOptimizerStep: return "OPT";
    case ActionKind::kParamSync: return "PS";
  }
  return "?";
}

std::string ToString(const Action& a) {
  std::string s = ToString(a.kind);
  if (a.microbatch >= 0) s += std::to_string(a.microbatch) + ".";
  if (a.chunk >= 0) s += std::to_string(a.chunk);
  return s;
}

}  // namespace dt
