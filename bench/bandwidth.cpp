// The memory-bandwidth limit: a STREAM-style triad a[i] = b[i] + s*c[i]
// (the loop itself is in fused_loops.cpp, -O3 -march=native). Bytes counted
// as STREAM does: 12 per element (two reads, one write; no write-allocate),
// the same convention as the workloads' "bytes the math must move once".
// With several threads the triad runs on parallel_pieces, as the parallel
// fused loops do, and every figure says how many threads took part.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "bench/common.h"

namespace bench {
namespace {

struct Arrays {
  Floats a, b, c;
  explicit Arrays(int64_t n)
      : a(static_cast<size_t>(n), 0.0f), b(static_cast<size_t>(n), 1.0f), c(static_cast<size_t>(n), 2.0f) {}
};

// One set of arrays per size for the whole process: pages are faulted in
// once, never between a probe and a benchmark.
Arrays& arrays(int64_t n) {
  static std::mutex mu;
  static std::map<int64_t, std::unique_ptr<Arrays>> all;
  std::lock_guard<std::mutex> lock(mu);
  auto& p = all[n];
  if (!p) p = std::make_unique<Arrays>(n);
  return *p;
}

constexpr float kScalar = 3.0f;

// One triad over n elements; with threads > 1, over parallel_pieces (the
// arena and the cuts the parallel fused loops use).
void triad(Arrays& v, int64_t n, int threads) {
  if (threads <= 1) {
    fused_triad(v.a.data(), v.b.data(), v.c.data(), kScalar, n);
    return;
  }
  float* a = v.a.data();
  const float* b = v.b.data();
  const float* c = v.c.data();
  parallel_pieces(threads, n, kGrainElems, 16,
                  [=](int64_t lo, int64_t hi) { fused_triad(a + lo, b + lo, c + lo, kScalar, hi - lo); });
}

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

void check_triad(const Arrays& v, int64_t n, const std::string& what) {
  std::vector<float> want(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) want[static_cast<size_t>(i)] = v.b[static_cast<size_t>(i)] + kScalar * v.c[static_cast<size_t>(i)];
  check_close(what, v.a.data(), want.data(), n);
}

void BM_triad(benchmark::State& state, int64_t n, int threads) {
  Arrays& v = arrays(n);
  const std::string name = "bandwidth/triad/" + std::to_string(n) + "/threads:" + std::to_string(threads);
  triad_bytes_per_second(threads);  // measured before, never inside, a timing
  triad(v, n, threads);             // warm caches
  if (first_time(name)) check_triad(v, n, name);
  pieces_threads_seen();
  const LoopStats loop_stats;
  for (auto _ : state) {
    triad(v, n, threads);
    benchmark::ClobberMemory();
  }
  loop_stats.set_counters(state);
  if (threads > 1 && n >= 2 * kGrainElems) state.counters["threads_used"] = expect_pieces_threads(threads, name);
  set_bandwidth_counters(state, 12.0 * static_cast<double>(n), threads);
}

int register_triad() {
  for (int64_t n : kSizes)
    for (int threads : thread_counts()) {
      benchmark::internal::Benchmark* b = benchmark::RegisterBenchmark(
          ("bandwidth/triad/" + std::to_string(n) + "/threads:" + std::to_string(threads)).c_str(),
          [n, threads](benchmark::State& st) { BM_triad(st, n, threads); });
      b->Unit(benchmark::kMicrosecond);
      if (threads > 1) b->UseRealTime();  // the work is on several threads
    }
  return 0;
}
const int registered = register_triad();

}  // namespace

double triad_bytes_per_second(int threads) {
  static std::mutex mu;
  static std::map<int, double> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(threads);
  if (it != cache.end()) return it->second;

  const int64_t n = kLarge;
  Arrays* v = &arrays(n);
  triad(*v, n, threads);  // first touch of every page
  check_triad(*v, n, "triad bandwidth probe");
  for (int r = 0; r < 10; ++r) triad(*v, n, threads);  // settle: the first runs are slower here
  constexpr int kRuns = 15;
  std::vector<double> secs;
  pieces_threads_seen();
  const double cpu0 = process_cpu_seconds();
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < kRuns; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    triad(*v, n, threads);
    const auto t1 = std::chrono::steady_clock::now();
    secs.push_back(std::chrono::duration<double>(t1 - t0).count());
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu = process_cpu_seconds() - cpu0;
  const int seen = threads > 1 ? expect_pieces_threads(threads, "triad bandwidth probe") : 1;
  // STREAM's convention, the best run: other processes on the machine only
  // ever slow a run down, so the fastest is the closest to the hardware's
  // limit (the median is printed beside it).
  std::sort(secs.begin(), secs.end());
  const double bps = 12.0 * static_cast<double>(n) / secs.front();
  const double median_bps = 12.0 * static_cast<double>(n) / secs[kRuns / 2];
  // Process CPU time over wall time near `threads` says they all worked.
  std::fprintf(stderr,
               "bench_dvm: triad bandwidth (%d thread%s, %lld floats, best of %d): %.2f GB/s "
               "(median %.2f GB/s; on %d thread%s, process CPU time / wall time %.2f)\n",
               threads, threads == 1 ? "" : "s", static_cast<long long>(n), kRuns, bps * 1e-9,
               median_bps * 1e-9, seen, seen == 1 ? "" : "s", cpu / wall);
  cache[threads] = bps;
  return bps;
}

double page_fault_ns() {
  static const double ns = [] {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t bytes = size_t{32} << 20;
    std::vector<double> per_page;
    for (int r = 0; r < 3; ++r) {
      void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (m == MAP_FAILED) return 0.0;
      volatile char* p = static_cast<volatile char*>(m);
      const auto t0 = std::chrono::steady_clock::now();
      for (size_t off = 0; off < bytes; off += page) p[off] = 1;
      const auto t1 = std::chrono::steady_clock::now();
      munmap(m, bytes);
      per_page.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(bytes / page));
    }
    std::sort(per_page.begin(), per_page.end());
    return per_page[1];
  }();
  return ns;
}

}  // namespace bench
