// Executor: runs the flushed nodes: partition, then for each group lower,
// fetch the kernel from the cache, allocate outputs, bind and launch.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "dvm/runtime.h"
#include "tracer/node.h"

namespace dvm::fuser {

// Computes `nodes` (pending, needed, in record order). On return every node
// that is observable has a buffer. Returns the number of nodes computed.
int64_t execute(const std::vector<detail::Node*>& nodes);

// Process-wide; every thread's flush adds to them, hence atomic.
struct ExecStats {
  std::atomic<int64_t> kernels_launched{0};  // launches (a stack of small kernels is one)
  std::atomic<int64_t> kernels_run{0};       // kernels executed
};
ExecStats& exec_stats();

// The calling thread's kernel log: while on, every launch runs alone and is
// timed and recorded; take_kernel_log() returns and clears the records.
void set_kernel_log(bool on);
std::vector<KernelRun> take_kernel_log();

// While on, every plan-cache replay is lowered again and compared with the
// cached kernel (off by default; DVM_PLAN_CHECK).
void set_plan_check(bool on);

}  // namespace dvm::fuser
