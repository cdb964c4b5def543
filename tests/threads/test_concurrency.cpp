// Concurrency (README.md, "Threads"): several threads recording and flushing
// their own programs at once, sharing computed tensors read-only, tiering
// (JIT threshold 1) and evicting (a tiny kernel cache) together, copying and
// destroying each other's handles, changing the thread count while others
// launch, and counting launches exactly. Values are checked against a
// double-precision reference; scripts/ci_tsan.sh runs this binary under
// ThreadSanitizer, which checks the same runs for data races.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dvm/dvm.h"
#include "tracer/buffer_pool.h"
#include "tracer/node.h"
#include "vm/kernel_cache.h"

namespace dvm {
namespace {

constexpr int kThreads = 4;

// Runs body(t) for t in [0, n) on n threads released together, so their
// work overlaps.
void run_together(int n, const std::function<void(int)>& body) {
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t)
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < n) std::this_thread::yield();
      body(t);
    });
  for (auto& th : threads) th.join();
}

std::vector<float> values(int64_t n, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& x : v) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    x = static_cast<float>(static_cast<double>(s >> 40) * 0x1.0p-24 * 2.0 - 1.0);  // [-1, 1)
  }
  return v;
}

// A chain of unary ops picked by `code` (base-5 digits): many distinct
// kernels from one recipe, so threads insert, hit and evict cache entries.
constexpr int kChainOps = 5;
Tensor chain(Tensor x, int code, int len) {
  for (int i = 0; i < len; ++i, code /= kChainOps) {
    switch (code % kChainOps) {
      case 0: x = sin(x); break;
      case 1: x = tanh(x); break;
      case 2: x = sigmoid(x); break;
      case 3: x = x * x; break;
      default: x = abs(x) * 0.5f; break;
    }
  }
  return x;
}
double chain_ref(double x, int code, int len) {
  for (int i = 0; i < len; ++i, code /= kChainOps) {
    switch (code % kChainOps) {
      case 0: x = std::sin(x); break;
      case 1: x = std::tanh(x); break;
      case 2: x = 1.0 / (1.0 + std::exp(-x)); break;
      case 3: x = x * x; break;
      default: x = std::fabs(x) * 0.5; break;
    }
  }
  return x;
}

// Every value here is of order 1 and comes from a few float ops and dvm's
// math library (a few ulp each, docs/MATH.md) summed over at most a few
// hundred terms: 2e-5 relative (plus 1e-6 absolute near zero) bounds it with
// a wide margin, while any mixed-up buffer or lost update is off by O(1).
void expect_close(const std::vector<float>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-6 + 2e-5 * std::fabs(want[i]))) {
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", expected " << want[i];
      return;
    }
}

// One thread's program: a chain, a row softmax and a row sum of squares.
struct Program {
  int64_t rows, cols;
  int code, len;
  std::vector<float> x;

  std::vector<float> run() const {
    Tensor t = Tensor::from_blob(x.data(), {rows, cols});
    Tensor c = chain(t, code, len);
    Tensor s = softmax(c * 3.0f, -1);
    Tensor q = (t * t).sum(-1);
    std::vector<float> out = s.to_vector();
    std::vector<float> qv = q.to_vector();
    out.insert(out.end(), qv.begin(), qv.end());
    return out;
  }
  std::vector<double> reference() const {
    std::vector<double> out(static_cast<size_t>(rows * cols)), q(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      double mx = -INFINITY, sum = 0, sq = 0;
      std::vector<double> c(static_cast<size_t>(cols));
      for (int64_t j = 0; j < cols; ++j) {
        const double v = x[static_cast<size_t>(r * cols + j)];
        c[static_cast<size_t>(j)] = 3.0 * chain_ref(v, code, len);
        mx = std::max(mx, c[static_cast<size_t>(j)]);
        sq += v * v;
      }
      for (int64_t j = 0; j < cols; ++j) sum += std::exp(c[static_cast<size_t>(j)] - mx);
      for (int64_t j = 0; j < cols; ++j)
        out[static_cast<size_t>(r * cols + j)] = std::exp(c[static_cast<size_t>(j)] - mx) / sum;
      q[static_cast<size_t>(r)] = sq;
    }
    out.insert(out.end(), q.begin(), q.end());
    return out;
  }
};

Program make_program(int thread, int iter, int codes) {
  Program p;
  p.rows = 3 + (thread + iter) % 5;
  p.cols = 16 + 8 * ((thread * 3 + iter) % 7);
  p.code = (thread * 7 + iter * 3) % codes;
  p.len = 1 + (thread + iter) % 3;
  p.x = values(p.rows * p.cols, static_cast<uint64_t>(thread * 1000 + iter));
  return p;
}

TEST(Concurrency, ThreadsRecordAndFlushTheirOwnPrograms) {
  run_together(kThreads, [](int t) {
    for (int it = 0; it < 60; ++it) {
      const Program p = make_program(t, it, 125);
      expect_close(p.run(), p.reference(), "thread " + std::to_string(t) + " iteration " + std::to_string(it));
    }
  });
}

TEST(Concurrency, TieringAndEvictionWhileOthersRun) {
  // Every kernel compiles at its first launch, in the background, while the
  // tiny cache evicts kernels other threads may be launching or compiling.
  vm::KernelCache& cache = vm::KernelCache::global();
  const int64_t saved_capacity = cache.capacity();
  const int64_t saved_threshold = jit_threshold();
  const TierMode saved_mode = tier_mode();
  set_tier_mode(TierMode::Auto);
  set_jit_threshold(1);
  cache.set_capacity(3);
  const int64_t evictions = cache.evictions();
  const int64_t compiles = stats().jit_compiles;
  std::atomic<int> running{kThreads};
  run_together(kThreads + 1, [&](int t) {
    if (t == kThreads) {  // reads the statistics while the others run
      while (running.load() > 0) {
        // Each counter alone is exact; pairs of them may be mid-update.
        const Stats s = stats();
        EXPECT_GE(s.kernels_launched, 0);
        for (const KernelStats& k : kernel_stats()) EXPECT_GE(k.calls, 0);
        std::this_thread::yield();
      }
      return;
    }
    for (int it = 0; it < 60; ++it) {
      const Program p = make_program(t, it, 25);  // few codes: kernels recur across threads
      expect_close(p.run(), p.reference(), "thread " + std::to_string(t) + " iteration " + std::to_string(it));
    }
    running.fetch_sub(1);
  });
  wait_for_jit();
  EXPECT_GT(cache.evictions(), evictions);  // the cache did evict under load
  if (DVM_HAS_JIT && isa() != "portable") {
    EXPECT_GT(stats().jit_compiles, compiles);  // and the JIT compiled meanwhile
  }
  cache.set_capacity(saved_capacity);
  set_jit_threshold(saved_threshold);
  set_tier_mode(saved_mode);
}

TEST(Concurrency, ComputedTensorsAreSharedReadOnly) {
  const int64_t rows = 24, cols = 40;
  const std::vector<float> wv = values(rows * cols, 11);
  Tensor w = Tensor::from_vector(wv, {rows, cols}) * 2.0f;  // computed below, then shared
  w.sync();
  const Tensor wt = w.transpose(0, 1);         // a strided view of computed values
  const Tensor half = Tensor::full({cols}, 0.5f);  // a constant
  const int32_t refs_before = w.node()->refs();
  run_together(kThreads, [&](int t) {
    for (int it = 0; it < 40; ++it) {
      Tensor a = w;  // copies made and dropped on every thread
      Tensor b = wt;
      // Used as an input of this thread's trace.
      std::vector<float> y = (a * static_cast<float>(t + 1) + half).sum(-1).to_vector();
      std::vector<double> yr(static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r) {
        double s = 0;
        for (int64_t j = 0; j < cols; ++j) s += 2.0 * wv[static_cast<size_t>(r * cols + j)] * (t + 1) + 0.5;
        yr[static_cast<size_t>(r)] = s;
      }
      expect_close(y, yr, "shared input");
      // Observed on every thread at once: data() of a strided view and of a
      // constant make a contiguous copy once, which all threads then read.
      const float* d = b.data();
      const float* h = half.data();
      for (int64_t j = 0; j < cols; ++j) {
        for (int64_t r = 0; r < rows; ++r)
          ASSERT_EQ(d[j * rows + r], 2.0f * wv[static_cast<size_t>(r * cols + j)]) << j << "," << r;
        ASSERT_EQ(h[j], 0.5f);
      }
      EXPECT_EQ(w.to_vector()[static_cast<size_t>(t)], 2.0f * wv[static_cast<size_t>(t)]);
      EXPECT_EQ(half.to_vector()[3], 0.5f);
      EXPECT_EQ(half.sum().item(), 0.5f * cols);  // exact: 40 halves
    }
  });
  EXPECT_EQ(w.node()->refs(), refs_before);  // no count lost or doubled
}

// A computed weight that every thread's two-row products read by columns:
// the threads race to make its row-major copy (docs/API.md, "Weights read
// by columns"); one copy is made and all read it, with the bits of the
// transposing path.
TEST(Concurrency, ThreadsShareAWeightsRowCopy) {
  const int64_t K = 96, N = 80;
  const std::vector<float> wv = values(N * K, 13);
  Tensor w = Tensor::from_vector(wv, {N, K}) * 0.5f;
  w.sync();
  const int64_t copies_before = memory_stats().weight_copy_bytes;
  std::vector<std::vector<float>> first(kThreads);
  run_together(kThreads, [&](int t) {
    const std::vector<float> xv = values(2 * K, 20 + t);
    const Tensor x = Tensor::from_vector(xv, {2, K});
    for (int it = 0; it < 6; ++it) {
      const std::vector<float> y = linear(x, w).to_vector();
      if (it == 0) {
        std::vector<double> yr(static_cast<size_t>(2 * N));
        for (int64_t m = 0; m < 2; ++m)
          for (int64_t n = 0; n < N; ++n) {
            double s = 0;
            for (int64_t k = 0; k < K; ++k)
              s += 0.5 * wv[static_cast<size_t>(n * K + k)] * xv[static_cast<size_t>(m * K + k)];
            yr[static_cast<size_t>(m * N + n)] = s;
          }
        expect_close(y, yr, "linear on a shared weight");
        first[static_cast<size_t>(t)] = y;
      } else {
        ASSERT_EQ(y, first[static_cast<size_t>(t)]) << "thread " << t << ", call " << it;
      }
    }
  });
  EXPECT_EQ(memory_stats().weight_copy_bytes - copies_before,
            static_cast<int64_t>(detail::pool_block_bytes(static_cast<size_t>(K * 80 * 4))))
      << "one copy, rows of 80 floats, in its pool block";
}

TEST(Concurrency, HandlesCopiedAndDestroyedOnOtherThreads) {
  // Tensors made on each thread, handed to the others, copied there and
  // destroyed on a thread other than their maker.
  const int per_thread = 40;
  std::mutex mu;
  std::vector<Tensor> made;
  std::vector<std::vector<float>> expect;
  run_together(kThreads, [&](int t) {
    for (int i = 0; i < per_thread; ++i) {
      const std::vector<float> v = values(8, static_cast<uint64_t>(t * 100 + i));
      Tensor x = exp(Tensor::from_vector(v));
      x.sync();
      std::lock_guard<std::mutex> lock(mu);
      made.push_back(x);
    }
  });
  std::vector<int32_t> refs;
  for (const Tensor& x : made) refs.push_back(x.node()->refs());
  run_together(kThreads, [&](int t) {
    std::vector<Tensor> copies;
    for (int round = 0; round < 5; ++round) {
      for (size_t i = static_cast<size_t>(t); i < made.size(); i += 1) copies.push_back(made[i]);
      std::vector<Tensor> moved = std::move(copies);
      copies.clear();
      for (size_t i = 0; i < moved.size(); i += 2) copies.push_back(moved[i]);
    }
  });
  for (size_t i = 0; i < made.size(); ++i) EXPECT_EQ(made[i].node()->refs(), refs[i]) << i;
  // The last handles die on threads other than the makers.
  std::vector<std::vector<Tensor>> parts(kThreads);
  for (size_t i = 0; i < made.size(); ++i) parts[(i + 1) % kThreads].push_back(std::move(made[i]));
  made.clear();
  run_together(kThreads, [&](int t) {
    for (Tensor& x : parts[static_cast<size_t>(t)]) {
      const std::vector<float> v = x.to_vector();
      EXPECT_EQ(v.size(), 8u);
      for (float f : v) EXPECT_GT(f, 0.0f);
      x = Tensor();
    }
  });
}

// A handle of a node pending on one thread, copied and destroyed on
// another before the flush: the recording thread counts its own drops
// without atomic operations (Node::dropped_handles), the other thread's
// count is atomic, and the flush adds them up (run under ThreadSanitizer
// in CI).
TEST(Concurrency, PendingHandlesDroppedOnTwoThreads) {
  for (int round = 0; round < 50; ++round) {
    const std::vector<float> v = values(16, static_cast<uint64_t>(round));
    Tensor x = Tensor::from_vector(v);
    const int32_t x_refs = x.node()->refs();
    Tensor y = x * 3.0f;
    Tensor dropped_here = y + 1.0f;
    std::vector<Tensor> shared(8, dropped_here);
    dropped_here = Tensor();
    std::thread other([&shared, &y] {
      std::vector<Tensor> copies = shared;  // atomic counts: pending elsewhere
      Tensor more = y;
      copies.clear();
      shared.clear();
    });
    other.join();
    Tensor kept = y;
    y = Tensor();
    const std::vector<float> got = kept.to_vector();
    for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(got[i], v[i] * 3.0f) << i;
    EXPECT_EQ(kept.node()->refs(), 1);
    kept = Tensor();
    EXPECT_EQ(x.node()->refs(), x_refs);
  }
}

// f throws a dvm::Error that starts with "op:", holds `part` and is not an
// internal one.
void expect_op_error(const std::function<void()>& f, const std::string& op, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << op << ": no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind(op + ":", 0), 0u) << m;
    EXPECT_NE(m.find(part), std::string::npos) << m;
    EXPECT_EQ(m.find("internal"), std::string::npos) << m;
  }
}

TEST(Concurrency, PendingTensorOfAnotherThreadIsAClearError) {
  const std::vector<float> xv = {1, 2, 3, 4, 5, 6};
  Tensor x = Tensor::from_vector(xv, {2, 3});
  Tensor y = exp(x) * 2.0f;  // pending in this thread's trace
  auto expect_error = [](const std::function<void()>& f, const std::string& op) {
    expect_op_error(f, op, "pending in another thread's trace");
  };
  std::thread other([&] {
    expect_error([&] { Tensor z = y + 1.0f; }, "add");
    expect_error([&] { Tensor z = y * x; }, "mul");
    expect_error([&] { Tensor z = y.sum(0); }, "sum");
    expect_error([&] { Tensor z = y.transpose(0, 1); }, "transpose");
    expect_error([&] { Tensor z = softmax(y, -1); }, "softmax");
    expect_error([&] { y.data(); }, "data");
    expect_error([&] { y.to_vector(); }, "to_vector");
    // Handles and properties are fine on any thread.
    Tensor copy = y;
    EXPECT_EQ(copy.shape(), (Shape{2, 3}));
    // This thread's own trace is untouched by the failed ops.
    std::vector<float> z = (x + 1.0f).to_vector();
    for (size_t i = 0; i < z.size(); ++i) EXPECT_EQ(z[i], xv[i] + 1.0f);
  });
  other.join();
  std::vector<float> yv = y.to_vector();  // computed here, by its own thread
  for (size_t i = 0; i < yv.size(); ++i)
    EXPECT_NEAR(yv[i], 2.0 * std::exp(static_cast<double>(xv[i])), 2e-6 * 2.0 * std::exp(static_cast<double>(xv[i])));
  // Once computed it is an ordinary shared input.
  std::thread after([&] {
    std::vector<float> z = (y + 1.0f).to_vector();
    for (size_t i = 0; i < z.size(); ++i) EXPECT_EQ(z[i], yv[i] + 1.0f);
  });
  after.join();
}

// A KVCache used by one thread at a time: an append after another thread's
// append that is still pending there is an error (it cannot be ordered after
// that write), and once that thread computed it, the append goes on.
TEST(Concurrency, KVCacheAppendAfterAnotherThreadsPendingAppendIsAClearError) {
  KVCache cache(Shape{8, 2}, 0);
  Tensor first = cache.append(Tensor::full(Shape{2, 2}, 1.0f));  // pending in this thread's trace
  std::thread([&] {
    expect_op_error([&] { (void)cache.append(Tensor::full(Shape{1, 2}, 2.0f)); }, "KVCache::append",
                    "pending in another thread's trace");
  }).join();
  first.sync();
  std::vector<float> got;
  std::thread([&] { got = cache.append(Tensor::full(Shape{1, 2}, 2.0f)).to_vector(); }).join();
  EXPECT_EQ(got, (std::vector<float>{1, 1, 1, 1, 2, 2}));
}

// A tensor whose recording thread ended before computing it has no values:
// every read and use says why, and the reading thread goes on.
TEST(Concurrency, TensorOfAThreadThatEndedIsAClearError) {
  const Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  x.sync();
  Tensor orphan;
  std::thread([&] { orphan = exp(x); }).join();  // recorded, never computed
  const std::vector<std::pair<std::string, std::function<void()>>> uses = {
      {"to_vector", [&] { (void)orphan.to_vector(); }},
      {"sync", [&] { orphan.sync(); }},
      {"add", [&] { (void)(orphan + 1.0f).to_vector(); }},
  };
  for (const auto& [op, f] : uses) expect_op_error(f, op, "the thread that recorded it ended before computing it");
  EXPECT_EQ((x * 2.0f).sum().item(), 20.0f);
}

TEST(Concurrency, SetNumThreadsWhileOthersLaunch) {
  // Launches of 128K elements split across the arena that set_num_threads()
  // replaces (or drops, with 0) while they run.
  const char* env = std::getenv("DVM_NUM_THREADS");
  const int saved = env ? std::atoi(env) : 0;
  const int64_t rows = 256, cols = 512;
  const std::vector<float> xv = values(rows * cols, 5);
  std::atomic<bool> done{false};
  run_together(kThreads, [&](int t) {
    if (t == 0) {
      for (int i = 0; !done.load() || i < 8; ++i) {
        set_num_threads(i % 4);
        std::this_thread::yield();
      }
      return;
    }
    for (int it = 0; it < 10; ++it) {
      Tensor x = Tensor::from_blob(xv.data(), {rows, cols});
      std::vector<float> y = (x * static_cast<float>(t) + 1.0f).sum(-1).to_vector();
      std::vector<double> yr(static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r) {
        double s = 0;
        for (int64_t j = 0; j < cols; ++j) s += static_cast<double>(xv[static_cast<size_t>(r * cols + j)]) * t + 1.0;
        yr[static_cast<size_t>(r)] = s;
      }
      // 512 terms of order 1 summing to ~512: float rounding of the sum
      // stays under 1e-4 absolute.
      for (size_t r = 0; r < yr.size(); ++r) ASSERT_NEAR(y[r], yr[r], 1e-4 * (1 + std::fabs(yr[r]))) << r;
    }
    if (t == 1) done.store(true);
  });
  set_num_threads(saved);
}

// Threads run one static graph's executable at once, at their own sizes:
// one at a time replays its program through the executable's arena, the
// others rebuild their ops; every result is the lazy path's.
TEST(Concurrency, ThreadsRunOneExecutable) {
  Executable exe;
  {
    Graph g;
    const Dim N = g.symbol("N");
    const Tensor x = g.input("x", {N, 32});
    g.output("y", softmax(tanh(x) * 3.0f, -1) + x.mean({0}, true));
    exe = g.compile();
  }
  std::atomic<int> bad{0};
  run_together(kThreads, [&](int t) {
    const int64_t n = 9 + 20 * t;
    std::vector<float> x(static_cast<size_t>(n * 32));
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i) * 0.37f + static_cast<float>(t));
    const Tensor xt = Tensor::from_blob(x.data(), {n, 32});
    const std::vector<float> want = (softmax(tanh(xt) * 3.0f, -1) + xt.mean({0}, true)).to_vector();
    std::vector<float> y(want.size());
    for (int i = 0; i < 100; ++i) {
      exe.run({{"x", x.data()}}, {{"y", y.data()}}, {{"N", n}});
      if (y != want) bad.fetch_add(1);
    }
  });
  EXPECT_EQ(bad.load(), 0);
}

TEST(Concurrency, StatsCountEveryThreadsLaunches) {
  // One program's counts alone, then the same program run by every thread:
  // the totals are exact sums, with nothing lost to concurrent updates.
  const Program p = make_program(1, 2, 125);
  auto once = [&] { expect_close(p.run(), p.reference(), "stats program"); };
  flush();
  once();  // warm: the kernels exist
  reset_stats();
  once();
  const Stats one = stats();
  ASSERT_GT(one.kernels_launched, 0);
  const int iters = 50;
  reset_stats();
  run_together(kThreads, [&](int) {
    for (int i = 0; i < iters; ++i) once();
  });
  const Stats all = stats();
  const int64_t runs = int64_t{kThreads} * iters;
  EXPECT_EQ(all.flushes, runs * one.flushes);
  EXPECT_EQ(all.kernels_launched, runs * one.kernels_launched);
  EXPECT_EQ(all.kernels_run, runs * one.kernels_run);
  EXPECT_EQ(all.nodes_computed, runs * one.nodes_computed);
  EXPECT_EQ(all.nodes_recorded, runs * one.nodes_recorded);
}

}  // namespace
}  // namespace dvm
