// Caching allocator: size classes of four steps per power of two (at most
// 25% slack), a mutex-guarded free list per class, and a cap on what is kept.
// Shapes that change call after call leave blocks in classes nothing asks
// for any more: when a request must go to the system (and every
// kStaleCheckRequests requests otherwise), the classes not asked for in the
// last kStaleRequests requests give their blocks back, so the cache follows
// the working set instead of every size ever seen.
// Tensor buffers may also take one of the last few blocks freed, up to twice
// their size, or four times where the block is small enough to sit in a
// core's L2 cache: with sizes that change call after call (W8), a block of
// the request's own class was last written many calls ago and is out of the
// CPU's caches, while the one just freed is still in them.
// Blocks of kMapBytes and more are mapped from the system directly, not
// taken from malloc: glibc serves a large request from its heap once a
// mapped block of that size was freed, and keeps what is freed there, so a
// program whose sizes change would hold every size it ever saw. The mapped
// blocks of stale classes are kept whole, up to kReserveBytes, and remapped
// into the next new blocks (their pages are already there, where a fresh
// mapping faults in every one); the rest go back to the system.
#include "tracer/buffer_pool.h"

#include <array>
#include <cstdint>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

// Not under AddressSanitizer (it checks the bounds of malloc's blocks only),
// and not in an interpreter-only build, whose library calls nothing that
// can map memory (scripts/ci_nojit.sh checks).
#if defined(__linux__) && !defined(__SANITIZE_ADDRESS__) && DVM_HAS_JIT
#include <sys/mman.h>
#define DVM_POOL_MAPS 1
#else
#define DVM_POOL_MAPS 0
#endif

#include "dvm/error.h"

namespace dvm::detail {
namespace {

constexpr size_t kMaxCachedBytes = size_t{512} << 20;
constexpr int kClasses = 4 * 48;
constexpr uint64_t kStaleRequests = 1024;
// How often a reuse looks for stale classes (a new block always does).
constexpr uint64_t kStaleCheckRequests = 256;
constexpr int kRecent = 4;        // blocks freed last, remembered for reuse
constexpr int kRecentClasses = 4;  // a block up to 4 classes (2x) larger
constexpr int kRecentSmallClasses = 8;  // up to 8 classes (4x) for a block of
constexpr size_t kRecentSmallBytes = size_t{512} << 10;  // at most this
constexpr size_t kMapBytes = size_t{128} << 10;  // glibc's own first mmap threshold
constexpr size_t kReserveBytes = size_t{32} << 20;
// No system gives this much, and the size class would wrap past 2^64 (a
// request of 2^63 bytes and more rounded up to 0).
constexpr size_t kMaxRequestBytes = size_t{1} << 62;

// The size of class c's blocks (size_class's inverse).
size_t class_size(int c) {
  if (c == 0) return 256;
  const int log2 = (c - 1) / 4 + 8;
  const size_t base = size_t{1} << log2;
  return base + static_cast<size_t>((c - 1) % 4 + 1) * (base / 4);
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

// The pool's lock. Its sections are a few list operations, so a waiter
// spins (yielding after a while) rather than sleeping, and an unlock is a
// plain store instead of the atomic operation a mutex's unlock is.
class SpinLock {
 public:
  void lock() {
    int spins = 0;
    while (held_.exchange(true, std::memory_order_acquire))
      while (held_.load(std::memory_order_relaxed))
        if (++spins > 64) std::this_thread::yield();
  }
  void unlock() { held_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> held_{false};
};

struct Pool {
  SpinLock mu;
  // The host's allocator (set_allocator), or null for the system's.
  AllocateFn host_allocate = nullptr;
  DeallocateFn host_deallocate = nullptr;
  void* host = nullptr;
  std::array<std::vector<void*>, kClasses> free;
  std::array<uint64_t, kClasses> last_request{};  // the request count when each class was last asked for
  uint64_t requests = 0;
  // The last kRecent frees (most recent at recent_next - 1); an entry is
  // still free while its block is the back of its class's list.
  struct Recent {
    void* block = nullptr;
    int cls = -1;
  };
  std::array<Recent, kRecent> recent{};
  uint32_t recent_next = 0;
  size_t cached = 0;
  size_t live = 0;  // bytes handed out and not yet returned (their class sizes)
  size_t peak = 0;  // the most live + cached held at once
  int64_t system_allocs = 0, reuses = 0, remapped = 0;
  // Mapped blocks of stale classes (address, bytes), counted in `cached`.
  std::vector<std::pair<void*, size_t>> reserve;
  size_t reserve_bytes = 0;
  void trim() {
    for (size_t c = 0; c < free.size(); ++c) {
      for (void* p : free[c]) release(p, class_size(static_cast<int>(c)));
      free[c].clear();
    }
    for (auto [p, bytes] : reserve) release(p, bytes);
    reserve.clear();
    reserve_bytes = 0;
    cached = 0;
    recent.fill({});
  }
  // Gives back the blocks of classes not asked for in kStaleRequests: into
  // the reserve while it has room, else to the system.
  void release_stale() {
    for (size_t c = 0; c < free.size(); ++c) {
      if (free[c].empty() || last_request[c] + kStaleRequests >= requests) continue;
      const size_t cb = class_size(static_cast<int>(c));
      for (void* p : free[c]) {
        if (DVM_POOL_MAPS && !host_deallocate && cb >= kMapBytes && reserve_bytes + cb <= kReserveBytes) {
          try {
            reserve.emplace_back(p, cb);
            reserve_bytes += cb;
            continue;
          } catch (const std::bad_alloc&) {
          }
        }
        release(p, cb);
        cached -= cb;
      }
      free[c].clear();
    }
  }
#if DVM_POOL_MAPS
  // A reserved mapping remapped to cb bytes (the smallest that holds cb,
  // else the largest), or null.
  void* take_reserve(size_t cb) {
    const size_t none = reserve.size();
    size_t best = none;
    for (size_t i = 0; i < reserve.size(); ++i)
      if (reserve[i].second >= cb && (best == none || reserve[i].second < reserve[best].second)) best = i;
    if (best == none)
      for (size_t i = 0; i < reserve.size(); ++i)
        if (best == none || reserve[i].second > reserve[best].second) best = i;
    if (best == none) return nullptr;
    auto [p, bytes] = reserve[best];
    reserve[best] = reserve.back();
    reserve.pop_back();
    reserve_bytes -= bytes;
    cached -= bytes;
    void* q = mremap(p, bytes, cb, MREMAP_MAYMOVE);
    if (q != MAP_FAILED) {
      ++remapped;
      return q;
    }
    munmap(p, bytes);
    return nullptr;
  }
#endif
  // A recent free of class c to c + kRecentClasses (kRecentSmallClasses
  // for a block of at most kRecentSmallBytes), the most recent first, taken
  // off its list (its class in *taken); else null.
  void* take_recent(int c, int* taken) {
    for (uint32_t k = 1; k <= kRecent; ++k) {
      Recent& r = recent[(recent_next - k) % kRecent];
      if (r.cls < c) continue;
      const int reach = class_size(r.cls) <= kRecentSmallBytes ? kRecentSmallClasses : kRecentClasses;
      if (r.cls > c + reach) continue;
      auto& list = free[static_cast<size_t>(r.cls)];
      if (list.empty() || list.back() != r.block) continue;
      void* block = r.block;
      list.pop_back();
      *taken = r.cls;
      r = {};
      return block;
    }
    return nullptr;
  }
  // A new block of cb bytes, 64-byte aligned, from the system or the host.
  void* obtain(size_t cb) {
    if (!host_allocate) {
#if DVM_POOL_MAPS
      if (cb >= kMapBytes) {  // a class size: a whole number of pages
        if (void* r = take_reserve(cb)) return r;
        void* b = mmap(nullptr, cb, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (b == MAP_FAILED) throw std::bad_alloc();
        return b;
      }
#endif
      void* b = std::aligned_alloc(64, cb);
      if (!b) throw std::bad_alloc();
      return b;
    }
    void* b = nullptr;
    try {
      b = host_allocate(host, cb, 64);
    } catch (const std::exception& e) {  // dvm::Error is what leaves dvm
      throw Error("out of memory: the host allocator (set_allocator) threw for " + std::to_string(cb) +
                  " bytes: " + e.what());
    } catch (...) {
      throw Error("out of memory: the host allocator (set_allocator) threw for " + std::to_string(cb) + " bytes");
    }
    if (!b)
      throw Error("out of memory: the host allocator (set_allocator) returned null for " + std::to_string(cb) +
                  " bytes");
    if (reinterpret_cast<uintptr_t>(b) % 64 != 0) {
      host_deallocate(host, b, cb);
      throw Error("set_allocator: the host allocator returned a block not aligned to 64 bytes (for " +
                  std::to_string(cb) + " bytes)");
    }
    return b;
  }
  void release(void* b, size_t cb) {
    if (host_deallocate) {
      host_deallocate(host, b, cb);
      return;
    }
#if DVM_POOL_MAPS
    if (cb >= kMapBytes) {
      munmap(b, cb);
      return;
    }
#endif
    std::free(b);
  }
};

// Never destroyed: tensors held in globals die after main returns, and
// their buffers come back here then. At exit the cached blocks stay with
// the process (the system takes them back; trim() gives them to a host
// allocator before it shuts down).
Pool& pool() {
  static Pool* p = new Pool;
  return *p;
}

thread_local int64_t t_fail_after = -1;
std::atomic<int64_t> g_limit{0};  // 0: none

}  // namespace

void pool_set_limit(int64_t bytes) {
  g_limit.store(bytes > 0 ? bytes : 0, std::memory_order_relaxed);
  // The cap holds from now on: cached blocks above it are given back (a
  // later request would reuse them past it, unchecked).
  Pool& p = pool();
  std::lock_guard<SpinLock> lock(p.mu);
  if (bytes > 0 && p.live + p.cached > static_cast<size_t>(bytes)) p.trim();
}
int64_t pool_limit() { return g_limit.load(std::memory_order_relaxed); }

void pool_fail_after(int64_t after) { t_fail_after = after; }

bool pool_maps_blocks() { return DVM_POOL_MAPS != 0; }

namespace {
void* allocate(size_t bytes, size_t* block_bytes) {
  if (t_fail_after >= 0 && t_fail_after-- == 0) throw std::bad_alloc();
  if (bytes > kMaxRequestBytes) throw std::bad_alloc();
  size_t cb;
  int c = size_class(bytes, &cb);
  Pool& p = pool();
  std::lock_guard<SpinLock> lock(p.mu);
  ++p.requests;
  if (c < kClasses) {
    p.last_request[static_cast<size_t>(c)] = p.requests;
    int taken = c;
    void* b = block_bytes ? p.take_recent(c, &taken) : nullptr;
    auto& list = p.free[static_cast<size_t>(c)];
    if (!b && !list.empty()) {
      b = list.back();
      list.pop_back();
    }
    if (b) {
      cb = class_size(taken);
      p.last_request[static_cast<size_t>(taken)] = p.requests;
      p.cached -= cb;
      p.live += cb;
      ++p.reuses;
      if (block_bytes) *block_bytes = cb;
      // A loop whose every request is a reuse still gives stale classes back.
      if (p.requests % kStaleCheckRequests == 0) p.release_stale();
      return b;
    }
  }
  // A new block: stale classes give theirs back first; and within the limit,
  // after giving every cached one back if that is what it takes.
  p.release_stale();
  const size_t limit = static_cast<size_t>(g_limit.load(std::memory_order_relaxed));
  if (limit > 0 && p.live + p.cached + cb > limit) {
    p.trim();
    if (p.live + cb > limit)
      throw Error("out of memory: the memory limit (set_memory_limit) is " + std::to_string(limit) +
                  " bytes; dvm holds " + std::to_string(p.live) + " bytes of tensors and this buffer needs " +
                  std::to_string(cb));
  }
  void* b = p.obtain(cb);
  if (c < kClasses) ++p.system_allocs;
  p.live += cb;
  if (p.live + p.cached > p.peak) p.peak = p.live + p.cached;
  if (block_bytes) *block_bytes = cb;
  return b;
}
}  // namespace

void* pool_allocate(size_t bytes) { return allocate(bytes, nullptr); }

size_t pool_block_bytes(size_t bytes) {
  size_t cb = bytes;
  if (bytes <= kMaxRequestBytes) size_class(bytes, &cb);
  return cb;
}

void* pool_allocate_recent(size_t bytes, size_t* block_bytes) { return allocate(bytes, block_bytes); }

void pool_free(void* b, size_t bytes) {
  if (!b) return;
  size_t cb;
  int c = size_class(bytes, &cb);
  Pool& p = pool();
  std::lock_guard<SpinLock> lock(p.mu);
  p.live -= cb;
  const size_t limit = static_cast<size_t>(g_limit.load(std::memory_order_relaxed));
  if (c < kClasses && p.cached + cb <= kMaxCachedBytes && (limit == 0 || p.live + p.cached + cb <= limit)) {
    // Freeing never throws (it runs in destructors): a class list that
    // cannot grow gives the block back instead of caching it.
    try {
      p.free[static_cast<size_t>(c)].push_back(b);
    } catch (const std::bad_alloc&) {
      p.release(b, cb);
      return;
    }
    p.cached += cb;
    p.recent[p.recent_next++ % kRecent] = {b, c};
    return;
  }
  p.release(b, cb);
}

void pool_set_allocator(AllocateFn allocate, DeallocateFn deallocate, void* host) {
  if (!allocate != !deallocate)
    throw Error("set_allocator: expected both an allocate and a deallocate function, or neither; got only " +
                std::string(allocate ? "allocate" : "deallocate"));
  Pool& p = pool();
  std::lock_guard<SpinLock> lock(p.mu);
  if (p.live > 0)
    throw Error("set_allocator: dvm's tensors hold " + std::to_string(p.live) +
                " bytes from the current allocator; change it before creating tensors or after all are destroyed");
  p.trim();
  p.host_allocate = allocate;
  p.host_deallocate = deallocate;
  p.host = host;
}

PoolStats pool_stats() {
  Pool& p = pool();
  std::lock_guard<SpinLock> lock(p.mu);
  return {p.system_allocs, p.reuses, static_cast<int64_t>(p.cached), static_cast<int64_t>(p.live),
          static_cast<int64_t>(p.peak), p.remapped};
}

void pool_trim() {
  Pool& p = pool();
  std::lock_guard<SpinLock> lock(p.mu);
  p.trim();
}

void pool_reset_peak() {
  Pool& p = pool();
  std::lock_guard<SpinLock> lock(p.mu);
  p.peak = p.live + p.cached;
}

}  // namespace dvm::detail
