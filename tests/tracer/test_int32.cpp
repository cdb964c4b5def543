// int32 lanes through the public API: int32 and uint8 arithmetic,
// comparisons, where, relu and conversions against references computed here
// with exact integer arithmetic (int64_t, then wrapped to the result type as
// torch wraps), on every target (ISA x tier): lengths 0..33 and 4099, values
// near INT32_MIN / INT32_MAX, uint8 wrap-around, fused chains that wrap after
// every op. And the errors for what stays refused.
#include "tests/tracer/int_testing.h"

#include <climits>

namespace dvm::testing {
namespace {

class Int32Lanes : public IsaTest {};

std::vector<int64_t> lengths() {
  std::vector<int64_t> l;
  for (int64_t n = 0; n <= 33; ++n) l.push_back(n);
  l.push_back(4099);
  return l;
}

Dtype promoted(Dtype a, Dtype b) {
  if (a == Dtype::I32 || b == Dtype::I32) return Dtype::I32;
  if (a == Dtype::U8 || b == Dtype::U8) return Dtype::U8;
  return Dtype::Bool;
}

const std::vector<std::pair<Dtype, Dtype>> kPairs = {
    {Dtype::I32, Dtype::I32}, {Dtype::I32, Dtype::U8}, {Dtype::U8, Dtype::I32}, {Dtype::U8, Dtype::U8},
    {Dtype::I32, Dtype::Bool}, {Dtype::Bool, Dtype::I32}, {Dtype::U8, Dtype::Bool}, {Dtype::Bool, Dtype::U8}};

struct BinaryCase {
  const char* name;
  Tensor (*op)(const Tensor&, const Tensor&);
  int64_t (*ref)(int64_t, int64_t);
  bool compare;
};

const BinaryCase kBinary[] = {
    {"add", [](const Tensor& a, const Tensor& b) { return a + b; }, [](int64_t a, int64_t b) { return a + b; }, false},
    {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }, [](int64_t a, int64_t b) { return a - b; }, false},
    {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }, [](int64_t a, int64_t b) { return a * b; }, false},
    {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); },
     [](int64_t a, int64_t b) { return std::max(a, b); }, false},
    {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); },
     [](int64_t a, int64_t b) { return std::min(a, b); }, false},
    {"eq", [](const Tensor& a, const Tensor& b) { return eq(a, b); },
     [](int64_t a, int64_t b) { return static_cast<int64_t>(a == b); }, true},
    {"ne", [](const Tensor& a, const Tensor& b) { return ne(a, b); },
     [](int64_t a, int64_t b) { return static_cast<int64_t>(a != b); }, true},
    {"lt", [](const Tensor& a, const Tensor& b) { return lt(a, b); },
     [](int64_t a, int64_t b) { return static_cast<int64_t>(a < b); }, true},
    {"le", [](const Tensor& a, const Tensor& b) { return le(a, b); },
     [](int64_t a, int64_t b) { return static_cast<int64_t>(a <= b); }, true},
    {"gt", [](const Tensor& a, const Tensor& b) { return gt(a, b); },
     [](int64_t a, int64_t b) { return static_cast<int64_t>(a > b); }, true},
    {"ge", [](const Tensor& a, const Tensor& b) { return ge(a, b); },
     [](int64_t a, int64_t b) { return static_cast<int64_t>(a >= b); }, true},
};

TEST_P(Int32Lanes, BinaryOpsWrapAsTorchsIntegers) {
  for (const BinaryCase& c : kBinary) {
    for (auto [ta, tb] : kPairs) {
      if (std::string(c.name) == "sub" && (ta == Dtype::Bool || tb == Dtype::Bool)) {
        // torch refuses a subtraction with any bool operand.
        expect_error("sub of bool", [&] { (void)(make(ta, {1}) - make(tb, {1})); }, {"sub", "bool", "not supported"});
        continue;
      }
      for (int64_t n : lengths()) {
        const std::vector<int64_t> a = values(ta, n, static_cast<uint32_t>(n) * 7 + 1);
        std::vector<int64_t> b = values(tb, n, static_cast<uint32_t>(n) * 7 + 2);
        for (int64_t i = 0; i < n; i += 4) b[static_cast<size_t>(i)] = wrap(tb, a[static_cast<size_t>(i)]);
        const Tensor y = c.op(make(ta, a), make(tb, b));
        const Dtype rt = c.compare ? Dtype::Bool : promoted(ta, tb);
        ASSERT_EQ(y.dtype(), rt) << c.name << " " << dtype_name(ta) << " " << dtype_name(tb);
        const std::vector<int64_t> got = read(y);
        ASSERT_EQ(got.size(), static_cast<size_t>(n));
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_EQ(got[i], wrap(rt, c.ref(a[i], b[i])))
              << c.name << "(" << dtype_name(ta) << " " << a[i] << ", " << dtype_name(tb) << " " << b[i]
              << ") n=" << n << " i=" << i;
      }
    }
  }
}

TEST_P(Int32Lanes, UnaryOpsAndWhere) {
  for (Dtype t : {Dtype::I32, Dtype::U8}) {
    for (int64_t n : lengths()) {
      const std::vector<int64_t> a = values(t, n, static_cast<uint32_t>(n) + 11);
      const std::vector<int64_t> b = values(t, n, static_cast<uint32_t>(n) + 12);
      const std::vector<int64_t> m = values(Dtype::Bool, n, static_cast<uint32_t>(n) + 13);
      const Tensor x = make(t, a);
      const std::vector<int64_t> yn = read(neg(x)), ya = read(abs(x)), yr = read(relu(x));
      const std::vector<int64_t> yw = read(where(make(Dtype::Bool, m), x, make(t, b)));
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_EQ(yn[i], wrap(t, -a[i])) << "neg " << dtype_name(t) << " " << a[i];
        // torch: abs of INT32_MIN is INT32_MIN; abs of a uint8 is itself.
        ASSERT_EQ(ya[i], wrap(t, a[i] < 0 ? -a[i] : a[i])) << "abs " << dtype_name(t) << " " << a[i];
        ASSERT_EQ(yr[i], a[i] > 0 ? a[i] : 0) << "relu " << dtype_name(t) << " " << a[i];
        ASSERT_EQ(yw[i], m[i] ? a[i] : b[i]) << "where " << dtype_name(t);
      }
    }
  }
}

// A fused chain wraps after every op, as torch's op-by-op uint8 does; the
// comparisons and min/max see the wrapped values.
TEST_P(Int32Lanes, FusedChainsWrapAfterEveryOp) {
  for (Dtype t : {Dtype::U8, Dtype::I32}) {
    for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{4099}}) {
      const std::vector<int64_t> a = values(t, n, 21), b = values(t, n, 22), c = values(t, n, 23);
      const Tensor x = make(t, a), y = make(t, b), z = make(t, c);
      const Tensor s = x * y + z;      // wraps twice
      const Tensor d = maximum(s - x, -z);
      const Tensor k = gt(s, y);
      const Tensor w = where(k, d, abs(s)) * y;
      const std::vector<int64_t> gs = read(s), gd = read(d), gk = read(k), gw = read(w);
      for (size_t i = 0; i < a.size(); ++i) {
        const int64_t rs = wrap(t, wrap(t, a[i] * b[i]) + c[i]);
        const int64_t rd = std::max(wrap(t, rs - a[i]), wrap(t, -c[i]));
        const int64_t rk = rs > b[i];
        const int64_t rw = wrap(t, (rk ? rd : wrap(t, rs < 0 ? -rs : rs)) * b[i]);
        ASSERT_EQ(gs[i], rs) << dtype_name(t) << " i=" << i;
        ASSERT_EQ(gd[i], rd) << dtype_name(t) << " i=" << i;
        ASSERT_EQ(gk[i], rk) << dtype_name(t) << " i=" << i;
        ASSERT_EQ(gw[i], rw) << dtype_name(t) << " i=" << i;
      }
    }
  }
}

// Integers read by float ops convert to f32 to nearest even first (torch
// promotes, then computes in float32); conversions with to().
TEST_P(Int32Lanes, MixedWithFloatsAndConversions) {
  for (int64_t n : lengths()) {
    const std::vector<int64_t> a = values(Dtype::I32, n, static_cast<uint32_t>(n) + 31);
    std::vector<float> f(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) f[static_cast<size_t>(i)] = 0.25f * static_cast<float>(i) - 3.0f;
    const Tensor x = make(Dtype::I32, a);
    const Tensor fx = Tensor::from_vector(f, {n});
    const Tensor sum = x + fx, twice = (x + x) * 0.5f;
    const std::vector<float> gs = sum.to_vector<float>(), gt2 = twice.to_vector<float>();
    const std::vector<int64_t> gu = read(x.to(Dtype::U8)), gb = read(x.to(Dtype::Bool));
    const std::vector<int64_t> gi = read(x.to(Dtype::U8).to(Dtype::I32));
    const std::vector<float> gf = x.to(Dtype::F32).to_vector<float>();
    const std::vector<int64_t> gbi = read(gt(x, 0.0f).to(Dtype::I32) + x);
    for (size_t i = 0; i < a.size(); ++i) {
      const float af = static_cast<float>(a[i]);
      ASSERT_TRUE(same_float(gs[i], af + f[i])) << a[i];
      ASSERT_TRUE(same_float(gt2[i], static_cast<float>(wrap(Dtype::I32, 2 * a[i])) * 0.5f)) << a[i];
      ASSERT_EQ(gu[i], wrap(Dtype::U8, a[i])) << a[i];
      ASSERT_EQ(gb[i], a[i] != 0) << a[i];
      ASSERT_EQ(gi[i], wrap(Dtype::U8, a[i])) << a[i];
      ASSERT_TRUE(same_float(gf[i], af)) << a[i];
      ASSERT_EQ(gbi[i], wrap(Dtype::I32, a[i] + (af > 0.0f))) << a[i];
    }
  }
}

// Any nonzero byte of a bool buffer is true (1) in integer arithmetic too.
TEST_P(Int32Lanes, BoolBytesCountAsOne) {
  const std::vector<uint8_t> bytes = {0, 1, 2, 255, 7, 0, 128};
  const std::vector<int32_t> v = {5, 5, 5, 5, INT32_MAX, INT32_MIN, -1};
  const Tensor m = Tensor::from_blob(static_cast<const void*>(bytes.data()), {7}, Dtype::Bool);
  const std::vector<int32_t> got = (Tensor::from_vector(v, {7}) + m).to_vector<int32_t>();
  for (size_t i = 0; i < v.size(); ++i)
    EXPECT_EQ(got[i], static_cast<int32_t>(static_cast<uint32_t>(v[i]) + (bytes[i] != 0 ? 1u : 0u))) << i;
}

// The same bits on both tiers, every ISA the CPU has, every tail length;
// the machine-code runs really are machine code (int32, uint8 and bool lanes
// load and store on the JIT).
TEST(Int32LanesTiers, InterpreterAndMachineCodeAgree) {
  DVM_SKIP_WITHOUT_JIT();
  SettingsGuard guard;
  for (const char* isa : testing::machine_code_isas()) {
    dvm::set_isa(isa);
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{17}, int64_t{33}, int64_t{4099}}) {
      const std::vector<int64_t> a = values(Dtype::I32, n, 91), b = values(Dtype::I32, n, 92);
      const std::vector<int64_t> c = values(Dtype::U8, n, 93);
      auto program = [&] {
        const Tensor x = make(Dtype::I32, a), y = make(Dtype::I32, b), u = make(Dtype::U8, c);
        const Tensor s = maximum(x * y - x, -y);
        const Tensor w = u * u + u;  // uint8 wraps
        const Tensor m = lt(s, y);
        return std::vector<std::vector<int64_t>>{read(s), read(m), read(w), read(m.to(Dtype::U8)),
                                                  read(where(m, s, x).to(Dtype::U8))};
      };
      expect_tiers_agree(program, std::string(isa) + " n=" + std::to_string(n));
    }
  }
}

TEST(Int32LanesErrors, WhatStaysRefusedIsAClearError) {
  Tensor i32 = Tensor::full({4}, 1, Dtype::I32), i64 = Tensor::full({4}, 1, Dtype::I64);
  Tensor u8 = Tensor::full({4}, 1, Dtype::U8);
  expect_error("i32 mean", [&] { (void)i32.mean(); }, {"int32"});
  expect_error("u8 mean", [&] { (void)u8.mean({0}); }, {"mean", "uint8[4]"});
  expect_error("i64 pow", [&] { (void)pow(i64, i64); }, {"pow", "int64", "not supported"});
}

INSTANTIATE_TEST_SUITE_P(Target, Int32Lanes, ::testing::ValuesIn(kTargets), target_name);

}  // namespace
}  // namespace dvm::testing
