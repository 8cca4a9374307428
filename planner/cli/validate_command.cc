// dtplan validate: predicted vs measured iteration times (see planner/validate).
#include "planner/cli/commands.h"

namespace dt::cli {

int RunValidate(const ValidateOptions& o) { return Fail("validate: not built yet"); }

}  // namespace dt::cli
