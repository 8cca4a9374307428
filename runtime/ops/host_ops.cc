#include "runtime/ops/host_ops.h"

#include "base/check.h"

namespace dt::rt {

void HostAccess(Backend& be, const char* op) {
  DT_CHECK(be.host_accessible()) << op << " runs on host memory; backend '" << be.name()
                                 << "' keeps tensors in device memory and has no kernel for it";
  be.Synchronize();
}

}  // namespace dt::rt
