// Requests larger than the system can give are dvm::Errors that name the
// op ("out of memory: ..."), never a std::bad_alloc: the host-side reads
// (index ops, to_vector<T>, save_weights) and a graph's run (its arena, and
// the scratch of an output given over an input, which the memory limit
// counts). The host-side requests are larger than any address space (2^48
// elements), so they fail whatever the kernel's overcommit policy; the
// sanitizers' allocators abort on such sizes instead of failing, so those
// builds skip them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <sys/resource.h>

#include "dvm/dvm.h"
#include "dvm/weights_file.h"
#include "tests/error_testing.h"
#include "tests/resident_memory.h"
#include "tracer/buffer_pool.h"

namespace dvm {
namespace {

using testing::expect_error_message;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DVM_SKIP_HUGE_ALLOCATIONS() GTEST_SKIP() << "the sanitizer's allocator aborts on such sizes"
#else
#define DVM_SKIP_HUGE_ALLOCATIONS() (void)0
#endif

constexpr int64_t kHuge = int64_t{1} << 48;  // 256 TiB as bool, 2 PiB as int64

struct LimitGuard {
  ~LimitGuard() { set_memory_limit(0); }
};

TEST(OutOfMemory, IndexOpsReadingTooManyIndicesSaySo) {
  DVM_SKIP_HUGE_ALLOCATIONS();
  const Tensor x = Tensor::ones({2, 3});
  const Tensor ids = Tensor::full({1}, 0, Dtype::I64).expand({kHuge});
  expect_error_message("index_select", [&] { (void)index_select(x, 0, ids); }, {"out of memory", "index_select"});
  expect_error_message("embedding", [&] { (void)embedding(ids, x); }, {"out of memory", "embedding"});
  expect_error_message("gather", [&] { (void)gather(x, 0, ids.reshape({kHuge, 1}).expand({kHuge, 3})); },
                       {"out of memory", "gather"});
}

TEST(OutOfMemory, TypedReadsAndWeightsFilesSaySo) {
  DVM_SKIP_HUGE_ALLOCATIONS();
  const Tensor big = Tensor::ones({1}).expand({kHuge});
  expect_error_message("to_vector<float>", [&] { (void)big.to_vector<float>(); },
                       {"out of memory", "to_vector", "float32[281474976710656]"});
  const Tensor bits = Tensor::full({1}, 1, Dtype::Bool).expand({kHuge});
  expect_error_message("to_vector<bool>", [&] { (void)bits.to_vector<bool>(); }, {"out of memory", "to_vector<bool>"});
  const std::string path = ::testing::TempDir() + "dvm_out_of_memory.dvmw";
  expect_error_message("save_weights", [&] { save_weights(path, {{"w", big}}); },
                       {"save_weights", path, "\"w\"", "out of memory"});
  std::remove(path.c_str());
}

// The bytes of /proc/self/status's VmSize (the address space in use), or 0.
int64_t address_space_bytes() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  int64_t kib = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "VmSize: %ld kB", &kib) == 1) break;
  std::fclose(f);
  return kib * 1024;
}

// Loads path with the address space capped a little past what the process
// holds; exits 0 on a dvm::Error naming load_weights and out of memory (or
// when there is no /proc to cap against, or the cap is not enforced), else
// nonzero.
[[noreturn]] void load_capped_and_exit(const std::string& path) {
  const int64_t in_use = address_space_bytes();
  if (in_use == 0) std::exit(0);
  const auto bytes = static_cast<rlim_t>(in_use + (int64_t{48} << 20));
  const rlimit cap{bytes, bytes};
  setrlimit(RLIMIT_AS, &cap);
  // Where the cap is not enforced (qemu's user mode ignores RLIMIT_AS for
  // its guest) there is nothing to check.
  const size_t probe_bytes = size_t{256} << 20;
  void* probe = mmap(nullptr, probe_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (probe != MAP_FAILED) {
    munmap(probe, probe_bytes);
    std::exit(0);
  }
  try {
    (void)load_weights(path);
    std::exit(4);  // it fit: the file is too small for the cap
  } catch (const Error& e) {
    const std::string msg = e.what();
    std::exit(msg.find("load_weights") != std::string::npos && msg.find("out of memory") != std::string::npos ? 0 : 2);
  } catch (...) {
    std::exit(3);
  }
}

// With the host allocator refusing (the address space capped a little past
// what the process holds), loading a file of many small tensors is a
// dvm::Error naming load_weights, and the tensors made before it are freed
// without an exception (a free never allocates what it cannot get). Run in
// a child process, whose cap the rest of the suite never sees.
TEST(OutOfMemory, LoadingWeightsWhileTheHostAllocatorRefusesIsAnError) {
  DVM_SKIP_HUGE_ALLOCATIONS();
  const std::string path = ::testing::TempDir() + "dvm_many_small.dvmw";
  // Written byte by byte (docs/WEIGHTS.md), so that this process never held
  // the tensors: a child's heap starts without their room.
  std::string bytes = "DVMW";
  auto put = [&](uint64_t v, int n) {
    for (int i = 0; i < n; ++i) bytes.push_back(static_cast<char>(v >> (8 * i) & 0xFF));
  };
  const int count = 200000;
  put(1, 4);
  put(count, 8);
  for (int i = 0; i < count; ++i) {
    const std::string name = std::to_string(i);
    put(name.size(), 4);
    bytes += name;
    put(2, 1);  // bfloat16
    put(0, 1);  // rank 0
    put(0, 2);
    put(0x3f80, 2);  // 1.0
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  std::fclose(f);
  EXPECT_EXIT(load_capped_and_exit(path), ::testing::ExitedWithCode(0), "");
  std::remove(path.c_str());
}

// Past the memory limit, a flush names the ops whose result had no room,
// and load_weights the file and the tensor.
TEST(OutOfMemory, TheMemoryLimitNamesTheOpsAndTheFile) {
  LimitGuard guard;
  const Tensor x = Tensor::uniform({256, 64}, 1);
  x.sync();
  const std::string path = ::testing::TempDir() + "dvm_limit_names.dvmw";
  save_weights(path, {{"x_weight", x}});
  set_memory_limit(memory_stats().live_bytes + 1);
  expect_error_message("flush", [&] { matmul(x, x.transpose(0, 1)).sync(); },
                       {"out of memory", "memory limit", "the result of", "matmul float32[256, 256]"});
  expect_error_message("load_weights", [&] { (void)load_weights(path); },
                       {"load_weights", path, "\"x_weight\"", "out of memory", "memory limit"});
  set_memory_limit(0);
  std::remove(path.c_str());
}

// index_select, embedding and gather with many indices (an expanded view:
// 2^27 of them, 1 GiB as host int64s) and a result past the memory limit
// are refused by the result's allocation, named, before the indices are
// copied to host memory: the process's peak stays far below that copy.
TEST(OutOfMemory, IndexOpsRefuseTheirResultBeforeReadingTheIndices) {
  LimitGuard guard;
  const int64_t n = int64_t{1} << 27;
  const Tensor w = Tensor::uniform({3, 4}, 1);
  w.sync();
  const Tensor ids = Tensor::from_vector(std::vector<int64_t>{1}, {1}).expand({n});
  ids.sync();
  set_memory_limit(memory_stats().live_bytes + (int64_t{64} << 20));
  const bool peak_reset = testing::reset_peak_rss();
  const int64_t rss_before = testing::peak_rss_bytes();
  expect_error_message("embedding", [&] { embedding(ids, w).sync(); },
                       {"embedding", "out of memory", "memory limit", "float32[" + std::to_string(n) + ", 4]"});
  expect_error_message("index_select", [&] { index_select(w, 0, ids).sync(); },
                       {"index_select", "out of memory", "memory limit"});
  expect_error_message("gather", [&] { gather(w.reshape({12}), 0, ids).sync(); },
                       {"gather", "out of memory", "memory limit"});
  if (peak_reset && rss_before > 0) {
    EXPECT_LT(testing::peak_rss_bytes() - rss_before, int64_t{256} << 20) << "the indices were copied first";
  }
  set_memory_limit(0);
}

// Under a limit nothing fits, the ops that make a buffer when recorded
// (a count for mean, var, std, layer_norm; an integer scalar's value) say
// which op it was for.
TEST(OutOfMemory, BuffersMadeWhenRecordingNameTheirOp) {
  LimitGuard guard;
  const Tensor x = Tensor::uniform({4, 6}, 2);
  x.sync();
  set_memory_limit(1);
  expect_error_message("mean", [&] { (void)x.mean({1}); }, {"mean: out of memory", "memory limit"});
  expect_error_message("var", [&] { (void)x.var({1}); }, {"var: ", "out of memory"});
  expect_error_message("std", [&] { (void)x.std(); }, {"std: ", "out of memory"});
  expect_error_message("layer_norm", [&] { (void)layer_norm(x, {6}, Tensor(), Tensor(), 1e-5f); },
                       {"layer_norm: out of memory"});
  expect_error_message("integer scalar", [&] { (void)(x + Tensor(int64_t{3})); }, {"integer scalar: out of memory"});
  // The writes into a buffer made when recorded: cat's, stack's, a KVCache's.
  expect_error_message("cat", [&] { (void)cat({x, x}, 0); }, {"cat: out of memory", "float32[8, 6]"});
  expect_error_message("stack", [&] { (void)stack({x, x}, 1); }, {"stack: out of memory", "float32[4, 2, 6]"});
  KVCache cache({16, 6}, 0);
  expect_error_message("KVCache::append", [&] { (void)cache.append(x); },
                       {"KVCache::append: out of memory", "float32[16, 6]"});
  set_memory_limit(0);
  EXPECT_EQ(cache.append(x).shape(), Shape({4, 6})) << "the refused append left the cache unusable";
}

// Buffers of a legal element count whose bytes pass 2^62 (int64 elements
// near kMaxElements): the size class would wrap past 2^64 to a 0-byte
// block that the kernel then filled. Refused before any system allocation,
// so the sanitizer builds run it too.
TEST(OutOfMemory, BuffersNearTheLargestElementCountAreRefused) {
  for (const int64_t n : {kMaxElements, kMaxElements / 8 * 7 + 1, kMaxElements / 2 + 1}) {
    const std::string count = std::to_string(n);
    expect_error_message("full " + count, [&] { Tensor::full({n}, int64_t{7}, Dtype::I64).sync(); },
                         {"out of memory", count, "int64"});
    expect_error_message("expand + 1 " + count, [&] { (Tensor(int64_t{7}).expand({n}) + 1).sync(); },
                         {"out of memory", "int64"});
  }
  static const int64_t d[4] = {};
  expect_error_message("from_copy", [&] { (void)Tensor::from_copy(d, {kMaxElements}, Dtype::I64); },
                       {"out of memory", std::to_string(kMaxElements)});
}

// More pieces or elements than a std::vector holds are dvm::Errors too, not
// std::length_error (checked before anything is allocated).
TEST(OutOfMemory, MorePiecesOrElementsThanAVectorHoldsSaySo) {
  expect_error_message("chunk", [] { (void)Tensor::zeros({0}).chunk(INT64_MAX); }, {"out of memory", "chunk", "[0]"});
  expect_error_message("to_vector<int64_t>", [] { (void)Tensor(int64_t{7}).expand({kMaxElements}).to_vector<int64_t>(); },
                       {"out of memory", "to_vector"});
}

TEST(OutOfMemory, TypedReadsOfAnUndefinedTensorNameTheRead) {
  expect_error_message("to_vector<int32_t>", [] { (void)Tensor().to_vector<int32_t>(); }, {"to_vector", "undefined"});
  expect_error_message("to_vector<bool>", [] { (void)Tensor().to_vector<bool>(); }, {"to_vector<bool>", "undefined"});
}

// A run whose arena the system cannot give (the pool's next request made
// to fail, as a system out of memory fails it) raises a dvm::Error naming
// the run and its binding, and writes no output.
TEST(OutOfMemory, AGraphsArenaTheSystemCannotGiveIsAnError) {
  const Tensor w = Tensor::uniform({4, 4}, 7);
  Graph g;
  const Dim B = g.symbol("B");
  const Tensor in = g.input("x", {B, 4});
  const Tensor h = matmul(in, w);  // kept in the arena for the second product
  g.output("y", matmul(h, w).sum(1) + h.sum(1));
  const Executable exe = g.compile();
  std::vector<float> x(4000, 0.5f), y(1000, -7.0f);
  exe.run({{"x", x.data()}}, {{"y", y.data()}}, {{"B", 10}});  // a small arena, and the program replayed next
  ASSERT_GT(exe.memory({{"B", 1000}}), exe.memory({{"B", 10}}));
  std::fill(y.begin(), y.end(), -7.0f);
  detail::pool_fail_after(0);  // the arena's growth is the run's first request
  expect_error_message("run", [&] { exe.run({{"x", x.data()}}, {{"y", y.data()}}, {{"B", 1000}}); },
                       {"out of memory", "Executable::run", "B = 1000"});
  detail::pool_fail_after(-1);
  for (float v : y) ASSERT_EQ(v, -7.0f);
  exe.run({{"x", x.data()}}, {{"y", y.data()}}, {{"B", 1000}});  // and the next run has its arena
  EXPECT_NE(y[999], -7.0f);
}

TEST(OutOfMemory, AnOutputOverItsInputIsComputedWithinTheMemoryLimit) {
  const int64_t n = int64_t{1} << 20;  // 4 MiB
  std::vector<float> buf(static_cast<size_t>(n), 1.0f);
  Graph g;
  const Dim S = g.symbol("S");
  g.output("y", g.input("x", {S}) * 2.0f);
  const Executable exe = g.compile();
  exe.run({{"x", buf.data()}}, {{"y", buf.data()}}, {{"S", n}});  // compiled and replayed before the limit
  EXPECT_EQ(buf[0], 2.0f);
  {
    const LimitGuard guard;
    trim();
    set_memory_limit(1 << 20);
    // The output's scratch of 4 MiB is a buffer the limit counts.
    expect_error_message("run", [&] { exe.run({{"x", buf.data()}}, {{"y", buf.data()}}, {{"S", n}}); },
                         {"out of memory", "memory limit"});
    EXPECT_EQ(buf[n - 1], 2.0f);  // untouched by the failed run
  }
  exe.run({{"x", buf.data()}}, {{"y", buf.data()}}, {{"S", n}});
  EXPECT_EQ(buf[n - 1], 4.0f);
}

}  // namespace
}  // namespace dvm
