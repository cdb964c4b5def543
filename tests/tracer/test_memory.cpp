// Memory: a steady-state loop gets every tensor buffer from the buffer pool
// (no system allocation after the first iterations), and nodes come from the
// per-thread free list.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "dvm/dvm.h"
#include "tracer/buffer_pool.h"

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

// A program whose shapes change (prompts of new lengths) must not keep a
// block for every size it ever used: classes nobody asked for in the last
// 1024 requests give their blocks back when a request misses the cache.
TEST(Memory, PoolGivesBackClassesNoLongerAskedFor) {
  detail::pool_trim();
  size_t old_bytes = 0;
  for (int i = 0; i < 6; ++i) {
    const size_t bytes = size_t{4096} << i;  // six classes
    detail::pool_free(detail::pool_allocate(bytes), bytes);
    old_bytes += bytes;
  }
  EXPECT_EQ(detail::pool_stats().cached_bytes, static_cast<int64_t>(old_bytes));
  // One hot size, asked for 1024 times (cache hits after the first).
  constexpr size_t kHot = 300;
  for (int i = 0; i < 1024; ++i) detail::pool_free(detail::pool_allocate(kHot), kHot);
  // Still cached: nothing missed the cache since.
  EXPECT_GE(detail::pool_stats().cached_bytes, static_cast<int64_t>(old_bytes));
  // A new size misses: the six stale classes are given back, the hot stays.
  constexpr size_t kNew = 777777;
  void* fresh = detail::pool_allocate(kNew);
  const int64_t cached = detail::pool_stats().cached_bytes;
  EXPECT_GT(cached, 0);
  EXPECT_LT(cached, 4096);  // the hot block alone (its class is 320 bytes)
  detail::pool_free(fresh, kNew);
  detail::pool_trim();
}

}  // namespace
}  // namespace dvm
