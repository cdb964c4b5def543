// The profiler's part of the flush pipeline (runtime/profiler.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "tracer/node.h"

namespace dvm::runtime {

// fuser::execute(needed) with the flush's event around it; run_flush calls
// it while a profile is on.
int64_t profiled_flush(const std::vector<detail::Node*>& needed);

}  // namespace dvm::runtime
