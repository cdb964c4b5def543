// Caching allocator: size classes of four steps per power of two (at most
// 25% slack), a mutex-guarded free list per class, and a cap on what is kept.
#include "tracer/buffer_pool.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "dvm/error.h"

namespace dvm::detail {
namespace {

constexpr size_t kMaxCachedBytes = size_t{512} << 20;
constexpr int kClasses = 4 * 48;

struct Pool {
  std::mutex mu;
  std::array<std::vector<void*>, kClasses> free;
  size_t cached = 0;
  size_t live = 0;  // bytes handed out and not yet returned (their class sizes)
  size_t peak = 0;  // the most live + cached held at once
  int64_t system_allocs = 0, reuses = 0;
  ~Pool() { trim(); }
  void trim() {
    for (auto& list : free) {
      for (void* p : list) std::free(p);
      list.clear();
    }
    cached = 0;
  }
};

Pool& pool() {
  static Pool p;
  return p;
}

// Class index and the size every block of that class has.
int size_class(size_t bytes, size_t* class_bytes) {
  if (bytes <= 256) {
    *class_bytes = 256;
    return 0;
  }
  int log2 = 63 - __builtin_clzll(bytes - 1);  // 2^log2 < bytes <= 2^(log2+1)
  size_t base = size_t{1} << log2;
  size_t step = base / 4;
  size_t k = (bytes - base + step - 1) / step;  // 1..4
  *class_bytes = base + k * step;
  return 1 + (log2 - 8) * 4 + static_cast<int>(k - 1);
}

thread_local int64_t t_fail_after = -1;
std::atomic<int64_t> g_limit{0};  // 0: none

}  // namespace

void pool_set_limit(int64_t bytes) { g_limit.store(bytes > 0 ? bytes : 0, std::memory_order_relaxed); }
int64_t pool_limit() { return g_limit.load(std::memory_order_relaxed); }

void pool_fail_after(int64_t after) { t_fail_after = after; }

void* pool_allocate(size_t bytes) {
  if (t_fail_after >= 0 && t_fail_after-- == 0) throw std::bad_alloc();
  size_t cb;
  int c = size_class(bytes, &cb);
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mu);
  if (c < kClasses) {
    auto& list = p.free[static_cast<size_t>(c)];
    if (!list.empty()) {
      void* b = list.back();
      list.pop_back();
      p.cached -= cb;
      p.live += cb;
      ++p.reuses;
      return b;
    }
  }
  // A new block: within the limit, after giving the cached ones back if
  // that is what it takes.
  const size_t limit = static_cast<size_t>(g_limit.load(std::memory_order_relaxed));
  if (limit > 0 && p.live + p.cached + cb > limit) {
    p.trim();
    if (p.live + cb > limit)
      throw Error("out of memory: the memory limit (set_memory_limit) is " + std::to_string(limit) +
                  " bytes; dvm holds " + std::to_string(p.live) + " bytes of tensors and this buffer needs " +
                  std::to_string(cb));
  }
  void* b = std::aligned_alloc(64, cb);
  if (!b) throw std::bad_alloc();
  if (c < kClasses) ++p.system_allocs;
  p.live += cb;
  if (p.live + p.cached > p.peak) p.peak = p.live + p.cached;
  return b;
}

void pool_free(void* b, size_t bytes) {
  if (!b) return;
  size_t cb;
  int c = size_class(bytes, &cb);
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mu);
  p.live -= cb;
  const size_t limit = static_cast<size_t>(g_limit.load(std::memory_order_relaxed));
  if (c < kClasses && p.cached + cb <= kMaxCachedBytes && (limit == 0 || p.live + p.cached + cb <= limit)) {
    p.free[static_cast<size_t>(c)].push_back(b);
    p.cached += cb;
    return;
  }
  std::free(b);
}

PoolStats pool_stats() {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mu);
  return {p.system_allocs, p.reuses, static_cast<int64_t>(p.cached), static_cast<int64_t>(p.live),
          static_cast<int64_t>(p.peak)};
}

void pool_trim() {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mu);
  p.trim();
}

}  // namespace dvm::detail
