// Memory: a steady-state loop gets every tensor buffer from the buffer pool
// (no system allocation after the first iterations), and nodes come from the
// per-thread free list.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <unistd.h>
#endif

#include "dvm/dvm.h"
#include "tests/resident_memory.h"
#include "tracer/buffer_pool.h"
#include "tracer/node.h"

#include <thread>

namespace dvm {
namespace {

TEST(Memory, SteadyStateLoopsAllocateNoBuffersFromTheSystem) {
  std::vector<float> xv(4096 * 3), bv(4096);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = std::sin(0.01f * static_cast<float>(i));
  for (size_t i = 0; i < bv.size(); ++i) bv[i] = 0.5f - 0.0001f * static_cast<float>(i);
  auto step = [&](int64_t rows) {
    Tensor x = Tensor::from_blob(xv.data(), {rows, 4096});
    Tensor b = Tensor::from_blob(bv.data(), {4096});
    Tensor h = gelu(x + b);
    Tensor y = softmax(layer_norm(h, {4096}, b, b), -1);  // intermediates stored between kernels too
    Tensor s = (h * 2.0f).sum(0).sum();
    return y.to_vector()[0] + s.item();
  };
  // Warm up with every size the loop will see.
  float first = 0;
  for (int i = 0; i < 3; ++i)
    for (int64_t rows : {1, 2, 3}) first = step(rows);
  const detail::PoolStats before = detail::pool_stats();
  float last = 0;
  for (int i = 0; i < 50; ++i)
    for (int64_t rows : {1, 2, 3}) last = step(rows);
  const detail::PoolStats after = detail::pool_stats();
  EXPECT_EQ(after.system_allocs, before.system_allocs);
  EXPECT_GT(after.reuses, before.reuses);
  EXPECT_EQ(first, last);  // same inputs, same bits
}

// A thread that only frees tensors (a consumer of workers' results) keeps
// the records of those that died on it for ops it never records: at most
// 4096, and trim() frees them.
TEST(Memory, ATensorConsumingThreadKeepsAtMost4096Records) {
  detail::node_pool_trim();
  for (int round = 0; round < 3; ++round) {
    std::vector<Tensor> made;
    std::thread worker([&] {
      for (int i = 0; i < 6000; ++i) {
        Tensor y = tanh(Tensor::full({4}, 0.5f * static_cast<float>(i % 7))) + 1.0f;
        y.sync();
        made.push_back(y);
      }
    });
    worker.join();
    ASSERT_EQ(made.size(), 6000u);
    EXPECT_NEAR(made[5999].to_vector()[0], std::tanh(0.5f * (5999 % 7)) + 1.0f, 1e-6f);
    made.clear();  // every node dies on this thread
    EXPECT_LE(detail::node_pool_cached(), 4096u) << "round " << round;
    EXPECT_GE(detail::node_pool_cached(), 1000u) << "round " << round << ": the free list keeps nothing";
  }
  trim();
  EXPECT_EQ(detail::node_pool_cached(), 0u);
}

// argmax keeps a few index ranges per thread for its next calls; trim()
// and set_allocator() drop the calling thread's (a host may set its
// allocator after a first argmax).
TEST(Memory, TrimDropsTheIndexRangesArgmaxKeeps) {
  trim();
  ASSERT_EQ(memory_stats().live_bytes, 0);
  {
    const Tensor x = Tensor::from_vector(std::vector<float>{3, 1, 4, 1, 5, 9, 2, 6}, {2, 4});
    EXPECT_EQ(x.argmax(1).to_vector<int64_t>(), (std::vector<int64_t>{2, 1}));
  }
  EXPECT_GT(memory_stats().live_bytes, 0) << "no range kept: the cache this test covers is gone";
  trim();
  EXPECT_EQ(memory_stats().live_bytes, 0);
  {
    const Tensor x = Tensor::from_vector(std::vector<float>{3, 1, 4}, {3});
    EXPECT_EQ(x.argmin().to_vector<int64_t>(), (std::vector<int64_t>{1}));
  }
  set_allocator(nullptr, nullptr, nullptr);  // would throw while a range held a block
  EXPECT_EQ(memory_stats().live_bytes, 0);
}

// A result recorded and dropped unread (a temporary whose op was never
// observed) keeps its inputs until a flush drops it; trim() flushes the
// calling thread first, so their buffers are given back as well.
TEST(Memory, TrimGivesBackWhatOnlyDroppedResultsHeld) {
  trim();
  ASSERT_EQ(memory_stats().live_bytes, 0);
  for (int64_t n : {int64_t{6}, int64_t{1000}, int64_t{70000}}) {
    {
      const Tensor x = Tensor::from_vector(std::vector<float>(static_cast<size_t>(n), 2.0f), {n});
      (void)(x * 3.0f + 1.0f).to(Dtype::F16);  // recorded, never read
    }
    EXPECT_GT(memory_stats().live_bytes, 0) << n << ": the pending result holds nothing";
    trim();
    EXPECT_EQ(memory_stats().live_bytes, 0) << n;
    EXPECT_EQ(memory_stats().cached_bytes, 0) << n;
  }
}

TEST(Memory, PoolRoundsToSizeClassesAndReusesThem) {
  detail::pool_trim();
  const detail::PoolStats s0 = detail::pool_stats();
  void* a = detail::pool_allocate(1000 * sizeof(float));
  detail::pool_free(a, 1000 * sizeof(float));
  // A slightly different request of the same class reuses the block.
  void* b = detail::pool_allocate(1010 * sizeof(float));
  EXPECT_EQ(a, b);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 64, 0u);
  detail::pool_free(b, 1010 * sizeof(float));
  const detail::PoolStats s1 = detail::pool_stats();
  EXPECT_EQ(s1.system_allocs - s0.system_allocs, 1);
  EXPECT_EQ(s1.reuses - s0.reuses, 1);
  EXPECT_GT(s1.cached_bytes, 0);
  detail::pool_trim();
  EXPECT_EQ(detail::pool_stats().cached_bytes, 0);
}

// A tensor buffer may take one of the last blocks freed up to twice its
// size, or four times for a block of at most 512 KiB (still in the CPU's
// caches, where its own class's block was last written long ago), and is
// freed back to that block's class; callers that free by request size never
// get a larger block.
TEST(Memory, TensorBuffersReuseRecentBlocksUpToTwiceOrFourTimesTheirSize) {
  detail::pool_trim();
  const int64_t live0 = detail::pool_stats().live_bytes;
  size_t big_bytes = 0;
  void* big = detail::pool_allocate_recent(8000, &big_bytes);  // class 8192
  EXPECT_EQ(big_bytes, 8192u);
  detail::pool_free(big, big_bytes);
  // 4200 bytes is class 5120: 8192 is within twice that.
  size_t got = 0;
  void* b = detail::pool_allocate_recent(4200, &got);
  EXPECT_EQ(b, big);
  EXPECT_EQ(got, 8192u);
  EXPECT_EQ(detail::pool_stats().live_bytes - live0, 8192);
  detail::pool_free(b, got);
  EXPECT_EQ(detail::pool_stats().live_bytes, live0);
  // A small block serves up to four times the request: 2000 bytes is class
  // 2048.
  void* quarter = detail::pool_allocate_recent(2000, &got);
  EXPECT_EQ(quarter, big);
  EXPECT_EQ(got, 8192u);
  detail::pool_free(quarter, got);
  // More than four times the request: a block of the request's class.
  size_t small_bytes = 0;
  void* small = detail::pool_allocate_recent(1000, &small_bytes);
  EXPECT_NE(small, big);
  EXPECT_EQ(small_bytes, 1024u);
  detail::pool_free(small, small_bytes);
  // A request-size caller (the graph arena, row copies) gets its own class.
  void* exact = detail::pool_allocate(4200);
  EXPECT_NE(exact, big);
  detail::pool_free(exact, 4200);
  // The big block was taken by neither and is still cached, once.
  size_t again = 0;
  void* c = detail::pool_allocate_recent(8100, &again);
  EXPECT_EQ(c, big);
  detail::pool_free(c, again);
  EXPECT_EQ(detail::pool_stats().live_bytes, live0);
  // A block above 512 KiB serves at most twice the request: 2 MiB is not
  // taken for 700 KiB (class 768 KiB) and is for 1.1 MiB (class 1.25 MiB).
  size_t large_bytes = 0;
  void* large = detail::pool_allocate_recent(size_t{2} << 20, &large_bytes);
  EXPECT_EQ(large_bytes, size_t{2} << 20);
  detail::pool_free(large, large_bytes);
  size_t mid_bytes = 0;
  void* mid = detail::pool_allocate_recent(700 << 10, &mid_bytes);
  EXPECT_NE(mid, large);
  EXPECT_EQ(mid_bytes, size_t{768} << 10);
  detail::pool_free(mid, mid_bytes);
  size_t near_bytes = 0;
  void* near_large = detail::pool_allocate_recent(1100 << 10, &near_bytes);
  EXPECT_EQ(near_large, large);
  EXPECT_EQ(near_bytes, size_t{2} << 20);
  detail::pool_free(near_large, near_bytes);
  EXPECT_EQ(detail::pool_stats().live_bytes, live0);
  detail::pool_trim();
  EXPECT_EQ(detail::pool_stats().cached_bytes, 0);
}

// Tensors of pseudo-random sizes, made and dropped in a random order: every
// value is right and the pool's books balance (live bytes back to where
// they began, every cached block given back by trim).
TEST(Memory, TensorsOfChangingSizesBalanceThePool) {
  dvm::flush();
  detail::pool_trim();
  const int64_t live0 = detail::pool_stats().live_bytes;
  uint64_t s = 0x5eed;
  auto next = [&s] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return s >> 33;
  };
  std::vector<Tensor> alive;
  for (int i = 0; i < 300; ++i) {
    const int64_t n = 1 + static_cast<int64_t>(next() % 20000);
    const float k = static_cast<float>(next() % 7);
    Tensor t = Tensor::arange(n) * 2.0f + k;
    const std::vector<float> v = t.to_vector();
    ASSERT_EQ(static_cast<int64_t>(v.size()), n);
    for (int64_t j = 0; j < n; j += 97) ASSERT_EQ(v[static_cast<size_t>(j)], 2.0f * static_cast<float>(j) + k) << n;
    ASSERT_EQ(v.back(), 2.0f * static_cast<float>(n - 1) + k);
    alive.push_back(t);
    if (alive.size() > 5) alive.erase(alive.begin() + static_cast<long>(next() % alive.size()));
  }
  alive.clear();
  EXPECT_EQ(detail::pool_stats().live_bytes, live0);
  detail::pool_trim();
  EXPECT_EQ(detail::pool_stats().cached_bytes, 0);
}

// A program whose shapes change (prompts of new lengths) must not keep a
// block for every size it ever used: classes nobody asked for in the last
// 1024 requests give their blocks back, at a request that misses the cache
// and every 256 requests while every request is a reuse (a warmed-up frame
// loop after a load-time spike).
TEST(Memory, PoolGivesBackClassesNoLongerAskedFor) {
  detail::pool_trim();
  size_t old_bytes = 0;
  for (int i = 0; i < 6; ++i) {
    const size_t bytes = size_t{4096} << i;  // six classes
    detail::pool_free(detail::pool_allocate(bytes), bytes);
    old_bytes += bytes;
  }
  EXPECT_EQ(detail::pool_stats().cached_bytes, static_cast<int64_t>(old_bytes));
  // One hot size, asked for 1000 times (cache hits after the first): the
  // six are not stale yet.
  constexpr size_t kHot = 300;
  for (int i = 0; i < 1000; ++i) detail::pool_free(detail::pool_allocate(kHot), kHot);
  EXPECT_GE(detail::pool_stats().cached_bytes, static_cast<int64_t>(old_bytes));
  // 300 more hits: past 1024 requests, and at least one check since. The
  // hot block stays (its class is 320 bytes), and the 128 KiB block where
  // the pool maps blocks (kept for reuse, within 32 MiB).
  for (int i = 0; i < 300; ++i) detail::pool_free(detail::pool_allocate(kHot), kHot);
  const int64_t kept = detail::pool_maps_blocks() ? int64_t{4096} << 5 : 0;
  EXPECT_GT(detail::pool_stats().cached_bytes, kept);
  EXPECT_LT(detail::pool_stats().cached_bytes, kept + 4096);
  // A new size misses the cache; the hot block stays.
  constexpr size_t kNew = 777777;
  void* fresh = detail::pool_allocate(kNew);
  const int64_t cached = detail::pool_stats().cached_bytes;
  EXPECT_GT(cached, 0);
  EXPECT_LT(cached, 4096);
  detail::pool_free(fresh, kNew);
  detail::pool_trim();
}

#if defined(__linux__)
using testing::resident_bytes;

// Blocks of 128 KiB and more are the system's pages while the pool holds
// them and no longer once it gives them back: trim() lowers the process's
// resident memory by what it frees.
TEST(Memory, TrimReturnsLargeBlocksPagesToTheSystem) {
  if (!detail::pool_maps_blocks()) GTEST_SKIP() << "the pool takes large blocks from malloc in this build";
  detail::pool_trim();
  std::vector<std::pair<void*, size_t>> blocks;
  size_t total = 0;
  for (int i = 0; i < 48; ++i) {
    const size_t bytes = (size_t{1} << 20) + static_cast<size_t>(i % 4) * (size_t{64} << 10);
    void* b = detail::pool_allocate(bytes);
    std::memset(b, i + 1, bytes);  // resident now
    blocks.emplace_back(b, bytes);
    total += bytes;
  }
  for (auto [b, bytes] : blocks) detail::pool_free(b, bytes);
  const int64_t before = resident_bytes();
  ASSERT_GT(before, 0);
  detail::pool_trim();
  const int64_t after = resident_bytes();
  EXPECT_GE(before - after, static_cast<int64_t>(total) * 9 / 10) << "resident " << before << " -> " << after;
}

// The mapped blocks of stale classes are kept, up to 32 MiB, for the next new
// blocks to reuse (remapped: their pages are already resident); past that
// they go back to the system. A new class's block is made from a kept one.
TEST(Memory, StaleLargeBlocksAreReusedForNewSizesWithinABound) {
  if (!detail::pool_maps_blocks()) GTEST_SKIP() << "the pool takes large blocks from malloc in this build";
  detail::pool_trim();
  // 40 stale blocks of distinct classes, 1 to 3 MiB each: more than 32 MiB.
  std::vector<size_t> sizes;
  size_t total = 0;
  for (int i = 0; i < 40; ++i) {
    const size_t bytes = (size_t{1} << 20) + static_cast<size_t>(i) * (size_t{50} << 10);
    sizes.push_back(bytes);
    total += bytes;
  }
  std::vector<void*> held;
  for (size_t bytes : sizes) held.push_back(detail::pool_allocate(bytes));
  for (size_t i = 0; i < sizes.size(); ++i) detail::pool_free(held[i], sizes[i]);
  ASSERT_GT(total, size_t{32} << 20);
  constexpr size_t kHot = 300;
  for (int i = 0; i < 1100; ++i) detail::pool_free(detail::pool_allocate(kHot), kHot);
  // A new size misses the cache: the stale classes go, at most 32 MiB kept,
  // and the new block is made from a kept one.
  const int64_t remapped = detail::pool_stats().remapped;
  constexpr size_t kNew = 700000;
  void* fresh = detail::pool_allocate(kNew);
  EXPECT_EQ(detail::pool_stats().remapped, remapped + 1);
  const int64_t cached = detail::pool_stats().cached_bytes;
  EXPECT_LE(cached, (int64_t{32} << 20) + 4096);
  EXPECT_GE(cached, int64_t{16} << 20);  // kept for reuse, not all given back
  std::memset(fresh, 1, kNew);
  detail::pool_free(fresh, kNew);
  detail::pool_trim();
  EXPECT_EQ(detail::pool_stats().cached_bytes, 0);
}
#endif

}  // namespace
}  // namespace dvm
