// cat, stack and KVCache: writes into slices of a dvm-owned buffer, checked
// against a host-side concatenation of the pieces' values on every target.
#include <map>

#include "tests/tracer/int_testing.h"
#include "dvm/runtime.h"

namespace dvm::testing {
namespace {

class Joining : public IsaTest {};

// Index of the element at multi-index idx in a row-major shape.
int64_t flat(const Shape& s, const std::vector<int64_t>& idx) {
  int64_t f = 0;
  for (int k = 0; k < s.rank(); ++k) f = f * s[k] + idx[static_cast<size_t>(k)];
  return f;
}

// Host concatenation of row-major pieces (values as doubles) along axis.
std::vector<double> cat_reference(const std::vector<std::vector<double>>& v, const std::vector<Shape>& shapes,
                                  int axis, Shape* out_shape) {
  Shape out = shapes[0];
  out[axis] = 0;
  for (const Shape& s : shapes) out[axis] += s[axis];
  std::vector<double> r(static_cast<size_t>(out.numel()));
  int64_t at = 0;
  for (size_t p = 0; p < v.size(); ++p) {
    const Shape& s = shapes[p];
    std::vector<int64_t> idx(static_cast<size_t>(s.rank()), 0);
    for (int64_t i = 0; i < s.numel(); ++i) {
      int64_t rem = i;
      for (int k = s.rank() - 1; k >= 0; --k) {
        idx[static_cast<size_t>(k)] = rem % s[k];
        rem /= s[k];
      }
      std::vector<int64_t> o = idx;
      o[static_cast<size_t>(axis)] += at;
      r[static_cast<size_t>(flat(out, o))] = v[p][static_cast<size_t>(i)];
    }
    at += s[axis];
  }
  *out_shape = out;
  return r;
}

// A tensor of type t holding small integers (exact in every type), made
// one of several ways, and the values it holds.
struct Piece {
  Tensor t;
  std::vector<double> values;
};
Piece make_piece(Dtype t, const Shape& s, std::mt19937& rng) {
  const int64_t n = s.numel();
  std::vector<int64_t> v(static_cast<size_t>(n));
  const bool boolean = t == Dtype::Bool;
  for (int64_t& e : v) e = boolean ? static_cast<int64_t>(rng() % 2) : static_cast<int64_t>(rng() % 41) - 20;
  if (t == Dtype::U8)
    for (int64_t& e : v) e = e < 0 ? -e : e;
  Piece p;
  const int how = static_cast<int>(rng() % 4);
  auto make_of = [&](const std::vector<int64_t>& x, const Shape& shape) {
    if (t == Dtype::F32 || t == Dtype::F16 || t == Dtype::BF16) {
      std::vector<float> f(x.begin(), x.end());
      return Tensor::from_vector(f, shape).to(t);
    }
    return make(t, x, shape);
  };
  if (how == 1 && s.rank() >= 2) {
    // A transposed view: stored with its last two axes swapped.
    const int r = s.rank();
    Shape ts = s;
    std::swap(ts[r - 1], ts[r - 2]);
    std::vector<int64_t> tv(static_cast<size_t>(n));
    const int64_t R = s[r - 2], C = s[r - 1], B = n / std::max<int64_t>(R * C, 1);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < R; ++i)
        for (int64_t j = 0; j < C; ++j) tv[static_cast<size_t>(b * R * C + j * R + i)] = v[static_cast<size_t>(b * R * C + i * C + j)];
    p.t = make_of(tv, ts).transpose(r - 1, r - 2);
  } else if (how == 2 && !boolean) {
    // A computed value: the write reads a fused op's stored result.
    std::vector<int64_t> half(v.size());
    for (size_t i = 0; i < v.size(); ++i) half[i] = v[i] / 2;
    const Tensor h = make_of(half, s);
    std::vector<int64_t> rest(v.size());
    for (size_t i = 0; i < v.size(); ++i) rest[i] = v[i] - 2 * half[i];
    p.t = h + h + make_of(rest, s);
  } else if (how == 3 && !boolean && t == Dtype::F32) {
    const float c = static_cast<float>(static_cast<int>(rng() % 9) - 4);
    for (int64_t& e : v) e = static_cast<int64_t>(c);
    p.t = Tensor::full(s, c);
  } else {
    p.t = make_of(v, s);
  }
  p.values.assign(v.begin(), v.end());
  return p;
}

std::vector<double> read_as_double(const Tensor& y) {
  std::vector<double> out;
  if (is_floating(y.dtype())) {
    for (float f : y.to_vector()) out.push_back(f);
  } else {
    for (int64_t e : read(y)) out.push_back(static_cast<double>(e));
  }
  return out;
}

TEST_P(Joining, CatOfGeneratedPiecesMatchesTheConcatenation) {
  std::mt19937 rng(7);
  const Dtype types[] = {Dtype::F32, Dtype::F16, Dtype::BF16, Dtype::I32, Dtype::I64, Dtype::U8, Dtype::Bool};
  for (int iter = 0; iter < 150; ++iter) {
    const int rank = 1 + static_cast<int>(rng() % 4);
    Shape base;
    for (int k = 0; k < rank; ++k) base.push_back(1 + static_cast<int64_t>(rng() % (rank <= 2 ? 40 : 7)));
    const int axis = static_cast<int>(rng() % static_cast<unsigned>(rank));
    const int npieces = 1 + static_cast<int>(rng() % 4);
    const Dtype t0 = types[rng() % std::size(types)];
    const Dtype t1 = rng() % 3 == 0 ? types[rng() % std::size(types)] : t0;
    std::vector<Tensor> ts;
    std::vector<std::vector<double>> vals;
    std::vector<Shape> shapes;
    Dtype want = t0;
    for (int p = 0; p < npieces; ++p) {
      Shape s = base;
      s[axis] = static_cast<int64_t>(rng() % 6);  // zero extents too
      const Dtype t = p % 2 ? t1 : t0;
      want = promote_types(want, t);
      Piece pc = make_piece(t, s, rng);
      ts.push_back(pc.t);
      vals.push_back(pc.values);
      shapes.push_back(s);
    }
    const int asked = rng() % 2 ? axis : axis - rank;  // negative axes count from the end
    Shape out_shape;
    std::vector<double> ref = cat_reference(vals, shapes, axis, &out_shape);
    if (want == Dtype::Bool)
      for (double& d : ref) d = d != 0;
    const Tensor y = dvm::cat(ts, asked);
    SCOPED_TRACE("iteration " + std::to_string(iter) + ": cat of " + std::to_string(npieces) + " pieces along axis " +
                 std::to_string(axis) + " into " + out_shape.to_string());
    ASSERT_EQ(y.shape(), out_shape);
    ASSERT_EQ(y.dtype(), want);
    const std::vector<double> got = read_as_double(y);
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(got[i], ref[i]) << "element " << i;
  }
}

TEST_P(Joining, CatReadByLaterOpsAndStackedAlongEveryAxis) {
  std::mt19937 rng(11);
  for (int iter = 0; iter < 40; ++iter) {
    const int64_t R = 1 + static_cast<int64_t>(rng() % 9), C = 1 + static_cast<int64_t>(rng() % 70);
    const int n = 1 + static_cast<int>(rng() % 4);
    std::vector<Tensor> ts;
    std::vector<std::vector<float>> host;
    for (int p = 0; p < n; ++p) {
      std::vector<float> v(static_cast<size_t>(R * C));
      for (float& e : v) e = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 64.0f;
      host.push_back(v);
      ts.push_back(Tensor::from_vector(v, Shape{R, C}));
    }
    const int axis = static_cast<int>(rng() % 3);
    // stack along axis, then an op that reads the result (a fused consumer).
    const Tensor s = dvm::stack(ts, axis);
    const Tensor y = s * 2.0f + 1.0f;
    Shape want;
    for (int k = 0, j = 0; k < 3; ++k) want.push_back(k == axis ? n : (j++ == 0 ? R : C));
    ASSERT_EQ(y.shape(), want);
    const std::vector<float> got = y.to_vector();
    for (int p = 0; p < n; ++p)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t c = 0; c < C; ++c) {
          std::vector<int64_t> idx = {r, c};
          idx.insert(idx.begin() + axis, p);
          const float expect = host[static_cast<size_t>(p)][static_cast<size_t>(r * C + c)] * 2.0f + 1.0f;
          ASSERT_EQ(got[static_cast<size_t>(flat(want, idx))], expect) << "stack axis " << axis;
        }
  }
}

// stack along a new last axis interleaves its pieces: one write kernel
// stores every piece, each strided along C (STS) over the piece's
// elements. Generated pieces (1 to 6 of them, extents 1, odd and longer
// than a vector, made several ways, several types): exact values, and one
// elementwise kernel on the target's tier.
TEST_P(Joining, StackAlongANewLastAxisOfGeneratedPieces) {
  std::mt19937 rng(23);
  const Dtype types[] = {Dtype::F32, Dtype::F16, Dtype::I32, Dtype::U8, Dtype::BF16, Dtype::Bool, Dtype::I64};
  for (int iter = 0; iter < 60; ++iter) {
    const int rank = 1 + static_cast<int>(rng() % 3);
    Shape s;
    for (int k = 0; k < rank; ++k) {
      const int64_t pick[] = {1, 2, 3, 5, 7, 16, 17, 33, 1 + static_cast<int64_t>(rng() % 90)};
      s.push_back(pick[rng() % std::size(pick)]);
    }
    const int npieces = 1 + iter % 6;
    const Dtype t = types[static_cast<size_t>(iter / 6) % std::size(types)];
    std::vector<Tensor> ts;
    std::vector<std::vector<double>> vals;
    std::vector<Shape> shapes;
    Shape one = s;
    one.push_back(1);
    for (int p = 0; p < npieces; ++p) {
      Piece pc = make_piece(t, s, rng);
      pc.t.sync();
      ts.push_back(pc.t);
      vals.push_back(pc.values);
      shapes.push_back(one);
    }
    Shape out_shape;
    const std::vector<double> ref = cat_reference(vals, shapes, rank, &out_shape);
    SCOPED_TRACE("iteration " + std::to_string(iter) + ": stack of " + std::to_string(npieces) + " " +
                 dtype_name(t) + " pieces " + s.to_string());
    set_kernel_log(true);
    const Tensor y = dvm::stack(ts, iter % 2 ? rank : -1);
    y.sync();
    const std::vector<KernelRun> log = take_kernel_log();
    set_kernel_log(false);
    ASSERT_EQ(y.shape(), out_shape);
    if (npieces > 1) {
      ASSERT_EQ(log.size(), 1u) << "one write kernel for every piece";
      // int64 copies move int64 lanes, which the JIT declines (docs/JIT.md).
      const bool interp = GetParam().tier == TierMode::Off || t == Dtype::I64;
      for (const KernelRun& k : log) {
        EXPECT_EQ(k.form, "elementwise");
        EXPECT_EQ(k.tier, interp ? "interp" : "jit");
      }
    }
    const std::vector<double> got = read_as_double(y);
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(got[i], ref[i]) << "element " << i;
  }
}

// Many pieces still pending, each read through a view (stack makes one;
// unsqueeze, a transpose, a slice for cat): one write group holds more
// arguments than a kernel takes, so it is split, after earlier launches
// resolved some of the views. Generated counts past 32 pieces, exact
// values against the pieces' own.
TEST_P(Joining, ManyPendingPiecesReadThroughViews) {
  std::mt19937 rng(61);
  for (int iter = 0; iter < 12; ++iter) {
    const int n = 30 + static_cast<int>(rng() % 80);
    const int kind = iter % 4;  // 0 stack, 1 cat of unsqueeze, 2 cat of transposes, 3 cat of step slices
    std::vector<Tensor> ps;
    std::vector<std::vector<float>> want;
    for (int i = 0; i < n; ++i) {
      std::vector<float> v(12);
      for (float& f : v) f = static_cast<float>(static_cast<int>(rng() % 1000) - 500);
      const Tensor x = Tensor::from_vector(v, {3, 4});
      const Tensor p = x + x;  // pending
      std::vector<float> w(12);
      for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 4; ++c) w[static_cast<size_t>(r * 4 + c)] = 2 * v[static_cast<size_t>(r * 4 + c)];
      if (kind == 2) {  // [4, 3]
        std::vector<float> t(12);
        for (int r = 0; r < 3; ++r)
          for (int c = 0; c < 4; ++c) t[static_cast<size_t>(c * 3 + r)] = w[static_cast<size_t>(r * 4 + c)];
        w = t;
      } else if (kind == 3) {  // columns 0 and 2: [3, 2]
        w = {w[0], w[2], w[4], w[6], w[8], w[10]};
      }
      want.push_back(w);
      ps.push_back(kind == 0 ? p : kind == 1 ? p.unsqueeze(0) : kind == 2 ? p.transpose(0, 1) : p.slice(1, 0, 4, 2));
    }
    const Tensor y = kind == 0 ? dvm::stack(ps, 0) : cat(ps, 0);
    const std::vector<float> got = y.to_vector();
    std::vector<float> expect;
    for (const auto& w : want) expect.insert(expect.end(), w.begin(), w.end());
    ASSERT_EQ(got, expect) << "kind " << kind << ", " << n << " pieces";
  }
}

TEST_P(Joining, CacheAppendsMatchTheRowsSoFarAndOldResultsStay) {
  std::mt19937 rng(5);
  for (int axis : {0, 1, 2}) {
    const int64_t cap = 37;
    Shape full{2, 3, 5};
    full[axis] = cap;
    KVCache cache(full, axis);
    std::vector<std::vector<double>> pieces;
    std::vector<Shape> shapes;
    std::vector<std::pair<Tensor, std::vector<double>>> kept;  // earlier results and their values
    while (cache.size() < cap) {
      Shape s = full;
      s[axis] = std::min<int64_t>(cap - cache.size(), 1 + static_cast<int64_t>(rng() % 6));
      std::vector<float> v(static_cast<size_t>(s.numel()));
      for (float& e : v) e = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 8.0f;
      // Computed rows: a scale and a permuted view the write reads.
      std::vector<float> half(v.size());
      for (size_t i = 0; i < v.size(); ++i) half[i] = v[i] / 2.0f;
      const Tensor rows = Tensor::from_vector(half, s) * 2.0f;
      const Tensor all = cache.append(rows);
      pieces.emplace_back(v.begin(), v.end());
      shapes.push_back(s);
      Shape ref_shape;
      const std::vector<double> ref = cat_reference(pieces, shapes, axis, &ref_shape);
      ASSERT_EQ(all.shape(), ref_shape);
      ASSERT_EQ(cache.size(), ref_shape[axis]);
      if (rng() % 2) {
        const std::vector<double> got = read_as_double(all);
        ASSERT_EQ(got, ref) << "axis " << axis << " size " << cache.size();
      }
      kept.emplace_back(all, ref);
    }
    for (const auto& [t, ref] : kept) EXPECT_EQ(read_as_double(t), ref) << "an earlier result changed";
    const Tensor more = Tensor::zeros(shapes[0]);
    more.sync();
    expect_error("append past the capacity", [&] { (void)cache.append(more); },
                 {"KVCache::append", "capacity 37"});
    // clear() while earlier results live: they keep their values.
    cache.clear();
    EXPECT_EQ(cache.size(), 0);
    EXPECT_EQ(cache.values().shape()[axis], 0);
    Shape s = full;
    s[axis] = cap;
    const Tensor refill = cache.append(Tensor::full(s, -3.0f));
    for (float e : refill.to_vector()) ASSERT_EQ(e, -3.0f);
    for (const auto& [t, ref] : kept) EXPECT_EQ(read_as_double(t), ref) << "clear() wrote over a live result";
  }
}

TEST_P(Joining, CacheWritesInPlaceAndReplaysDecodeSteps) {
  // Axis 0: the rows so far are a contiguous prefix of the buffer, so
  // data() shows where they live.
  KVCache cache(Shape{64, 8}, 0);
  const float* where = nullptr;
  Stats after_second{};
  for (int step = 0; step < 20; ++step) {
    const Tensor rows = Tensor::full(Shape{step == 0 ? 5 : 1, 8}, static_cast<float>(step)) + 0.5f;
    const Tensor all = cache.append(rows);
    const float* p = all.data();
    if (step == 0) where = p;
    EXPECT_EQ(p, where) << "step " << step << ": the rows moved (a copy)";
    EXPECT_EQ(all.to_vector()[static_cast<size_t>((all.size(0) - 1) * 8)], static_cast<float>(step) + 0.5f);
    if (step == 2) after_second = dvm::stats();
  }
  const Stats end = dvm::stats();
  EXPECT_EQ(end.kernels_compiled, after_second.kernels_compiled) << "decode steps compiled new kernels";
  // Nothing else sees the buffer: clear() keeps it.
  cache.clear();
  const Tensor again = cache.append(Tensor::full(Shape{3, 8}, 1.0f));
  EXPECT_EQ(again.data(), where);
}

TEST_P(Joining, CacheRefilledAfterClearIsReadFreshByProducts) {
  // A one-row product reads the cached keys by columns; the second read
  // keeps a row-major copy of them (tracer/row_copies.h), which clear()
  // must drop when the buffer is reused.
  const int64_t n = 64, d = 64;
  KVCache keys(Shape{n, d}, 0);
  std::vector<float> q(static_cast<size_t>(d));
  for (int64_t i = 0; i < d; ++i) q[static_cast<size_t>(i)] = static_cast<float>(i % 7) - 3.0f;
  const Tensor query = Tensor::from_vector(q, Shape{1, d});
  for (int fill = 0; fill < 2; ++fill) {
    std::vector<float> k(static_cast<size_t>(n * d));
    for (int64_t i = 0; i < n * d; ++i) k[static_cast<size_t>(i)] = static_cast<float>((i * (fill + 3)) % 11) - 5.0f;
    {
      const Tensor all = keys.append(Tensor::from_vector(k, Shape{n, d}));
      for (int rep = 0; rep < 3; ++rep) {
        const std::vector<float> got = matmul(query, all.transpose(0, 1)).to_vector();
        for (int64_t j = 0; j < n; ++j) {
          double want = 0;  // small integers: exact in any order
          for (int64_t i = 0; i < d; ++i)
            want += static_cast<double>(q[static_cast<size_t>(i)]) * k[static_cast<size_t>(j * d + i)];
          ASSERT_EQ(got[static_cast<size_t>(j)], want) << "fill " << fill << " read " << rep << " column " << j;
        }
      }
    }
    keys.clear();  // nothing else sees the buffer now: reused
  }
}

TEST_P(Joining, CacheConvertsToItsType) {
  KVCache cache(Shape{4, 6}, 1, Dtype::BF16);
  const std::vector<float> v = {1.0f, 1.00390625f, 1.005859375f, -2.5f, 3.0e-3f, 65504.0f, 7.0f, 0.1f};
  const Tensor all = cache.append(Tensor::from_vector(v, Shape{4, 2}));
  ASSERT_EQ(all.dtype(), Dtype::BF16);
  const std::vector<float> got = all.to_vector();
  for (size_t i = 0; i < v.size(); ++i) {
    // Round to nearest even at bit 16 (no NaNs here).
    uint32_t b = bits_of(v[i]);
    b = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
    float want;
    std::memcpy(&want, &b, sizeof want);
    EXPECT_EQ(got[i], want) << i;
  }
}

// An append whose flush fails leaves the cache failed until clear(): its
// size counts the rows asked for, later appends and values() raise the
// error and name clear(), after which the cache works again.
TEST(KVCacheErrors, AFailedAppendNeedsAClear) {
  KVCache cache({64, 4}, 0);
  cache.append(Tensor::full({2, 4}, 1.0f)).sync();
  set_memory_limit(256 * 1024);
  std::vector<float> src(100000, 2.0f);
  const Tensor big = Tensor::from_blob(src.data(), {100000}) * 3.0f;  // a 400 KB result: past the limit
  const Tensor rows = Tensor::from_vector(std::vector<float>(12, 5.0f), {3, 4}) * 1.0f;
  const Tensor seen = cache.append(rows);  // pending in the same flush
  EXPECT_THROW(big.sync(), Error);
  set_memory_limit(0);
  EXPECT_EQ(cache.size(), 5);
  expect_error_message("append after", [&] { (void)cache.append(Tensor::full({1, 4}, 7.0f)); }, {"clear()"});
  expect_error_message("values after", [&] { (void)cache.values(); }, {"KVCache::values", "memory limit", "clear()"});
  cache.clear();
  EXPECT_EQ(cache.append(Tensor::full({1, 4}, 9.0f)).to_vector(), std::vector<float>(4, 9.0f));
}

TEST(JoiningErrors, NameTheOpAndTheShapes) {
  const Tensor a = Tensor::zeros(Shape{2, 3}), b = Tensor::zeros(Shape{2, 4}), c = Tensor::zeros(Shape{2});
  a.sync();
  b.sync();
  c.sync();
  expect_error("cat of nothing", [&] { (void)dvm::cat({}); }, {"cat", "non-empty"});
  expect_error("cat of mismatched extents", [&] { (void)dvm::cat({a, b}, 0); }, {"cat", "tensor 1", "[2, 4]", "[2, 3]"});
  expect_error("cat of mismatched ranks", [&] { (void)dvm::cat({a, c}, 0); }, {"cat", "rank 2"});
  expect_error("cat along a missing axis", [&] { (void)dvm::cat({a, b}, 2); }, {"cat"});
  const Tensor s0 = Tensor::scalar(1.0f);
  s0.sync();
  expect_error("cat of 0-d", [&] { (void)dvm::cat({s0, s0}); }, {"cat", "zero-dimensional"});
  expect_error("stack of mismatched shapes", [&] { (void)dvm::stack({a, b}); }, {"stack", "[2, 4]", "equal shapes"});
  expect_error("stack along a missing axis", [&] { (void)dvm::stack({a, a}, 3); }, {"stack"});
  expect_error("cat of an undefined piece", [&] { (void)dvm::cat({a, a, Tensor()}, 0); },
               {"cat", "tensor 2", "undefined"});
  expect_error("stack of an undefined piece", [&] { (void)dvm::stack({a, Tensor(), a}); },
               {"stack", "tensor 1", "undefined"});
  expect_error("cache with no axis", [&] { KVCache k(Shape{}, 0); }, {"KVCache"});
  expect_error("cache axis out of range", [&] { KVCache k(Shape{4, 2}, 2); }, {"KVCache"});
  KVCache cache(Shape{2, 8, 3}, 1);
  expect_error("append of the wrong extents", [&] { (void)cache.append(a); }, {"KVCache::append", "rank 3"});
  const Tensor wrong = Tensor::zeros(Shape{2, 1, 4});
  wrong.sync();
  expect_error("append of the wrong width", [&] { (void)cache.append(wrong); }, {"KVCache::append", "[2, 1, 4]"});
}

INSTANTIATE_TEST_SUITE_P(Target, Joining, ::testing::ValuesIn(kTargets), target_name);

}  // namespace
}  // namespace dvm::testing
