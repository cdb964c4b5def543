// The embedding hooks a host engine sets at start-up: where compiles run
// (set_compile_executor), where tensor buffers come from (set_allocator),
// where messages go (set_log_callback), the perf map, and warm_up /
// precompile (no compile after the first frame).
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#if DVM_HAS_JIT
#include "backends/jit/jit.h"
#endif
#include "dvm/dvm.h"
#include "fuser/plan_cache.h"
#include "vm/kernel_cache.h"
#include "tests/jit_built.h"

namespace dvm {
namespace {

bool has_machine_code() { return DVM_HAS_JIT && isa() != "portable" && tier_mode() != TierMode::Off; }

#define SKIP_WITHOUT_MACHINE_CODE()                                                   \
  DVM_SKIP_WITHOUT_JIT();                                                             \
  if (!has_machine_code()) GTEST_SKIP() << "no machine code for ISA " << isa() << " or tier off"

// Restores what a test changes, also when it fails half-way.
struct Restore {
  int64_t threshold = jit_threshold();
  TierMode mode = tier_mode();
  ~Restore() {
    wait_for_jit();
    set_compile_executor(nullptr, nullptr);
    set_log_callback(nullptr, nullptr);
    set_perf_map(false);
    set_jit_threshold(threshold);
    set_tier_mode(mode);
    set_kernel_log(false);
  }
};

// A chain whose result is checked against double precision: y = exp(x * a
// + b) * 0.5 - x, n elements. `a` is a scalar parameter, so every call runs
// one kernel whatever n and a are.
std::vector<float> run_chain(int64_t n, float a, std::vector<double>* want) {
  std::vector<float> x(static_cast<size_t>(n)), b(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    x[static_cast<size_t>(i)] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));
    b[static_cast<size_t>(i)] = static_cast<float>(0.25 * std::cos(0.11 * static_cast<double>(i)));
  }
  Tensor tx = Tensor::from_blob(x.data(), {n}), tb = Tensor::from_blob(b.data(), {n});
  std::vector<float> y = (exp(tx * a + tb) * 0.5f - tx).to_vector();
  if (want) {
    want->resize(static_cast<size_t>(n));
    for (size_t i = 0; i < want->size(); ++i) {
      const double t = static_cast<double>(x[i]) * a + b[i];
      (*want)[i] = std::exp(t) * 0.5 - x[i];
    }
  }
  return y;
}

// exp's error (docs/MATH.md: under 2 ULP) and three roundings of values of
// magnitude up to e^1.5: 8 float ULPs of the largest term.
void expect_chain_close(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 8 * std::ldexp(4.5, -23)) << "element " << i;
}

std::vector<std::string> launch_tiers(const std::function<void()>& f) {
  set_kernel_log(true);
  (void)take_kernel_log();
  f();
  std::vector<std::string> tiers;
  for (const KernelRun& r : take_kernel_log()) tiers.push_back(r.tier);
  set_kernel_log(false);
  return tiers;
}

// ---- set_compile_executor ---------------------------------------------------

// A host queue: compiles wait in it until the host drains it on a thread of
// its own.
struct HostQueue {
  std::mutex mu;
  std::vector<std::pair<CompileJobFn, void*>> jobs;
  int submitted = 0;
  static void submit(void* self, CompileJobFn run, void* job) {
    auto* q = static_cast<HostQueue*>(self);
    std::lock_guard<std::mutex> lock(q->mu);
    q->jobs.emplace_back(run, job);
    ++q->submitted;
  }
  void drain_on_another_thread() {
    std::vector<std::pair<CompileJobFn, void*>> taken;
    {
      std::lock_guard<std::mutex> lock(mu);
      taken.swap(jobs);
    }
    std::thread t([&] {
      for (auto& [run, job] : taken) run(job);
    });
    t.join();
  }
};

// Kernels compile after their first call, and the compiles go to a host
// queue. (Members are destroyed in reverse: the queue before the settings.)
struct HostCompiles {
  Restore restore;
  HostQueue q;
  HostCompiles() {
    set_tier_mode(TierMode::Auto);
    set_jit_threshold(1);
    set_compile_executor(&HostQueue::submit, &q);
  }
};

TEST(CompileExecutor, CompilesRunWhereTheHostRunsThem) {
  SKIP_WITHOUT_MACHINE_CODE();
  // The chain's kernel must be new: one an earlier test compiled would run on machine code at once.
  vm::KernelCache::global().clear();
  fuser::PlanCache::current().clear();  // plans hold their kernels too
  HostCompiles host;
  HostQueue& q = host.q;
  std::vector<double> want;
  const int64_t compiles_before = stats().jit_compiles;
  // The kernel stays on the interpreter while its compile waits in the host's queue.
  for (int64_t n : {1000, 1537, 77}) {
    std::vector<std::string> tiers;
    std::vector<float> y;
    tiers = launch_tiers([&] { y = run_chain(n, 0.75f, &want); });
    expect_chain_close(y, want);
    ASSERT_FALSE(tiers.empty());
    for (const std::string& t : tiers) EXPECT_EQ(t, "interp");
  }
  EXPECT_GE(q.submitted, 1);
  EXPECT_EQ(stats().jit_compiles, compiles_before);
  EXPECT_FALSE(wait_for_jit(1.0)) << "wait_for_jit must wait for compiles the host holds";
  q.drain_on_another_thread();
  EXPECT_TRUE(wait_for_jit(0.0));
  EXPECT_EQ(stats().jit_compiles, compiles_before + q.submitted);
  std::vector<float> y;
  const std::vector<std::string> tiers = launch_tiers([&] { y = run_chain(2049, -1.25f, &want); });
  expect_chain_close(y, want);
  ASSERT_FALSE(tiers.empty());
  for (const std::string& t : tiers) EXPECT_EQ(t, "jit");
}

TEST(CompileExecutor, NullReturnsToDvmsThread) {
  SKIP_WITHOUT_MACHINE_CODE();
  HostCompiles host;
  set_compile_executor(nullptr, nullptr);
  std::vector<double> want;
  run_chain(300, 2.0f, &want);
  Tensor t = Tensor::uniform({333, 7}, 3).sum(1);  // another kernel
  (void)t.to_vector();
  wait_for_jit();
  EXPECT_EQ(host.q.submitted, 0);
}

// ---- set_allocator ----------------------------------------------------------

struct CountingAllocator {
  std::mutex mu;
  std::set<void*> live;
  int64_t allocations = 0, deallocations = 0, bad_sizes = 0;
  std::vector<std::pair<void*, size_t>> sizes;
  bool refuse = false, misalign = false, throws = false;
  static void* allocate(void* self, size_t bytes, size_t alignment) {
    auto* a = static_cast<CountingAllocator*>(self);
    std::lock_guard<std::mutex> lock(a->mu);
    if (a->refuse) return nullptr;
    if (a->throws) throw std::runtime_error("host arena exhausted");
    // Room for a misaligned block too, freed from its aligned start.
    char* p = static_cast<char*>(std::aligned_alloc(alignment, (bytes + 64 + alignment - 1) / alignment * alignment));
    if (!p) return nullptr;
    void* out = a->misalign ? static_cast<void*>(p + 8) : static_cast<void*>(p);
    a->live.insert(out);
    a->sizes.emplace_back(out, bytes);
    ++a->allocations;
    return out;
  }
  static void deallocate(void* self, void* p, size_t bytes) {
    auto* a = static_cast<CountingAllocator*>(self);
    std::lock_guard<std::mutex> lock(a->mu);
    if (a->live.erase(p) != 1) ++a->bad_sizes;
    bool found = false;
    for (auto& [q, n] : a->sizes)
      if (q == p) {
        found = true;
        if (n != bytes) ++a->bad_sizes;
        q = nullptr;
      }
    if (!found) ++a->bad_sizes;
    ++a->deallocations;
    const uintptr_t u = reinterpret_cast<uintptr_t>(p);
    std::free(reinterpret_cast<void*>(u - u % 64));
  }
};

struct AllocatorGuard {
  ~AllocatorGuard() {
    trim();
    try {
      set_allocator(nullptr, nullptr, nullptr);
    } catch (const Error&) {
    }
  }
};

TEST(Allocator, TensorBuffersComeFromTheHostAndGoBack) {
  AllocatorGuard guard;
  trim();
  ASSERT_EQ(memory_stats().live_bytes, 0) << "a tensor of an earlier test is alive";
  CountingAllocator a;
  set_allocator(&CountingAllocator::allocate, &CountingAllocator::deallocate, &a);
  {
    std::vector<double> want;
    for (int64_t n : {5, 4096, 100003}) {
      const std::vector<float> y = run_chain(n, 0.5f, &want);
      expect_chain_close(y, want);
    }
    Tensor kept = Tensor::full({64, 64}, 2.0, Dtype::F16) + 1.0f;
    EXPECT_EQ(kept.to_vector()[4095], 3.0f);
    EXPECT_GT(a.allocations, 0);
    EXPECT_GT(memory_stats().live_bytes, 0);
    // Changing the allocator while a tensor holds a block is refused.
    try {
      set_allocator(nullptr, nullptr, nullptr);
      ADD_FAILURE() << "set_allocator with live tensors: no dvm::Error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("set_allocator"), std::string::npos) << e.what();
    }
  }
  // Everything is back in the cache; giving the allocator back frees it there.
  set_allocator(nullptr, nullptr, nullptr);
  EXPECT_EQ(a.bad_sizes, 0);
  EXPECT_TRUE(a.live.empty()) << a.live.size() << " blocks never given back";
  EXPECT_EQ(a.allocations, a.deallocations);
  // Back on the system's allocator, dvm still computes.
  std::vector<double> want;
  expect_chain_close(run_chain(999, 1.5f, &want), want);
  EXPECT_EQ(a.allocations, a.deallocations);
}

TEST(Allocator, ARefusalOrAMisalignedBlockIsAnError) {
  AllocatorGuard guard;
  trim();
  ASSERT_EQ(memory_stats().live_bytes, 0) << "a tensor of an earlier test is alive";
  CountingAllocator a;
  set_allocator(&CountingAllocator::allocate, &CountingAllocator::deallocate, &a);
  auto expect_refused = [](const std::string& what, const std::string& part) {
    try {
      (void)(Tensor::uniform({1000}, 1) * 2.0f).to_vector();
      ADD_FAILURE() << what << ": no dvm::Error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  a.refuse = true;
  expect_refused("a host allocator returning null", "returned null");
  a.refuse = false;
  a.misalign = true;
  expect_refused("a misaligned block", "aligned");
  a.misalign = false;
  a.throws = true;  // an exception of the host's own becomes a dvm::Error, from a flush or a creation
  expect_refused("a host allocator that throws", "threw for 4096 bytes: host arena exhausted");
  try {
    (void)Tensor::from_vector(std::vector<float>(5000, 1.0f));
    ADD_FAILURE() << "from_vector: no dvm::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("host arena exhausted"), std::string::npos) << e.what();
  }
  a.throws = false;
  EXPECT_TRUE(a.live.empty());
  set_allocator(nullptr, nullptr, nullptr);
  EXPECT_EQ(a.allocations, a.deallocations);
  EXPECT_EQ(a.bad_sizes, 0);
}

// A result recorded and dropped unread holds its input's buffer until a
// flush drops it; set_allocator flushes first, so once every tensor is
// destroyed the allocator can be given back.
TEST(Allocator, AResultDroppedUnreadDoesNotBlockGivingTheAllocatorBack) {
  AllocatorGuard guard;
  trim();
  ASSERT_EQ(memory_stats().live_bytes, 0) << "a tensor of an earlier test is alive";
  CountingAllocator a;
  set_allocator(&CountingAllocator::allocate, &CountingAllocator::deallocate, &a);
  {
    Tensor w = Tensor::uniform({64, 32}, 1);
    w.sync();
    Tensor unused = w * 2.0f;  // recorded, never read
  }
  EXPECT_NO_THROW(set_allocator(nullptr, nullptr, nullptr));
  EXPECT_TRUE(a.live.empty()) << a.live.size() << " blocks never given back";
  EXPECT_EQ(a.allocations, a.deallocations);
}

TEST(Allocator, OneFunctionWithoutTheOtherIsAnError) {
  CountingAllocator a;
  EXPECT_THROW(set_allocator(&CountingAllocator::allocate, nullptr, &a), Error);
  EXPECT_THROW(set_allocator(nullptr, &CountingAllocator::deallocate, &a), Error);
}

// ---- set_log_callback -------------------------------------------------------

struct Messages {
  std::mutex mu;
  std::vector<std::pair<LogLevel, std::string>> got;
  static void log(void* self, LogLevel level, const char* text) {
    auto* m = static_cast<Messages*>(self);
    std::lock_guard<std::mutex> lock(m->mu);
    m->got.emplace_back(level, text);
    (void)stats();  // calling into dvm from the callback does not deadlock
  }
  bool has(LogLevel level, const std::string& part) {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& [l, t] : got)
      if (l == level && t.find(part) != std::string::npos) return true;
    return false;
  }
};

TEST(LogCallback, AJitDeclineIsInformation) {
  SKIP_WITHOUT_MACHINE_CODE();
  Restore restore;
  const std::string active = isa();
  set_isa("avx2");
  Messages m;
  set_log_callback(&Messages::log, &m);
  set_tier_mode(TierMode::Eager);
  const std::vector<int64_t> v = {1, -2, 3, 1 << 30, -7};
  Tensor t = Tensor::from_blob(v.data(), {5});
  // t + t adds in int64 lanes, which the JIT declines (docs/DTYPES.md).
  const std::vector<float> y = ((t + t).to(Dtype::F32) + 0.25f).to_vector();
  set_isa(active);
  EXPECT_EQ(y[3], 2.0f * static_cast<float>(1 << 30));
  EXPECT_EQ(y[1], -3.75f);
  EXPECT_TRUE(m.has(LogLevel::Info, "stays on the interpreter")) << m.got.size() << " messages";
}

// A callback called during a flush cannot compute a tensor (the flush
// does not nest): the read is a dvm::Error that says so, and the tensor is
// computed once the flush is over.
struct ComputeInCallback {
  std::string error;
  Tensor made;
  static void log(void* self, LogLevel, const char*) {
    auto* c = static_cast<ComputeInCallback*>(self);
    if (c->made.defined()) return;
    c->made = Tensor::from_vector({1.0f, 2.0f}) * 3.0f;
    try {
      (void)c->made.to_vector();
    } catch (const Error& e) {
      c->error = e.what();
    }
  }
};
TEST(LogCallback, ComputingDuringAFlushIsAClearError) {
  SKIP_WITHOUT_MACHINE_CODE();
  Restore restore;
  const std::string active = isa();
  set_isa("avx2");  // the JIT declines int64 lanes (t * t - t): an Info message from inside the flush
  ComputeInCallback c;
  set_log_callback(&ComputeInCallback::log, &c);
  set_tier_mode(TierMode::Eager);
  const std::vector<int64_t> v = {5, -2, 3, 1 << 29, -7, 11};
  // A kernel no other test runs (a kernel declines once, when compiled).
  const Tensor t = Tensor::from_blob(v.data(), {6});
  const std::vector<float> y = ((t * t - t).to(Dtype::F32) * 0.5f).to_vector();
  set_log_callback(nullptr, nullptr);
  set_isa(active);
  EXPECT_EQ(y[0], 10.0f);
  ASSERT_TRUE(c.made.defined()) << "no message came during the flush";
  EXPECT_NE(c.error.find("inside a flush"), std::string::npos) << c.error;
  EXPECT_EQ(c.made.to_vector(), (std::vector<float>{3.0f, 6.0f}));
}

TEST(LogCallback, TheJitAssemblyIsDebugOutput) {
  SKIP_WITHOUT_MACHINE_CODE();
  Restore restore;
  Messages m;
  set_log_callback(&Messages::log, &m);
  set_tier_mode(TierMode::Eager);
#if DVM_HAS_JIT
  // DVM_JIT_LOG=1 turns this on at start; a kernel no other test here runs.
  backends::jit::set_log(true);
  Tensor t = (log(Tensor::uniform({321}, 5, 1.0f, 2.0f)) * 3.0f - 0.7071f).sum();
  (void)t.item();
  backends::jit::set_log(false);
#endif
  EXPECT_TRUE(m.has(LogLevel::Debug, "ret")) << m.got.size() << " messages";
}

// A callback of the background compile's own messages (its assembly) that
// waits for the JIT, or warms up a frame, gets an answer: the compile
// thread cannot wait for itself or for what is queued behind it. Before,
// both waited forever; a hang here ends the test binary after 60 s.
struct WaitInCallback {
  std::atomic<int> calls{0}, nested{0};
  bool timed_wait_done = true;
  static void log(void* self, LogLevel, const char*) {
    auto* w = static_cast<WaitInCallback*>(self);
    if (w->nested.fetch_add(1) > 0 || w->calls.fetch_add(1) > 0) {
      w->nested.fetch_sub(1);
      return;
    }
    wait_for_jit();
    w->timed_wait_done = wait_for_jit(5000.0);
    static const std::vector<float> v(48, 0.25f);
    (void)warm_up([] { (tanh(Tensor::from_blob(v.data(), {48})) * 3.5f + 0.125f).sync(); });
    w->nested.fetch_sub(1);
  }
};
TEST(LogCallback, WaitingForTheJitInsideACompileReturns) {
  SKIP_WITHOUT_MACHINE_CODE();
  Restore restore;
  WaitInCallback w;
  set_log_callback(&WaitInCallback::log, &w);
  set_tier_mode(TierMode::Auto);
  set_jit_threshold(1);
#if DVM_HAS_JIT
  backends::jit::set_log(true);
#endif
  std::atomic<bool> finished{false};
  std::thread watchdog([&] {
    for (int i = 0; i < 600 && !finished.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!finished.load()) {
      std::fprintf(stderr, "LogCallback.WaitingForTheJitInsideACompileReturns: hung in the callback\n");
      std::_Exit(1);
    }
  });
  // A kernel no other test runs: its first launch queues the compile.
  const std::vector<float> y = (exp(Tensor::uniform({77}, 9) * 0.4375f) - 0.0625f).to_vector();
  wait_for_jit();
#if DVM_HAS_JIT
  backends::jit::set_log(false);
#endif
  set_log_callback(nullptr, nullptr);
  finished = true;
  watchdog.join();
  EXPECT_EQ(y.size(), 77u);
  EXPECT_GE(w.calls.load(), 1) << "no message came from the compile";
  EXPECT_FALSE(w.timed_wait_done) << "a timed wait inside a compile says compiles are pending (its own)";
}

// ---- the perf map -----------------------------------------------------------

TEST(PerfMap, EachCompileNamesItsCode) {
  SKIP_WITHOUT_MACHINE_CODE();
  Restore restore;
  set_perf_map(true);
  EXPECT_TRUE(perf_map());
  set_tier_mode(TierMode::Eager);
  Tensor t = tanh(Tensor::uniform({4097}, 11) * 0.318f) + 0.5f;  // a new kernel
  (void)t.to_vector();
  uint64_t hash = 0;
  for (const KernelStats& k : kernel_stats())
    if (k.tier == "jit" && k.calls > 0) hash = k.hash;
  ASSERT_NE(hash, 0u);
  char name[32];
  std::snprintf(name, sizeof name, "%016llx", static_cast<unsigned long long>(hash));
  std::ifstream in("/tmp/perf-" + std::to_string(static_cast<long long>(getpid())) + ".map");
  ASSERT_TRUE(in.good());
  std::string line;
  int lines = 0, named = 0;
  while (std::getline(in, line)) {
    ++lines;
    std::istringstream fields(line);
    std::string addr, size, label;
    fields >> addr >> size >> label;
    EXPECT_GT(std::stoull(addr, nullptr, 16), 0u) << line;
    EXPECT_GT(std::stoull(size, nullptr, 16), 0u) << line;
    EXPECT_EQ(label.rfind("dvm_", 0), 0u) << line;
    if (label.find(name) != std::string::npos) ++named;
  }
  EXPECT_GE(lines, 1);
  EXPECT_GE(named, 1) << "no line names kernel " << name;
  std::remove(("/tmp/perf-" + std::to_string(static_cast<long long>(getpid())) + ".map").c_str());
}

// ---- executable memory --------------------------------------------------------

// The mappings of this process that are both writable and executable
// (/proc/self/maps permissions "rwx" or "-wx").
std::vector<std::string> writable_and_executable() {
  std::ifstream maps("/proc/self/maps");
  std::vector<std::string> bad;
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string range, perms;
    fields >> range >> perms;
    if (perms.size() >= 3 && perms[1] == 'w' && perms[2] == 'x') bad.push_back(line);
  }
  return bad;
}

// JIT code, in the default dual-mapped blocks and in the perf map's
// anonymous pages, is never writable and executable at once (docs/JIT.md).
TEST(ExecutableMemory, NoPageIsWritableAndExecutable) {
  SKIP_WITHOUT_MACHINE_CODE();
  Restore restore;
  set_tier_mode(TierMode::Eager);
  ASSERT_TRUE(writable_and_executable().empty()) << writable_and_executable()[0];
  for (bool map : {false, true}) {
    set_perf_map(map);
    // New kernels in each placement (a scalar would not make one).
    const Tensor x = Tensor::uniform({5000}, 31);
    Tensor t = map ? (tanh(x) * 3.0f).sum() : (exp(x) - 1.0f).sum();
    (void)t.item();
    (void)matmul(Tensor::uniform({33, 65}, 32), Tensor::uniform({65, 17}, 33)).to_vector();  // cube tiles
    const std::vector<std::string> bad = writable_and_executable();
    EXPECT_TRUE(bad.empty()) << (map ? "perf map on: " : "perf map off: ") << bad.size()
                             << " writable and executable mapping(s), the first: " << (bad.empty() ? "" : bad[0]);
  }
  EXPECT_GT(stats().jit_compiles, 0);
  std::remove(("/tmp/perf-" + std::to_string(static_cast<long long>(getpid())) + ".map").c_str());
}

// ---- warm_up and precompile -------------------------------------------------

TEST(WarmUp, TheFirstFrameAfterItRunsOnMachineCode) {
  SKIP_WITHOUT_MACHINE_CODE();
  Restore restore;
  set_tier_mode(TierMode::Auto);
  set_jit_threshold(1000);  // without warm_up, nothing would compile for a long time
  std::vector<double> want;
  auto frame = [&](int64_t n, float a) {
    const std::vector<float> y = run_chain(n, a, &want);
    expect_chain_close(y, want);
    Tensor s = (Tensor::uniform({n / 7 + 1, 7}, 3) * a).sum(1);
    (void)s.to_vector();
  };
  // Kernels earlier tests compiled would count as kernels warm_up found compiled.
  vm::KernelCache::global().clear();
  fuser::PlanCache::current().clear();  // plans hold their kernels too
  const WarmUpReport r = warm_up([&] { frame(1000, 0.5f); });
  EXPECT_GE(r.kernels, 2);
  EXPECT_EQ(r.compiled + r.declined, r.kernels);
  EXPECT_EQ(r.declined, 0);
  EXPECT_GT(r.ms, 0.0);
  const int64_t compiled = stats().kernels_compiled + stats().jit_compiles;
  for (int64_t n : {13, 4096, 70001}) {
    const std::vector<std::string> tiers = launch_tiers([&] { frame(n, 0.01f * static_cast<float>(n % 97)); });
    ASSERT_FALSE(tiers.empty());
    for (const std::string& t : tiers) EXPECT_EQ(t, "jit") << "n = " << n;
  }
  EXPECT_EQ(stats().kernels_compiled + stats().jit_compiles, compiled);
  // A second warm-up of the same frame compiles nothing.
  const WarmUpReport again = warm_up([&] { frame(555, 2.0f); });
  EXPECT_EQ(again.compiled, 0);
  EXPECT_EQ(again.kernels, r.kernels);
}

// A kernel whose background compile waits in the host's queue (not
// started) is compiled by warm_up itself before its launch, and the queued
// job then finds nothing to do. (Two threads warming up the same new kernels
// met this: the second one's launch found the first one's compile under way
// and ran on the interpreter.)
TEST(WarmUp, ACompileQueuedElsewhereIsTakenOverBeforeTheLaunch) {
  SKIP_WITHOUT_MACHINE_CODE();
  vm::KernelCache::global().clear();
  fuser::PlanCache::current().clear();
  HostCompiles host;
  std::vector<double> want;
  // The first call queues the compile in the host's queue and runs on the interpreter.
  for (const std::string& t : launch_tiers([&] { expect_chain_close(run_chain(900, 0.3f, &want), want); }))
    EXPECT_EQ(t, "interp");
  ASSERT_EQ(host.q.submitted, 1);
  const int64_t compiles = stats().jit_compiles;
  std::vector<std::string> tiers;
  // warm_up waits for every compile before it returns, the host's too: the
  // host runs its queue once the frame is done (the queued job then finds
  // nothing left to compile).
  std::atomic<bool> frame_done{false};
  std::thread host_thread([&] {
    while (!frame_done.load()) std::this_thread::yield();
    host.q.drain_on_another_thread();
  });
  const WarmUpReport r = warm_up([&] {
    tiers = launch_tiers([&] { expect_chain_close(run_chain(901, 0.4f, &want), want); });
    frame_done = true;
  });
  host_thread.join();
  ASSERT_FALSE(tiers.empty());
  for (const std::string& t : tiers) EXPECT_EQ(t, "jit");
  EXPECT_EQ(r.compiled, 1);
  EXPECT_TRUE(wait_for_jit(0.0));
  EXPECT_EQ(stats().jit_compiles, compiles + 1);
}

// Two threads warming up frames that make the same new kernels at once:
// every launch of both runs on machine code.
TEST(WarmUp, TwoThreadsWarmingUpTheSameKernelsBothRunMachineCode) {
  SKIP_WITHOUT_MACHINE_CODE();
  Restore restore;
  set_tier_mode(TierMode::Auto);
  set_jit_threshold(1000);
  constexpr int kRounds = 40;
  std::atomic<int> arrived{0}, on_interp{0};
  auto body = [&](int seed) {
    for (int round = 1; round <= kRounds; ++round) {
      // Both threads start each round together.
      arrived.fetch_add(1);
      while (arrived.load() < 2 * round) std::this_thread::yield();
      std::vector<std::string> tiers;
      (void)warm_up([&] {
        tiers = launch_tiers([&] {
          Tensor x = Tensor::uniform({64, 64}, static_cast<uint64_t>(seed));
          for (int k = 0; k < round; ++k) x = tanh(x) * 1.5f;  // a kernel new to both each round
          x.sync();
        });
      });
      for (const std::string& t : tiers) on_interp += t != "jit";
    }
  };
  std::thread a(body, 1), b(body, 2);
  a.join();
  b.join();
  EXPECT_EQ(on_interp.load(), 0);
}

// kernel_stats' tier says what serves the kernel's launches: "jit" once
// compiled, "interp" while the tier mode is Off (its code kept), "jit" again
// after.
TEST(KernelStatsTier, TierOffReportsTheInterpreter) {
  SKIP_WITHOUT_MACHINE_CODE();
  Restore restore;
  std::vector<KernelRun> runs;
  (void)warm_up([&] {
    set_kernel_log(true);
    (void)(erf(Tensor::uniform({321}, 5)) * 1.25f - 0.5f).to_vector();
    runs = take_kernel_log();
    set_kernel_log(false);
  });
  ASSERT_EQ(runs.size(), 1u);
  auto tier = [&] {
    for (const KernelStats& k : kernel_stats())
      if (k.hash == runs[0].hash) return k.tier;
    return std::string("(not in the cache)");
  };
  EXPECT_EQ(tier(), "jit");
  set_tier_mode(TierMode::Off);
  EXPECT_EQ(tier(), "interp");
  set_tier_mode(TierMode::Auto);
  EXPECT_EQ(tier(), "jit");
}

TEST(WarmUp, TierOffCompilesNothingAndStillRunsTheFrame) {
  Restore restore;
  set_tier_mode(TierMode::Off);
  std::vector<double> want;
  std::vector<float> y;
  const WarmUpReport r = warm_up([&] { y = run_chain(777, 0.25f, &want); });
  expect_chain_close(y, want);
  EXPECT_GE(r.kernels, 1);
  EXPECT_EQ(r.compiled, 0);
}

// A warm_up inside another's frame: the enclosing report counts the
// kernels the inner frame launched too.
TEST(WarmUp, ANestedWarmUpsKernelsCountForTheEnclosingOne) {
  Restore restore;
  set_tier_mode(TierMode::Off);
  std::vector<float> v(300, 0.75f);
  WarmUpReport inner;
  const WarmUpReport outer = warm_up([&] {
    inner = warm_up([&] { (void)(erf(Tensor::from_blob(v.data(), {300})) * 3.5f).sum().item(); });
  });
  EXPECT_GE(inner.kernels, 1);
  EXPECT_EQ(outer.kernels, inner.kernels);
}

TEST(WarmUp, ErrorsPropagateAndAnEmptyFunctionIsAnError) {
  EXPECT_THROW(warm_up(std::function<void()>()), Error);
  EXPECT_THROW(warm_up([] { (void)(Tensor::zeros({3}) + Tensor::zeros({4})).to_vector(); }), Error);
}

TEST(Precompile, PendingKernelsRunOnMachineCode) {
  SKIP_WITHOUT_MACHINE_CODE();
  Restore restore;
  set_tier_mode(TierMode::Auto);
  set_jit_threshold(1000);
  Tensor x = Tensor::uniform({2000}, 21, -2.0f, 2.0f);
  Tensor y = sigmoid(x * 1.7f) - 0.125f;
  const std::vector<std::string> tiers = launch_tiers([] { precompile(); });
  ASSERT_FALSE(tiers.empty());
  for (const std::string& t : tiers) EXPECT_EQ(t, "jit");
  const std::vector<float> xv = x.to_vector(), yv = y.to_vector();
  for (size_t i = 0; i < xv.size(); ++i) {
    const double t = static_cast<double>(xv[i] * 1.7f);  // rounded to float, as the kernel's product
    ASSERT_NEAR(yv[i], 1.0 / (1.0 + std::exp(-t)) - 0.125, 1e-6) << "element " << i;
  }
}

}  // namespace
}  // namespace dvm
