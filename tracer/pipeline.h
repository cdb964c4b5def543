// What the tracer needs from the layer that wires the pipeline, declared here
// and defined by runtime/ (runtime/pipeline.cpp), so the tracer includes
// nothing from the fuser, the vm or the backends.
#pragma once

#include <cstdint>
#include <vector>

#include "tracer/node.h"

namespace dvm::detail {

// Computes `needed` (pending nodes a live Tensor can reach, in record order):
// fuses, compiles and launches them. Returns the number of nodes computed.
int64_t run_flush(const std::vector<Node*>& needed);

// The limit a thread's trace starts with (DVM_TRACE_LIMIT, else 4096). The
// first call applies the environment's settings.
int64_t default_trace_limit();

}  // namespace dvm::detail
