// int64 lanes through the public API: generated programs of integer ops on
// int64, int32, uint8 and bool tensors (broadcast rows and columns,
// transposed views, several outputs per flush) against a reference
// evaluated here in 128-bit integers and wrapped to each result type as
// torch wraps; int64 values at the extremes and beyond 2^53, division by 0
// and INT64_MIN // -1; conversions to and from int64. On every target
// (the JIT declines int64 kernels, so its targets check that they still run).
#include <algorithm>
#include <array>
#include <climits>
#include <map>
#include <random>
#include <string>

#include "tests/tracer/int_testing.h"

namespace dvm::testing {
namespace {

__extension__ typedef __int128 i128;  // (GCC's; __extension__: -Wpedantic)

class Int64Lanes : public IsaTest {};

std::vector<int64_t> widen(const std::vector<int32_t>& v) { return std::vector<int64_t>(v.begin(), v.end()); }

// v wrapped to type t as torch's integers wrap (bool: nonzero).
int64_t wrap_to(Dtype t, i128 v) {
  const uint64_t low = static_cast<uint64_t>(v);
  switch (t) {
    case Dtype::I64: return static_cast<int64_t>(low);
    case Dtype::I32: return static_cast<int32_t>(static_cast<uint32_t>(low));
    case Dtype::U8: return static_cast<int64_t>(low & 0xffu);
    default: return v != 0;
  }
}

// Python's floor division with dvm's x // 0 = 0.
i128 floor_div(i128 a, i128 b) {
  if (b == 0) return 0;
  i128 q = a / b;
  if (q * b != a && (a < 0) != (b < 0)) --q;
  return q;
}

int rank_of(Dtype t) { return t == Dtype::Bool ? 0 : t == Dtype::U8 ? 1 : t == Dtype::I32 ? 2 : 3; }
Dtype wider(Dtype a, Dtype b) { return rank_of(a) >= rank_of(b) ? a : b; }

// A value of the program: its tensor and its reference, broadcast to the
// program's full [R, C].
struct Val {
  Tensor t;
  Dtype type;
  std::vector<int64_t> ref;
};

std::vector<int64_t> read_all(const Tensor& y, int64_t R, int64_t C) { return read(y.expand({R, C})); }

class Program {
 public:
  Program(uint32_t seed, int64_t R, int64_t C) : rng_(seed), R_(R), C_(C) {}

  // A leaf of type t: shape [R, C], [1, C], [R, 1] or a transposed [C, R].
  Val leaf(Dtype t) {
    const int form = static_cast<int>(rng_() % 4);
    const int64_t rows = form == 1 ? 1 : R_, cols = form == 2 ? 1 : C_;
    std::vector<int64_t> v(static_cast<size_t>(rows * cols));
    for (int64_t& e : v) e = value(t);
    Tensor x;
    if (form == 3) {  // stored [C, R], read transposed
      std::vector<int64_t> tr(v.size());
      for (int64_t r = 0; r < R_; ++r)
        for (int64_t c = 0; c < C_; ++c) tr[static_cast<size_t>(c * R_ + r)] = v[static_cast<size_t>(r * C_ + c)];
      x = make(t, tr, {C_, R_}).transpose(0, 1);
    } else {
      x = make(t, v, {rows, cols});
    }
    Val out{x, t, std::vector<int64_t>(static_cast<size_t>(R_ * C_))};
    for (int64_t r = 0; r < R_; ++r)
      for (int64_t c = 0; c < C_; ++c)
        out.ref[static_cast<size_t>(r * C_ + c)] = v[static_cast<size_t>((rows == 1 ? 0 : r) * cols + (cols == 1 ? 0 : c))];
    return out;
  }

  // One op on values of the pool, chosen at random; its name in *what.
  Val step(const std::vector<Val>& pool, std::string* what) {
    const Val& a = pool[rng_() % pool.size()];
    const Val& b = pool[rng_() % pool.size()];
    const Dtype t = wider(a.type, b.type);
    const bool bools = t == Dtype::Bool;
    switch (rng_() % 11) {
      case 0:
        return bools ? binary("add", a, b, what, [](i128 x, i128 y) { return x | y; }, a.t + b.t)
                     : binary("add", a, b, what, [](i128 x, i128 y) { return x + y; }, a.t + b.t);
      case 1:  // (torch refuses a subtraction with a bool operand)
        if (a.type == Dtype::Bool || b.type == Dtype::Bool)
          return binary("mul", a, b, what, [](i128 x, i128 y) { return x * y; }, a.t * b.t);
        return binary("sub", a, b, what, [](i128 x, i128 y) { return x - y; }, a.t - b.t);
      case 2:
        return binary("mul", a, b, what, [](i128 x, i128 y) { return x * y; }, a.t * b.t);
      case 3:
        if (rng_() % 2) return binary("maximum", a, b, what, [](i128 x, i128 y) { return std::max(x, y); }, maximum(a.t, b.t));
        return binary("minimum", a, b, what, [](i128 x, i128 y) { return std::min(x, y); }, minimum(a.t, b.t));
      case 4:
        if (bools) return binary("xor", a, b, what, [](i128 x, i128 y) { return x ^ y; }, a.t ^ b.t);
        if (rng_() % 2)
          return binary("floor_divide", a, b, what, [](i128 x, i128 y) { return floor_div(x, y); }, floor_divide(a.t, b.t));
        return binary("remainder", a, b, what, [](i128 x, i128 y) { return y == 0 ? x : x - floor_div(x, y) * y; },
                      remainder(a.t, b.t));
      case 5: {
        const int k = static_cast<int>(rng_() % 3);
        if (k == 0) return binary("and", a, b, what, [](i128 x, i128 y) { return x & y; }, a.t & b.t);
        if (k == 1) return binary("or", a, b, what, [](i128 x, i128 y) { return x | y; }, a.t | b.t);
        return binary("xor", a, b, what, [](i128 x, i128 y) { return x ^ y; }, a.t ^ b.t);
      }
      case 6: {
        const int k = static_cast<int>(rng_() % 6);
        static const char* const names[] = {"eq", "ne", "lt", "le", "gt", "ge"};
        static Tensor (*const ops[])(const Tensor&, const Tensor&) = {eq, ne, lt, le, gt, ge};
        Val out{ops[k](a.t, b.t), Dtype::Bool, a.ref};
        for (size_t i = 0; i < out.ref.size(); ++i) {
          const int64_t x = a.ref[i], y = b.ref[i];
          const bool r = k == 0 ? x == y : k == 1 ? x != y : k == 2 ? x < y : k == 3 ? x <= y : k == 4 ? x > y : x >= y;
          out.ref[i] = r;
        }
        *what = std::string(names[k]) + "(" + dtype_name(a.type) + ", " + dtype_name(b.type) + ")";
        return out;
      }
      case 7: {  // where(mask, a, b), the mask a comparison or a bool value
        const Val& m = pool[rng_() % pool.size()];
        const Tensor mask = m.type == Dtype::Bool ? m.t : ne(m.t, a.t);
        Val out{where(mask, a.t, b.t), t, a.ref};
        for (size_t i = 0; i < out.ref.size(); ++i) {
          const bool mi = m.type == Dtype::Bool ? m.ref[i] != 0 : m.ref[i] != a.ref[i];
          out.ref[i] = mi ? a.ref[i] : b.ref[i];
        }
        *what = std::string("where(") + dtype_name(m.type) + ", " + dtype_name(a.type) + ", " + dtype_name(b.type) + ")";
        return out;
      }
      case 8: {  // neg, abs, relu, ~ (bool: only ~)
        const int k = a.type == Dtype::Bool ? 3 : static_cast<int>(rng_() % 4);
        static const char* const names[] = {"neg", "abs", "relu", "bitwise_not"};
        const Tensor y = k == 0 ? neg(a.t) : k == 1 ? abs(a.t) : k == 2 ? relu(a.t) : ~a.t;
        Val out{y, a.type, a.ref};
        for (int64_t& e : out.ref) {
          const i128 x = e;
          e = a.type == Dtype::Bool ? !e
                                    : wrap_to(a.type, k == 0 ? -x : k == 1 ? (x < 0 ? -x : x) : k == 2 ? std::max<i128>(x, 0) : -x - 1);
        }
        *what = std::string(names[k]) + "(" + dtype_name(a.type) + ")";
        return out;
      }
      default: {  // to() another integer type
        static const Dtype types[] = {Dtype::I64, Dtype::I32, Dtype::U8, Dtype::Bool};
        const Dtype to = types[rng_() % 4];
        Val out{a.t.to(to), to, a.ref};
        for (int64_t& e : out.ref) e = wrap_to(to, e);
        *what = std::string("to(") + dtype_name(a.type) + " -> " + dtype_name(to) + ")";
        return out;
      }
    }
  }

 private:
  template <class Ref>
  Val binary(const char* name, const Val& a, const Val& b, std::string* what, Ref ref, Tensor y) {
    const Dtype t = wider(a.type, b.type);
    Val out{y, t, a.ref};
    for (size_t i = 0; i < out.ref.size(); ++i) out.ref[i] = wrap_to(t, ref(a.ref[i], b.ref[i]));
    *what = std::string(name) + "(" + dtype_name(a.type) + ", " + dtype_name(b.type) + ")";
    return out;
  }

  int64_t value(Dtype t) {
    const uint64_t r = rng_();
    if (t == Dtype::Bool) return static_cast<int64_t>(r & 1);
    if (t == Dtype::U8) return static_cast<int64_t>(r & 0xff);
    static const int64_t special[] = {0, 1, -1, 2, -3, INT64_MIN, INT64_MAX, INT64_MIN + 1, INT32_MIN, INT32_MAX,
                                      int64_t{1} << 32, (int64_t{1} << 53) + 1, -((int64_t{1} << 40) + 7), 255, 256};
    int64_t v = r % 3 == 0   ? special[(r >> 8) % std::size(special)]
                : r % 3 == 1 ? static_cast<int64_t>((r >> 16) % 64) - 32
                             : static_cast<int64_t>(rng_()) >> ((r >> 8) % 64);
    return t == Dtype::I32 ? wrap_to(Dtype::I32, v) : v;
  }

  std::mt19937_64 rng_;
  int64_t R_, C_;
};

// Generated programs: a few leaves, then ops on any earlier values, every
// value read back at the end (so a flush computes them all, several
// outputs per kernel).
TEST_P(Int64Lanes, GeneratedProgramsMatchA128BitReference) {
  const int64_t shapes[][2] = {{1, 1}, {3, 5}, {2, 33}, {7, 1}, {4, 130}, {1, 4099}};
  for (uint32_t seed = 0; seed < 200; ++seed) {
    const int64_t R = shapes[seed % std::size(shapes)][0], C = shapes[seed % std::size(shapes)][1];
    Program prog(seed * 7919u + 1, R, C);
    std::vector<Val> pool;
    std::vector<std::string> names;
    static const Dtype leaf_types[] = {Dtype::I64, Dtype::I64, Dtype::I32, Dtype::U8, Dtype::Bool};
    for (int i = 0; i < 4; ++i) {
      pool.push_back(prog.leaf(leaf_types[(seed + static_cast<uint32_t>(i)) % std::size(leaf_types)]));
      names.push_back(std::string("leaf ") + dtype_name(pool.back().type));
    }
    for (int i = 0; i < 10; ++i) {
      std::string what;
      Val v = prog.step(pool, &what);
      pool.push_back(std::move(v));
      names.push_back(what);
    }
    for (size_t k = 0; k < pool.size(); ++k) {
      ASSERT_EQ(pool[k].t.dtype(), pool[k].type) << "seed " << seed << " value " << k << ": " << names[k];
      std::vector<int64_t> got;
      try {
        got = read_all(pool[k].t, R, C);
      } catch (const Error& e) {
        std::string listing;
        for (size_t j = 0; j < names.size(); ++j) listing += "\n  v" + std::to_string(j) + " = " + names[j];
        FAIL() << "seed " << seed << ": " << e.what() << "\nthe program:" << listing;
      }
      ASSERT_EQ(got.size(), pool[k].ref.size());
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(got[i], pool[k].ref[i]) << "seed " << seed << " value " << k << " (" << names[k] << ") element " << i;
    }
  }
}

// Conversions between int64 and the float types: int64 to f32 rounds to
// nearest even (as static_cast from long double, whose significand holds
// it), to f16 / bf16 through that f32 (torch's cast); floats to int64
// truncate toward zero.
TEST_P(Int64Lanes, ConversionsToAndFromFloats) {
  std::vector<int64_t> v = {0, 1, -1, 16777217, -16777217, (int64_t{1} << 53) + 1, INT64_MAX, INT64_MIN,
                            (int64_t{1} << 40) + (int64_t{1} << 16) + 1, 123456789, -987654321012};
  std::mt19937_64 rng(5);
  for (int i = 0; i < 4000; ++i) v.push_back(static_cast<int64_t>(rng()) >> (rng() % 64));
  const Tensor x = Tensor::from_vector(v, {static_cast<int64_t>(v.size())});
  const std::vector<float> f = x.to(Dtype::F32).to_vector();
  const std::vector<float> g = (x + x).to_vector();  // an int64 result read as f32 by to_vector
  const std::vector<float> h = (x * Tensor::full({1}, 1, Dtype::I64) + 0.0f).to_vector();  // ltof in a kernel
  for (size_t i = 0; i < v.size(); ++i) {
    const float want = static_cast<float>(static_cast<long double>(v[i]));
    ASSERT_EQ(f[i], want) << v[i];
    ASSERT_EQ(h[i], want) << v[i];
    const i128 twice = static_cast<i128>(v[i]) * 2;
    ASSERT_EQ(g[i], static_cast<float>(static_cast<long double>(wrap_to(Dtype::I64, twice)))) << v[i];
  }
  const std::vector<float> fl = {0.0f, -0.0f, 1.5f, -1.5f, 2.5e9f, -3.7e12f, 9.2e18f, -9.2e18f, 16777217.0f};
  const std::vector<int64_t> back = Tensor::from_vector(fl, {9}).to(Dtype::I64).to_vector<int64_t>();
  for (size_t i = 0; i < fl.size(); ++i) ASSERT_EQ(back[i], static_cast<int64_t>(fl[i])) << fl[i];
}

// The coordinates of flat element i of shape that a reduction over axes
// keeps: the output element it folds into.
std::vector<int64_t> kept_coordinates(int64_t i, const Shape& shape, const std::vector<int>& axes) {
  std::vector<int64_t> idx(static_cast<size_t>(shape.rank()));
  for (int d = shape.rank() - 1; d >= 0; --d) {
    idx[static_cast<size_t>(d)] = i % shape[d];
    i /= shape[d];
  }
  std::vector<int64_t> key;
  for (int d = 0; d < shape.rank(); ++d)
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) key.push_back(idx[static_cast<size_t>(d)]);
  return key;
}

// Reductions of integers as torch's: sum of int64, int32 and uint8 is int64
// (wrapping), max and min keep the type; over the inner axis (rows long
// enough for several passes too), the outer one (many rows: launches that
// would split if they were float), a middle one and all axes, with a fused
// prologue and epilogue. The reference folds in 128 bits and wraps.
TEST_P(Int64Lanes, ReductionsGiveTorchsTypes) {
  struct Case {
    Shape shape;
    std::vector<int> axes;
  };
  const Case cases[] = {{{5, 37}, {1}},     {{5, 37}, {0}},      {{3, 4, 9}, {1}},  {{2, 70000}, {1}},
                        {{9000, 3}, {0}},   {{4, 6}, {0, 1}},    {{1, 1}, {1}},     {{1, 0, 4}, {0}},
                        {{40000}, {0}},     {{2, 3, 5}, {0, 2}}};
  std::mt19937_64 rng(11);
  for (const Case& c : cases) {
    for (Dtype t : {Dtype::I64, Dtype::I32, Dtype::U8}) {
      const int64_t n = c.shape.numel();
      std::vector<int64_t> v(static_cast<size_t>(n));
      for (int64_t& e : v) {
        const uint64_t r = rng();
        e = r % 5 == 0 ? INT64_MAX - static_cast<int64_t>(r % 9) : static_cast<int64_t>(rng()) >> (r % 64);
        e = wrap_to(t, e);
      }
      const Tensor x = make(t, v, c.shape);
      // prologue: x * 3 - x in x's type (wraps as the type does)
      const Tensor pro = x * Tensor::full({}, 3, t) - x;
      std::vector<int64_t> pv(v.size());
      for (size_t i = 0; i < v.size(); ++i) pv[i] = wrap_to(t, static_cast<i128>(v[i]) * 3 - v[i]);
      const Tensor sum = pro.sum(c.axes), mx = x.max(c.axes), mn = x.min(c.axes);
      const Tensor spread = mx - mn;  // one kernel with both folds (a ColReduce keeps them in one block)
      ASSERT_EQ(sum.dtype(), Dtype::I64);
      ASSERT_EQ(mx.dtype(), t);
      const Tensor sum1 = sum + Tensor::full({}, 1, Dtype::I64);  // an epilogue
      // Reference: each output element folds the input elements whose
      // unreduced coordinates match.
      std::map<std::vector<int64_t>, std::array<i128, 3>> acc;
      std::vector<std::vector<int64_t>> order;
      for (int64_t i = 0; i < n; ++i) {
        const std::vector<int64_t> key = kept_coordinates(i, c.shape, c.axes);
        auto [it, fresh] = acc.try_emplace(key, std::array<i128, 3>{0, INT64_MIN, INT64_MAX});
        if (fresh) order.push_back(key);
        it->second[0] += pv[static_cast<size_t>(i)];
        it->second[1] = std::max<i128>(it->second[1], v[static_cast<size_t>(i)]);
        it->second[2] = std::min<i128>(it->second[2], v[static_cast<size_t>(i)]);
      }
      std::sort(order.begin(), order.end());
      if (n == 0) continue;  // (an empty axis: sum is 0 below; max has no identity)
      const std::vector<int64_t> gs = read(sum), gs1 = read(sum1), gx = read(mx), gn = read(mn), gd = read(spread);
      ASSERT_EQ(gs.size(), order.size());
      for (size_t k = 0; k < order.size(); ++k) {
        const auto& a = acc[order[k]];
        const std::string where = c.shape.to_string() + " axes " + std::to_string(c.axes[0]) + " " + dtype_name(t) +
                                  " output " + std::to_string(k);
        ASSERT_EQ(gs[k], wrap_to(Dtype::I64, a[0])) << "sum " << where;
        ASSERT_EQ(gs1[k], wrap_to(Dtype::I64, a[0] + 1)) << "sum + 1 " << where;
        ASSERT_EQ(gx[k], static_cast<int64_t>(a[1])) << "max " << where;
        ASSERT_EQ(gn[k], static_cast<int64_t>(a[2])) << "min " << where;
        ASSERT_EQ(gd[k], wrap_to(t, a[1] - a[2])) << "max - min " << where;
      }
    }
  }
  // An empty sum is 0; an integer mean is an error, as in torch.
  const Tensor e = Tensor::full({3, 0}, 0, Dtype::I32);
  EXPECT_EQ(e.sum({1}).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0}));
  const Tensor i = Tensor::full({4}, 1, Dtype::I64);
  i.sync();
  expect_error("i64 mean", [&] { (void)i.mean(); }, {"mean", "int64[4]", "floating"});
}

// A count past 2^24, where float32 lanes would lose ones: every element
// true, and a fused comparison true at every third element (closed forms).
TEST_P(Int64Lanes, BoolSumsStayExactPastTwoToTheTwentyFour) {
  const int64_t n = (int64_t{1} << 24) + 3;
  std::vector<uint8_t> ones(static_cast<size_t>(n), 1);
  const Tensor mask = Tensor::from_blob(ones.data(), {n}, Dtype::Bool);
  EXPECT_EQ(read(mask.sum()), (std::vector<int64_t>{n}));
  EXPECT_EQ(read(mask.reshape({n, 1}).sum(0)), (std::vector<int64_t>{n}));
  const Tensor idx = Tensor::arange(0, static_cast<double>(n), 1, Dtype::I32);
  const Tensor three = Tensor::full({}, 3, Dtype::I32), zero = Tensor::full({}, 0, Dtype::I32);
  EXPECT_EQ(read(dvm::eq(dvm::remainder(idx, three), zero).sum()), (std::vector<int64_t>{(n + 2) / 3}));
}

// A sum of bool counts the trues in int64 (torch's type), over the same
// axes as above, from a comparison fused into the counting kernel and from
// stored masks whose bytes are any nonzero value (true); mean is the
// fraction of trues in float32. The reference counts.
TEST_P(Int64Lanes, BoolSumsCountTheTruesInInt64) {
  struct Case {
    Shape shape;
    std::vector<int> axes;
  };
  const Case cases[] = {{{5, 37}, {1}}, {{5, 37}, {0}}, {{3, 4, 9}, {1}}, {{2, 70000}, {1}}, {{9000, 3}, {0}},
                        {{4, 6}, {0, 1}}, {{1, 1}, {1}}, {{40000}, {0}}, {{2, 3, 5}, {0, 2}}, {{3, 0}, {1}}};
  std::mt19937 rng(23);
  for (const Case& c : cases) {
    const int64_t n = c.shape.numel();
    std::vector<float> v(static_cast<size_t>(n));
    for (float& e : v) e = static_cast<float>(static_cast<int>(rng() % 7) - 3);
    std::vector<uint8_t> bytes(static_cast<size_t>(n));
    for (uint8_t& b : bytes) b = rng() % 3 == 0 ? static_cast<uint8_t>(1 + rng() % 255) : 0;
    const Tensor x = Tensor::from_vector(v, c.shape);
    const Tensor stored = Tensor::from_blob(bytes.data(), c.shape, Dtype::Bool);
    const Tensor fused = dvm::gt(x, 0.0f).sum(c.axes), direct = stored.sum(c.axes);
    const Tensor frac = stored.mean(c.axes);
    ASSERT_EQ(fused.dtype(), Dtype::I64);
    ASSERT_EQ(direct.dtype(), Dtype::I64);
    ASSERT_EQ(frac.dtype(), Dtype::F32);
    std::map<std::vector<int64_t>, std::array<int64_t, 3>> acc;  // fused count, stored count, members
    for (int64_t i = 0; i < n; ++i) {
      auto& a = acc[kept_coordinates(i, c.shape, c.axes)];
      a[0] += v[static_cast<size_t>(i)] > 0.0f;
      a[1] += bytes[static_cast<size_t>(i)] != 0;
      a[2] += 1;
    }
    const std::vector<int64_t> gf = read(fused), gd = read(direct);
    const std::vector<float> gm = frac.to_vector();
    const std::string what = c.shape.to_string() + " axes " + std::to_string(c.axes[0]);
    if (n == 0) {
      EXPECT_EQ(gd, std::vector<int64_t>(gd.size(), 0)) << what;
      continue;
    }
    ASSERT_EQ(gf.size(), acc.size()) << what;
    size_t k = 0;
    for (const auto& [key, a] : acc) {
      ASSERT_EQ(gf[k], a[0]) << "gt(x, 0).sum " << what << " output " << k;
      ASSERT_EQ(gd[k], a[1]) << "mask.sum " << what << " output " << k;
      // mean: the count (exact in f32 below 2^24) times one rounded division
      const double want = static_cast<double>(a[1]) / static_cast<double>(a[2]);
      ASSERT_NEAR(gm[k], want, 2 * 0x1p-24 * want) << "mask.mean " << what << " output " << k;
      ++k;
    }
  }
}

// contiguous() of strided int32 and int64 views (and the reshapes that need
// one) is a copy kernel in integer lanes: every value moves as it is, past
// 2^24 and 2^53 too, on every target. (It was a copy on the host, which a
// graph's capture cannot make.)
TEST_P(Int64Lanes, ContiguousCopiesOfIntegerViewsAreExact) {
  std::mt19937_64 rng(42);
  for (const Dtype t : {Dtype::I32, Dtype::I64}) {
    for (const auto& [r, c] : std::vector<std::pair<int64_t, int64_t>>{{2, 3}, {17, 33}, {5, 300}}) {
      std::vector<int64_t> v(static_cast<size_t>(r * c));
      for (int64_t& e : v) e = t == Dtype::I32 ? static_cast<int32_t>(rng()) : static_cast<int64_t>(rng());
      v[0] = t == Dtype::I32 ? INT32_MIN : INT64_MIN;
      v[1] = t == Dtype::I32 ? (1 << 24) + 1 : (int64_t{1} << 53) + 1;
      const Tensor x = make(t, v, Shape{r, c});
      const Tensor tc = x.transpose(0, 1).contiguous();
      const Tensor flat = x.transpose(0, 1).reshape({r * c});
      for (const Tensor* y : {&tc, &flat}) {
        ASSERT_EQ(y->dtype(), t);
        const std::vector<int64_t> got = t == Dtype::I32 ? widen(y->to_vector<int32_t>()) : y->to_vector<int64_t>();
        for (int64_t j = 0; j < c; ++j)
          for (int64_t i = 0; i < r; ++i)
            ASSERT_EQ(got[static_cast<size_t>(j * r + i)], v[static_cast<size_t>(i * c + j)])
                << dtype_name(t) << " [" << r << ", " << c << "] at " << i << ", " << j;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Target, Int64Lanes, ::testing::ValuesIn(kTargets), target_name);

}  // namespace
}  // namespace dvm::testing
