#include "runtime/ops/host_ops.h"

#include <cstring>

#include "base/check.h"

namespace dt::rt {

void CheckHostBackend(const Backend& be, const char* op) {
  DT_CHECK(std::strcmp(be.name(), "cpu") == 0)
      << op << " runs on host memory only (CPU backend); backend '" << be.name() << "' has no kernel for it";
}

}  // namespace dt::rt
