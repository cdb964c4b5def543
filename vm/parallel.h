// Parallel execution of a launch's work items on TBB, with a small cost model
// deciding when splitting pays and how large each piece is.
#pragma once

#include <cstdint>


namespace dvm::vm {

// Splitting fewer than this many elements across threads costs more than it
// saves (measured on a 2-core Zen 4: ~64K elements).
inline constexpr int64_t kMinParallelElements = 64 * 1024;
// Elements one task should own at least, so scheduling stays a small share.
inline constexpr int64_t kMinTaskElements = 16 * 1024;

// Threads dvm may use: set_num_threads()'s n, or with 0 (the default) the
// concurrency of the TBB arena the caller runs in (so a host engine's
// task_arena bounds dvm).
int num_threads();
// n >= 1 pins dvm to its own arena of n threads; 0 returns to the caller's arena.
void set_num_threads(int n);

// A host's parallel loop (dvm::set_parallel_for): tasks run fn(ctx, t) for
// t in [0, tasks); null returns to TBB. workers bounds the split.
using HostTaskFn = void (*)(void* ctx, int64_t task);
using HostParallelFor = void (*)(void* host, int64_t tasks, HostTaskFn run, void* ctx);
void set_host_parallel_for(HostParallelFor fn, void* host, int workers);

// Runs body(begin, end) over the items [0, items). elems_per_item is the
// cost model's size of one item (floats touched). Items are independent and
// each computes the same values wherever it runs, so results do not depend
// on the thread count.
using ItemsFn = void (*)(void* ctx, int64_t begin, int64_t end);
void parallel_items(int64_t items, int64_t elems_per_item, ItemsFn fn, void* ctx);

template <class Body>
void parallel_items(int64_t items, int64_t elems_per_item, Body&& body) {
  parallel_items(
      items, elems_per_item,
      [](void* ctx, int64_t b, int64_t e) { (*static_cast<Body*>(ctx))(b, e); }, &body);
}

}  // namespace dvm::vm
