// Executor: runs the flushed nodes: partition, then for each group lower,
// fetch the kernel from the cache, allocate outputs, bind and launch.
#pragma once

#include <vector>

#include "tracer/node.h"

namespace dvm::fuser {

// Computes `nodes` (pending, needed, in record order). On return every node
// that is observable has a buffer. Returns the number of nodes computed.
int64_t execute(const std::vector<detail::Node*>& nodes);

struct ExecStats {
  int64_t kernels_launched = 0;  // launches (a stack of small kernels is one)
  int64_t kernels_run = 0;       // kernels executed
};
ExecStats& exec_stats();

}  // namespace dvm::fuser
