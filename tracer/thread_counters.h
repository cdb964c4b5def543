// The statistics the lower layers count on every flush and launch
// (dvm::stats()), kept per thread: a thread adds to its own slot with a
// relaxed load and store, never an atomic read-modify-write on a line all
// threads share, and a reader sums every thread's slot.
#pragma once

#include <cstdint>

namespace dvm::detail {

enum class Count : int {
  Flushes,          // flushes that computed (tracer)
  NodesRecorded,    // nodes that left a trace through a flush (tracer)
  NodesComputed,    // nodes those flushes computed (tracer)
  KernelsLaunched,  // launches (a stack of small kernels is one) (fuser, graph)
  KernelsRun,       // kernels executed (fuser, graph)
  kCount,
};

// Adds v to this thread's count c.
void count(Count c, int64_t v);
// Every thread's count c: those alive and those that have exited.
int64_t counted(Count c);
// This thread's own count c (to undo a stretch of its own counting).
int64_t thread_counted(Count c);

}  // namespace dvm::detail
