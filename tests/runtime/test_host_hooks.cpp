// dvm::set_parallel_for: launches run as the host's tasks (each task index
// exactly once), give the bits dvm's own threads give, and small launches
// never reach the host.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "dvm/dvm.h"
#include "tests/resident_memory.h"

namespace dvm {
namespace {

// A host loop that runs tasks on two threads of its own and records every
// task index it was asked to run and ran.
struct RecordingHost {
  std::mutex mu;
  std::vector<int64_t> calls;  // tasks per call
  std::vector<int> runs;       // per task of the last call: times run
  static void parallel_for(void* self, int64_t tasks, TaskFn run, void* ctx) {
    auto* h = static_cast<RecordingHost*>(self);
    {
      std::lock_guard<std::mutex> lock(h->mu);
      h->calls.push_back(tasks);
      h->runs.assign(static_cast<size_t>(tasks), 0);
    }
    auto body = [&](int64_t first, int64_t step) {
      for (int64_t t = first; t < tasks; t += step) {
        run(ctx, t);
        std::lock_guard<std::mutex> lock(h->mu);
        ++h->runs[static_cast<size_t>(t)];
      }
    };
    std::thread other(body, 1, 2);
    body(0, 2);
    other.join();
  }
};

struct HookGuard {
  ~HookGuard() {
    set_parallel_for(nullptr, nullptr, 1);
    set_num_threads(0);
  }
};

std::vector<float> programs() {
  const int64_t rows = 300, cols = 4099;
  Tensor x = Tensor::uniform({rows, cols}, 7, -3.0f, 3.0f);
  Tensor w = Tensor::uniform({cols, 96}, 8, -1.0f, 1.0f);
  std::vector<float> out;
  for (const Tensor& t : {softmax(x, -1), (x * x).sum(0), tanh(x) * 0.5f + 1.0f, matmul(x, w), x.sum(1),
                          Tensor::uniform({2, 1 << 20}, 9).sum(1)}) {
    const std::vector<float> v = t.to_vector();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

TEST(HostHooks, HostTasksGiveTheBitsOfDvmsOwnThreads) {
  HookGuard guard;
  set_num_threads(3);
  const std::vector<float> own = programs();
  RecordingHost host;
  set_parallel_for(&RecordingHost::parallel_for, &host, 3);
  EXPECT_EQ(num_threads(), 3);
  const std::vector<float> hosted = programs();
  ASSERT_EQ(own.size(), hosted.size());
  EXPECT_EQ(std::memcmp(own.data(), hosted.data(), own.size() * sizeof(float)), 0);
  ASSERT_FALSE(host.calls.empty()) << "no launch reached the host";
  for (int64_t tasks : host.calls) EXPECT_GE(tasks, 2);
  for (int n : host.runs) EXPECT_EQ(n, 1);  // the last call: each task once
  // Back to dvm's threads: the host sees nothing more.
  set_parallel_for(nullptr, nullptr, 1);
  const size_t calls = host.calls.size();
  EXPECT_EQ(programs(), own);
  EXPECT_EQ(host.calls.size(), calls);
}

TEST(HostHooks, SmallLaunchesStayOnTheCallingThread) {
  HookGuard guard;
  RecordingHost host;
  set_parallel_for(&RecordingHost::parallel_for, &host, 4);
  std::vector<float> v(4096, 1.5f);
  EXPECT_EQ((Tensor::from_blob(v.data(), {4096}) * 2.0f).to_vector(), std::vector<float>(4096, 3.0f));
  EXPECT_TRUE(host.calls.empty());
}

TEST(HostHooks, OneWorkerOrNoneIsAClearError) {
  HookGuard guard;
  RecordingHost host;
  try {
    set_parallel_for(&RecordingHost::parallel_for, &host, 0);
    ADD_FAILURE() << "workers = 0 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("set_parallel_for"), std::string::npos);
  }
  set_parallel_for(&RecordingHost::parallel_for, &host, 1);  // one worker: never splits
  EXPECT_EQ(num_threads(), 1);
  (void)Tensor::uniform({1 << 20}, 3).sum().item();
  EXPECT_TRUE(host.calls.empty());
}

// More threads than the machine has: the work is cut for them and runs on
// as many as there are, with the bits of one thread and nothing written to
// stderr (TBB warns there when an arena asks for more workers than it
// allows); past 1024 the setter refuses.
TEST(NumThreads, MoreThanTheMachineHasRunQuietlyWithTheSameBits) {
  const int before = num_threads();
  const int64_t n = int64_t{1} << 21;
  auto run = [&] { return (sin(Tensor::arange(static_cast<double>(n))) * 1.5f).sum().item(); };
  set_num_threads(1);
  const float one = run();
  std::fflush(stderr);
  char path[] = "/tmp/dvm_stderr_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const int saved = dup(2);
  dup2(fd, 2);
  const int many = 4 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  set_num_threads(many);
  const float got = run();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  const off_t written = lseek(fd, 0, SEEK_END);
  close(fd);
  unlink(path);
  EXPECT_EQ(num_threads(), many);
  EXPECT_EQ(got, one);
  EXPECT_EQ(written, 0) << "set_num_threads(" << many << ") wrote to stderr";
  EXPECT_THROW(set_num_threads(1025), Error);
  set_num_threads(before);
}

#if defined(__linux__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)

// A host may set the thread count every frame: each count's arena is made
// once. (A new TBB arena per call, with a launch that splits, kept about
// 6 KiB of resident memory per frame.)
TEST(NumThreads, SettingTheCountEveryFrameKeepsMemoryFlat) {
  const int before = num_threads();
  std::vector<float> a(size_t{1} << 16, 0.5f);
  const Tensor x = Tensor::from_blob(a.data(), {int64_t{1} << 16});
  auto frames = [&](int count) {
    for (int f = 0; f < count; ++f) {
      set_num_threads(2 + f % 2);
      ASSERT_EQ((x * 2.0f).data()[12345], 1.0f);
    }
  };
  frames(500);  // warm: the arenas and the pool's blocks exist
  const int64_t start = testing::resident_bytes();
  ASSERT_GT(start, 0);
  frames(3000);
  EXPECT_LT(testing::resident_bytes() - start, int64_t{2} << 20) << "bytes more resident after 3000 frames";
  set_num_threads(before);
}
#endif

// KernelStats::total_ns sums the launches' time (counted in the CPU's
// time-stamp ticks and converted when read): for a kernel whose launches
// are most of a loop's wall time, it lies between half that time and the
// whole of it.
TEST(KernelStatsTime, TotalTimeIsTheLaunchesWallTime) {
  dvm::flush();
  const int64_t n = int64_t{1} << 22;
  std::vector<float> v(static_cast<size_t>(n), 0.25f);
  const Tensor x = Tensor::from_blob(v.data(), {n});
  // A workload no other test records: its kernel is new here.
  auto run = [&] { Tensor y = exp(sin(x) * 1.75f) - 0.125f; y.sync(); };
  run();
  auto total = [] {
    int64_t most = 0;  // the kernel with the most time is this one
    for (const KernelStats& k : kernel_stats()) most = std::max(most, k.total_ns);
    return most;
  };
  const int64_t before = total();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) run();
  const int64_t wall =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  const int64_t launched = total() - before;
  EXPECT_GT(launched, wall / 2) << "launches " << launched << " ns of a " << wall << " ns loop";
  EXPECT_LE(launched, wall) << "launches " << launched << " ns of a " << wall << " ns loop";
}

// Stats::new_shapes counts a launch whose extents its kernel did not run
// with among its last 64 launch shapes: repeats of recent lengths add
// nothing, a length 64 others ago counts again.
TEST(KernelStatsShapes, NewShapesCountExtentsTheKernelHasNotRunWithLately) {
  dvm::flush();
  std::vector<float> v(4096, 0.5f);
  // A workload no other test records; a kernel of its own.
  auto run = [&](int64_t n) {
    Tensor y = cos(Tensor::from_blob(v.data(), {n}) * 2.5f) + 0.375f;
    y.sync();
  };
  run(1000);  // the kernel exists before the count starts
  const int64_t base = stats().new_shapes;
  for (int64_t n : {1000, 1001, 1000, 1002, 1001, 1002}) run(n);
  EXPECT_EQ(stats().new_shapes - base, 2);
  for (int64_t n = 2000; n < 2064; ++n) run(n);  // 64 new lengths
  EXPECT_EQ(stats().new_shapes - base, 66);
  run(2063);
  EXPECT_EQ(stats().new_shapes - base, 66);
  run(1000);  // pushed out by the 64 since
  EXPECT_EQ(stats().new_shapes - base, 67);
}

}  // namespace
}  // namespace dvm

namespace dvm {
namespace {

// The kernel cache evicts the least recently used kernel, not the oldest:
// a kernel relaunched through the plan cache stays.
TEST(KernelCacheLru, TheLeastRecentlyUsedKernelIsEvicted) {
  const int64_t saved = kernel_cache_capacity();
  struct Restore {
    int64_t c;
    ~Restore() { set_kernel_cache_capacity(c); }
  } restore{saved};
  std::vector<float> v(64, 0.5f);
  const Tensor x = Tensor::from_blob(v.data(), {64});
  auto run_a = [&] { (void)(exp(x) * 3.0f).to_vector(); };
  auto run_b = [&] { (void)(tanh(x) - 1.0f).to_vector(); };
  auto run_c = [&] { (void)(sigmoid(x) / 7.0f).to_vector(); };
  set_kernel_cache_capacity(2);
  EXPECT_EQ(kernel_cache_capacity(), 2);
  run_a();
  run_b();
  run_a();  // A is the most recent now (a plan-cache hit launches it)
  const std::vector<KernelStats> before = kernel_stats();
  ASSERT_EQ(before.size(), 2u);
  uint64_t a_hash = 0, b_hash = 0;
  for (const KernelStats& k : before) (k.calls == 2 ? a_hash : b_hash) = k.hash;
  ASSERT_NE(a_hash, 0u);
  ASSERT_NE(b_hash, 0u);
  run_c();  // evicts B, the least recently used
  bool has_a = false, has_b = false;
  for (const KernelStats& k : kernel_stats()) {
    has_a |= k.hash == a_hash;
    has_b |= k.hash == b_hash;
  }
  EXPECT_TRUE(has_a) << "the most recently used kernel was evicted";
  EXPECT_FALSE(has_b);
  EXPECT_THROW(set_kernel_cache_capacity(0), Error);
}

}  // namespace
}  // namespace dvm

namespace dvm {
namespace {

// wait_for_jit(timeout): a frame can bound its wait for background compiles.
TEST(HostHooks, WaitForJitWithATimeout) {
  const TierMode saved_mode = tier_mode();
  const int64_t saved_threshold = jit_threshold();
  set_tier_mode(TierMode::Auto);
  set_jit_threshold(1);
  std::vector<float> v(256, 0.25f);
  const Tensor x = Tensor::from_blob(v.data(), {256});
  for (int i = 0; i < 3; ++i) (void)(sigmoid(x) * 5.0f - 1.0f).to_vector();  // queues a compile
  EXPECT_TRUE(wait_for_jit(60000.0));  // a minute: done long before
  EXPECT_TRUE(wait_for_jit(0.0));      // nothing pending now
  EXPECT_THROW(wait_for_jit(-1.0), Error);
  set_jit_threshold(saved_threshold);
  set_tier_mode(saved_mode);
}

}  // namespace
}  // namespace dvm
