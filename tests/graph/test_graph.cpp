// dvm::Graph and dvm::Executable: a graph captured once with symbolic
// extents runs at any binding with the lazy path's bits (the lazy path is the
// reference: its own tests check it against double-precision references),
// compiles nothing after its first run, writes only its outputs, and every
// misuse is a dvm::Error naming what is wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "dvm/dvm.h"
#include "graph/program.h"
#include "tracer/buffer_pool.h"
#include "tracer/row_copies.h"
#include "tests/error_testing.h"

namespace dvm::testing {
namespace {

// Graph errors may come after ops were recorded (compile), so only the
// message is checked.
template <class F>
void expect_error(const std::string& what, F&& f, const std::vector<std::string>& parts) {
  expect_error_message(what, f, parts);
}

std::vector<float> values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-2.0f, 2.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// exe saved to path and loaded back (the file removed).
void reload(Executable& exe, const std::string& path) {
  exe.save(path);
  exe = Executable::load(path);
  std::remove(path.c_str());
}

// Runs exe (input "x", output "y") at S = s and expects want's bits, with
// guard elements after the output untouched.
void expect_run_bits(const Executable& exe, const std::vector<float>& xv, const Tensor& want, int64_t s) {
  const std::vector<float> w = want.to_vector();
  std::vector<float> y(w.size() + 4, -9.0f);
  exe.run({{"x", xv.data()}}, {{"y", y.data()}}, {{"S", s}});
  for (size_t i = 0; i < w.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(y[i]), std::bit_cast<uint32_t>(w[i])) << "S " << s << " element " << i;
  for (size_t i = w.size(); i < y.size(); ++i) ASSERT_EQ(y[i], -9.0f) << "S " << s;
}

// The model both paths run: x [B, S, 32], m [S, 1]; weights made before.
struct Weights {
  Tensor w = Tensor::normal({48, 32}, 1, 0.0f, 0.2f), b = Tensor::normal({48}, 2);
  Tensor lw = Tensor::normal({32}, 3, 1.0f, 0.1f), lb = Tensor::normal({32}, 4);
  Weights() {
    for (const Tensor* t : {&w, &b, &lw, &lb}) t->sync();
  }
};

struct Outs {
  Tensor y, pooled, scores, z;
};

// Ops of every form: a row kernel (layer_norm, softmax), a product with an
// epilogue, views through products of symbols, a reduction over a symbolic
// axis (its count bound per run), a batched product of two graph tensors,
// broadcasting against a [S, 1] input and a constant of symbolic extents.
Outs model(const Weights& wt, const Tensor& x, const Tensor& m, int64_t B, int64_t S) {
  const Tensor h = layer_norm(x, {32}, wt.lw, wt.lb);
  const Tensor y = gelu(linear(h, wt.w, wt.b));                      // [B, S, 48]
  const Tensor flat = y.reshape({B * S, 48});
  const Tensor pooled = flat.mean({0});                               // [48]
  const Tensor q = y.reshape({B, S, 6, 8}).permute({0, 2, 1, 3});     // [B, 6, S, 8]
  const Tensor scores = softmax(matmul(q, q.transpose(-2, -1)) * 0.35f, -1);  // [B, 6, S, S]
  const Tensor z = (x * m + Tensor::full({B, S, 32}, 0.5f)).sum({2});  // [B, S]
  return {flat, pooled, scores, z};
}

Executable capture_model(const Weights& wt) {
  Graph g;
  const Dim B = g.symbol("B"), S = g.symbol("S");
  const Tensor x = g.input("x", {B, S, 32});
  const Tensor m = g.input("m", {S, 1});
  const Outs o = model(wt, x, m, B, S);
  g.output("y", o.y);
  g.output("pooled", o.pooled);
  g.output("scores", o.scores);
  g.output("z", o.z);
  return g.compile();
}

TEST(Graph, RunsMatchTheLazyPathBitForBitAtEveryBinding) {
  const Weights wt;
  const Executable exe = capture_model(wt);
  EXPECT_EQ(exe.symbols(), (std::vector<std::string>{"B", "S"}));
  EXPECT_EQ(exe.inputs(), (std::vector<std::string>{"x", "m"}));
  EXPECT_EQ(exe.describe(),
            "input x: float32[B, S, 32]\ninput m: float32[S, 1]\noutput y: float32[B*S, 48]\n"
            "output pooled: float32[48]\noutput scores: float32[B, 6, S, S]\noutput z: float32[B, S]\n");
  std::mt19937 rng(5);
  int64_t compiled_by_runs = 0;
  for (int run = 0; run < 14; ++run) {
    // Extents of 1 last: they are a structure of their own (what broadcasts),
    // planned by compile() too; no size compiles anything.
    const int64_t B = run >= 12 ? 1 : 2 + static_cast<int64_t>(rng() % 4);
    const int64_t S = run == 13 ? 1 : 2 + static_cast<int64_t>(rng() % 40);
    const Bindings bind = {{"S", S}, {"B", B}};
    EXPECT_EQ(exe.shape("scores", bind), (Shape{B, 6, S, S}));
    const std::vector<float> xv = values(B * S * 32, static_cast<uint32_t>(run)), mv = values(S, 100u + run);
    // Outputs with guard elements after them.
    constexpr float kGuard = -12345.0f;
    std::vector<float> y(static_cast<size_t>(B * S * 48 + 4), kGuard), pooled(48 + 4, kGuard),
        scores(static_cast<size_t>(B * 6 * S * S + 4), kGuard), z(static_cast<size_t>(B * S + 4), kGuard);
    const int64_t before = stats().kernels_compiled, launched = stats().kernels_run;
    exe.run({{"x", xv.data()}, {"m", mv.data()}},
            {{"y", y.data()}, {"pooled", pooled.data()}, {"scores", scores.data()}, {"z", z.data()}}, bind);
    compiled_by_runs += stats().kernels_compiled - before;
    const int64_t graph_kernels = stats().kernels_run - launched;
    const Tensor x = Tensor::from_blob(xv.data(), {B, S, 32}), m = Tensor::from_blob(mv.data(), {S, 1});
    const Outs lazy = model(wt, x, m, B, S);
    const int64_t before_lazy = stats().kernels_run;
    for (const Tensor* t : {&lazy.y, &lazy.pooled, &lazy.scores, &lazy.z}) t->sync();
    // (At an extent of 1 the lazy path records some ops differently.)
    if (B > 1 && S > 1) {
      EXPECT_EQ(graph_kernels, stats().kernels_run - before_lazy) << "the graph's ops fuse as the lazy path's";
    }
    const std::string at = "B " + std::to_string(B) + " S " + std::to_string(S);
    for (const auto& [got, want] : {std::pair{&y, &lazy.y}, std::pair{&pooled, &lazy.pooled},
                                    std::pair{&scores, &lazy.scores}, std::pair{&z, &lazy.z}}) {
      const std::vector<float> w = want->to_vector();
      ASSERT_EQ(got->size(), w.size() + 4) << at;
      for (size_t i = 0; i < w.size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>((*got)[i]), std::bit_cast<uint32_t>(w[i])) << at << " element " << i;
      for (size_t i = w.size(); i < got->size(); ++i) ASSERT_EQ((*got)[i], kGuard) << at << ": written past the end";
    }
  }
  EXPECT_EQ(compiled_by_runs, 0) << "a run compiled kernels (compile() makes them)";
}

// A graph's products of one row (decoding one token) read a constant weight
// stored by columns from its row-major copy even where the lazy path reads
// it in place: past the one-row budget (tests/tracer/test_weight_copies.cpp),
// as this 25 MB copy is. The graph holds its constants for its lifetime.
// The copy is made by the second request (compile() plans a run, and the
// plan check binds twice); the bits are the lazy path's either way; the copy
// is counted, goes with the weight, and is not made with copies turned off.
TEST(Graph, OneRowProductsReadARowMajorCopyOfAConstantWeight) {
  const bool copies_were = weight_copies();
  const int64_t K = 2048, N = 3100;
  const std::vector<float> w = values(N * K, 61);
  const int64_t before = memory_stats().weight_copy_bytes;
  for (bool copies : {true, false}) {
    set_weight_copies(copies);
    {
      const Tensor W = Tensor::from_blob(w.data(), {N, K});
      Graph g;
      const Dim B = g.symbol("B");
      g.output("y", linear(g.input("x", {B, K}), W));
      const Executable exe = g.compile();
      for (int run = 0; run < 4; ++run) {
        const int64_t rows = run == 3 ? 5 : 1;  // a few rows read the same copy
        const std::vector<float> x = values(rows * K, 70u + static_cast<uint32_t>(run));
        std::vector<float> y(static_cast<size_t>(rows * N));
        exe.run({{"x", x.data()}}, {{"y", y.data()}}, {{"B", rows}});
        // The lazy product on the weight wrapped anew: its own storage, read
        // once, never copied (on the portable ISA one row would copy W).
        const std::vector<float> lazy =
            linear(Tensor::from_blob(x.data(), {rows, K}), Tensor::from_blob(w.data(), {N, K})).to_vector();
        const std::string at = std::string(copies ? "copies on" : "copies off") + ", run " + std::to_string(run);
        for (int64_t i = 0; i < rows * N; ++i) {
          const size_t e = static_cast<size_t>(i);
          ASSERT_EQ(std::bit_cast<uint32_t>(y[e]), std::bit_cast<uint32_t>(lazy[e])) << at << " element " << i;
          double ref = 0, mag = 0;
          for (int64_t k = 0; k < K; ++k) {
            const double p = static_cast<double>(x[static_cast<size_t>((i / N) * K + k)]) * w[static_cast<size_t>((i % N) * K + k)];
            ref += p;
            mag += std::fabs(p);
          }
          // One rounding per fused step (two on the portable ISA): 2K ulps of sum |x w|.
          ASSERT_LE(std::fabs(y[e] - ref), 2.0 * K * std::ldexp(mag, -24)) << at << " element " << i;
        }
        const int64_t made = memory_stats().weight_copy_bytes - before, copy = static_cast<int64_t>(
            detail::pool_block_bytes(static_cast<size_t>(K * detail::row_copy_stride(N) * 4)));
        if (copies && run >= 1) EXPECT_EQ(made, copy) << at << ": no copy";
        else if (copies) EXPECT_TRUE(made == 0 || made == copy) << at << ": " << made << " bytes of copies";
        else EXPECT_EQ(made, 0) << at << ": a copy";
      }
    }
    EXPECT_EQ(memory_stats().weight_copy_bytes, before) << "the copy outlived its weight and the executable";
  }
  set_weight_copies(copies_were);
}

// Typed inputs and outputs: a float16 input, an int32 one, a bool output.
TEST(Graph, TypedInputsAndOutputs) {
  Executable exe;
  {
    Graph g;
    const Dim N = g.symbol("N");
    const Tensor a = g.input("a", {N, 4}, Dtype::F16), k = g.input("k", {N}, Dtype::I32);
    g.output("h", a * 2.0f);
    g.output("s", (k * Tensor::full({}, 3, Dtype::I32)).sum());
    g.output("big", gt(k, Tensor::full({}, 10, Dtype::I32)));
    exe = g.compile();
  }
  EXPECT_EQ(exe.dtype("h"), Dtype::F16);
  EXPECT_EQ(exe.dtype("s"), Dtype::I64);
  EXPECT_EQ(exe.dtype("big"), Dtype::Bool);
  for (int64_t n : {1, 5, 300}) {
    std::vector<Half> a(static_cast<size_t>(n * 4));
    std::vector<int32_t> k(static_cast<size_t>(n));
    int64_t sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      k[static_cast<size_t>(i)] = static_cast<int32_t>(i * 7 % 23);
      sum += 3 * k[static_cast<size_t>(i)];
    }
    for (size_t i = 0; i < a.size(); ++i) a[i] = to_half(static_cast<float>(i % 17) * 0.25f);
    std::vector<Half> h(a.size());
    int64_t s = -1;
    std::vector<uint8_t> big(static_cast<size_t>(n), 7);
    exe.run({{"a", a.data()}, {"k", k.data()}}, {{"h", h.data()}, {"s", &s}, {"big", big.data()}}, {{"N", n}});
    EXPECT_EQ(s, sum);
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(to_float(h[i]), 2.0f * to_float(a[i])) << i;
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(big[static_cast<size_t>(i)], k[static_cast<size_t>(i)] > 10 ? 1 : 0);
  }
}

// An input may be an output; an output read through a non-contiguous view
// is written contiguous.
TEST(Graph, InputsAndViewsAsOutputs) {
  Executable exe;
  {
    Graph g;
    const Dim R = g.symbol("R"), C = g.symbol("C");
    const Tensor x = g.input("x", {R, C});
    g.output("same", x);
    g.output("t", x.transpose(0, 1));
    g.output("half", x.narrow(1, 1, 2) * 1.0f);  // a constant width inside a symbolic row
    exe = g.compile();
  }
  const int64_t R = 3, C = 5;
  const std::vector<float> x = values(R * C, 9);
  std::vector<float> same(R * C), t(R * C), half(R * 2);
  exe.run({{"x", x.data()}}, {{"same", same.data()}, {"t", t.data()}, {"half", half.data()}}, {{"R", R}, {"C", C}});
  EXPECT_EQ(same, x);
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < C; ++j) EXPECT_EQ(t[static_cast<size_t>(j * R + i)], x[static_cast<size_t>(i * C + j)]);
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < 2; ++j)
      EXPECT_EQ(half[static_cast<size_t>(i * 2 + j)], x[static_cast<size_t>(i * C + 1 + j)]);
  // Narrower than the constant slice: the view would read outside x.
  std::vector<float> small(2), o1(2), o2(2), o3(2);
  expect_error("narrow past a bound extent", [&] {
    exe.run({{"x", small.data()}}, {{"same", o1.data()}, {"t", o2.data()}, {"half", o3.data()}},
            {{"R", 1}, {"C", 2}});
  }, {"R = 1", "C = 2", "a view", "outside"});
  // Two outputs may not share bytes (an output over the input may).
  std::vector<float> shared(R * C + 4);
  expect_error("outputs that overlap", [&] {
    exe.run({{"x", x.data()}}, {{"same", shared.data()}, {"t", shared.data() + 4}, {"half", half.data()}},
            {{"R", R}, {"C", C}});
  }, {"outputs 'same' and 't'", "overlapping"});
  std::vector<float> io = x;
  exe.run({{"x", io.data()}}, {{"same", io.data()}, {"t", t.data()}, {"half", half.data()}}, {{"R", R}, {"C", C}});
  EXPECT_EQ(io, x);
}

// trim() during a capture gives the caches back and flushes nothing (the
// captured ops are the graph's): the graph then runs as it would have.
TEST(Graph, TrimDuringACaptureLeavesTheGraphAsItWas) {
  Graph g;
  const Dim S = g.symbol("S");
  const Tensor x = g.input("x", {S, 5});
  const Tensor h = x * 2.0f;
  trim();
  g.output("y", h + 1.0f);
  const Executable exe = g.compile();
  for (int64_t s : {1, 4, 9}) {
    std::vector<float> xv(static_cast<size_t>(s * 5)), y(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i) * 0.25f - 3.0f;
    exe.run({{"x", xv.data()}}, {{"y", y.data()}}, {{"S", s}});
    for (size_t i = 0; i < xv.size(); ++i) ASSERT_EQ(y[i], xv[i] * 2.0f + 1.0f) << "S=" << s << " at " << i;
  }
}

TEST(Graph, CaptureErrors) {
  {
    Graph g;
    expect_error("empty symbol", [&] { g.symbol(""); }, {"symbol", "not a valid name"});
    expect_error("bad symbol", [&] { g.symbol("a b"); }, {"symbol", "a b"});
    g.symbol("B");
    expect_error("repeated symbol", [&] { g.symbol("B"); }, {"'B' is already a symbol"});
    const Tensor x = g.input("x", {4});
    expect_error("repeated input", [&] { g.input("x", {4}); }, {"'x' is already an input"});
    expect_error("second graph", [] { Graph h; }, {"another graph is being built"});
    expect_error("read during capture", [&] { (void)(x * 2.0f).to_vector(); },
                 {"graph capture", "values were asked for"});
    const Tensor before = Tensor::full({2}, 1.0f);
    expect_error("output made before", [&] { g.output("c", before); }, {"'c'", "not computed by this graph"});
    const Tensor filled = Tensor::ones({3});  // made during the capture, with its values
    expect_error("output filled on the host", [&] { g.output("c", filled); }, {"'c'", "constant", "Tensor::ones"});
    expect_error("an input's name", [&] { g.output("x", x * 2.0f); }, {"'x' is already an input", "distinct"});
    g.output("y", x * 3.0f);
    expect_error("an output's name", [&] { g.input("y", {4}); }, {"'y' is already an output", "distinct"});
  }
  {
    Graph g;
    (void)g.input("x", {4});
    expect_error("no outputs", [&] { (void)g.compile(); }, {"no outputs"});
  }
  {
    Graph g;
    const Dim S = g.symbol("S");
    const Tensor x = g.input("x", {S, 8});
    g.output("y", x.narrow(0, 1, S - 1));  // S - 1: a difference of symbols
    expect_error("a difference", [&] { (void)g.compile(); }, {"not a product of the graph's symbols", "S - 1"});
  }
  // A length computed from a symbol by a sum, a difference or a division
  // (chunk, split, a step) would be frozen to the number the symbol stood
  // for: refused, for the symbol of the axis whichever it is.
  for (int which = 0; which < 3; ++which)
    for (int64_t k = 2; k <= 9; ++k) {
      auto refused = [&](const std::string& what, auto make) {
        Graph g;
        std::vector<Dim> dims;
        for (int i = 0; i <= which; ++i) dims.push_back(g.symbol(std::string(1, static_cast<char>('A' + i))));
        const Dim S = dims.back();
        const Tensor x = g.input("x", {S, 3});
        // Refused by the slice, or (a length near another symbol's number) by the compile as a sum.
        expect_error_message(what + " of symbol " + std::to_string(which), [&] {
          g.output("y", make(x, static_cast<int64_t>(S)) * 2.0f);
          (void)g.compile();
        }, {"slice"});
      };
      refused("chunk(" + std::to_string(k) + ")", [&](const Tensor& x, int64_t) { return x.chunk(k)[0]; });
      refused("step " + std::to_string(k), [&](const Tensor& x, int64_t S) { return x.slice(0, 0, S, k); });
      refused("S - " + std::to_string(k * k * 7), [&](const Tensor& x, int64_t S) { return x.narrow(0, 0, S - k * k * 7); });
      refused("S / " + std::to_string(k), [&](const Tensor& x, int64_t S) { return x.narrow(0, 1, S / k); });
    }
  {
    Graph g;
    const Dim S = g.symbol("S");
    const Tensor x = g.input("x", {S, 8});
    // A negative start is the extent minus a number: S - 16.
    expect_error("the last rows", [&] { (void)x.narrow(0, -16, 16); }, {"graph capture", "starts at", "S - 16"});
    expect_error("a slice from the end", [&] { (void)x.slice(0, -16, S); }, {"graph capture", "starts at"});
  }
  {
    Graph g;
    const Tensor x = g.input("x", {g.symbol("S"), 3});
    expect_error("chunk(2)", [&] { (void)x.chunk(2); },
                 {"graph capture: slice of axis 0 of float32[S, 3] keeps 20016 of its S elements", "chunk()"});
  }
  // Constant lengths along a symbolic axis stay constants (a window of the
  // first L rows), and run at any binding that holds them.
  for (int64_t L : {1, 16, 100, 1000, 1024, 3000, 4096, 8192, 12288, 16000}) {
    Graph g;
    const Dim S = g.symbol("S");
    g.output("y", g.input("x", {S}).narrow(0, 0, L) * 2.0f);
    const Executable exe = g.compile();
    const int64_t n = L + 5;
    std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(L));
    for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i % 97);
    exe.run({{"x", x.data()}}, {{"y", y.data()}}, {{"S", n}});
    for (int64_t i = 0; i < L; ++i) ASSERT_EQ(y[static_cast<size_t>(i)], 2.0f * x[static_cast<size_t>(i)]) << L;
    EXPECT_EQ(exe.shape("y", {{"S", n}}), Shape{L});
  }
  {
    Graph g;
    const Dim S = g.symbol("S");
    const Tensor x = g.input("x", {S});
    // Only arange's length may be a symbol: a start made from a Dim would be
    // the capture's number.
    g.output("y", x + Tensor::arange(static_cast<double>(S), static_cast<double>(2 * S), 1.0, Dtype::F32));
    expect_error("arange from a symbolic start", [&] { (void)g.compile(); }, {"arange", "starts or steps by", "symbols"});
  }
  {
    Graph g;
    const Dim S = g.symbol("S");
    const Tensor x = g.input("x", {S, 4});
    expect_error("var over a symbol", [&] { (void)x.var({0}); }, {"var", "symbols", "not supported yet"});
    // Shapes in errors name the symbols, not the numbers the capture uses for them.
    expect_error("a shape error", [&] { (void)matmul(x, Tensor::full({5, 2}, 1.0f)); }, {"matmul", "[S, 4]"});
    const Dim B = g.symbol("B");
    const Tensor w = g.input("w", {B, S * 2});
    expect_error("a product of symbols", [&] { (void)w.reshape({7}); }, {"reshape", "[B, S*2]"});
    // Writes into buffers are refused when recorded, before a buffer of the
    // capture's sizes (numbers above 40000 per symbol) is allocated.
    KVCache cache({16, 4}, 0);
    expect_error("a write", [&] { (void)cache.append(x.narrow(0, 0, 2)); },
                 {"KVCache::append", "writes into a buffer", "not supported"});
    // Also when the rows' symbolic extent stands above the cache's capacity:
    // the error is the capture's, not the capacity's.
    expect_error("a write of S rows", [&] { (void)cache.append(x); },
                 {"KVCache::append", "writes into a buffer", "not supported"});
    const Tensor big = g.input("big", {S, S, 2});
    expect_error("a cat of symbolic extents", [&] { (void)cat({big, big}, -1); },
                 {"cat", "writes into a buffer", "not supported"});
    expect_error("a stack", [&] { (void)stack({big, big}, 0); }, {"stack: ", "writes into a buffer", "not supported"});
  }
  // After a failed compile (or a destroyed graph) the thread records lazily again.
  const Tensor t = Tensor::full({3}, 2.0f) * 2.0f;
  EXPECT_EQ(t.to_vector(), (std::vector<float>{4.0f, 4.0f, 4.0f}));
}

std::string port_name(size_t i) {
  std::string s = "o";
  s += std::to_string(i);
  return s;
}

// arange of a symbolic length, and what is made of it (a causal mask in
// attention, tril, argmax's indices), is filled by each run at its own
// length: the lazy path's bits at every binding, replayed and after a save.
std::vector<Tensor> ranges_model(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& m, int64_t S) {
  return {scaled_dot_product_attention(q, k, v, Tensor(), true, 0.3f),  // causal: aranges of S
          tril(m, -1) + triu(m, 2) * 0.5f,
          m.argmax(-1),
          Tensor::arange(0.0, static_cast<double>(S), 1.0, Dtype::I32) * 3,
          (Tensor::arange(1.0, static_cast<double>(S) + 1.0, 1.0, Dtype::F32) * 0.25f).reshape({S, 1}) * m};
}

// argmax and argmin of floats and sums of bool along symbolic axes keep
// their indices and counts in float32 lanes, as the lazy path does up to
// 2^24 elements: a run launches the lazy path's kernels (the same
// bytecode) and gives its values, at every binding (extents of 1, short
// rows, a decode step's one row of logits); a binding past 2^24 along
// such an axis is an error naming it.
TEST(Graph, FloatIndicesAndCountsAlongSymbolicAxesAreTheLazyPaths) {
  auto model = [](const Tensor& x) {
    return std::vector<Tensor>{x.argmax(-1), x.argmin(0, true), x.argmax(),
                               dvm::gt(x, 0.0f).sum(std::vector<int>{1}), dvm::lt(x, 0.5f).sum()};
  };
  Executable exe;
  {
    Graph g;
    const Dim R = g.symbol("R"), C = g.symbol("C");
    const std::vector<Tensor> ys = model(g.input("x", {R, C}));
    for (size_t i = 0; i < ys.size(); ++i) g.output(port_name(i), ys[i]);
    exe = g.compile();
  }
  auto hashes = [] {
    std::vector<uint64_t> h;
    for (const KernelRun& k : dvm::take_kernel_log()) h.push_back(k.hash);
    std::sort(h.begin(), h.end());
    return h;
  };
  const int64_t shapes[][2] = {{1, 1}, {3, 8}, {37, 10}, {1, 4096}, {5, 1000}, {4099, 2}, {1, 33}, {9, 1}};
  for (const auto& rc : shapes) {
    const int64_t r = rc[0], c = rc[1];
    std::vector<float> xv = values(r * c, static_cast<uint32_t>(r * 31 + c));
    for (int64_t i = 0; i < r * c; i += 7) xv[static_cast<size_t>(i)] = 1.0f;  // ties
    if (r * c > 3) xv[static_cast<size_t>(r * c / 2)] = NAN;
    std::string what = "[";
    what += std::to_string(r);
    what += ", ";
    what += std::to_string(c);
    what += "]";
    std::vector<std::vector<int64_t>> got(5);
    got[0].resize(static_cast<size_t>(r));
    got[1].resize(static_cast<size_t>(c));
    got[2].resize(1);
    got[3].resize(static_cast<size_t>(r));
    got[4].resize(1);
    dvm::set_kernel_log(true);
    (void)dvm::take_kernel_log();
    exe.run({{"x", xv.data()}},
            {{"o0", got[0].data()}, {"o1", got[1].data()}, {"o2", got[2].data()}, {"o3", got[3].data()},
             {"o4", got[4].data()}},
            {{"R", r}, {"C", c}});
    const std::vector<uint64_t> graph_kernels = hashes();
    const Tensor x = Tensor::from_blob(xv.data(), {r, c});
    const std::vector<Tensor> ys = model(x);
    dvm::flush();
    const std::vector<uint64_t> lazy_kernels = hashes();
    dvm::set_kernel_log(false);
    EXPECT_EQ(graph_kernels, lazy_kernels) << what;
    for (size_t i = 0; i < ys.size(); ++i) EXPECT_EQ(got[i], ys[i].to_vector<int64_t>()) << what << " output " << i;
  }
  const int64_t past = (int64_t{1} << 24) + 1;
  expect_error_message("C past 2^24", [&] { (void)exe.memory({{"R", 1}, {"C", past}}); },
                       {"C = 16777217", "argmax", "2^24"});
  // A count alone: of R * C elements.
  Graph g;
  const Dim R = g.symbol("R"), C = g.symbol("C");
  g.output("n", dvm::gt(g.input("x", {R, C}), 0.0f).sum());
  const Executable count = g.compile();
  EXPECT_GE(count.memory({{"R", 4096}, {"C", 4096}}), 0);
  expect_error_message("R * C past 2^24", [&] { (void)count.memory({{"R", 4096}, {"C", 4097}}); },
                       {"R*C = 16781312", "sum of bool", "2^24"});
}

// A view whose first element's offset sums terms of different symbols
// (slices of two axes, one past a symbolic axis: 48 * A + 3) runs as the
// lazy path's at every binding, saved and loaded too: as a number the
// offset looked like a constant, and runs read the elements at the
// capture's offset.
TEST(Graph, ViewOffsetsThatSumSymbolsRunAsTheLazyPath) {
  // Each case: the view of x [4, 4, A, 4] (and of B too: [B, 4, A]) as the
  // lazy path would write it, at any A and B.
  using Make = std::function<Tensor(const Tensor&)>;
  const std::vector<std::pair<std::string, Make>> cases = {
      {"x[3:4, :, :, 3:4]", [](const Tensor& x) { return x.slice(3, 3, 4).slice(0, 3, 4); }},
      {"x[:, 3:4, :, 3:4]", [](const Tensor& x) { return x.slice(3, 3, 4).slice(1, 3, 4); }},
      {"x[1:, :, 1:2, 2:]", [](const Tensor& x) { return x.slice(2, 1, 2).slice(0, 1, 4).slice(3, 2, 4); }},
      {"x[2:4, 1:3].transpose", [](const Tensor& x) { return x.slice(0, 2, 4).slice(1, 1, 3).transpose(2, 3); }},
  };
  const std::string path = ::testing::TempDir() + "dvm_sum_offsets.dvmx";
  for (const auto& [name, make] : cases) {
    SCOPED_TRACE(name);
    Executable exe;
    {
      Graph g;
      const Dim A = g.symbol("A"), B = g.symbol("B");
      const Tensor x = g.input("x", {4, 4, A, 4});
      const Tensor y = g.input("y", {B, 4, A});
      g.output("v", make(x) * 1.0f);
      g.output("w", y.slice(0, 1, 2).slice(2, 1, 2) + 0.5f);  // y[1:2, :, 1:2]: A*4 + 1
      exe = g.compile();
    }
    for (int pass = 0; pass < 2; ++pass) {
      if (pass == 1) reload(exe, path);
      for (int64_t a : {2, 3, 7, 40})  // (at A = 1, A's slice 1:2 is empty: the graph's [.., 1] reads outside)
        for (int64_t b : {2, 5}) {
          const std::vector<float> xv = values(16 * a * 4, static_cast<uint32_t>(a)),
                                   yv = values(b * 4 * a, static_cast<uint32_t>(a + b));
          const Tensor lx = Tensor::from_blob(xv.data(), {4, 4, a, 4}), ly = Tensor::from_blob(yv.data(), {b, 4, a});
          const std::vector<float> want_v = (make(lx) * 1.0f).to_vector(),
                                   want_w = (ly.slice(0, 1, 2).slice(2, 1, 2) + 0.5f).to_vector();
          std::vector<float> v(want_v.size() + 4, -9.0f), w(want_w.size() + 4, -9.0f);
          exe.run({{"x", xv.data()}, {"y", yv.data()}}, {{"v", v.data()}, {"w", w.data()}}, {{"A", a}, {"B", b}});
          for (size_t i = 0; i < want_v.size(); ++i)
            ASSERT_EQ(std::bit_cast<uint32_t>(v[i]), std::bit_cast<uint32_t>(want_v[i])) << "A " << a << " B " << b;
          for (size_t i = 0; i < want_w.size(); ++i)
            ASSERT_EQ(std::bit_cast<uint32_t>(w[i]), std::bit_cast<uint32_t>(want_w[i])) << "A " << a << " B " << b;
          for (size_t i = want_v.size(); i < v.size(); ++i) ASSERT_EQ(v[i], -9.0f);
          for (size_t i = want_w.size(); i < w.size(); ++i) ASSERT_EQ(w[i], -9.0f);
          if (name == "x[3:4, :, :, 3:4]") {  // x[3, j / a, j % a, 3], by hand
            for (int64_t j = 0; j < 4 * a; ++j)
              ASSERT_EQ(v[static_cast<size_t>(j)],
                        xv[static_cast<size_t>(3 * 16 * a + (j / a) * 4 * a + (j % a) * 4 + 3)]);
          }
        }
    }
  }
}

// A slice or narrow keeps the length it was captured with, so a binding
// whose axis is too short for it is an error, even where the view it made
// reads inside its operand: one of an expanded axis (stride 0), one folded
// into a later narrow, and a slice whose end the lazy path would clamp.
// Bindings that fit run as the lazy path, before and after save and load.
TEST(Graph, SlicesPastTheirAxisAtABindingAreErrors) {
  using Make = std::function<Tensor(const Tensor&, int64_t)>;  // (x [1] or [S], S)
  struct Case {
    std::string name;
    bool expanded;  // x is [1], else [S]
    Make make;
    int64_t first_fit;  // the least S whose slice fits
  };
  const std::vector<Case> cases = {
      {"x.expand(2S).narrow(0, 1, 2)", true,
       [](const Tensor& x, int64_t s) { return x.expand({2 * s}).narrow(0, 1, 2); }, 2},
      {"x.narrow(0, 0, 3).narrow(0, 1, 1)", false,
       [](const Tensor& x, int64_t) { return x.narrow(0, 0, 3).narrow(0, 1, 1); }, 3},
      {"x.slice(0, 1, 5)", false, [](const Tensor& x, int64_t) { return x.slice(0, 1, 5); }, 5},
      {"x.expand(S, 3).narrow(0, 2, 2)", true,
       [](const Tensor& x, int64_t s) { return x.expand({s, 3}).narrow(0, 2, 2); }, 4},
  };
  const std::string path = ::testing::TempDir() + "dvm_slice_bounds.dvmx";
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Executable exe;
    {
      Graph g;
      const Dim S = g.symbol("S");
      const Tensor x = c.expanded ? g.input("x", {1}) : g.input("x", {S});
      g.output("y", relu(c.make(x, S)) * 2.0f);
      exe = g.compile();
    }
    for (int pass = 0; pass < 2; ++pass) {
      if (pass == 1) reload(exe, path);
      for (int64_t s = 1; s <= c.first_fit + 2; ++s) {
        const std::vector<float> xv = values(c.expanded ? 1 : s, static_cast<uint32_t>(s));
        const Tensor lx = Tensor::from_blob(xv.data(), {c.expanded ? 1 : s});
        if (s < c.first_fit) {
          expect_error(c.name + " at S = " + std::to_string(s),
                       [&] {
                         std::vector<float> y(64, -9.0f);
                         exe.run({{"x", xv.data()}}, {{"y", y.data()}}, {{"S", s}});
                       },
                       {"dvm::Executable::run", "S = " + std::to_string(s), "narrow) of axis 0", "outside"});
          expect_error(c.name + " memory", [&] { (void)exe.memory({{"S", s}}); }, {"dvm::Executable::memory"});
          continue;
        }
        expect_run_bits(exe, xv, relu(c.make(lx, s)) * 2.0f, s);
      }
    }
  }
}

// A squeeze keeps an axis of symbolic extent (the capture's number is not
// 1), so a binding of 1, where the lazy path would drop the axis and give
// another shape, is an error; larger ones run as the lazy path.
TEST(Graph, SqueezedSymbolicAxesNeedAnExtentAboveOne) {
  using Make = std::function<Tensor(const Tensor&)>;  // of x [S, 1, 3]
  const std::vector<std::pair<std::string, Make>> cases = {
      {"squeeze(0)", [](const Tensor& x) { return x.squeeze(0).sum(0); }},
      {"squeeze()", [](const Tensor& x) { return x.squeeze().sum(0); }},
      {"squeeze(1)", [](const Tensor& x) { return x.squeeze(1).sum(0); }},  // a constant 1: any S
  };
  const std::string path = ::testing::TempDir() + "dvm_squeeze_bounds.dvmx";
  for (const auto& [name, make] : cases) {
    SCOPED_TRACE(name);
    Executable exe;
    {
      Graph g;
      const Dim S = g.symbol("S");
      g.output("y", make(g.input("x", {S, 1, 3})) * 2.0f);
      exe = g.compile();
    }
    for (int pass = 0; pass < 2; ++pass) {
      if (pass == 1) reload(exe, path);
      for (int64_t s : {1, 2, 5}) {
        const std::vector<float> xv = values(s * 3, static_cast<uint32_t>(s));
        const Tensor lx = Tensor::from_blob(xv.data(), {s, 1, 3});
        if (s == 1 && name != "squeeze(1)") {
          expect_error(name + " at S = 1", [&] { (void)exe.shape("y", {{"S", 1}}); },
                       {"dvm::Executable::shape", "S = 1", "squeeze kept axis 0"});
          expect_error(name + " run at S = 1",
                       [&] {
                         std::vector<float> y(8, -9.0f);
                         exe.run({{"x", xv.data()}}, {{"y", y.data()}}, {{"S", 1}});
                       },
                       {"dvm::Executable::run", "S = 1", "squeeze kept axis 0"});
          continue;
        }
        const Tensor want = make(lx) * 2.0f;
        EXPECT_EQ(exe.shape("y", {{"S", s}}), want.shape()) << "S " << s;
        expect_run_bits(exe, xv, want, s);
      }
    }
  }
}

// tril of a matrix whose rows are a product of symbols: during the capture
// the extent stands far above 2^31 (6 * S * S with S's number), which the
// lazy path would refuse; each run fills its int32 indices at its own size.
TEST(Graph, TriangleOfAProductOfSymbolsCompiles) {
  Executable exe;
  {
    Graph g;
    const Dim S = g.symbol("S");
    g.output("y", tril(g.input("x", {S * S * 6, S}), 1) * 1.0f);
    exe = g.compile();
  }
  for (int64_t S : {1, 2, 5}) {
    const std::vector<float> xv = values(S * S * 6 * S, static_cast<uint32_t>(S));
    std::vector<float> y(static_cast<size_t>(S * S * 6 * S));
    exe.run({{"x", xv.data()}}, {{"y", y.data()}}, {{"S", S}});
    EXPECT_EQ(y, (tril(Tensor::from_blob(xv.data(), {S * S * 6, S}), 1) * 1.0f).to_vector()) << "S = " << S;
    for (int64_t r = 0; r < S * S * 6; ++r)
      for (int64_t c = 0; c < S; ++c)
        ASSERT_EQ(y[static_cast<size_t>(r * S + c)], c - r <= 1 ? xv[static_cast<size_t>(r * S + c)] : 0.0f);
  }
}

// A bool input may hold any nonzero byte for true; outputs that pass it
// through (itself, a reshape, a transpose) hold 0 or 1, as the lazy path's
// values do, in the run that rebuilds, in replays, and once loaded.
TEST(Graph, BoolOutputsPassedThroughHoldZerosAndOnes) {
  Executable exe;
  {
    Graph g;
    const Dim S = g.symbol("S");
    const Tensor m = g.input("m", {S, 3}, Dtype::Bool);
    g.output("same", m);
    g.output("flat", m.reshape({S * 3}));
    g.output("t", m.transpose(0, 1));
    exe = g.compile();
  }
  const std::string path = ::testing::TempDir() + "dvm_bool_outputs.dvmx";
  for (int pass = 0; pass < 3; ++pass) {
    if (pass == 2) reload(exe, path);
    for (int64_t s : {2, 5}) {
      std::vector<uint8_t> m(static_cast<size_t>(s * 3));
      for (size_t i = 0; i < m.size(); ++i) m[i] = static_cast<uint8_t>((i * 67 + 2) % 5 == 0 ? 0 : (i * 37) % 255 + 1);
      std::vector<uint8_t> same(m.size(), 9), flat(m.size(), 9), t(m.size(), 9);
      exe.run({{"m", m.data()}}, {{"same", same.data()}, {"flat", flat.data()}, {"t", t.data()}}, {{"S", s}});
      for (int64_t i = 0; i < s; ++i)
        for (int64_t j = 0; j < 3; ++j) {
          const uint8_t want = m[static_cast<size_t>(i * 3 + j)] != 0;
          ASSERT_EQ(same[static_cast<size_t>(i * 3 + j)], want) << "pass " << pass << " S " << s;
          ASSERT_EQ(flat[static_cast<size_t>(i * 3 + j)], want) << "pass " << pass << " S " << s;
          ASSERT_EQ(t[static_cast<size_t>(j * s + i)], want) << "pass " << pass << " S " << s;
        }
    }
  }
}

// Transposed int32 and int64 graph tensors made contiguous (contiguous,
// reshape, flatten) compile and give the lazy path's values, exact past
// 2^24 and 2^53.
TEST(Graph, IntegerViewsBecomeContiguous) {
  for (const Dtype t : {Dtype::I32, Dtype::I64}) {
    SCOPED_TRACE(dtype_name(t));
    Executable exe;
    {
      Graph g;
      const Dim S = g.symbol("S");
      const Tensor x = g.input("x", {S, 3}, t);
      g.output("c", x.transpose(0, 1).contiguous());
      g.output("f", x.transpose(0, 1).flatten());
      exe = g.compile();
    }
    for (int64_t s : {1, 4}) {
      std::vector<int64_t> v(static_cast<size_t>(s * 3));
      for (size_t i = 0; i < v.size(); ++i)
        v[i] = (t == Dtype::I32 ? (int64_t{1} << 24) : (int64_t{1} << 53)) + static_cast<int64_t>(i) * 7 + 1;
      std::vector<int32_t> v32(v.begin(), v.end());
      const void* in = t == Dtype::I32 ? static_cast<const void*>(v32.data()) : static_cast<const void*>(v.data());
      std::vector<int64_t> c(v.size()), f(v.size());
      std::vector<int32_t> c32(v.size()), f32(v.size());
      void* oc = t == Dtype::I32 ? static_cast<void*>(c32.data()) : static_cast<void*>(c.data());
      void* of = t == Dtype::I32 ? static_cast<void*>(f32.data()) : static_cast<void*>(f.data());
      exe.run({{"x", in}}, {{"c", oc}, {"f", of}}, {{"S", s}});
      if (t == Dtype::I32) {
        c.assign(c32.begin(), c32.end());
        f.assign(f32.begin(), f32.end());
      }
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t i = 0; i < s; ++i) {
          ASSERT_EQ(c[static_cast<size_t>(j * s + i)], v[static_cast<size_t>(i * 3 + j)]) << "S " << s;
          ASSERT_EQ(f[static_cast<size_t>(j * s + i)], v[static_cast<size_t>(i * 3 + j)]) << "S " << s;
        }
    }
  }
}

// An arange of symbolic length whose last value its type cannot hold at a
// binding is that binding's error (run and memory name it), as the lazy
// path's arange is; the capture judges only the start (its number for S is
// no value of the user's), so arange(0, 2S, 2) in float16 compiles.
TEST(Graph, RangesPastTheirTypeAreErrorsAtTheBinding) {
  struct Case {
    Dtype type;
    double step;
    int64_t fits, too_far;  // a binding of S that fits, one that does not
  };
  for (const Case c : {Case{Dtype::F16, 1.0, 60000, 70000}, Case{Dtype::F16, 2.0, 30000, 40000},
                       Case{Dtype::U8, 1.0, 256, 257}, Case{Dtype::I32, 1.0, 1000, 1000}}) {
    SCOPED_TRACE(std::string(dtype_name(c.type)) + " step " + std::to_string(c.step));
    Executable exe;
    {
      Graph g;
      const Dim S = g.symbol("S");
      const Tensor r = Tensor::arange(0.0, c.step * static_cast<double>(S), c.step, c.type);
      g.output("y", g.input("x", {S}) + r.to(Dtype::F32));
      exe = g.compile();
    }
    for (const int64_t s : {c.fits, c.too_far}) {
      std::vector<float> x(static_cast<size_t>(s), 0.5f), y(static_cast<size_t>(s));
      const bool fits = s == c.fits || c.type == Dtype::I32;
      if (!fits) {
        expect_error("run at S = " + std::to_string(s),
                     [&] { exe.run({{"x", x.data()}}, {{"y", y.data()}}, {{"S", s}}); },
                     {"dvm::Executable::run", "S = " + std::to_string(s), "arange", dtype_name(c.type)});
        expect_error("memory at S = " + std::to_string(s), [&] { (void)exe.memory({{"S", s}}); },
                     {"dvm::Executable::memory", "arange", dtype_name(c.type)});
        continue;
      }
      exe.run({{"x", x.data()}}, {{"y", y.data()}}, {{"S", s}});
      const std::vector<float> want =
          (Tensor::from_blob(x.data(), {s}) +
           Tensor::arange(0.0, c.step * static_cast<double>(s), c.step, c.type).to(Dtype::F32))
              .to_vector();
      ASSERT_EQ(y, want) << "S " << s;
    }
  }
}

TEST(Graph, RangesOfSymbolicLengthAreFilledPerRun) {
  Executable exe;
  {
    Graph g;
    const Dim B = g.symbol("B"), S = g.symbol("S");
    const Tensor q = g.input("q", {B, 2, S, 8}), k = g.input("k", {B, 2, S, 8}), v = g.input("v", {B, 2, S, 8});
    const Tensor m = g.input("m", {S, S});
    const std::vector<Tensor> outs = ranges_model(q, k, v, m, S);
    for (size_t i = 0; i < outs.size(); ++i) g.output(port_name(i), outs[i]);
    exe = g.compile();
  }
  EXPECT_EQ(exe.dtype("o2"), Dtype::I64);
  const std::string path = ::testing::TempDir() + "dvm_ranges.dvmx";
  auto check = [&](const Executable& e, int64_t B, int64_t S, const std::string& at) {
    const std::vector<float> qv = values(B * 2 * S * 8, 1), kv = values(B * 2 * S * 8, 2), vv = values(B * 2 * S * 8, 3),
                             mv = values(S * S, 4);
    const auto T = [](const std::vector<float>& d, Shape s) { return Tensor::from_blob(d.data(), std::move(s)); };
    const std::vector<Tensor> lazy = ranges_model(T(qv, {B, 2, S, 8}), T(kv, {B, 2, S, 8}), T(vv, {B, 2, S, 8}),
                                                  T(mv, {S, S}), S);
    std::vector<std::vector<char>> got;
    GraphOutputs out;
    for (size_t o = 0; o < lazy.size(); ++o) {
      got.emplace_back(static_cast<size_t>(lazy[o].numel()) * dtype_size(lazy[o].dtype()) + 16, '\x5a');
      out.emplace_back(port_name(o), got.back().data());
    }
    e.run({{"q", qv.data()}, {"k", kv.data()}, {"v", vv.data()}, {"m", mv.data()}}, out, {{"B", B}, {"S", S}});
    for (size_t o = 0; o < lazy.size(); ++o) {
      const size_t bytes = got[o].size() - 16;
      std::vector<char> want(bytes);
      const void* w = lazy[o].dtype() == Dtype::I64 ? static_cast<const void*>(lazy[o].data<int64_t>())
                      : lazy[o].dtype() == Dtype::I32 ? static_cast<const void*>(lazy[o].data<int32_t>())
                                                       : static_cast<const void*>(lazy[o].data());
      std::memcpy(want.data(), w, bytes);
      EXPECT_EQ(std::memcmp(got[o].data(), want.data(), bytes), 0) << at << " output " << o;
      for (size_t i = bytes; i < got[o].size(); ++i) ASSERT_EQ(got[o][i], '\x5a') << at << " output " << o;
    }
  };
  for (int twice = 0; twice < 2; ++twice) {
    const int64_t replays = graph::program_stats().replays;
    for (const auto& [B, S] : std::vector<std::pair<int64_t, int64_t>>{{2, 5}, {1, 9}, {3, 1}, {2, 2}, {1, 33}})
      check(exe, B, S, "run " + std::to_string(twice) + " B " + std::to_string(B) + " S " + std::to_string(S));
    if (twice == 1) {
      EXPECT_EQ(graph::program_stats().replays, replays + 5) << "the second pass replays every binding";
    }
  }
  exe.save(path);
  const Executable loaded = Executable::load(path);
  std::remove(path.c_str());
  for (const auto& [B, S] : std::vector<std::pair<int64_t, int64_t>>{{2, 5}, {1, 9}, {3, 1}, {2, 2}, {4, 17}})
    check(loaded, B, S, "loaded B " + std::to_string(B) + " S " + std::to_string(S));
}

// A view of a constant whose extents are symbols (the position rows of a
// sequence, wpe.narrow(0, 0, S)) is made by each run at its extents, and
// checked against the constant's bounds: of a leaf, and of an op's result
// computed before the graph (a weight scaled or converted first).
TEST(Graph, ViewsOfConstantsWithSymbolicExtents) {
  // A leaf, a value computed before the graph, and a contiguous view of a
  // leaf's values (arange(n).reshape() is one).
  for (const int kind : {0, 1, 2}) {
    SCOPED_TRACE(kind == 0 ? "a leaf" : kind == 1 ? "computed before the graph" : "a view of a leaf");
    const Tensor wpe = kind == 1   ? Tensor::normal({40, 8}, 9) * 0.5f + 0.25f
                       : kind == 0 ? Tensor::normal({40, 8}, 9)
                                   : Tensor::normal({320}, 9).reshape({40, 8});
    wpe.sync();
    auto model = [&](const Tensor& x, int64_t S) {
      return std::vector<Tensor>{x + wpe.narrow(0, 0, S), wpe.narrow(0, 3, S).transpose(0, 1) * 2.0f,
                                 wpe.narrow(0, 1, S)};
    };
    Executable exe;
    {
      Graph g;
      const Dim S = g.symbol("S");
      const std::vector<Tensor> outs = model(g.input("x", {S, 8}), S);
      for (size_t i = 0; i < outs.size(); ++i) g.output(port_name(i), outs[i]);
      exe = g.compile();
    }
    const std::string path = ::testing::TempDir() + "dvm_const_views.dvmx";
    for (int pass = 0; pass < 3; ++pass) {
      if (pass == 2) reload(exe, path);
      const int64_t replays = graph::program_stats().replays;
      for (int64_t S : {5, 1, 37, 12}) {
        const std::vector<float> xv = values(S * 8, static_cast<uint32_t>(S));
        const std::vector<Tensor> lazy = model(Tensor::from_blob(xv.data(), {S, 8}), S);
        std::vector<std::vector<float>> got(lazy.size(), std::vector<float>(static_cast<size_t>(S * 8) + 4, -5.0f));
        exe.run({{"x", xv.data()}}, {{"o0", got[0].data()}, {"o1", got[1].data()}, {"o2", got[2].data()}}, {{"S", S}});
        for (size_t o = 0; o < lazy.size(); ++o) {
          const std::vector<float> want = lazy[o].to_vector();
          for (size_t i = 0; i < want.size(); ++i)
            ASSERT_EQ(std::bit_cast<uint32_t>(got[o][i]), std::bit_cast<uint32_t>(want[i])) << "S " << S << " output " << o;
          for (size_t i = want.size(); i < got[o].size(); ++i) ASSERT_EQ(got[o][i], -5.0f) << "S " << S;
        }
      }
      if (pass > 0) {
        EXPECT_EQ(graph::program_stats().replays, replays + 4) << "pass " << pass << " replays every binding";
      }
      std::vector<float> x(38 * 8), y(38 * 8 + 4, -5.0f), y1(y), y2(y);
      expect_error("past the constant", [&] {
        exe.run({{"x", x.data()}}, {{"o0", y.data()}, {"o1", y1.data()}, {"o2", y2.data()}}, {{"S", 38}});
      }, {"S = 38", "outside"});
      EXPECT_EQ(y[0], -5.0f);
      expect_error("memory past the constant", [&] { (void)exe.memory({{"S", 38}}); },
                   {"dvm::Executable::memory at S = 38", "outside"});
    }
  }
}

// Symbol deduction: extents proven equal as products of symbols (B * S read
// back from a reshape of a flat input, in another order) fuse as equal
// extents at every binding, one kernel; extents that are only equal by
// value at some binding (B and S) are different extents of the graph.
TEST(Graph, FusionDecidedFromSymbolicRelations) {
  auto model = [](const Tensor& a, const Tensor& b, const Tensor& c, int64_t B, int64_t S) {
    return tanh(a.reshape({B, S, 8}) + b) * 2.0f - c.reshape({S, B, 8}).transpose(0, 1);
  };
  Executable exe;
  {
    Graph g;
    const Dim B = g.symbol("B"), S = g.symbol("S");
    const Tensor a = g.input("a", {B * S, 8}), b = g.input("b", {B, S, 8}), c = g.input("c", {S * B * 8});
    g.output("y", model(a, b, c, B, S));
    exe = g.compile();
  }
  for (const auto& [B, S] : std::vector<std::pair<int64_t, int64_t>>{{3, 5}, {4, 4}, {7, 2}, {6, 6}, {2, 9}}) {
    const std::vector<float> av = values(B * S * 8, 1), bv = values(B * S * 8, 2), cv = values(B * S * 8, 3);
    std::vector<float> y(static_cast<size_t>(B * S * 8));
    for (int twice = 0; twice < 2; ++twice) {
      const int64_t ran = stats().kernels_run;
      exe.run({{"a", av.data()}, {"b", bv.data()}, {"c", cv.data()}}, {{"y", y.data()}}, {{"B", B}, {"S", S}});
      EXPECT_EQ(stats().kernels_run - ran, 1) << "B " << B << " S " << S << ": one fused kernel";
    }
    const std::vector<float> want = model(Tensor::from_blob(av.data(), {B * S, 8}), Tensor::from_blob(bv.data(), {B, S, 8}),
                                          Tensor::from_blob(cv.data(), {S * B * 8}), B, S)
                                        .to_vector();
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(y[i]), std::bit_cast<uint32_t>(want[i])) << "B " << B << " S " << S;
  }
  // B and S are different extents even where a binding makes them equal.
  Graph g;
  const Dim B = g.symbol("B"), S = g.symbol("S");
  const Tensor a = g.input("a", {B, 8}), b = g.input("b", {S, 8});
  expect_error("B + S", [&] { (void)(a + b); }, {"broadcast"});
}

// Extents that models use (powers of two, round numbers, vocabulary sizes)
// are constants, never taken for sums of symbols; S - 1 and 2 * S + 3 are.
TEST(Graph, ConstantExtentsAreNotTakenForSums) {
  for (int64_t c : {16384, 32768, 65536, 50257, 32000, 128256, 151936, 40000, 100000}) {
    Executable exe;
    {
      Graph g;
      const Dim S = g.symbol("S");
      const Tensor x = g.input("x", {S, c}, Dtype::U8);
      g.output("y", x.reshape({S * c}).narrow(0, 0, c));  // a constant extent next to S * c
      exe = g.compile();
    }
    EXPECT_EQ(exe.shape("y", {{"S", 3}}), (Shape{c})) << c;
    std::vector<uint8_t> in(static_cast<size_t>(2 * c), 5), out(static_cast<size_t>(c), 0);
    exe.run({{"x", in.data()}}, {{"y", out.data()}}, {{"S", 2}});
    EXPECT_EQ(out, std::vector<uint8_t>(static_cast<size_t>(c), 5)) << c;
  }
  for (int k : {1, 2, 3}) {
    Graph g;
    const Dim S = g.symbol("S"), B = g.symbol("B");
    const Tensor x = g.input("x", {B * S, 2});
    const int64_t n = k == 1 ? S - 1 : k == 2 ? 2 * S + 3 : B * S - 7;
    g.output("y", x.narrow(0, 0, n));
    expect_error("a sum", [&] { (void)g.compile(); }, {"not a product of the graph's symbols"});
  }
  // A constant within 16 of a multiple of a symbol's number cannot be told
  // from a sum: refused, naming the symbol and its number.
  for (int64_t c : {int64_t{40030}, int64_t{40047}, 2 * int64_t{40031} + 5}) {
    Graph g;
    const Dim S = g.symbol("S");
    expect_error("a constant next to S's number", [&] { (void)g.input("x", {S, c}); },
                 {"'x'", std::to_string(c), "40031", "S stands for"});
    const Tensor x = g.input("x", {S, 4});
    const Tensor w = Tensor::zeros({c, 4});
    g.output("y", linear(x, w));
    expect_error("a weight next to S's number", [&] { (void)g.compile(); },
                 {std::to_string(c), "40031", "S stands for"});
  }
}

TEST(Graph, GraphTensorsHaveNoValuesAfterCompile) {
  Tensor kept;
  Executable exe;
  {
    Graph g;
    const Dim N = g.symbol("N");
    kept = g.input("x", {N}) * 3.0f;
    g.output("y", kept);
    exe = g.compile();
    expect_error("compile twice", [&] { (void)g.compile(); }, {"already compiled"});
  }
  // Its shape still holds the number the capture stood in for N; the
  // message says which.
  const std::string stand_in = std::to_string(kept.shape()[0]);
  expect_error("read a graph tensor", [&] { (void)kept.to_vector(); },
               {"Graph", "no values", "[" + stand_in + "]", "N stood for " + stand_in});
  expect_error("use a graph tensor", [&] { (void)(kept + 1.0f); }, {"Graph", "no values"});
  std::vector<float> x = {1, 2}, y(2);
  exe.run({{"x", x.data()}}, {{"y", y.data()}}, {{"N", 2}});
  EXPECT_EQ(y, (std::vector<float>{3.0f, 6.0f}));
}

TEST(Graph, RunErrorsNameTheProblemAndWriteNothing) {
  Executable exe;
  {
    Graph g;
    const Dim N = g.symbol("N");
    g.output("y", g.input("x", {N, 2}) + 1.0f);
    exe = g.compile();
  }
  std::vector<float> x(8, 1.0f), y(8, 7.0f);
  const GraphInputs in = {{"x", x.data()}};
  const GraphOutputs out = {{"y", y.data()}};
  expect_error("unbound", [&] { exe.run(in, out, {}); }, {"symbol 'N' is not bound"});
  expect_error("unknown symbol", [&] { exe.run(in, out, {{"N", 2}, {"M", 1}}); }, {"'M' is not a symbol"});
  expect_error("twice", [&] { exe.run(in, out, {{"N", 2}, {"N", 3}}); }, {"'N' is bound twice"});
  expect_error("zero", [&] { exe.run(in, out, {{"N", 0}}); }, {"'N' is bound to 0", "at least 1"});
  expect_error("negative", [&] { exe.run(in, out, {{"N", -4}}); }, {"'N' is bound to -4"});
  expect_error("overflow", [&] { exe.run(in, out, {{"N", int64_t{1} << 62}}); }, {"N = 4611686018427387904"});
  expect_error("missing input", [&] { exe.run({}, out, {{"N", 2}}); }, {"input 'x' is not given"});
  expect_error("unknown input", [&] { exe.run({{"x", x.data()}, {"q", x.data()}}, out, {{"N", 2}}); },
               {"'q' is not an input"});
  expect_error("null input", [&] { exe.run({{"x", nullptr}}, out, {{"N", 2}}); }, {"input 'x' is a null pointer"});
  expect_error("missing output", [&] { exe.run(in, {}, {{"N", 2}}); }, {"output 'y' is not given"});
  expect_error("unknown output", [&] { exe.run(in, {{"y", y.data()}, {"w", y.data()}}, {{"N", 2}}); },
               {"'w' is not an output"});
  expect_error("shape of nothing", [&] { (void)exe.shape("q", {{"N", 2}}); }, {"'q' is neither"});
  expect_error("shape overflow", [&] { (void)exe.shape("y", {{"N", int64_t{1} << 62}}); },
               {"dvm::Executable::shape", "N = 4611686018427387904"});
  for (float v : y) EXPECT_EQ(v, 7.0f);
  // Two outputs at a binding whose element counts overflow: the extents are
  // the error, not an overlap of the outputs' (unbounded) byte ranges.
  {
    Graph g;
    const Dim B = g.symbol("B"), S = g.symbol("S");
    const Tensor a = g.input("a", {B, S});
    g.output("p", a + 1.0f);
    g.output("q", a * 2.0f);
    const Executable two = g.compile();
    std::vector<float> p(8, 7.0f), q(8, 7.0f);
    for (const auto& [b, sv] : std::vector<std::pair<int64_t, int64_t>>{{int64_t{1} << 40, int64_t{1} << 30},
                                                                         {INT64_MAX / 2, 3}})
      expect_error("counts that overflow", [&] {
        two.run({{"a", x.data()}}, {{"p", p.data()}, {"q", q.data()}}, {{"B", b}, {"S", sv}});
      }, {"too many elements", "B = " + std::to_string(b)});
    for (float v : p) EXPECT_EQ(v, 7.0f);
  }
  Executable moved = std::move(exe);
  expect_error("moved from", [&] { exe.run(in, out, {{"N", 2}}); }, {"empty executable"});
  moved.run(in, out, {{"N", 4}});
  for (float v : y) EXPECT_EQ(v, 2.0f);
}

}  // namespace
}  // namespace dvm::testing
