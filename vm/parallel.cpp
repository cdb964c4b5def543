// Parallel item execution on TBB.
#include "vm/parallel.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include <tbb/blocked_range.h>
#include <tbb/info.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

namespace dvm::vm {
namespace {

// set_num_threads() may run while other threads launch: each parallel launch
// holds its own reference to the arena it runs in (the arenas are kept, one
// per concurrency). Only launches big enough to split take the lock; they
// run for tens of microseconds.
std::mutex g_mu;
std::atomic<int> g_threads{0};  // 0: the caller's arena
std::shared_ptr<tbb::task_arena> g_arena;

int configured() { return g_threads.load(std::memory_order_acquire); }

// The host's job system, when one is set: its loop, its context and how many
// workers it has. Read by every launch that splits, set rarely.
struct HostPool {
  HostParallelFor fn = nullptr;
  void* host = nullptr;
  int workers = 1;
};
std::atomic<const HostPool*> g_host{nullptr};

}  // namespace

void set_host_parallel_for(HostParallelFor fn, void* host, int workers) {
  // Every pool set stays allocated (a few bytes each, reachable from this
  // list): a launch on another thread may still hold the previous one
  // (set_parallel_for's contract asks for quiet; this keeps a race from
  // becoming a use after free).
  static std::mutex mu;
  static std::vector<std::unique_ptr<HostPool>> pools;
  const HostPool* p = nullptr;
  if (fn) {
    std::lock_guard<std::mutex> lock(mu);
    pools.push_back(std::make_unique<HostPool>(HostPool{fn, host, std::max(1, workers)}));
    p = pools.back().get();
  }
  g_host.store(p, std::memory_order_release);
}

int num_threads() {
  if (const HostPool* h = g_host.load(std::memory_order_acquire)) return h->workers;
  int t = configured();
  return t > 0 ? t : tbb::this_task_arena::max_concurrency();
}

void set_num_threads(int n) {
  n = std::max(0, n);
  // TBB cannot run more workers than the machine has (it warns on stderr
  // when asked): the arena has at most that many, and launches still cut
  // their work for n threads. One arena per concurrency, made once and
  // kept: a host that sets the count every frame would otherwise make and
  // drop an arena each time, and TBB keeps memory from every one.
  // (Never destroyed: a launch may still run on one at exit.)
  static auto* arenas = new std::vector<std::shared_ptr<tbb::task_arena>>;  // by concurrency; guarded by g_mu
  std::lock_guard<std::mutex> lock(g_mu);
  std::shared_ptr<tbb::task_arena> arena;
  if (n > 0) {
    const size_t c = static_cast<size_t>(std::min(n, tbb::info::default_concurrency()));
    if (arenas->size() <= c) arenas->resize(c + 1);
    if (!(*arenas)[c]) (*arenas)[c] = std::make_shared<tbb::task_arena>(static_cast<int>(c));
    arena = (*arenas)[c];
  }
  g_arena = std::move(arena);
  g_threads.store(n, std::memory_order_release);
}

void parallel_items(int64_t items, int64_t elems_per_item, ItemsFn fn, void* ctx) {
  if (items <= 0) return;
  const int64_t per_item = std::max<int64_t>(elems_per_item, 1);
  // A launch too small to split asks TBB nothing (the arena's concurrency
  // is a call into TBB).
  if (items < 2 || items * per_item < kMinParallelElements) {
    fn(ctx, 0, items);
    return;
  }
  const int threads = num_threads();
  if (threads <= 1) {
    fn(ctx, 0, items);
    return;
  }
  // Pieces of at least kMinTaskElements, and a few per thread for balance.
  int64_t grain = std::max<int64_t>(1, (kMinTaskElements + per_item - 1) / per_item);
  grain = std::max<int64_t>(grain, items / (4 * static_cast<int64_t>(threads)));
  if (const HostPool* h = g_host.load(std::memory_order_acquire)) {
    // Task t runs items [t * items / tasks, (t + 1) * items / tasks).
    const int64_t tasks = (items + grain - 1) / grain;
    struct Split {
      ItemsFn fn;
      void* ctx;
      int64_t items, tasks;
    } split{fn, ctx, items, tasks};
    h->fn(h->host, tasks,
          [](void* c, int64_t t) {
            const Split& s = *static_cast<const Split*>(c);
            s.fn(s.ctx, t * s.items / s.tasks, (t + 1) * s.items / s.tasks);
          },
          &split);
    return;
  }
  auto run = [&] {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, items, static_cast<size_t>(grain)),
                      [&](const tbb::blocked_range<int64_t>& r) { fn(ctx, r.begin(), r.end()); },
                      tbb::simple_partitioner());
  };
  std::shared_ptr<tbb::task_arena> arena;
  if (configured() > 0) {
    std::lock_guard<std::mutex> lock(g_mu);
    arena = g_arena;  // null if set_num_threads(0) ran meanwhile
  }
  if (arena) {
    arena->execute(run);
  } else {
    run();
  }
}

}  // namespace dvm::vm
