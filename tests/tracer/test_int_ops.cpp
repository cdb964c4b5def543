// floor_divide, remainder, the bitwise and logical ops and bool arithmetic
// through the public API, on every target (ISA x tier), against references
// computed here: exact integer arithmetic in int64_t (then wrapped as torch
// wraps), and torch's fmod-based float formulas in double. Generated inputs
// with the extremes (INT32_MIN, INT32_MAX, -1, 0, negative divisors, uint8
// wrap), odd lengths, fused chains, broadcasting, both tiers giving the same
// bits, and the errors.
#include "tests/tracer/int_testing.h"

#include <climits>

namespace dvm::testing {
namespace {

class IntOps : public IsaTest {};

const int64_t kLengths[] = {0, 1, 7, 33, 1000};

Dtype promoted(Dtype a, Dtype b) {
  if (a == Dtype::I32 || b == Dtype::I32) return Dtype::I32;
  if (a == Dtype::U8 || b == Dtype::U8) return Dtype::U8;
  return Dtype::Bool;
}

// Python's // and % on exact integers; x // 0 = 0 and x % 0 = x (dvm's
// definition: docs/DTYPES.md).
int64_t floordiv_ref(int64_t a, int64_t b) {
  if (b == 0) return 0;
  int64_t q = a / b;
  if (a % b != 0 && (a < 0) != (b < 0)) --q;
  return q;
}
int64_t rem_ref(int64_t a, int64_t b) { return a - floordiv_ref(a, b) * b; }

// torch's float formulas, in double on the operands (exact fmod).
double frem_ref(double a, double b) {
  const double m = std::fmod(a, b);
  if (m != 0 && (m < 0) != (b < 0)) return static_cast<double>(static_cast<long double>(m) + b);
  return m;
}
double ffloordiv_ref(double a, double b) {
  if (b == 0) return a / b;
  const double m = std::fmod(a, b);
  if (std::isnan(m)) return m;
  const double q = (a - m) / b - (m != 0 && (m < 0) != (b < 0) ? 1 : 0);
  return q == 0 ? std::copysign(0.0, a / b) : q;
}

// Divisors with zeros and -1 in them; a few INT32_MIN // -1.
void add_divisor_specials(Dtype ta, Dtype tb, std::vector<int64_t>& a, std::vector<int64_t>& b) {
  for (size_t i = 0; i < b.size(); i += 5) b[i] = 0;
  if (tb == Dtype::I32)
    for (size_t i = 2; i < b.size(); i += 7) b[i] = -1;
  if (ta == Dtype::I32)
    for (size_t i = 2; i < a.size(); i += 14) a[i] = INT32_MIN;
}

const std::vector<std::pair<Dtype, Dtype>> kIntPairs = {
    {Dtype::I32, Dtype::I32}, {Dtype::I32, Dtype::U8}, {Dtype::U8, Dtype::I32}, {Dtype::U8, Dtype::U8},
    {Dtype::I32, Dtype::Bool}, {Dtype::Bool, Dtype::I32}, {Dtype::U8, Dtype::Bool}, {Dtype::Bool, Dtype::U8}};

TEST_P(IntOps, FloorDivideAndRemainderOfIntegersAreExact) {
  for (auto [ta, tb] : kIntPairs) {
    for (int64_t n : kLengths) {
      std::vector<int64_t> a = values(ta, n, static_cast<uint32_t>(n) * 5 + 1);
      std::vector<int64_t> b = values(tb, n, static_cast<uint32_t>(n) * 5 + 2);
      add_divisor_specials(ta, tb, a, b);
      const Tensor x = make(ta, a), y = make(tb, b);
      const Tensor q = floor_divide(x, y), r = remainder(x, y);
      const Dtype rt = promoted(ta, tb);
      ASSERT_EQ(q.dtype(), rt);
      ASSERT_EQ(r.dtype(), rt);
      const std::vector<int64_t> gq = read(q), gr = read(r);
      ASSERT_EQ(gq.size(), static_cast<size_t>(n));
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_EQ(gq[i], wrap(rt, floordiv_ref(a[i], b[i])))
            << dtype_name(ta) << " " << a[i] << " // " << dtype_name(tb) << " " << b[i] << " n=" << n;
        ASSERT_EQ(gr[i], wrap(rt, rem_ref(a[i], b[i])))
            << dtype_name(ta) << " " << a[i] << " % " << dtype_name(tb) << " " << b[i] << " n=" << n;
      }
    }
  }
}

TEST_P(IntOps, FusedChainsBroadcastAndIdentity) {
  for (Dtype t : {Dtype::I32, Dtype::U8}) {
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{33}, int64_t{1000}}) {
      std::vector<int64_t> a = values(t, n, 41), b = values(t, n, 42);
      add_divisor_specials(t, t, a, b);
      const Tensor x = make(t, a), y = make(t, b);
      // One kernel: (a // b) * b + a % b == a (wrapping; b = 0: 0 * 0 + a).
      const Tensor back = floor_divide(x, y) * y + remainder(x, y);
      const Tensor chain = remainder(floor_divide(x * y, y + y) - x, y);  // uint8 wraps between ops
      const std::vector<int64_t> gb = read(back), gc = read(chain);
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_EQ(gb[i], a[i]) << dtype_name(t) << " a=" << a[i] << " b=" << b[i];
        const int64_t xy = wrap(t, a[i] * b[i]), yy = wrap(t, b[i] + b[i]);
        const int64_t d = wrap(t, wrap(t, floordiv_ref(xy, yy)) - a[i]);
        ASSERT_EQ(gc[i], wrap(t, rem_ref(d, b[i]))) << dtype_name(t) << " a=" << a[i] << " b=" << b[i];
      }
    }
  }
  // Broadcasting: [m, 1] against [1, k].
  const std::vector<int64_t> a = values(Dtype::I32, 9, 43), b = {-7, -1, 0, 1, 3, INT32_MIN, INT32_MAX};
  const Tensor x = make(Dtype::I32, a).reshape({9, 1}), y = make(Dtype::I32, b).reshape({1, 7});
  const std::vector<int64_t> gq = read(floor_divide(x, y)), gr = read(remainder(x, y));
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < b.size(); ++j) {
      ASSERT_EQ(gq[i * b.size() + j], wrap(Dtype::I32, floordiv_ref(a[i], b[j]))) << a[i] << " // " << b[j];
      ASSERT_EQ(gr[i * b.size() + j], wrap(Dtype::I32, rem_ref(a[i], b[j]))) << a[i] << " % " << b[j];
    }
}

// Floats of type t: moderate quotients (|a / b| < 2^24, where dvm is
// exact), then the specials; each value representable in t.
std::vector<float> float_values(Dtype t, int64_t n, uint32_t seed, bool divisor) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(divisor ? 0.01f : -1000.0f, divisor ? 10.0f : 1000.0f);
  const float special[] = {0.0f, -0.0f, kInf, -kInf, kNaN, 1.0f, -1.0f, 0.1f, -3.0f, 6.0f};
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) {
    const uint32_t r = rng() % 10;
    x = r == 0 ? special[rng() % std::size(special)] : r < 3 ? std::round(dist(rng)) : dist(rng);
    if (divisor && r != 0 && rng() % 2) x = -x;
    if (t == Dtype::F16) x = to_float(to_half(x));
    if (t == Dtype::BF16) x = to_float(to_bfloat16(x));
  }
  return v;
}

Tensor make_float(Dtype t, const std::vector<float>& v) {
  return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}).to(t);
}

// The f32 result rounded to t once more (the kernel computes in f32 and
// rounds at its store).
float rounded(Dtype t, double v) {
  const float f = static_cast<float>(v);
  if (t == Dtype::F16) return to_float(to_half(f));
  if (t == Dtype::BF16) return to_float(to_bfloat16(f));
  return f;
}

// A 0-d integer operand of another type than the tensor's does not change
// the result type (torch's result_type), and torch converts it to that type
// before the op: an int32 -3 meets a uint8 tensor as 253, an int64 2^32 + 5
// meets an int32 tensor as 5. Each op's result is read inside a fused chain
// (times 1.0f, and summed), where a value left wider than its type shows.
TEST_P(IntOps, ZeroDimOperandsOfAnotherTypeConvertFirst) {
  const int64_t zs[] = {-970, -3, -1, 0, 7, 300, 70000, (int64_t{1} << 32) + 5, -(int64_t{1} << 40) - 9};
  for (Dtype t : {Dtype::U8, Dtype::I32}) {
    const std::vector<int64_t> a = values(t, 33, 61);
    const Tensor x = make(t, a);
    for (Dtype zt : {Dtype::I32, Dtype::I64}) {
      if (zt == Dtype::I32 && t == Dtype::I32) continue;  // nothing to convert
      for (int64_t zv : zs) {
        if (zt == Dtype::I32 && (zv > INT32_MAX || zv < INT32_MIN)) continue;
        const Tensor z = make(zt, {zv}, Shape{});
        const int64_t zc = wrap(t, zv);  // z in the computation type
        struct Case {
          const char* name;
          Tensor y;
          int64_t (*ref)(int64_t, int64_t);  // (z, x) in the computation type
          bool compare;
        };
        const Case cases[] = {
            {"add", z + x, [](int64_t p, int64_t q) { return p + q; }, false},
            {"sub", z - x, [](int64_t p, int64_t q) { return p - q; }, false},
            {"mul", x * z, [](int64_t p, int64_t q) { return q * p; }, false},
            {"floor_divide", floor_divide(z, x), [](int64_t p, int64_t q) { return floordiv_ref(p, q); }, false},
            {"remainder", remainder(z, x), [](int64_t p, int64_t q) { return rem_ref(p, q); }, false},
            {"maximum", maximum(z, x), [](int64_t p, int64_t q) { return std::max(p, q); }, false},
            {"minimum", minimum(x, z), [](int64_t p, int64_t q) { return std::min(p, q); }, false},
            {"bitwise_and", bitwise_and(z, x), [](int64_t p, int64_t q) { return p & q; }, false},
            {"bitwise_or", bitwise_or(x, z), [](int64_t p, int64_t q) { return p | q; }, false},
            {"bitwise_xor", bitwise_xor(z, x), [](int64_t p, int64_t q) { return p ^ q; }, false},
            {"lt", lt(z, x), [](int64_t p, int64_t q) -> int64_t { return p < q; }, true},
            {"eq", eq(x, z), [](int64_t p, int64_t q) -> int64_t { return p == q; }, true},
            {"where", where(gt(x, make(t, {1}, Shape{})), z, x),
             [](int64_t p, int64_t q) { return q > 1 ? p : q; }, false},
        };
        for (const Case& c : cases) {
          const std::string what = cat(c.name, " of ", dtype_name(zt), " 0-d ", zv, " and ", dtype_name(t));
          ASSERT_EQ(c.y.dtype(), c.compare ? Dtype::Bool : t) << what;
          const std::vector<float> chained = (c.y * 1.0f).to_vector();
          const std::vector<int64_t> summed = read(c.y.sum());
          int64_t sum = 0;
          for (size_t i = 0; i < a.size(); ++i) {
            const int64_t want = c.compare ? c.ref(zc, a[i]) : wrap(t, c.ref(zc, a[i]));
            sum += want;
            ASSERT_EQ(chained[i], static_cast<float>(want)) << what << " at " << a[i];
          }
          ASSERT_EQ(summed[0], sum) << what << " summed";
        }
      }
    }
  }
}

TEST_P(IntOps, FloorDivideAndRemainderOfFloatsMatchTorchsFormulas) {
  for (Dtype t : {Dtype::F32, Dtype::F16, Dtype::BF16}) {
    for (int64_t n : kLengths) {
      const std::vector<float> a = float_values(t, n, static_cast<uint32_t>(n) + 51, false);
      const std::vector<float> b = float_values(t, n, static_cast<uint32_t>(n) + 52, true);
      const Tensor x = make_float(t, a), y = make_float(t, b);
      const Tensor q = floor_divide(x, y), r = remainder(x, y);
      ASSERT_EQ(q.dtype(), t);
      ASSERT_EQ(r.dtype(), t);
      const std::vector<float> gq = q.to(Dtype::F32).to_vector(), gr = r.to(Dtype::F32).to_vector();
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_TRUE(same_float(gq[i], rounded(t, ffloordiv_ref(a[i], b[i]))))
            << dtype_name(t) << " " << a[i] << " // " << b[i] << " = " << gq[i] << ", want "
            << ffloordiv_ref(a[i], b[i]);
        ASSERT_TRUE(same_float(gr[i], rounded(t, frem_ref(a[i], b[i]))))
            << dtype_name(t) << " " << a[i] << " % " << b[i] << " = " << gr[i] << ", want " << frem_ref(a[i], b[i]);
      }
    }
  }
  // A float scalar divisor, and an integer by a float (float32 result).
  const std::vector<float> a = float_values(Dtype::F32, 33, 53, false);
  const std::vector<float> gs = remainder(make_float(Dtype::F32, a), -2.5f).to_vector();
  for (size_t i = 0; i < a.size(); ++i) ASSERT_TRUE(same_float(gs[i], static_cast<float>(frem_ref(a[i], -2.5))));
  const Tensor i32 = make(Dtype::I32, {7, -7, 0, INT32_MIN});
  EXPECT_EQ(floor_divide(i32, 2.0f).dtype(), Dtype::F32);
  EXPECT_EQ(floor_divide(i32, 2.0f).to_vector(), (std::vector<float>{3.0f, -4.0f, 0.0f, -1073741824.0f}));
}

struct BitCase {
  const char* name;
  Tensor (*op)(const Tensor&, const Tensor&);
  int64_t (*ref)(int64_t, int64_t);
};
const BitCase kBits[] = {
    {"and", [](const Tensor& a, const Tensor& b) { return a & b; }, [](int64_t a, int64_t b) { return a & b; }},
    {"or", [](const Tensor& a, const Tensor& b) { return a | b; }, [](int64_t a, int64_t b) { return a | b; }},
    {"xor", [](const Tensor& a, const Tensor& b) { return a ^ b; }, [](int64_t a, int64_t b) { return a ^ b; }},
    {"bitwise_and", bitwise_and, [](int64_t a, int64_t b) { return a & b; }},
};

TEST_P(IntOps, BitwiseOpsOfBoolsAndIntegers) {
  std::vector<std::pair<Dtype, Dtype>> pairs = kIntPairs;
  pairs.push_back({Dtype::Bool, Dtype::Bool});
  for (const BitCase& c : kBits) {
    for (auto [ta, tb] : pairs) {
      for (int64_t n : kLengths) {
        const std::vector<int64_t> a = values(ta, n, static_cast<uint32_t>(n) * 3 + 61);
        const std::vector<int64_t> b = values(tb, n, static_cast<uint32_t>(n) * 3 + 62);
        const Tensor y = c.op(make(ta, a), make(tb, b));
        const Dtype rt = promoted(ta, tb);
        ASSERT_EQ(y.dtype(), rt) << c.name;
        const std::vector<int64_t> got = read(y);
        for (size_t i = 0; i < a.size(); ++i)
          ASSERT_EQ(got[i], wrap(rt, c.ref(a[i], b[i])))
              << c.name << "(" << dtype_name(ta) << " " << a[i] << ", " << dtype_name(tb) << " " << b[i] << ")";
      }
    }
  }
  for (Dtype t : {Dtype::I32, Dtype::U8, Dtype::Bool}) {
    for (int64_t n : kLengths) {
      const std::vector<int64_t> a = values(t, n, static_cast<uint32_t>(n) + 63);
      const Tensor x = make(t, a);
      const Tensor y = ~x;
      ASSERT_EQ(y.dtype(), t);
      // Fused: uint8's ~ wraps to 8 bits before the comparison reads it.
      const std::vector<int64_t> got = read(y), gt_a = read(gt(bitwise_not(x), x));
      for (size_t i = 0; i < a.size(); ++i) {
        const int64_t want = t == Dtype::Bool ? !a[i] : wrap(t, ~a[i]);
        ASSERT_EQ(got[i], want) << "~" << dtype_name(t) << " " << a[i];
        ASSERT_EQ(gt_a[i], want > a[i]) << dtype_name(t) << " " << a[i];
      }
    }
  }
}

// torch: bool + bool is logical or, bool * bool logical and (bool results),
// so a fused chain that goes on in float32 sees 1, never 2.
TEST_P(IntOps, BoolArithmeticIsLogical) {
  for (int64_t n : kLengths) {
    const std::vector<int64_t> a = values(Dtype::Bool, n, static_cast<uint32_t>(n) + 71);
    const std::vector<int64_t> b = values(Dtype::Bool, n, static_cast<uint32_t>(n) + 72);
    const Tensor x = make(Dtype::Bool, a), y = make(Dtype::Bool, b);
    const Tensor s = x + y, p = x * y;
    ASSERT_EQ(s.dtype(), Dtype::Bool);
    ASSERT_EQ(p.dtype(), Dtype::Bool);
    const std::vector<int64_t> gs = read(s), gp = read(p), gx = read(s ^ p), gn = read(~s | x);
    const std::vector<float> gf = ((x + y) * 3.0f + (x * y)).to_vector();
    const std::vector<int64_t> ge = read(eq(x + y, x));
    for (size_t i = 0; i < a.size(); ++i) {
      const int64_t o = a[i] | b[i], d = a[i] & b[i];
      ASSERT_EQ(gs[i], o);
      ASSERT_EQ(gp[i], d);
      ASSERT_EQ(gx[i], o ^ d);
      ASSERT_EQ(gn[i], (o == 0 ? 1 : 0) | a[i]);
      ASSERT_EQ(gf[i], static_cast<float>(3 * o + d)) << a[i] << " " << b[i];
      ASSERT_EQ(ge[i], o == a[i]);
    }
  }
}

TEST_P(IntOps, LogicalOpsOfAnyType) {
  const std::vector<float> f = {0.0f, -0.0f, 1.5f, kNaN, -kInf, 0.0f, 2.0f};
  const std::vector<int64_t> i = {0, 5, 0, -1, INT32_MIN, 0, 0};
  const Tensor x = Tensor::from_vector(f, {7}), y = make(Dtype::I32, i), h = x.to(Dtype::F16);
  const std::vector<int64_t> ga = read(logical_and(x, y)), go = read(logical_or(h, y)), gx = read(logical_xor(x, y)),
                             gn = read(logical_not(x)), gni = read(logical_not(y));
  for (size_t k = 0; k < f.size(); ++k) {
    const bool a = f[k] != 0.0f, b = i[k] != 0;  // NaN is true
    EXPECT_EQ(ga[k], a && b) << k;
    EXPECT_EQ(go[k], a || b) << k;
    EXPECT_EQ(gx[k], a != b) << k;
    EXPECT_EQ(gn[k], !a) << k;
    EXPECT_EQ(gni[k], !b) << k;
  }
}

// x^e in uint64_t arithmetic (exact modulo 2^64): e multiplies one by one
// for small e, square-and-multiply above.
uint64_t power_mod64(uint64_t x, uint64_t e) {
  uint64_t r = 1;
  if (e <= 200) {
    for (uint64_t i = 0; i < e; ++i) r *= x;
    return r;
  }
  for (uint64_t p = x; e != 0; e >>= 1, p *= p)
    if (e & 1) r *= p;
  return r;
}

// Integers to a C++ integer power wrap as torch's integer pow (torch has
// no floating detour for them): every type, generated bases with the
// extremes, exponents around the type's width, in one op and in a chain.
TEST_P(IntOps, IntegerPowersWrapAsTorchs) {
  const int64_t exponents[] = {0, 1, 2, 3, 5, 8, 13, 31, 32, 33, 63, 64, 65, 1000003};
  for (Dtype t : {Dtype::I32, Dtype::I64, Dtype::U8, Dtype::Bool}) {
    std::vector<int64_t> a = values(t == Dtype::I64 ? Dtype::I32 : t, 37, 91);
    if (t == Dtype::I64) a.insert(a.end(), {INT64_MIN, INT64_MAX, int64_t{3} << 40, -(int64_t{5} << 33)});
    const Tensor x = make(t, a);
    const Dtype rt = t == Dtype::Bool ? Dtype::I64 : t;  // a bool base computes in int64
    for (int64_t e : exponents) {
      const Tensor y = pow(x, e);
      ASSERT_EQ(y.dtype(), rt) << dtype_name(t) << " ^ " << e;
      const std::vector<int64_t> got = read(y), chained = read(pow(x, e) + x);
      for (size_t i = 0; i < a.size(); ++i) {
        const uint64_t p = power_mod64(static_cast<uint64_t>(a[i]), static_cast<uint64_t>(e));
        const int64_t want = rt == Dtype::I64 ? static_cast<int64_t>(p) : wrap(rt, static_cast<int64_t>(p));
        ASSERT_EQ(got[i], want) << dtype_name(t) << " " << a[i] << " ^ " << e;
        const uint64_t d = p + static_cast<uint64_t>(a[i]);
        ASSERT_EQ(chained[i], rt == Dtype::I64 ? static_cast<int64_t>(d) : wrap(rt, static_cast<int64_t>(d)))
            << dtype_name(t) << " " << a[i] << " ^ " << e << " + itself";
      }
    }
  }
  const Tensor i32 = make(Dtype::I32, {2, -3});
  expect_error("pow(i32, -1)", [&] { (void)pow(i32, -1); }, {"pow", "int32[2]", "-1", "negative"});
  expect_error("pow(i32, i32)", [&] { (void)pow(i32, i32); }, {"pow", "int32", "not supported"});
  // A float exponent computes in float32, as torch's.
  EXPECT_EQ(pow(i32, 2.0f).dtype(), Dtype::F32);
  EXPECT_EQ(pow(i32, 2.0f).to_vector(), (std::vector<float>{4.0f, 9.0f}));
}

// floor, ceil and round of integers are the integers themselves (torch).
TEST_P(IntOps, FloorCeilAndRoundOfIntegersAreTheValues) {
  for (Dtype t : {Dtype::I32, Dtype::I64, Dtype::U8}) {
    const std::vector<int64_t> a = values(t == Dtype::I64 ? Dtype::I32 : t, 40, 5);
    const Tensor x = make(t, a);
    for (const Tensor& y : {floor(x), ceil(x), round(x), floor(x + 1) - 1}) {
      ASSERT_EQ(y.dtype(), t);
      const std::vector<int64_t> got = read(y);
      for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(got[i], a[i]) << dtype_name(t);
    }
  }
}

// Narrow rows and a row broadcast over them ([R, C] + [C], which the JIT
// runs several rows to a call), in every type that has integer values
// exactly: int32 and uint8 wrap as torch's, float16 and bfloat16 on small
// integers; each against the host, over generated R and C.
TEST_P(IntOps, NarrowRowsPlusABroadcastRow) {
  std::mt19937 rng(41);
  for (int iter = 0; iter < 30; ++iter) {
    const int64_t R = 1 + static_cast<int64_t>(rng() % 200), C = 1 + static_cast<int64_t>(rng() % 40);
    for (Dtype t : {Dtype::I32, Dtype::U8, Dtype::F16, Dtype::BF16}) {
      const bool ints = t == Dtype::I32 || t == Dtype::U8;
      std::vector<int64_t> xv = values(ints ? t : Dtype::U8, R * C, static_cast<uint32_t>(iter) * 7 + 1);
      std::vector<int64_t> bv = values(ints ? t : Dtype::U8, C, static_cast<uint32_t>(iter) * 7 + 2);
      if (!ints)  // small integers: every sum below 256 is exact in both 16-bit types
        for (auto* v : {&xv, &bv})
          for (int64_t& e : *v) e %= 128;
      auto as = [&](const std::vector<int64_t>& v, Shape s) {
        return ints ? make(t, v, s) : Tensor::from_vector(std::vector<float>(v.begin(), v.end()), s).to(t);
      };
      const Tensor y = as(xv, Shape{R, C}) + as(bv, Shape{C});
      const std::vector<float> got = ints ? std::vector<float>() : y.to_vector();
      const std::vector<int64_t> got_ints = ints ? read(y) : std::vector<int64_t>();
      for (int64_t i = 0; i < R * C; ++i) {
        const int64_t want = xv[static_cast<size_t>(i)] + bv[static_cast<size_t>(i % C)];
        if (ints) ASSERT_EQ(got_ints[static_cast<size_t>(i)], wrap(t, want)) << dtype_name(t) << " R=" << R << " C=" << C << " [" << i << "]";
        else ASSERT_EQ(got[static_cast<size_t>(i)], static_cast<float>(want)) << dtype_name(t) << " R=" << R << " C=" << C << " [" << i << "]";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Target, IntOps, ::testing::ValuesIn(kTargets), target_name);

// The same bits from the interpreter and from machine code, on every ISA the
// CPU has; the machine-code runs really are machine code.
TEST(IntOpsTiers, InterpreterAndMachineCodeAgree) {
  DVM_SKIP_WITHOUT_JIT();
  if (dvm::isa() == std::string("portable")) GTEST_SKIP() << "no JIT on the portable ISA";
  SettingsGuard guard;
  for (const char* isa : testing::machine_code_isas()) {
    dvm::set_isa(isa);
    if (dvm::isa() != std::string(isa)) continue;  // DVM_ISA lowered it
    for (int64_t n : kLengths) {
      if (n == 0) continue;
      std::vector<int64_t> a = values(Dtype::I32, n, 81), b = values(Dtype::I32, n, 82);
      add_divisor_specials(Dtype::I32, Dtype::I32, a, b);
      const std::vector<int64_t> u = values(Dtype::U8, n, 83), m = values(Dtype::Bool, n, 84);
      const std::vector<float> fa = float_values(Dtype::F32, n, 85, false), fb = float_values(Dtype::F32, n, 86, true);
      auto program = [&] {
        const Tensor x = make(Dtype::I32, a), y = make(Dtype::I32, b), w = make(Dtype::U8, u);
        const Tensor k = make(Dtype::Bool, m), fx = make_float(Dtype::F32, fa), fy = make_float(Dtype::F32, fb);
        const Tensor q = floor_divide(x, y) ^ remainder(x, y);
        const Tensor v = remainder(~w | (w & k), w + 3.0f);                 // uint8 into a float op
        const Tensor bits = (k + lt(x, y)) * ~k;                             // bool arithmetic
        const Tensor fq = floor_divide(fx, fy), fr = remainder(fx, fy).to(Dtype::BF16);
        const Tensor wq = floor_divide(w, w & k) + remainder(w, w | k);     // uint8, / 0 included
        std::vector<std::vector<int64_t>> out{read(q), read(bits), read(wq)};
        for (const Tensor& f : {v, fq, fr.to(Dtype::F32)}) {
          std::vector<int64_t> bitsv;
          for (float e : f.to_vector()) bitsv.push_back(std::isnan(e) ? -1 : static_cast<int64_t>(bits_of(e)));
          out.push_back(bitsv);
        }
        return out;
      };
      expect_tiers_agree(program, std::string(isa) + " n=" + std::to_string(n));
    }
  }
}

TEST(IntOpsErrors, NameTheOpAndTheTypes) {
  const Tensor f32 = Tensor::full({4}, 1.0f), f16 = Tensor::full({4}, 1, Dtype::F16);
  const Tensor i32 = Tensor::full({4}, 1, Dtype::I32), i64 = Tensor::full({4}, 1, Dtype::I64);
  const Tensor m = Tensor::full({4}, 1, Dtype::Bool);
  expect_error("f32 & f32", [&] { (void)(f32 & f32); }, {"bitwise_and", "float32[4]"});
  expect_error("i32 | f16", [&] { (void)(i32 | f16); }, {"bitwise_or", "int32[4]", "float16[4]"});
  expect_error("m ^ f32", [&] { (void)bitwise_xor(m, f32); }, {"bitwise_xor", "bool[4]", "float32[4]"});
  expect_error("~f32", [&] { (void)~f32; }, {"bitwise_not", "float32[4]"});
  expect_error("i32 & 1.0f", [&] { (void)(i32 & 1.0f); }, {"bitwise_and", "int32[4]"});
  expect_error("i64 & f16", [&] { (void)(i64 & f16); }, {"bitwise_and", "int64[4]", "float16[4]"});
  expect_error("m - m", [&] { (void)(m - m); }, {"sub", "bool[4]", "logical_not"});
  expect_error("-m", [&] { (void)(-m); }, {"neg", "bool[4]"});
  expect_error("m // m", [&] { (void)floor_divide(m, m); }, {"floor_divide", "bool[4]"});
  expect_error("m % m", [&] { (void)remainder(m, m); }, {"remainder", "bool[4]"});
  expect_error("m // i64 as bool", [&] { (void)floor_divide(m, m.to(Dtype::Bool)); }, {"floor_divide", "bool[4]"});
}

}  // namespace
}  // namespace dvm::testing
