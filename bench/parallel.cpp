// Threads in bench_dvm's own loops: the thread counts the workloads run at,
// and parallel_pieces, which the parallel fused loops and the multi-thread
// triad share (common.h).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include <sys/resource.h>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include "bench/common.h"

namespace bench {
namespace {

// One arena per thread count for the whole process: its threads are started
// once, never inside a timing. An arena of N has N slots, one of them the
// caller's (arena.execute runs the caller in the arena).
tbb::task_arena& arena(int threads) {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<tbb::task_arena>> arenas;
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<tbb::task_arena>& a = arenas[threads];
  if (!a) {
    a = std::make_unique<tbb::task_arena>(threads);
    a->initialize();
  }
  return *a;
}

// Distinct threads that ran a piece since the last pieces_threads_seen(): a
// thread counts itself once per epoch.
std::atomic<uint64_t> g_epoch{1};
std::atomic<int> g_seen{0};
thread_local uint64_t t_epoch = 0;

inline void note_thread() {
  const uint64_t e = g_epoch.load(std::memory_order_relaxed);
  if (t_epoch != e) {
    t_epoch = e;
    g_seen.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace

const std::vector<int>& thread_counts() {
  static const std::vector<int> counts = [] {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    std::vector<int> v{1};
    if (cores > 1) v.push_back(cores);
    return v;
  }();
  return counts;
}

void parallel_pieces(int threads, int64_t n, int64_t grain, int64_t align, PieceFn fn, void* ctx) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  align = std::max<int64_t>(align, 1);
  const int64_t pieces = threads > 1 ? std::min<int64_t>(4 * static_cast<int64_t>(threads), n / grain) : 1;
  if (pieces < 2) {
    note_thread();
    fn(ctx, 0, n);
    return;
  }
  // Piece k is [cut(k), cut(k+1)); inner cuts on multiples of align (a cache
  // line of floats for the flat loops, so no two threads write one line).
  auto cut = [=](int64_t k) {
    if (k >= pieces) return n;
    const int64_t c = n * k / pieces;
    return c - c % align;
  };
  arena(threads).execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<int64_t>(0, pieces, 1),
        [&](const tbb::blocked_range<int64_t>& r) {
          note_thread();
          for (int64_t k = r.begin(); k != r.end(); ++k) fn(ctx, cut(k), cut(k + 1));
        },
        tbb::simple_partitioner());
  });
}

int pieces_threads_seen() {
  const int seen = g_seen.exchange(0, std::memory_order_relaxed);
  g_epoch.fetch_add(1, std::memory_order_relaxed);
  return seen;
}

int expect_pieces_threads(int threads, const std::string& what) {
  const int seen = pieces_threads_seen();
  if (threads > 1 && seen < threads)
    std::fprintf(stderr,
                 "bench_dvm: WARNING: %s: the pieces ran on %d thread%s, not %d (the other threads "
                 "never got a core in time: the machine is busy)\n",
                 what.c_str(), seen, seen == 1 ? "" : "s", threads);
  return seen;
}

namespace {
double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}
double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

}  // namespace

LoopStats::LoopStats() : cpu0_(process_cpu_seconds()), wall0_(wall_seconds()), faults0_(minor_faults()) {}

void LoopStats::set_counters(benchmark::State& state) const {
  const double wall = wall_seconds() - wall0_;
  const double cpu = process_cpu_seconds() - cpu0_;
  const double faults = static_cast<double>(minor_faults() - faults0_);
  const double iters = static_cast<double>(std::max<benchmark::IterationCount>(state.iterations(), 1));
  state.counters["cores_busy"] = wall > 0 ? cpu / wall : 0.0;
  state.counters["page_faults"] = faults / iters;
}

}  // namespace bench
