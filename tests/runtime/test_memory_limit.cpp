// dvm::set_memory_limit, memory_stats and trim: the tensor buffers dvm
// holds are counted, a flush that would pass the limit fails with a clear
// error and leaves nothing behind, and the limit holds while a loop runs.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "dvm/dvm.h"

namespace dvm {
namespace {

struct LimitGuard {
  ~LimitGuard() { set_memory_limit(0); }
};

constexpr int64_t kN = 1 << 20;  // 4 MiB of float32

TEST(MemoryLimit, LiveBytesFollowTensorsAndTrimEmptiesTheCache) {
  trim();
  const int64_t before = memory_stats().live_bytes;
  {
    Tensor x = Tensor::uniform({kN}, 1);
    EXPECT_GE(memory_stats().live_bytes, before + kN * 4);
  }
  const MemoryStats after = memory_stats();
  EXPECT_EQ(after.live_bytes, before);
  EXPECT_GE(after.cached_bytes, kN * 4);  // kept for reuse
  EXPECT_GE(after.peak_bytes, before + kN * 4);
  trim();
  EXPECT_EQ(memory_stats().cached_bytes, 0);
}

TEST(MemoryLimit, AFlushPastTheLimitFailsCleanlyAndLaterWorkSucceeds) {
  LimitGuard guard;
  trim();
  Tensor x = Tensor::uniform({kN}, 2);
  const int64_t base = memory_stats().live_bytes;
  set_memory_limit(base + kN * 4 + kN * 2);  // room for one more result, not two
  EXPECT_EQ(memory_limit(), base + kN * 6);
  Tensor a = exp(x), b = tanh(x);  // two outputs: 8 MiB
  try {
    a.sync();
    FAIL() << "the flush passed the limit";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("memory limit"), std::string::npos) << m;
    EXPECT_NE(m.find(std::to_string(base + kN * 6)), std::string::npos) << m;
  }
  EXPECT_LE(memory_stats().live_bytes, base + kN * 6);
  // The failed tensors say why when read; raising the limit lets new work run.
  EXPECT_THROW((void)b.to_vector(), Error);
  set_memory_limit(0);
  Tensor c = exp(x);
  const std::vector<float> v = c.to_vector();
  const std::vector<float> xv = x.to_vector();
  for (size_t i = 0; i < v.size(); i += 4099) EXPECT_FLOAT_EQ(v[i], std::exp(xv[i])) << i;
}

// mean makes a one-element buffer for its count when recorded: under a
// limit it cannot pass, the call itself throws, and it recorded nothing
// that would hold its operand's buffer until the next flush.
TEST(MemoryLimit, AMeanRefusedItsCountRecordsNothing) {
  LimitGuard guard;
  trim();
  const int64_t base = memory_stats().live_bytes;
  for (const bool all : {false, true}) {
    {
      Tensor x = Tensor::uniform({64, kN / 64}, 3);
      x.sync();
      set_memory_limit(memory_stats().live_bytes + 1);
      try {
        (void)(all ? x.mean() : x.mean({1}));
        ADD_FAILURE() << "a mean past the limit was recorded";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("memory limit"), std::string::npos) << e.what();
      }
      set_memory_limit(0);
    }
    EXPECT_EQ(memory_stats().live_bytes, base) << (all ? "mean()" : "mean({1})") << ": a pending op holds x";
    flush();
  }
}

TEST(MemoryLimit, TheLimitHoldsWhileALoopRuns) {
  LimitGuard guard;
  trim();
  const int64_t base = memory_stats().live_bytes;
  const int64_t limit = base + 24 * kN;  // 24 MiB
  set_memory_limit(limit);
  Tensor x = Tensor::uniform({kN}, 3);
  for (int i = 0; i < 30; ++i) {
    // Results of varying sizes, kept a while then dropped: the cache gives
    // blocks back instead of passing the limit.
    Tensor y = x.slice(0, 0, kN - i * 1000) * static_cast<float>(i);
    Tensor z = softmax(y, 0);
    (void)z.data();
    const MemoryStats s = memory_stats();
    ASSERT_LE(s.live_bytes + s.cached_bytes, limit) << "iteration " << i;
  }
}

// A limit set below what the cache holds gives the cache back at once, so
// a request cannot reuse a cached block past the cap (whether it failed
// depended on what happened to be cached).
TEST(MemoryLimit, ALimitBelowTheCacheGivesItBack) {
  LimitGuard guard;
  trim();
  const int64_t base = memory_stats().live_bytes;
  const std::vector<float> v(static_cast<size_t>(kN), 1.0f);
  Tensor::from_vector(v, {kN}).sync();  // its 4 MiB block is cached once it dies
  ASSERT_GE(memory_stats().cached_bytes, kN * 4);
  set_memory_limit(base + kN);  // 1 MiB above what tensors hold
  EXPECT_EQ(memory_stats().cached_bytes, 0);
  try {
    Tensor::from_vector(v, {kN}).sync();
    FAIL() << "a 4 MiB tensor was made under a limit 1 MiB above the live bytes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("memory limit"), std::string::npos) << e.what();
  }
  set_memory_limit(0);
  const Tensor x = Tensor::uniform({kN}, 4);
  (x * 2.0f).sync();  // its block is cached once it dies
  set_memory_limit(memory_stats().live_bytes + memory_stats().cached_bytes);  // at what is held: kept
  EXPECT_GT(memory_stats().cached_bytes, 0);
}

TEST(MemoryLimit, NegativeLimitsAreRefused) {
  EXPECT_THROW(set_memory_limit(-1), Error);
  EXPECT_EQ(memory_limit(), 0);
}

}  // namespace
}  // namespace dvm
