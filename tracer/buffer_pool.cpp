// Caching allocator: size classes of four steps per power of two (at most
// 25% slack), a mutex-guarded free list per class, and a cap on what is kept.
#include "tracer/buffer_pool.h"

#include <array>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

namespace dvm::detail {
namespace {

constexpr size_t kMaxCachedBytes = size_t{512} << 20;
constexpr int kClasses = 4 * 48;

struct Pool {
  std::mutex mu;
  std::array<std::vector<void*>, kClasses> free;
  size_t cached = 0;
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

}  // namespace

void pool_fail_after(int64_t after) { t_fail_after = after; }

void* pool_allocate(size_t bytes) {
  if (t_fail_after >= 0 && t_fail_after-- == 0) throw std::bad_alloc();
  size_t cb;
  int c = size_class(bytes, &cb);
  Pool& p = pool();
  if (c < kClasses) {
    std::lock_guard<std::mutex> lock(p.mu);
    auto& list = p.free[static_cast<size_t>(c)];
    if (!list.empty()) {
      void* b = list.back();
      list.pop_back();
      p.cached -= cb;
      ++p.reuses;
      return b;
    }
    ++p.system_allocs;
  }
  void* b = std::aligned_alloc(64, cb);
  if (!b) throw std::bad_alloc();
  return b;
}

void pool_free(void* b, size_t bytes) {
  if (!b) return;
  size_t cb;
  int c = size_class(bytes, &cb);
  Pool& p = pool();
  if (c < kClasses) {
    std::lock_guard<std::mutex> lock(p.mu);
    if (p.cached + cb <= kMaxCachedBytes) {
      p.free[static_cast<size_t>(c)].push_back(b);
      p.cached += cb;
      return;
    }
  }
  std::free(b);
}

PoolStats pool_stats() {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mu);
  return {p.system_allocs, p.reuses, static_cast<int64_t>(p.cached)};
}

void pool_trim() {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mu);
  p.trim();
}

}  // namespace dvm::detail
