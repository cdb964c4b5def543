// dvm::set_memory_limit, memory_stats and trim: the tensor buffers dvm
// holds are counted, a flush that would pass the limit fails with a clear
// error and leaves nothing behind, and the limit holds while a loop runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
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

// argmax and argmin make their index ranges before they record anything:
// a range refused by the limit records nothing, so repeated failures hold
// no more than the first (they used to leave a pending piece each, until
// every allocation failed), and the error names the op. Generated sizes
// for the all-elements form (rows of 2^16 and a tail) and along an axis.
TEST(MemoryLimit, AnArgmaxRefusedItsRangeRecordsNothing) {
  LimitGuard guard;
  trim();
  std::mt19937 g(31);
  for (int iter = 0; iter < 6; ++iter) {
    const int64_t n = std::uniform_int_distribution<int64_t>(70000, 400000)(g);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& f : v) f = std::uniform_real_distribution<float>(-1, 1)(g);
    const bool along = iter % 2;
    set_memory_limit(along ? 4096 : 16384);  // room for the small ranges, not for the long one
    int64_t held = -1;
    for (int attempt = 0; attempt < 30; ++attempt) {
      try {
        const Tensor x = along ? Tensor::from_blob(v.data(), {1, n}) : Tensor::from_blob(v.data(), {n});
        (void)(along ? x.argmin(1) : x.argmax()).to_vector<int64_t>();
        ADD_FAILURE() << "an argmax past the limit ran, n=" << n;
      } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find(along ? "argmin" : "argmax"), std::string::npos) << m;
        EXPECT_NE(m.find("memory limit"), std::string::npos) << m;
      }
      if (held < 0) held = memory_stats().live_bytes;
      ASSERT_EQ(memory_stats().live_bytes, held) << "n=" << n << " attempt " << attempt << ": a failure holds more";
    }
    set_memory_limit(0);
    const Tensor x = Tensor::from_blob(v.data(), {n});
    const int64_t want = std::max_element(v.begin(), v.end()) - v.begin();
    EXPECT_EQ(x.argmax().to_vector<int64_t>()[0], want) << "n=" << n;
    trim();
    EXPECT_EQ(memory_stats().live_bytes, 0);
  }
}

// The index ranges a thread keeps for its next argmax are given up when a
// range the limit refuses would fit without them.
TEST(MemoryLimit, KeptArgmaxRangesMakeRoomUnderALimit) {
  LimitGuard guard;
  trim();
  std::vector<float> v(300000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 7919) % 100003);
  (void)Tensor::from_blob(v.data(), {300000}).argmax().to_vector<int64_t>();
  const int64_t kept = memory_stats().live_bytes;
  ASSERT_GT(kept, 0) << "no range kept";
  // Room for the next range (400000 bytes, its block a quarter more at
  // most) once the kept ones are given up, not beside them.
  const int64_t limit = kept + 200000;
  ASSERT_GT(limit, 400000 * 5 / 4 + 4096) << "the kept ranges are too small for this test";
  set_memory_limit(limit);
  ASSERT_GT(kept + 400000, limit) << "the test's sizes no longer need the kept ranges' room";
  const std::vector<int64_t> got = Tensor::from_blob(v.data(), {3, 100000}).argmin(1).to_vector<int64_t>();
  for (int64_t r = 0; r < 3; ++r)
    EXPECT_EQ(got[static_cast<size_t>(r)],
              std::min_element(v.begin() + r * 100000, v.begin() + (r + 1) * 100000) - (v.begin() + r * 100000));
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
