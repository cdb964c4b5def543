// The memory calls of include/dvm/runtime.h over the tensor buffer pool.
#include <string>

#include "dvm/error.h"
#include "dvm/runtime.h"
#include "tracer/buffer_pool.h"
#include "tracer/capture.h"
#include "tracer/node.h"
#include "tracer/row_copies.h"
#include "tracer/trace.h"

namespace dvm {

MemoryStats memory_stats() {
  const detail::PoolStats p = detail::pool_stats();
  return {p.live_bytes, p.cached_bytes, p.peak_bytes, detail::pool_limit(), detail::row_copy_bytes()};
}

void set_memory_limit(int64_t bytes) {
  if (bytes < 0) throw Error("set_memory_limit: expected a byte count >= 0 (0: no limit), got " + std::to_string(bytes));
  detail::pool_set_limit(bytes);
}

int64_t memory_limit() { return detail::pool_limit(); }

void trim() {
  // A result dropped unread still holds its inputs until a flush drops it:
  // the calling thread's trace is flushed first, so what only such results
  // held is given back too (not while it captures a graph: its ops are the
  // graph's, computed by nothing now).
  if (detail::t_trace && !detail::capture()) detail::t_trace->flush();
  detail::drop_cached_ranges();
  detail::pool_trim();
  detail::node_pool_trim();
}

void set_allocator(AllocateFn allocate, DeallocateFn deallocate, void* host) {
  // A result dropped unread still holds its inputs until a flush drops it:
  // the calling thread's trace is flushed first, so only live tensors count.
  if (detail::t_trace) detail::t_trace->flush();
  detail::drop_cached_ranges();  // dvm's own tensors on this thread: not the host's to destroy
  detail::pool_set_allocator(allocate, deallocate, host);
}

}  // namespace dvm
