// Per-thread statistics counters: a registry of live threads' slots and the
// sums of exited ones.
#include "tracer/thread_counters.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

namespace dvm::detail {
namespace {

constexpr int kCounts = static_cast<int>(Count::kCount);

struct Slots {
  // Atomic only so that a reader may load them while the owner stores.
  std::atomic<int64_t> v[kCounts] = {};
};

struct Registry {
  std::mutex mu;
  std::vector<const Slots*> live;
  int64_t exited[kCounts] = {};
};
Registry& registry() {
  static Registry* r = new Registry;  // outlives every thread's slots
  return *r;
}

struct ThreadSlots {
  Slots s;
  ThreadSlots() {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    r.live.push_back(&s);
  }
  ~ThreadSlots() {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    for (int i = 0; i < kCounts; ++i) r.exited[i] += s.v[i].load(std::memory_order_relaxed);
    r.live.erase(std::find(r.live.begin(), r.live.end(), &s));
  }
};
thread_local ThreadSlots t_slots;

}  // namespace

void count(Count c, int64_t v) {
  std::atomic<int64_t>& a = t_slots.s.v[static_cast<int>(c)];
  a.store(a.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
}

int64_t counted(Count c) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  const int i = static_cast<int>(c);
  int64_t sum = r.exited[i];
  for (const Slots* s : r.live) sum += s->v[i].load(std::memory_order_relaxed);
  return sum;
}

int64_t thread_counted(Count c) { return t_slots.s.v[static_cast<int>(c)].load(std::memory_order_relaxed); }

}  // namespace dvm::detail
