// The memory-bandwidth limit: a STREAM-style triad a[i] = b[i] + s*c[i]
// (the loop itself is in fused_loops.cpp, -O3 -march=native). Bytes counted
// as STREAM does: 12 per element (two reads, one write; no write-allocate),
// the same convention as the workloads' "bytes the math must move once".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/common.h"

namespace bench {
namespace {

struct Arrays {
  std::vector<float> a, b, c;
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

// One triad over n elements, split into `threads` contiguous pieces.
void triad(Arrays& v, int64_t n, int threads) {
  if (threads <= 1) {
    fused_triad(v.a.data(), v.b.data(), v.c.data(), kScalar, n);
    return;
  }
  std::vector<std::thread> pool;
  const int64_t chunk = (n + threads - 1) / threads;
  for (int t = 0; t < threads; ++t) {
    const int64_t lo = std::min(n, t * chunk), hi = std::min(n, lo + chunk);
    pool.emplace_back([&v, lo, hi] {
      fused_triad(v.a.data() + lo, v.b.data() + lo, v.c.data() + lo, kScalar, hi - lo);
    });
  }
  for (auto& th : pool) th.join();
}

void check_triad(const Arrays& v, int64_t n, const std::string& what) {
  std::vector<float> want(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) want[static_cast<size_t>(i)] = v.b[static_cast<size_t>(i)] + kScalar * v.c[static_cast<size_t>(i)];
  check_close(what, v.a.data(), want.data(), n);
}

void BM_triad(benchmark::State& state, int64_t n) {
  Arrays& v = arrays(n);
  triad(v, n, 1);  // warm caches
  if (first_time("triad/" + std::to_string(n))) check_triad(v, n, "bandwidth/triad/" + std::to_string(n));
  for (auto _ : state) {
    fused_triad(v.a.data(), v.b.data(), v.c.data(), kScalar, n);
    benchmark::ClobberMemory();
  }
  set_bandwidth_counters(state, 12.0 * static_cast<double>(n));
}

int register_triad() {
  for (int64_t n : kSizes)
    benchmark::RegisterBenchmark(("bandwidth/triad/" + std::to_string(n)).c_str(),
                                 [n](benchmark::State& st) { BM_triad(st, n); })
        ->Unit(benchmark::kMicrosecond);
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
  for (int r = 0; r < kRuns; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    triad(*v, n, threads);
    const auto t1 = std::chrono::steady_clock::now();
    secs.push_back(std::chrono::duration<double>(t1 - t0).count());
  }
  std::sort(secs.begin(), secs.end());
  const double bps = 12.0 * static_cast<double>(n) / secs[kRuns / 2];
  std::fprintf(stderr, "bench_dvm: triad bandwidth (%d thread%s, %lld floats, median of %d): %.2f GB/s\n",
               threads, threads == 1 ? "" : "s", static_cast<long long>(n), kRuns, bps * 1e-9);
  cache[threads] = bps;
  return bps;
}

}  // namespace bench
