// Launch programs of static graphs (graph/program.h): a run whose relations
// (which extents are 1, which equal) were seen before replays the kernels of
// that run without rebuilding its ops, its intermediates in one arena. The
// reference is the lazy path at the same sizes (bit for bit: the same
// kernels), over random graphs and bindings that cross every relation.
#include <gtest/gtest.h>
#include <cstdio>
#include <cstdlib>

#include <bit>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "dvm/dvm.h"
#include "fuser/executor.h"
#include "graph/program.h"
#include "tracer/buffer_pool.h"
#include "tests/error_testing.h"
#include "tests/graph/random_graph.h"
#include "tests/resident_memory.h"

namespace dvm::testing {
namespace {

using namespace random_graph;

// What the one run between its construction and planned() did: it
// replayed a program, which it planned first (a dry rebuild of its ops)
// when its relations had none.
struct ProgramStatsDelta {
  int64_t replays = graph::program_stats().replays, rebuilds = graph::program_stats().rebuilds;
  bool planned() const {
    EXPECT_EQ(graph::program_stats().replays, replays + 1) << "the run did not replay a program";
    const int64_t rebuilt = graph::program_stats().rebuilds - rebuilds;
    EXPECT_LE(rebuilt, 1);
    return rebuilt == 1;
  }
};

TEST(GraphProgram, RandomGraphsReplayTheLazyPathsBits) {
  const Params p;
  // Bindings that cross the relations: extents of 1, B equal to S, S equal
  // to the constant 16, and sizes whose kernels launch alone (>= 64K elements).
  const std::vector<std::pair<int64_t, int64_t>> bindings = {{2, 5}, {3, 7},  {1, 9}, {4, 1},  {3, 3},
                                                             {2, 16}, {1, 1}, {5, 5}, {3, 4500}, {2, 9}};
  int64_t replays_seen = 0;
  for (uint32_t seed = 0; seed < 24; ++seed) {
    const Executable exe = capture_random(seed, p);
    for (const auto& [B, S] : bindings) {
      const std::string at = "seed " + std::to_string(seed) + " B " + std::to_string(B) + " S " + std::to_string(S);
      const Bindings bind = {{"B", B}, {"S", S}};
      const std::vector<float> xv = values(B * S * kC, seed * 31 + static_cast<uint32_t>(S)),
                               ev = values(S * kC, seed * 17 + static_cast<uint32_t>(B));
      const Tensor x = Tensor::from_blob(xv.data(), {B, S, kC}), e = Tensor::from_blob(ev.data(), {S, kC});
      const std::vector<Tensor> lazy = random_model(seed, p, x, e, B, S);
      std::vector<std::vector<float>> want;
      for (const Tensor& t : lazy) want.push_back(t.to_vector());
      // Twice: the first run of new relations plans its ops, and both replay.
      for (int twice = 0; twice < 2; ++twice) {
        constexpr float kGuard = -777.0f;
        std::vector<std::vector<float>> got;
        GraphOutputs out;
        for (size_t o = 0; o < want.size(); ++o) {
          got.emplace_back(want[o].size() + 3, kGuard);
          out.emplace_back(port(o), got.back().data());
        }
        const int64_t replays = graph::program_stats().replays;
        exe.run({{"x", xv.data()}, {"e", ev.data()}}, out, bind);
        if (twice == 1) {
          EXPECT_EQ(graph::program_stats().replays, replays + 1) << at << ": the second run did not replay";
        }
        replays_seen += graph::program_stats().replays - replays;
        for (size_t o = 0; o < want.size(); ++o) {
          for (size_t i = 0; i < want[o].size(); ++i)
            ASSERT_EQ(std::bit_cast<uint32_t>(got[o][i]), std::bit_cast<uint32_t>(want[o][i]))
                << at << " run " << twice << " output " << o << " element " << i;
          for (size_t i = want[o].size(); i < got[o].size(); ++i)
            ASSERT_EQ(got[o][i], kGuard) << at << ": output " << o << " written past its end";
        }
      }
    }
  }
  EXPECT_GT(replays_seen, 24 * 10);
}

// A program serves the relations it was made under: compile() plans
// distinct extents and each symbol at 1 (and all at 1); the first run where
// an extent equals another plans its ops first (the lazy path may choose
// other kernels there: a program of its own), then replays it.
TEST(GraphProgram, NewRelationsArePlannedOnceThenReplayed) {
  Executable exe;
  {
    Graph g;
    const Dim N = g.symbol("N"), M = g.symbol("M");
    const Tensor x = g.input("x", {N, 16}), y = g.input("y", {M, 16});
    g.output("s", x.sum({0}) + y.mean({0}));
    exe = g.compile();  // plans N and M apart, neither 1 nor 16
  }
  const std::vector<float> x = values(40 * 16, 1), y = values(40 * 16, 2);
  std::vector<float> s(16);
  auto run = [&](int64_t n, int64_t m) {
    const ProgramStatsDelta d;
    exe.run({{"x", x.data()}, {"y", y.data()}}, {{"s", s.data()}}, {{"N", n}, {"M", m}});
    const Tensor xt = Tensor::from_blob(x.data(), {n, 16}), yt = Tensor::from_blob(y.data(), {m, 16});
    EXPECT_EQ(s, (xt.sum({0}) + yt.mean({0})).to_vector()) << n << " " << m;
    return d.planned();
  };
  EXPECT_FALSE(run(5, 7)) << "the relations compile() planned";
  EXPECT_FALSE(run(30, 2));
  // compile() plans each symbol at 1, and all of them at 1, too.
  for (const auto& [n, m] : std::vector<std::pair<int64_t, int64_t>>{{1, 7}, {4, 1}, {1, 1}})
    EXPECT_FALSE(run(n, m)) << "N " << n << " M " << m << ": planned by compile()";
  for (const auto& [n, m] : std::vector<std::pair<int64_t, int64_t>>{{5, 5}, {16, 3}}) {
    EXPECT_TRUE(run(n, m)) << "N " << n << " M " << m << ": new relations";
    EXPECT_FALSE(run(n, m)) << "N " << n << " M " << m << ": planned by the run before";
  }
  EXPECT_FALSE(run(33, 33)) << "N = M: planned by (5, 5)";
}

// Intermediates whose lifetimes do not overlap share the arena's bytes: a
// chain of products keeps two of them, however long it is.
TEST(GraphProgram, ArenaReusesTheBytesOfDeadValues) {
  const Tensor w = Tensor::normal({64, 64}, 3, 0.0f, 0.1f);
  w.sync();
  Executable exe;
  {
    Graph g;
    const Dim N = g.symbol("N");
    Tensor t = g.input("x", {N, 64});
    for (int i = 0; i < 6; ++i) t = tanh(matmul(t, w));
    g.output("y", t);
    exe = g.compile();
  }
  // The pool's size class of a request (four steps per power of two), as
  // the memory limit counts the arena.
  auto block = [](int64_t b) {
    if (b <= 256) return int64_t{256};
    int64_t p = 1;
    while (p * 2 < b) p *= 2;
    const int64_t step = p / 4;
    return p + (b - p + step - 1) / step * step;
  };
  for (int64_t n : {7, 300, 2000}) {
    const int64_t bytes = (n * 64 * 4 + 63) / 64 * 64;
    const int64_t planned = exe.memory({{"N", n}});
    EXPECT_EQ(planned, block(2 * bytes)) << "N " << n << ": five intermediates, two alive at a time";
    const std::vector<float> x = values(n * 64, 4);
    std::vector<float> y(static_cast<size_t>(n * 64));
    exe.run({{"x", x.data()}}, {{"y", y.data()}}, {{"N", n}});
    Tensor r = Tensor::from_blob(x.data(), {n, 64});
    for (int i = 0; i < 6; ++i) r = tanh(matmul(r, w));
    EXPECT_EQ(y, r.to_vector()) << "N " << n;
  }
  // The arena the run at 2000 left is replaced by a small one when a run
  // needs under a quarter of it: the live bytes fall by about its size.
  {
    const int64_t held = memory_stats().live_bytes;
    const std::vector<float> x = values(7 * 64, 4);
    std::vector<float> y(7 * 64);
    exe.run({{"x", x.data()}}, {{"y", y.data()}}, {{"N", 7}});
    EXPECT_LE(memory_stats().live_bytes, held - 2 * 2000 * 64 * 4 + 4096);
  }
  // Outputs no kernel computes (an input, a view of one) are copied after
  // the launches, from the caller's buffers: no arena at all.
  Executable same;
  {
    Graph g;
    const Tensor x = g.input("x", {g.symbol("N"), 3});
    g.output("y", x);
    g.output("t", x.transpose(0, 1));
    same = g.compile();
  }
  EXPECT_EQ(same.memory({{"N", 5}}), 0);
  const std::vector<float> x = values(15, 6);
  for (int twice = 0; twice < 2; ++twice) {
    std::vector<float> y(15), t(15);
    const int64_t replays = graph::program_stats().replays;
    same.run({{"x", x.data()}}, {{"y", y.data()}, {"t", t.data()}}, {{"N", 5}});
    EXPECT_EQ(graph::program_stats().replays, replays + 1);
    EXPECT_EQ(y, x);
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(t[static_cast<size_t>(j * 5 + i)], x[static_cast<size_t>(i * 3 + j)]);
  }
}

// A view's bounds depend on values, not relations: a binding that shares
// its relations with a planned one but reads past its operand is an error.
TEST(GraphProgram, ViewBoundsAreCheckedOnEveryReplay) {
  Executable exe;
  {
    Graph g;
    const Dim C = g.symbol("C");
    g.output("y", g.input("x", {3, C}).narrow(1, 2, 5) * 2.0f);
    exe = g.compile();
  }
  std::vector<float> x = values(3 * 40, 1), y(15, 0.0f);
  for (int64_t c : {40, 9, 7}) {
    exe.run({{"x", x.data()}}, {{"y", y.data()}}, {{"C", c}});
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t j = 0; j < 5; ++j)
        ASSERT_EQ(y[static_cast<size_t>(r * 5 + j)], 2.0f * x[static_cast<size_t>(r * c + 2 + j)]) << c;
  }
  std::fill(y.begin(), y.end(), 3.0f);
  expect_error_message("narrow past C", [&] { exe.run({{"x", x.data()}}, {{"y", y.data()}}, {{"C", 6}}); },
                       {"C = 6", "outside"});
  for (float v : y) EXPECT_EQ(v, 3.0f);
}

// An output buffer that is also an input: the replay would overwrite what
// later kernels read, so such a run computes first and copies.
TEST(GraphProgram, OutputsThatAliasInputsAreComputedFirst) {
  const Tensor w = Tensor::normal({8, 8}, 5);
  w.sync();
  Executable exe;
  {
    Graph g;
    const Dim N = g.symbol("N");
    const Tensor x = g.input("x", {N, 8});
    g.output("y", matmul(x * 2.0f, w) + x);
    exe = g.compile();
  }
  for (int64_t n : {3, 40}) {
    std::vector<float> x = values(n * 8, 2);
    const Tensor ref = matmul(Tensor::from_blob(x.data(), {n, 8}) * 2.0f, w) + Tensor::from_blob(x.data(), {n, 8});
    const std::vector<float> want = ref.to_vector();
    exe.run({{"x", x.data()}}, {{"y", x.data()}}, {{"N", n}});  // y over x
    EXPECT_EQ(x, want) << n;
  }
}

// memory() plans a binding's run without buffers for its inputs and
// outputs: at a binding whose input is 1 GiB (and one of 64 GiB) it touches
// none of that, and the program it keeps runs later bindings correctly.
TEST(GraphProgram, MemoryQueriesTouchNoBuffers) {
  auto make = [] {
    Graph g;
    const Dim B = g.symbol("B"), S = g.symbol("S");
    g.output("y", (g.input("x", {B, S, 4}) * 2.0f).sum(1));
    return g.compile();
  };
  const Executable exe = make(), huge = make();
  const int64_t before = peak_rss_bytes();
  EXPECT_EQ(exe.memory({{"B", 8192}, {"S", 8192}}), 0);  // B = S: relations compile() did not plan
  EXPECT_EQ(huge.memory({{"B", 65536}, {"S", 65536}}), 0);
  if (before > 0) {
    EXPECT_LT(peak_rss_bytes() - before, int64_t{256} << 20) << "memory() touched buffers of the binding's size";
  }
  // A binding too large to plan names memory(), the call made.
  try {
    (void)exe.memory({{"B", int64_t{1} << 60}, {"S", 1}});
    ADD_FAILURE() << "memory() at B = 2^60 planned";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Executable::memory"), std::string::npos) << e.what();
  }
  for (int64_t n : {3, 6}) {  // B = S again: the program memory() made
    const std::vector<float> x = values(n * n * 4, 8);
    std::vector<float> y(static_cast<size_t>(n * 4));
    exe.run({{"x", x.data()}}, {{"y", y.data()}}, {{"B", n}, {"S", n}});
    EXPECT_EQ(y, (Tensor::from_blob(x.data(), {n, n, 4}) * 2.0f).sum(1).to_vector()) << "B = S = " << n;
  }
}

// memory() is what a run adds to dvm's memory as the limit counts it (the
// pool's size classes included): a limit of what dvm holds plus memory()
// lets the run through, at sizes where the class rounds the arena up.
TEST(GraphProgram, MemoryBudgetsARunUnderTheLimitAndBelowItRunsAreNamed) {
  const Tensor w = Tensor::uniform({64, 32}, 1, -0.2f, 0.2f);
  w.sync();
  Executable exe;
  {
    Graph g;
    const Dim B = g.symbol("B");
    const Tensor h = gelu(linear(g.input("x", {B, 32}), w));
    g.output("y", layer_norm(softmax(h, 1) * h, {64}, Tensor(), Tensor()));
    exe = g.compile();
  }
  auto run = [&](int64_t b) {
    std::vector<float> x(static_cast<size_t>(b * 32), 0.1f), y(static_cast<size_t>(b * 64));
    exe.run({{"x", x.data()}}, {{"y", y.data()}}, {{"B", b}});
  };
  run(10);  // the relations every larger B shares
  // The plan check (DVM_PLAN_CHECK, on under CTest) computes each replay a
  // second time on the lazy path, with buffers of its own.
  const bool checked = fuser::plan_check();
  fuser::set_plan_check(false);
  for (int64_t b : {3000, 1700, 5000}) {
    trim();
    const int64_t need = exe.memory({{"B", b}});
    ASSERT_GT(need, 0);
    const MemoryStats held = memory_stats();
    set_memory_limit(held.live_bytes + held.cached_bytes + need);
    EXPECT_NO_THROW(run(b)) << "B " << b << ": memory() said " << need;
    set_memory_limit(0);
  }
  // Below it a run whose arena must grow is refused, naming the run and the
  // binding (a host may hold several executables).
  trim();
  const int64_t need = exe.memory({{"B", 20000}});
  const MemoryStats held = memory_stats();
  set_memory_limit(held.live_bytes + held.cached_bytes + need / 2);
  expect_error_message("B 20000 past the limit", [&] { run(20000); },
                       {"out of memory", "memory limit", "dvm::Executable::run at B = 20000"});
  set_memory_limit(0);
  fuser::set_plan_check(checked);
}

// Planning new relations allocates no buffer either, for intermediates or
// for aranges of symbolic length, at any size and under any memory limit;
// memory() counts both. A run's arange values come from the buffer pool:
// counted, and refused past the memory limit as the lazy path's are.
TEST(GraphProgram, PlanningAllocatesNothingAndRangesObeyTheMemoryLimit) {
  auto make = [] {
    Graph g;
    const Dim B = g.symbol("B"), S = g.symbol("S");
    const Tensor x = g.input("x", {B, S});
    const Tensor r = Tensor::arange(0.0, static_cast<double>(S), 1.0, Dtype::F32);
    g.output("y", softmax(x * r, 0) * 3.0f);  // a column softmax: several kernels, intermediates of [B, S]
    return g.compile();
  };
  const Executable exe = make();
  detail::pool_reset_peak();
  const int64_t peak = memory_stats().peak_bytes;
  set_memory_limit(int64_t{1} << 20);
  const int64_t n = int64_t{1} << 24;
  const int64_t bytes = exe.memory({{"B", n}, {"S", n}});  // B = S: relations compile() did not plan
  EXPECT_GE(bytes, n * n * 4 + n * 4) << "an intermediate of [B, S] and the range";
  EXPECT_EQ(memory_stats().peak_bytes, peak) << "planning allocated buffers";
  // A range of 2^20 floats passes a 1 MiB limit: the run is refused, as the lazy arange is.
  std::vector<float> x(4 * 1048576, 0.5f), y(x.size());
  expect_error_message("a range past the limit",
                       [&] { exe.run({{"x", x.data()}}, {{"y", y.data()}}, {{"B", 4}, {"S", 1048576}}); },
                       {"memory limit"});
  set_memory_limit(0);
  for (int64_t b : {3, 5}) {
    const int64_t s_len = 7;
    const std::vector<float> xv = values(b * s_len, 9);
    std::vector<float> out(static_cast<size_t>(b * s_len));
    exe.run({{"x", xv.data()}}, {{"y", out.data()}}, {{"B", b}, {"S", s_len}});
    const Tensor want = softmax(Tensor::from_blob(xv.data(), {b, s_len}) * Tensor::arange(0.0, 7.0, 1.0, Dtype::F32), 0) * 3.0f;
    EXPECT_EQ(out, want.to_vector()) << b;
  }
}

// memory() at new relations of a graph with element counts (layer_norm's)
// allocates nothing either, under a limit of one byte too; lazy work
// pending on the thread is computed for real before the plan; and a first
// run at new relations, never asked memory() for, fits a limit of what dvm
// holds plus what memory() gives (it plans and then replays the arena).
TEST(GraphProgram, FirstRunsAtNewRelationsTakeWhatMemoryReports) {
  auto make = [] {
    Graph g;
    const Dim B = g.symbol("B"), S = g.symbol("S");
    const Tensor x = g.input("x", {B, S, 64});
    g.output("y", layer_norm(x * 2.0f, {64}, Tensor(), Tensor()) + x.sum(1, true));
    return g.compile();
  };
  const Executable asked = make(), fresh = make();
  const std::vector<float> pv = values(300, 3);
  trim();  // (before the pending tensor is recorded: trim() flushes)
  const Tensor pending = Tensor::from_blob(pv.data(), {300}) * 3.0f + 1.0f;  // not computed yet
  const MemoryStats m0 = memory_stats();
  const int64_t need = asked.memory({{"B", 21}, {"S", 21}});  // B = S: relations compile() did not plan
  ASSERT_GT(need, 0);
  const MemoryStats m1 = memory_stats();
  const int64_t pending_bytes = static_cast<int64_t>(detail::pool_block_bytes(300 * 4));
  EXPECT_EQ(m1.live_bytes + m1.cached_bytes, m0.live_bytes + m0.cached_bytes + pending_bytes)
      << "planning allocated buffers beyond the pending tensor's";
  const std::vector<float> got = pending.to_vector();
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], pv[i] * 3.0f + 1.0f) << "pending element " << i;
  {
    set_memory_limit(1);
    EXPECT_EQ(asked.memory({{"B", 64}, {"S", 5}}), asked.memory({{"B", 64}, {"S", 5}})) << "B = 64, the constant";
    set_memory_limit(0);
  }
  const bool checked = fuser::plan_check();  // its lazy recomputation has buffers of its own
  fuser::set_plan_check(false);
  trim();
  const std::vector<float> x = values(21 * 21 * 64, 4);
  std::vector<float> y(x.size());
  set_memory_limit(memory_stats().live_bytes + need);
  EXPECT_NO_THROW(fresh.run({{"x", x.data()}}, {{"y", y.data()}}, {{"B", 21}, {"S", 21}}))
      << "the first run at B = S took more than memory() said, " << need;
  set_memory_limit(0);
  fuser::set_plan_check(checked);
  const Tensor xt = Tensor::from_blob(x.data(), {21, 21, 64});
  EXPECT_EQ(y, (layer_norm(xt * 2.0f, {64}, Tensor(), Tensor()) + xt.sum(1, true)).to_vector());
}

// The values of an arange of symbolic length follow the arena's rule: a
// run that needs under a quarter of the block they have gets a smaller one.
TEST(GraphProgram, RangeValuesShrinkAfterALargeRun) {
  Executable exe;
  {
    Graph g;
    const Dim S = g.symbol("S");
    g.output("y", g.input("x", {S}) + Tensor::arange(0.0, static_cast<double>(S), 1.0, Dtype::F32));
    exe = g.compile();
  }
  auto run = [&](int64_t n) {
    const std::vector<float> x = values(n, 5);
    std::vector<float> y(static_cast<size_t>(n));
    exe.run({{"x", x.data()}}, {{"y", y.data()}}, {{"S", n}});
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[static_cast<size_t>(i)], x[static_cast<size_t>(i)] + static_cast<float>(i));
  };
  run(3);
  const int64_t small = memory_stats().live_bytes;
  run(100000);
  EXPECT_GE(memory_stats().live_bytes, small + 100000 * 4);
  run(3);
  EXPECT_EQ(memory_stats().live_bytes, small) << "the values of the large run's range are still held";
}

}  // namespace
}  // namespace dvm::testing
