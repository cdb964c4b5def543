// The flush pipeline: a flushed trace goes to the fuser, which lowers it to
// kernels the vm launches.
#include "tracer/pipeline.h"

#include "fuser/executor.h"
#include "runtime/environment.h"
#include "runtime/profiler.h"
#include "vm/profile.h"

namespace dvm::detail {

int64_t run_flush(const std::vector<Node*>& needed) {
  if (vm::profile::on()) [[unlikely]] return runtime::profiled_flush(needed);
  return fuser::execute(needed);
}

int64_t default_trace_limit() {
  runtime::apply_environment();
  return runtime::environment_value(runtime::Setting::TraceLimit);
}

}  // namespace dvm::detail
