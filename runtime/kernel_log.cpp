// The kernel-log calls of include/dvm/runtime.h; the executor records the
// launches (fuser/executor.h).
#include "dvm/runtime.h"
#include "fuser/executor.h"
#include "runtime/environment.h"

namespace dvm {

void set_kernel_log(bool on) {
  runtime::apply_environment();
  fuser::set_kernel_log(on);
}

std::vector<KernelRun> take_kernel_log() {
  runtime::apply_environment();
  return fuser::take_kernel_log();
}

}  // namespace dvm
