#include "tracer/row_copies.h"

#include <atomic>
#include <mutex>
#include <new>
#include <vector>

#include "tracer/buffer_pool.h"
#include "tracer/node.h"

namespace dvm::detail {

struct RowCopies {
  struct Entry {
    int64_t offset, K, N, cs;
    int requests = 0;
    bool failed = false;  // no memory for it: never tried again
    float* data = nullptr;
    size_t bytes = 0;    // the request (what pool_free takes back)
    size_t counted = 0;  // its pool block: what live_bytes and the budget count
    int64_t ld = 0;
  };
  std::mutex mu;
  std::vector<Entry> entries;
};

namespace {

// A buffer is read as a few matrices at most (a fused weight's slices).
constexpr size_t kMaxEntries = 4;

std::atomic<bool> g_on{true};
std::atomic<int64_t> g_bytes{0};

// s's copies, made at its first request while copies are on; null when
// there are none to read and none may be made.
RowCopies* copies_of(Storage* s) {
  RowCopies* c = s->row_copies.load(std::memory_order_acquire);
  if (c || !g_on.load(std::memory_order_relaxed)) return c;
  RowCopies* fresh = new (std::nothrow) RowCopies;
  if (!fresh) return nullptr;
  if (s->row_copies.compare_exchange_strong(c, fresh, std::memory_order_acq_rel)) return fresh;
  delete fresh;
  return c;
}

}  // namespace

int64_t row_copy_stride(int64_t N) {
  int64_t ld = (N + 15) / 16 * 16;
  if (ld % 1024 == 0) ld += 16;
  return ld;
}

const float* row_copy(Storage* s, int64_t offset, int64_t K, int64_t N, int64_t cs, FillRows fill,
                      int64_t* ld, int64_t budget) {
  RowCopies* c = copies_of(s);
  if (!c) return nullptr;
  std::lock_guard<std::mutex> lock(c->mu);
  RowCopies::Entry* e = nullptr;
  for (RowCopies::Entry& x : c->entries)
    if (x.offset == offset && x.K == K && x.N == N && x.cs == cs) e = &x;
  if (!e) {
    if (c->entries.size() == kMaxEntries || !g_on.load(std::memory_order_relaxed)) return nullptr;
    try {
      c->entries.push_back({offset, K, N, cs});
    } catch (const std::bad_alloc&) {
      return nullptr;
    }
    e = &c->entries.back();
  }
  if (e->data) {
    *ld = e->ld;
    return e->data;
  }
  if (e->requests < 2) ++e->requests;  // saturates: a product refused by the budget asks on every call
  if (e->failed || e->requests < 2 || !g_on.load(std::memory_order_relaxed)) return nullptr;
  const int64_t stride = row_copy_stride(N);
  const size_t bytes = static_cast<size_t>(K * stride) * sizeof(float);
  // The pool block, as live_bytes counts it: the budget and weight_copy_bytes
  // are then parts of live_bytes.
  const size_t counted = pool_block_bytes(bytes);
  if (budget >= 0 && g_bytes.load(std::memory_order_relaxed) + static_cast<int64_t>(counted) > budget) return nullptr;
  void* p = nullptr;
  try {
    p = pool_allocate(bytes);
  } catch (...) {  // std::bad_alloc, or the memory limit's dvm::Error
    e->failed = true;
    return nullptr;
  }
  float* dst = static_cast<float*>(p);
  fill(static_cast<const float*>(s->at(offset)), cs, K, N, dst, stride);
  e->data = dst;
  e->bytes = bytes;
  e->counted = counted;
  e->ld = stride;
  g_bytes.fetch_add(static_cast<int64_t>(counted), std::memory_order_relaxed);
  *ld = stride;
  return dst;
}

const float* existing_row_copy(Storage* s, int64_t offset, int64_t K, int64_t N, int64_t cs, int64_t* ld) {
  RowCopies* c = s->row_copies.load(std::memory_order_acquire);
  if (!c) return nullptr;
  std::lock_guard<std::mutex> lock(c->mu);
  for (const RowCopies::Entry& e : c->entries)
    if (e.offset == offset && e.K == K && e.N == N && e.cs == cs && e.data) {
      *ld = e.ld;
      return e.data;
    }
  return nullptr;
}

void free_row_copies(Storage* s) {
  // The storage's last reference is going: nothing else can set its copies
  // now, so a load tells whether there are any (an exchange is an atomic
  // operation on every buffer freed).
  if (!s->row_copies.load(std::memory_order_acquire)) return;
  RowCopies* c = s->row_copies.exchange(nullptr, std::memory_order_acq_rel);
  if (!c) return;
  for (const RowCopies::Entry& e : c->entries)
    if (e.data) {
      pool_free(e.data, e.bytes);
      g_bytes.fetch_sub(static_cast<int64_t>(e.counted), std::memory_order_relaxed);
    }
  delete c;
}

void set_row_copies(bool on) { g_on.store(on, std::memory_order_relaxed); }
bool row_copies_on() { return g_on.load(std::memory_order_relaxed); }
int64_t row_copy_bytes() { return g_bytes.load(std::memory_order_relaxed); }

}  // namespace dvm::detail
