// Laziness: recording computes nothing; a flush computes exactly what a live
// Tensor can reach; the trace flushes by itself at its node limit and the
// results of one flush stay usable in later ones; common fused programs run
// as one kernel, and new sizes of a program compile nothing new.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dvm/dvm.h"
#include "tests/tracer/tracer_testing.h"
#include "tracer/trace.h"

namespace dvm::testing {
namespace {

size_t pending() { return detail::Trace::current().pending(); }

// Each test starts from an empty trace and zeroed counters.
class Laziness : public ::testing::Test {
 protected:
  void SetUp() override {
    dvm::flush();
    dvm::reset_stats();
    ASSERT_EQ(pending(), 0u);
  }
  // Nothing is left pending for thread exit (ThreadExitDropsPendingWork
  // covers that case on its own).
  void TearDown() override { dvm::flush(); }
};

TEST_F(Laziness, RecordingComputesNothing) {
  Tensor x = Tensor::uniform({16, 33}, 1, -1.0f, 1.0f);
  Tensor w = Tensor::from_vector(std::vector<float>(33, 0.5f));
  Tensor y = dvm::exp(x * w + 1.0f);
  Tensor s = dvm::softmax(y, -1).sum(0);
  Tensor t = dvm::layer_norm(y.transpose(0, 1).contiguous(), {16}, Tensor(), Tensor());
  // Properties never compute.
  EXPECT_EQ(y.shape(), Shape({16, 33}));
  EXPECT_EQ(s.numel(), 33);
  EXPECT_EQ(t.size(-1), 16);
  EXPECT_EQ(dvm::lt(y, 1.0f).dtype(), Dtype::Bool);
  const Stats st = dvm::stats();
  EXPECT_EQ(st.nodes_computed, 0);
  EXPECT_EQ(st.kernels_launched, 0);
  EXPECT_EQ(st.flushes, 0);
  EXPECT_GT(pending(), 0u);
  EXPECT_EQ(st.nodes_recorded, static_cast<int64_t>(pending()));
  // Observing one value computes.
  (void)s.to_vector();
  EXPECT_GT(dvm::stats().nodes_computed, 0);
  EXPECT_EQ(dvm::stats().flushes, 1);
  EXPECT_EQ(pending(), 0u);
}

// Dropped intermediates that a live result needs are computed; a dropped
// branch is not; views are not computed nodes.
TEST_F(Laziness, UnreachableValuesAreNeverComputed) {
  const std::vector<float> xv = {1, 2, 3, 4, 5, 6};
  Tensor x = Tensor::from_vector(xv, {2, 3});
  Tensor out;
  {
    Tensor a = x * 2.0f;                 // needed by out
    Tensor b = a + 1.0f;                 // needed by out
    Tensor c = dvm::exp(b);              // dropped branch
    Tensor d = c.sum(0) * 3.0f;          // dropped branch
    Tensor e = dvm::softmax(b, 1) - 1.0f;  // dropped branch (several nodes)
    Tensor f = b.transpose(0, 1);        // a view: no computed node
    out = f * 3.0f;                      // needed
  }
  const int64_t recorded = static_cast<int64_t>(pending());
  EXPECT_GT(recorded, 8);
  EXPECT_EQ(dvm::stats().nodes_computed, 0);
  const std::vector<float> got = out.to_vector();
  EXPECT_EQ(dvm::stats().nodes_computed, 3) << "computed nodes beyond a, b and out";
  EXPECT_EQ(dvm::stats().flushes, 1);
  EXPECT_EQ(dvm::stats().nodes_recorded, recorded);
  const std::vector<float> want = {9, 27, 15, 33, 21, 39};  // (2x+1)*3, transposed
  EXPECT_EQ(got, want);
}

// Handles that die on the recording thread while their node is pending are
// counted on the node without an atomic operation (Node::dropped_handles);
// the flush must still see them as gone, and a copy made after a drop must
// keep its node alive and computed. Inputs the trace pinned (Trace::pin)
// are given back: their counts end where they began.
TEST_F(Laziness, HandlesDroppedWhilePendingCountAsGone) {
  Tensor x = Tensor::from_vector({1, 2, 3, 4});
  const int32_t x_refs = x.node()->refs();
  {
    Tensor y = x * 2.0f;
    Tensor y2 = y;  // two handles, both dropped before the flush
  }
  Tensor z = x + 1.0f;
  Tensor kept;
  {
    Tensor a = z * z;
    Tensor tmp = a;
    tmp = Tensor();   // one handle dropped...
    kept = a;         // ...and a copy made after it
  }                   // a's own handle dropped
  for (int i = 0; i < 100; ++i) z = z + x;  // x read by 100 ops: pinned once
  EXPECT_EQ(dvm::stats().nodes_computed, 0);
  const std::vector<float> zv = z.to_vector();
  // z, the 100 adds and kept: not y.
  EXPECT_EQ(dvm::stats().nodes_computed, 102);
  EXPECT_EQ(zv, (std::vector<float>{102, 203, 304, 405}));
  EXPECT_EQ(kept.to_vector(), (std::vector<float>{4, 9, 16, 25}));
  EXPECT_EQ(x.node()->refs(), x_refs + 0) << "x's count did not return (pins or edges leaked)";
  EXPECT_EQ(kept.node()->refs(), 1) << "kept's node holds references beyond its one handle";
  z = Tensor();
  kept = Tensor();
  EXPECT_EQ(x.node()->refs(), x_refs);
}

// Handles copied, moved, reassigned and dropped at random points of random
// programs, with flushes and observations between: every observed value is
// the float reference's (each op rounds once in f32, as the kernels do),
// and once everything is dropped the leaf's count and the pool's live bytes
// are back where they began (no reference or buffer lost or leaked by the
// dropped-handle counts, the pins or the settle fast paths).
TEST_F(Laziness, RandomHandleLifetimesKeepValuesAndCounts) {
  std::mt19937 rng(0xd0c5);
  for (int program = 0; program < 40; ++program) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 300);
    std::vector<float> xv(static_cast<size_t>(n));
    for (float& v : xv) v = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 500.0f;
    const int64_t live0 = dvm::memory_stats().live_bytes;
    Tensor x = Tensor::from_vector(xv);
    const int32_t x_refs = x.node()->refs();
    struct Held {
      Tensor t;
      std::vector<float> want;
    };
    std::vector<Held> held;
    held.push_back({x, xv});
    for (int step = 0; step < 300; ++step) {
      const size_t i = rng() % held.size(), j = rng() % held.size();
      switch (rng() % 8) {
        case 0:
        case 1: {  // a * s + t
          const float sc = static_cast<float>(static_cast<int>(rng() % 17) - 8) / 8.0f;
          const float t = static_cast<float>(static_cast<int>(rng() % 9) - 4) / 4.0f;
          Held h{held[i].t * sc + t, held[i].want};
          for (float& v : h.want) v = v * sc + t;
          held.push_back(std::move(h));
          break;
        }
        case 2: {  // (a + b) * 0.5
          Held h{(held[i].t + held[j].t) * 0.5f, held[i].want};
          for (size_t k = 0; k < h.want.size(); ++k) h.want[k] = (h.want[k] + held[j].want[k]) * 0.5f;
          held.push_back(std::move(h));
          break;
        }
        case 3: held.push_back(held[i]); break;  // a copy
        case 4: held[i] = held[j]; break;         // a reassignment
        case 5:
          if (held.size() > 1) held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
          break;
        case 6: {  // an observation
          const std::vector<float> got = held[i].t.to_vector();
          for (size_t k = 0; k < got.size(); ++k)
            ASSERT_EQ(got[k], held[i].want[k]) << "program " << program << " step " << step << " element " << k;
          break;
        }
        default:
          if (rng() % 4 == 0) dvm::flush();
          break;
      }
    }
    for (const Held& h : held) {
      const std::vector<float> got = h.t.to_vector();
      for (size_t k = 0; k < got.size(); ++k) ASSERT_EQ(got[k], h.want[k]) << "program " << program;
    }
    held.clear();
    dvm::flush();
    EXPECT_EQ(x.node()->refs(), x_refs) << "program " << program;
    x = Tensor();
    EXPECT_EQ(dvm::memory_stats().live_bytes, live0) << "program " << program;
  }
}

// A live handle keeps its value reachable: the flush computes it too, once.
TEST_F(Laziness, LiveUnobservedValuesAreComputedOnce) {
  Tensor x = Tensor::from_vector({1, 2, 3, 4});
  Tensor a = x + 1.0f;
  Tensor g = a * a;   // live, not observed yet
  Tensor h = a - 1.0f;
  (void)h.to_vector();
  EXPECT_EQ(dvm::stats().nodes_computed, 3);  // a, g, h
  const int64_t flushes = dvm::stats().flushes;
  EXPECT_EQ(g.to_vector(), (std::vector<float>{4, 9, 16, 25}));
  EXPECT_EQ(dvm::stats().flushes, flushes) << "observing a computed value flushed again";
  EXPECT_EQ(dvm::stats().nodes_computed, 3);
}

// A flush the node limit triggers also skips what nothing can reach.
TEST_F(Laziness, LimitFlushSkipsUnreachableValues) {
  TraceLimitGuard guard;
  dvm::set_trace_limit(4);
  Tensor x = Tensor::from_vector({1, 2, 3});
  Tensor a = x + 1.0f;               // 1
  (void)dvm::exp(a);                 // 2, dropped at once
  { Tensor b = dvm::sqrt(a); }       // 3, dropped
  Tensor c = a * 2.0f;               // 4: flush
  EXPECT_EQ(dvm::stats().flushes, 1);
  EXPECT_EQ(pending(), 0u);
  EXPECT_EQ(dvm::stats().nodes_computed, 2);  // a and c
  EXPECT_EQ(c.to_vector(), (std::vector<float>{4, 6, 8}));
}

// The trace flushes when it holds `limit` nodes: after k recorded ops,
// k / limit flushes and k % limit pending nodes.
TEST_F(Laziness, FlushesAtTheNodeLimit) {
  TraceLimitGuard guard;
  dvm::set_trace_limit(8);
  EXPECT_EQ(dvm::trace_limit(), 8);
  Tensor y = Tensor::from_vector({0.5f, -1.0f, 2.0f});
  for (int k = 1; k <= 30; ++k) {
    y = y * 1.5f + 0.25f;  // two nodes per step
    const int nodes = 2 * k;
    ASSERT_EQ(dvm::stats().flushes, nodes / 8) << "after " << nodes << " nodes";
    ASSERT_EQ(pending(), static_cast<size_t>(nodes % 8)) << "after " << nodes << " nodes";
  }
  EXPECT_EQ(dvm::stats().nodes_computed, 56);  // 7 flushes of 8 nodes, all needed
}

// Values from early flushes (kept handles) feed ops recorded many flushes
// later; everything matches a sequential float computation bit for bit.
TEST_F(Laziness, ResultsOfOneFlushServeLaterFlushes) {
  TraceLimitGuard guard;
  dvm::set_trace_limit(5);
  const std::vector<float> x0 = {0.5f, -1.0f, 2.0f, 3.25f, -0.125f, 7.0f, 1e-3f};
  std::vector<float> ref = x0;
  std::vector<std::vector<float>> kept_ref;
  std::vector<Tensor> kept;
  Tensor y = Tensor::from_vector(x0);
  for (int k = 0; k < 40; ++k) {
    y = (y * 0.75f + 0.5f) - y * 0.125f;
    for (float& v : ref) v = (v * 0.75f + 0.5f) - v * 0.125f;
    if (k % 7 == 0) {
      kept.push_back(y);
      kept_ref.push_back(ref);
    }
  }
  EXPECT_GE(dvm::stats().flushes, 20);
  // Mix early results into new work.
  Tensor z = kept.front() * kept.back() + kept[2].reshape({7, 1}).expand({7, 3}).max(1);
  std::vector<float> zref(x0.size());
  for (size_t i = 0; i < zref.size(); ++i) zref[i] = kept_ref.front()[i] * kept_ref.back()[i] + kept_ref[2][i];
  for (size_t j = 0; j < kept.size(); ++j)
    EXPECT_EQ(kept[j].to_vector(), kept_ref[j]) << "result kept at step " << 7 * j;
  EXPECT_EQ(y.to_vector(), ref);
  EXPECT_EQ(z.to_vector(), zref);
}

// Programs cut into pieces by small node limits (down to a flush per op
// outside the compositions, whose ops always reach one flush together) give
// the values of one flush: every op rounds to float either way, and
// reductions fold in the same order.
TEST_F(Laziness, ProgramsSplitAcrossFlushes) {
  TraceLimitGuard guard;
  Tensor x = Tensor::normal({7, 1029}, 21), w = Tensor::uniform({1029}, 22, 0.5f, 1.5f);
  Tensor b = Tensor::uniform({1029}, 23, -1, 1);
  auto program = [&] {
    std::vector<Tensor> outs = {
        dvm::softmax(x, -1),
        dvm::log_softmax(x * 3.0f, 0),
        dvm::layer_norm(x, {1029}, w, b),
        (dvm::gelu(x) * w + b).sum({0, 1}),
        dvm::relu(x * w + b).mean(-1, true) - x.max(-1, true),
    };
    std::vector<std::vector<float>> v;
    for (const Tensor& t : outs) v.push_back(t.to_vector());
    return v;
  };
  const auto fused = program();
  for (int64_t limit : {1, 2, 3, 5, 8, 13}) {
    dvm::set_trace_limit(limit);
    dvm::reset_stats();
    const auto split = program();
    EXPECT_GT(dvm::stats().nodes_recorded, 30);
    ASSERT_EQ(split.size(), fused.size());
    for (size_t k = 0; k < fused.size(); ++k) {
      ASSERT_EQ(split[k].size(), fused[k].size());
      int bad = 0;
      for (size_t i = 0; i < fused[k].size(); ++i)
        if (!same_float(split[k][i], fused[k][i]) && bad++ < 3)
          ADD_FAILURE() << "program " << k << " limit " << limit << " [" << i << "]: " << fstr(split[k][i])
                        << " vs fused " << fstr(fused[k][i]);
    }
  }
}

// A composition's ops reach one flush whatever was pending before it
// (detail::RecordTogether): a limit flush landing inside a 16-bit softmax,
// layer_norm, mean, linear or silu would store a value the fused kernel
// keeps in float32 (a row sum, the product before its bias) as float16 or
// bfloat16, rounding it twice. With a limit of 16 and 0..40 unrelated ops
// pending first, the limit falls at every position inside each of them, and
// the results are the bits of the flush that held the composition whole.
TEST_F(Laziness, ALimitFlushNeverSplitsACompositionOfSixteenBitValues) {
  TraceLimitGuard guard;
  for (Dtype t : {Dtype::F16, Dtype::BF16}) {
    SCOPED_TRACE(dtype_name(t));
    // Values of 101..110 (layer_norm's row sums need float32 to stay exact).
    const Tensor x = (Tensor::uniform({3, 10}, 41, 0.0f, 9.0f) + 101.0f).to(t);
    const Tensor w = Tensor::uniform({6, 10}, 42, -1, 1).to(t), bias = Tensor::uniform({6}, 43, -1, 1).to(t);
    const Tensor g = Tensor::uniform({10}, 44, 0.5f, 1.5f).to(t), h = Tensor::uniform({10}, 45, -1, 1).to(t);
    const Tensor q = Tensor::normal({2, 3, 10}, 46).to(t), small = (x * 0.01f).to(t);
    for (const Tensor* p : {&x, &w, &bias, &g, &h, &q, &small}) p->sync();
    const std::vector<std::pair<const char*, std::function<Tensor()>>> cases = {
        {"softmax", [&] { return dvm::softmax(x, -1); }},
        {"log_softmax", [&] { return dvm::log_softmax(x, -1); }},
        {"layer_norm", [&] { return dvm::layer_norm(x, {10}, g, h); }},
        {"layer_norm, float32 parameters",
         [&] { return dvm::layer_norm(x, {10}, g.to(Dtype::F32), h.to(Dtype::F32)); }},
        {"mean", [&] { return x.mean({1}); }},
        {"mean of all", [&] { return x.mean(); }},
        {"linear", [&] { return dvm::linear(x, w, bias); }},
        {"addmm", [&] { return dvm::addmm(bias, x, w.transpose(0, 1), 0.5f, 2.0f); }},
        {"silu", [&] { return dvm::silu(small); }},
        {"var", [&] { return x.var({1}, 1, false); }},
        {"scaled_dot_product_attention", [&] { return dvm::scaled_dot_product_attention(q, q, q, Tensor(), true, 0.0f); }},
    };
    for (const auto& [name, op] : cases) {
      SCOPED_TRACE(name);
      dvm::set_trace_limit(4096);
      const std::vector<float> whole = op().to_vector();
      dvm::set_trace_limit(16);
      for (int pending_ops = 0; pending_ops <= 40; ++pending_ops) {
        Tensor unrelated = Tensor::from_vector({1.0f});
        for (int i = 0; i < pending_ops; ++i) unrelated = unrelated + 1.0f;
        const std::vector<float> got = op().to_vector();
        ASSERT_EQ(got.size(), whole.size());
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_TRUE(same_float(got[i], whole[i]))
              << pending_ops << " ops pending: [" << i << "] " << fstr(got[i]) << " vs " << fstr(whole[i])
              << " in one flush";
        EXPECT_EQ(unrelated.item(), 1.0f + static_cast<float>(pending_ops));
      }
    }
  }
}

// A float sum is never fused with int64 values (an argmax of the same
// value): a kernel with int64 lanes folds its rows whole, while a long row
// alone is split (vm/split_launch.cpp), so the sum's bits would depend on
// what else the flush held. Rows past the split length, in one flush with
// an argmax and each op alone.
TEST_F(Laziness, AFloatSumsBitsDoNotDependOnAnArgmaxInTheSameFlush) {
  TraceLimitGuard guard;
  for (int64_t n : {int64_t{262145}, int64_t{300007}}) {
    const Tensor x = Tensor::normal({n}, 61);
    x.sync();
    auto run = [&](bool with_argmax) {
      const Tensor s = x * 0.5f;
      Tensor am;
      if (with_argmax) am = s.argmax();
      std::vector<float> v = {s.sum().item(), s.mean().item(), s.var().item(),
                              dvm::layer_norm(s.reshape({1, n}), {n}, Tensor(), Tensor()).sum().item()};
      if (with_argmax) v.push_back(static_cast<float>(am.to_vector<int64_t>()[0]));
      return v;
    };
    dvm::set_trace_limit(4096);
    const std::vector<float> fused = run(true);
    const std::vector<float> alone = run(false);
    dvm::set_trace_limit(1);
    const std::vector<float> split = run(true);
    for (size_t i = 0; i + 1 < fused.size(); ++i) {
      EXPECT_TRUE(same_float(fused[i], alone[i])) << "n " << n << " value " << i << ": " << fstr(fused[i]) << " vs " << fstr(alone[i]);
      EXPECT_TRUE(same_float(split[i], alone[i])) << "n " << n << " value " << i << ": " << fstr(split[i]) << " vs " << fstr(alone[i]);
    }
    EXPECT_EQ(fused.back(), split.back());
  }
}

// Each thread has its own trace: another thread's flush neither computes nor
// drops this thread's pending work.
TEST_F(Laziness, ThreadsHaveTheirOwnTraces) {
  Tensor x = Tensor::from_vector({1, 2, 3});
  Tensor y = x * 2.0f + 1.0f;
  const size_t mine = pending();
  ASSERT_EQ(mine, 2u);
  std::vector<float> other;
  size_t other_pending_before = 99, other_pending_after = 99;
  std::thread t([&] {
    other_pending_before = pending();
    Tensor a = Tensor::from_vector({4, 5});
    other = dvm::exp(a - a).to_vector();
    dvm::flush();
    other_pending_after = pending();
  });
  t.join();
  EXPECT_EQ(other_pending_before, 0u);
  EXPECT_EQ(other_pending_after, 0u);
  EXPECT_EQ(other, (std::vector<float>{1, 1}));
  EXPECT_EQ(pending(), mine) << "another thread's flush touched this thread's trace";
  EXPECT_EQ(y.to_vector(), (std::vector<float>{3, 5, 7}));
}

// Buffers of dropped values are recycled; buffers of live results never
// are: many results of many sizes held across many flushes keep their
// values, and data() pointers stay valid while their tensors live.
TEST_F(Laziness, LiveResultsSurviveBufferReuse) {
  std::vector<Tensor> kept;
  std::vector<std::vector<float>> want;
  std::vector<const float*> ptrs;
  for (int k = 0; k < 60; ++k) {
    const int64_t n = 1 + (k * 37) % 300;
    Tensor x = Tensor::full({n}, static_cast<float>(k));
    Tensor y = x * 2.0f + 1.0f;  // 2k + 1
    Tensor junk = dvm::exp(y) - y;  // dropped after observation
    (void)junk.to_vector();
    if (k % 3 == 0) {
      kept.push_back(y);
      want.emplace_back(static_cast<size_t>(n), 2.0f * static_cast<float>(k) + 1.0f);
      ptrs.push_back(y.data());
    }
  }
  for (size_t i = 0; i < kept.size(); ++i) {
    EXPECT_EQ(kept[i].data(), ptrs[i]) << "result " << i << " moved";
    const std::vector<float> got(ptrs[i], ptrs[i] + want[i].size());
    EXPECT_EQ(got, want[i]) << "result " << i << " was overwritten";
  }
}

// A thread that ends with work pending drops it (nothing can observe it).
// Its trace may have been created before its first node (set_trace_limit,
// flush or stats() create it), so thread-exit destruction order must not
// matter. Run in a child process: a failure corrupts the heap.
TEST(LazinessDeathTest, ThreadExitDropsPendingWork) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        for (int order = 0; order < 2; ++order) {
          std::thread t([order] {
            if (order == 0) dvm::set_trace_limit(1000);  // the trace first, then nodes
            Tensor x = Tensor::from_vector({1, 2, 3});
            if (order == 1) dvm::set_trace_limit(1000);  // nodes first, then the trace
            // Computed and dropped nodes: their blocks are recycled per thread.
            for (int i = 0; i < 50; ++i) (void)(x * static_cast<float>(i)).to_vector();
            std::vector<Tensor> keep;
            for (int i = 0; i < 200; ++i) keep.push_back(x * static_cast<float>(i) + 1.0f);
          });  // ends with 400 nodes pending
          t.join();
        }
        // Allocate and free a little so a corrupted heap shows.
        for (int i = 0; i < 1000; ++i) std::vector<char>(static_cast<size_t>(1 + i % 97)).swap(*std::make_unique<std::vector<char>>());
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

// ---------------------------------------------------------------------------
// Kernel counts
// ---------------------------------------------------------------------------
struct Workload {
  const char* name;
  const char* form;
  std::function<Tensor(int64_t rows, int64_t cols)> build;
};

std::vector<Workload> workloads() {
  return {
      {"W1 relu(x*a + b)*0.5 + x", "elementwise",
       [](int64_t r, int64_t c) {
         Tensor x = Tensor::uniform({r, c}, 1, -1, 1), a = Tensor::uniform({r, c}, 2, -1, 1);
         Tensor b = Tensor::uniform({c}, 3, -1, 1);
         return dvm::relu(x * a + b) * 0.5f + x;
       }},
      {"W2 gelu(tanh) written with ops", "elementwise",
       [](int64_t r, int64_t c) {
         Tensor x = Tensor::normal({r, c}, 4);
         return 0.5f * x * (1.0f + dvm::tanh(0.7978845608f * (x + 0.044715f * x * x * x)));
       }},
      {"W3 softmax over the last axis", "row_reduce",
       [](int64_t r, int64_t c) { return dvm::softmax(Tensor::normal({r, c}, 5), -1); }},
      {"W4 layer_norm with weight and bias", "row_reduce",
       [](int64_t r, int64_t c) {
         Tensor x = Tensor::normal({r, c}, 6), w = Tensor::uniform({c}, 7, 0.5f, 1.5f);
         Tensor b = Tensor::uniform({c}, 8, -1, 1);
         return dvm::layer_norm(x, {c}, w, b);
       }},
      {"W5 tanh(x + bias)", "elementwise",
       [](int64_t r, int64_t c) { return dvm::tanh(Tensor::normal({r, c}, 9) + Tensor::uniform({c}, 10, -1, 1)); }},
      {"W6 sum over the last axis", "row_reduce",
       [](int64_t r, int64_t c) { return Tensor::normal({r, c}, 11).sum(-1); }},
  };
}

TEST_F(Laziness, EachWorkloadIsOneKernel) {
  for (const Workload& w : workloads()) {
    Tensor y = w.build(64, 1024);
    const int64_t recorded = static_cast<int64_t>(pending());
    dvm::reset_stats();
    const std::vector<KernelRun> log = run_logged(y);
    const Stats st = dvm::stats();
    EXPECT_EQ(st.kernels_launched, 1) << w.name;
    ASSERT_EQ(log.size(), 1u) << w.name;
    EXPECT_EQ(log[0].form, w.form) << w.name;
    EXPECT_EQ(log[0].ops, recorded) << w.name << ": every recorded op fused into the kernel";
    EXPECT_EQ(st.nodes_computed, recorded) << w.name;
  }
}

// The kernel cache is keyed by bytecode, never by sizes: the same program at
// new sizes (rows, columns, a row longer than 4096) compiles nothing and is
// still one kernel.
TEST_F(Laziness, NewSizesCompileNothing) {
  const int64_t sizes[][2] = {{64, 1024}, {37, 1000}, {3, 5003}, {129, 17}};
  for (const Workload& w : workloads()) {
    for (size_t s = 0; s < std::size(sizes); ++s) {
      Tensor y = w.build(sizes[s][0], sizes[s][1]);
      dvm::reset_stats();
      const std::vector<KernelRun> log = run_logged(y);
      const Stats st = dvm::stats();
      EXPECT_EQ(st.kernels_launched, 1) << w.name << " at [" << sizes[s][0] << ", " << sizes[s][1] << "]";
      EXPECT_EQ(log.size(), 1u) << w.name << " at [" << sizes[s][0] << ", " << sizes[s][1] << "]";
      if (s > 0) {
        EXPECT_EQ(st.kernels_compiled, 0) << w.name << " compiled a new kernel for size [" << sizes[s][0] << ", "
                                          << sizes[s][1] << "]";
      }
    }
  }
}

// mean divides by the reduced count, a size: it must not become part of the
// kernel's identity either.
TEST_F(Laziness, MeanAtNewSizesCompilesNothing) {
  const int64_t cols[] = {1024, 1000, 17};
  for (size_t s = 0; s < std::size(cols); ++s) {
    Tensor y = Tensor::normal({8, cols[s]}, 12).mean(-1);
    dvm::reset_stats();
    y.sync();
    EXPECT_EQ(dvm::stats().kernels_launched, 1) << "mean over " << cols[s];
    if (s > 0) {
      EXPECT_EQ(dvm::stats().kernels_compiled, 0) << "mean over a row of " << cols[s] << " compiled a new kernel";
    }
  }
}

// The one-kernel programs compute the right values (W1 exactly: mul, add,
// relu, mul by 0.5 and add are each correctly rounded, and are not
// contracted into fma; W6 exactly on data whose partial sums are exact).
TEST_F(Laziness, FusedWorkloadValues) {
  const int64_t r = 5, c = 1027;
  Tensor x = Tensor::uniform({r, c}, 1, -1, 1), a = Tensor::uniform({r, c}, 2, -1, 1);
  Tensor b = Tensor::uniform({c}, 3, -1, 1);
  const std::vector<float> xv = x.to_vector(), av = a.to_vector(), bv = b.to_vector();
  const std::vector<float> y = (dvm::relu(x * a + b) * 0.5f + x).to_vector();
  for (int64_t i = 0; i < r * c; ++i) {
    const size_t k = static_cast<size_t>(i);
    float t = xv[k] * av[k];
    t = t + bv[static_cast<size_t>(i % c)];
    t = t < 0 ? 0.0f : t;
    t = t * 0.5f;
    t = t + xv[k];
    ASSERT_TRUE(same_float(y[k], t)) << "W1 [" << i << "] got " << y[k] << ", expected " << t;
  }
  std::vector<float> iv(static_cast<size_t>(r * 5003));
  for (size_t i = 0; i < iv.size(); ++i) iv[i] = static_cast<float>(static_cast<int>(i * 7919 % 129) - 64) / 8.0f;
  const std::vector<float> s = Tensor::from_vector(iv, {r, 5003}).sum(-1).to_vector();
  for (int64_t row = 0; row < r; ++row) {
    double want = 0;
    for (int64_t j = 0; j < 5003; ++j) want += iv[static_cast<size_t>(row * 5003 + j)];
    EXPECT_EQ(s[static_cast<size_t>(row)], static_cast<float>(want)) << "W6 row " << row;
  }
}

}  // namespace
}  // namespace dvm::testing
