// Element types through the public API: creation and observation of every
// type, torch's type promotion, conversions (Tensor::to), ops on 16-bit
// floats, uint8 and bool against references computed here, and the errors for
// what the vector unit does not do yet. Every target (ISA x tier) runs them.
#include "tests/tracer/tracer_testing.h"

#include <bit>
#include <functional>

namespace dvm::testing {
namespace {

class Dtypes : public IsaTest {};

// x rounded to the 16-bit float t, computed from the format's definition in
// double (nearest, ties to even): independent of the library's bit tricks.
double round16(Dtype t, float x) {
  if (std::isnan(x) || std::isinf(x) || x == 0) return x;
  const int man = t == Dtype::F16 ? 10 : 7, emin = t == Dtype::F16 ? -14 : -126;
  const double overflow = t == Dtype::F16 ? 65520.0 : 0x1.ffp127;
  int e = 0;
  std::frexp(std::fabs(static_cast<double>(x)), &e);
  e = std::max(e - 1, emin);
  const double q = std::ldexp(1.0, e - man);
  const double r = std::nearbyint(x / q) * q;
  return std::fabs(r) >= overflow ? std::copysign(static_cast<double>(kInf), x) : r;
}

float from16(Dtype t, uint16_t bits) { return t == Dtype::F16 ? to_float(Half{bits}) : to_float(BFloat16{bits}); }

std::vector<uint16_t> bits16(Dtype t, const std::vector<float>& v) {
  std::vector<uint16_t> out;
  for (float f : v) out.push_back(t == Dtype::F16 ? to_half(f).bits : to_bfloat16(f).bits);
  return out;
}

Tensor tensor16(Dtype t, const std::vector<uint16_t>& bits, Shape s) {
  return Tensor::from_blob(static_cast<const void*>(bits.data()), s, t);
}

std::vector<uint16_t> read16(const Tensor& y) {
  const Dtype t = y.dtype();
  std::vector<uint16_t> out(static_cast<size_t>(y.numel()));
  if (t == Dtype::F16) {
    const std::vector<Half> h = y.to_vector<Half>();
    for (size_t i = 0; i < h.size(); ++i) out[i] = h[i].bits;
  } else {
    const std::vector<BFloat16> h = y.to_vector<BFloat16>();
    for (size_t i = 0; i < h.size(); ++i) out[i] = h[i].bits;
  }
  return out;
}

// ---- creation and observation ------------------------------------------------------

TEST_P(Dtypes, EveryTypeRoundTripsThroughFromVectorAndToVector) {
  const std::vector<int32_t> i32 = {0, -1, 16777217, INT32_MIN, INT32_MAX};
  EXPECT_EQ(Tensor::from_vector(i32, {5}).to_vector<int32_t>(), i32);
  const std::vector<int64_t> i64 = {0, -1, (int64_t{1} << 40) + 1, INT64_MIN, INT64_MAX};
  Tensor t64 = Tensor::from_vector(i64, {5});
  EXPECT_EQ(t64.dtype(), Dtype::I64);
  EXPECT_EQ(t64.to_vector<int64_t>(), i64);
  EXPECT_EQ(std::vector<int64_t>(t64.data<int64_t>(), t64.data<int64_t>() + 5), i64);
  const std::vector<uint8_t> u8 = {0, 1, 127, 128, 255};
  EXPECT_EQ(Tensor::from_vector(u8, {5}).to_vector<uint8_t>(), u8);
  const std::vector<bool> b = {true, false, true};
  EXPECT_EQ(Tensor::from_vector(b, {3}).to_vector<bool>(), b);
  const std::vector<Half> h = {to_half(1.5f), to_half(-65504.0f), Half{0x7c00}};
  const std::vector<Half> hb = Tensor::from_vector(h, {3}).to_vector<Half>();
  for (size_t i = 0; i < h.size(); ++i) EXPECT_EQ(hb[i].bits, h[i].bits);
  // to_vector() gives float32 whatever the type, as loads convert.
  EXPECT_EQ(Tensor::from_vector(i32, {5}).to_vector(),
            (std::vector<float>{0.0f, -1.0f, 16777216.0f, -2147483648.0f, 2147483648.0f}));
  EXPECT_EQ(Tensor::from_vector(b, {3}).to_vector(), (std::vector<float>{1.0f, 0.0f, 1.0f}));
}

TEST_P(Dtypes, StridedViewsOfIntegersAreCopiedExactly) {
  // int64 values beyond 2^24 in a transposed view: data<T>() and
  // contiguous() copy bytes, never through f32.
  std::vector<int64_t> v(12);
  for (size_t i = 0; i < v.size(); ++i) v[i] = (int64_t{1} << 40) + static_cast<int64_t>(i) * 3 + 1;
  Tensor x = Tensor::from_vector(v, {3, 4}).transpose(0, 1);
  const int64_t* d = x.data<int64_t>();
  Tensor c = x.contiguous();
  const std::vector<int64_t> cv = c.to_vector<int64_t>();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) {
      EXPECT_EQ(d[i * 3 + j], v[static_cast<size_t>(j * 4 + i)]);
      EXPECT_EQ(cv[static_cast<size_t>(i * 3 + j)], v[static_cast<size_t>(j * 4 + i)]);
    }
  std::vector<int32_t> w = {16777217, 16777219, -16777217, 5, 6, 7};
  Tensor y = Tensor::from_vector(w, {2, 3}).transpose(0, 1).reshape({6});
  EXPECT_EQ(y.to_vector<int32_t>(), (std::vector<int32_t>{16777217, 5, 16777219, 6, -16777217, 7}));
}

TEST_P(Dtypes, FullAndArangeConvertTheirValues) {
  EXPECT_EQ(Tensor::full({3}, 3.7, Dtype::I32).to_vector<int32_t>(), (std::vector<int32_t>{3, 3, 3}));
  EXPECT_EQ(Tensor::full({2}, -2.5, Dtype::I64).to_vector<int64_t>(), (std::vector<int64_t>{-2, -2}));
  EXPECT_EQ(Tensor::full({2}, 0.1, Dtype::Bool).to_vector<bool>(), (std::vector<bool>{true, true}));
  EXPECT_EQ(read16(Tensor::full({2}, 0.1, Dtype::F16))[1], to_half(0.1f).bits);
  EXPECT_EQ(Tensor::arange(0, 5, 2, Dtype::U8).to_vector<uint8_t>(), (std::vector<uint8_t>{0, 2, 4}));
  EXPECT_EQ(Tensor::arange(16777216, 16777219, 1, Dtype::I32).to_vector<int32_t>(),
            (std::vector<int32_t>{16777216, 16777217, 16777218}));
  expect_error("full u8 256", [] { Tensor::full({2}, 256, Dtype::U8); }, {"full", "256", "uint8"});
  expect_error("full i32 nan", [] { Tensor::full({2}, std::nan(""), Dtype::I32); }, {"full", "int32"});
  expect_error("arange i32", [] { Tensor::arange(2e9, 3e9, 2e8, Dtype::I32); }, {"arange", "int32"});
  // A finite value beyond a floating type's largest is refused (torch's
  // checked conversion); its largest and an infinity are not.
  EXPECT_EQ(read16(Tensor::full({1}, 65504.0, Dtype::F16))[0], to_half(65504.0f).bits);
  EXPECT_EQ(Tensor::full({1}, -INFINITY, Dtype::F16).to(Dtype::F32).to_vector()[0], -INFINITY);
  expect_error("full f16 65520", [] { Tensor::full({2}, 65520.0, Dtype::F16); }, {"full", "float16", "65520"});
  expect_error("full bf16 3.4e38", [] { Tensor::full({2}, -3.4e38, Dtype::BF16); }, {"full", "bfloat16"});
  expect_error("full f32 1e39", [] { Tensor::full({2}, 1e39, Dtype::F32); }, {"full", "float32"});
  // arange converts as full does: its last value past float16's largest too.
  expect_error("arange f16 past 65504", [] { Tensor::arange(65500.0, 65530.0, 8.0, Dtype::F16); },
               {"arange", "float16", "65524"});
  // A step leading away from end is refused, as torch refuses it; an empty
  // range (end == start) is not.
  expect_error("arange 0 to 10 by -1", [] { Tensor::arange(0.0, 10.0, -1.0, Dtype::I32); }, {"arange", "sign"});
  expect_error("arange(-5)", [] { Tensor::arange(int64_t{-5}); }, {"arange", "sign"});
  // The values in the error are the caller's, every digit (not 0.000000).
  expect_error("arange by 1e-30", [] { Tensor::arange(0.0, 1.0, 1e-30, Dtype::F32); },
               {"arange: 0 to 1 by 1.0000000000000001e-30", "too many elements"});
  EXPECT_EQ(Tensor::arange(3.0, 3.0, -1.0, Dtype::I64).numel(), 0);
  EXPECT_EQ(Tensor::arange(5.0, 0.0, -2.0, Dtype::I64).to_vector<int64_t>(), (std::vector<int64_t>{5, 3, 1}));
  expect_error("arange f16 from below", [] { Tensor::arange(-70000.0, 0.0, 10000.0, Dtype::F16); },
               {"arange", "float16", "-70000"});
  EXPECT_EQ(read16(Tensor::arange(65496.0, 65505.0, 8.0, Dtype::F16)),
            (std::vector<uint16_t>{to_half(65496.0f).bits, to_half(65504.0f).bits}));
  const Tensor mask = Tensor::from_vector(std::vector<bool>{true, false}, Shape{2});
  expect_error("masked_fill f16 1e6", [&] { (void)masked_fill(Tensor::full({2}, 7.0, Dtype::F16), mask, 1e6f); },
               {"masked_fill", "float16"});
}

TEST_P(Dtypes, ReadingAsAnotherTypeIsAnError) {
  Tensor x = Tensor::from_vector(std::vector<int32_t>{1, 2}, {2});
  expect_error("to_vector<float>", [&] { (void)x.to_vector<float>(); }, {"to_vector", "int32[2]", "float32"});
  expect_error("data()", [&] { (void)x.data(); }, {"data", "int32[2]", "float32"});
  expect_error("data<Half>", [&] { (void)x.data<Half>(); }, {"data", "float16"});
  expect_error("bad dtype", [] { Tensor::full({1}, 0, static_cast<Dtype>(99)); }, {"full", "unknown dtype"});
  expect_error("from_blob bad dtype", [] { float f = 0; Tensor::from_blob(static_cast<const void*>(&f), {1}, static_cast<Dtype>(7)); },
               {"from_blob", "unknown dtype"});
  // torch has no bool range either.
  expect_error("arange bool", [] { Tensor::arange(0.0, 3.0, 1.0, Dtype::Bool); }, {"arange", "bool", "numeric"});
}

// ---- promotion -----------------------------------------------------------------------

TEST(DtypePromotion, PromoteTypesIsTorchsTable) {
  using D = Dtype;
  // torch.promote_types for every pair (symmetric).
  struct Row {
    D a, b, want;
  };
  const Row rows[] = {
      {D::Bool, D::Bool, D::Bool}, {D::Bool, D::U8, D::U8},     {D::Bool, D::I32, D::I32},
      {D::Bool, D::I64, D::I64},   {D::Bool, D::F16, D::F16},   {D::Bool, D::BF16, D::BF16},
      {D::Bool, D::F32, D::F32},   {D::U8, D::U8, D::U8},       {D::U8, D::I32, D::I32},
      {D::U8, D::I64, D::I64},     {D::U8, D::F16, D::F16},     {D::U8, D::BF16, D::BF16},
      {D::U8, D::F32, D::F32},     {D::I32, D::I64, D::I64},    {D::I32, D::F16, D::F16},
      {D::I32, D::BF16, D::BF16},  {D::I32, D::F32, D::F32},    {D::I64, D::F16, D::F16},
      {D::I64, D::BF16, D::BF16},  {D::I64, D::F32, D::F32},    {D::F16, D::BF16, D::F32},
      {D::F16, D::F32, D::F32},    {D::BF16, D::F32, D::F32},   {D::F16, D::F16, D::F16},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(promote_types(r.a, r.b), r.want) << dtype_name(r.a) << " " << dtype_name(r.b);
    EXPECT_EQ(promote_types(r.b, r.a), r.want) << dtype_name(r.b) << " " << dtype_name(r.a);
  }
}

TEST(DtypePromotion, OpResultTypesFollowTorch) {
  Tensor f32 = Tensor::ones({4});
  Tensor f16 = Tensor::full({4}, 1, Dtype::F16), bf16 = Tensor::full({4}, 1, Dtype::BF16);
  Tensor i32 = Tensor::full({4}, 1, Dtype::I32), u8 = Tensor::full({4}, 1, Dtype::U8);
  Tensor mask = gt(f32, 0.0f), s32 = Tensor::scalar(2.0f);
  EXPECT_EQ((i32 + f32).dtype(), Dtype::F32);
  EXPECT_EQ((f16 + f16).dtype(), Dtype::F16);
  EXPECT_EQ((f16 + f32).dtype(), Dtype::F32);
  EXPECT_EQ((f16 + bf16).dtype(), Dtype::F32);
  EXPECT_EQ((f16 * 2.0f).dtype(), Dtype::F16);  // a float scalar keeps a float tensor's type
  EXPECT_EQ((f16 * s32).dtype(), Dtype::F16);   // so does a 0-d tensor
  EXPECT_EQ((i32 * 2.0f).dtype(), Dtype::F32);  // and lifts an integer one to float32
  EXPECT_EQ((u8 / u8).dtype(), Dtype::F32);     // true division
  EXPECT_EQ(exp(i32).dtype(), Dtype::F32);
  EXPECT_EQ(tanh(bf16).dtype(), Dtype::BF16);
  EXPECT_EQ(lt(f16, f32).dtype(), Dtype::Bool);
  EXPECT_EQ(eq(u8, u8).dtype(), Dtype::Bool);
  EXPECT_EQ(maximum(u8, u8).dtype(), Dtype::U8);
  EXPECT_EQ(where(mask, u8, u8).dtype(), Dtype::U8);
  EXPECT_EQ(where(mask, f16, f32).dtype(), Dtype::F32);
  EXPECT_EQ(f16.sum().dtype(), Dtype::F16);
  EXPECT_EQ(bf16.mean(0).dtype(), Dtype::BF16);
  EXPECT_EQ(u8.max().dtype(), Dtype::U8);
  EXPECT_EQ(mask.sum().dtype(), Dtype::I64);  // torch: counts the trues
  EXPECT_EQ(mask.mean().dtype(), Dtype::F32);  // the fraction of trues (torch refuses bool)
  EXPECT_EQ((mask + mask).dtype(), Dtype::Bool);  // torch: logical or
  EXPECT_EQ((mask * mask).dtype(), Dtype::Bool);
  EXPECT_EQ((mask * 2.0f).dtype(), Dtype::F32);
  EXPECT_EQ((mask & mask).dtype(), Dtype::Bool);
  EXPECT_EQ((u8 | mask).dtype(), Dtype::U8);
  EXPECT_EQ(floor_divide(u8, mask).dtype(), Dtype::U8);
  EXPECT_EQ(remainder(f16, f16).dtype(), Dtype::F16);
  EXPECT_EQ(logical_and(f16, u8).dtype(), Dtype::Bool);
  EXPECT_EQ(matmul(Tensor::full({2, 3}, 1, Dtype::F16), Tensor::full({3, 2}, 1, Dtype::F16)).dtype(), Dtype::F16);
}

// A float scalar (x * 2.0f, clamp's bounds) is torch's wrapped number: it
// changes the result type only when it is of a higher category than every
// tensor operand, 0-d ones included.
TEST(DtypePromotion, FloatScalarsKeepAZeroDimTensorsFloatType) {
  for (Dtype t : {Dtype::F16, Dtype::BF16}) {
    const Tensor zero_dim = Tensor::full(Shape{}, 1.5, t), vec = Tensor::full(Shape{3}, 1.5, t);
    EXPECT_EQ((zero_dim * 2.0f).dtype(), t);
    EXPECT_EQ((2.0f + zero_dim).dtype(), t);
    EXPECT_EQ(clamp(zero_dim, 0.0f, 1.0f).dtype(), t);
    EXPECT_EQ((vec.sum() * 2.0f).dtype(), t);
    EXPECT_EQ((zero_dim * 2.0f).to_vector()[0], 3.0f);
    EXPECT_EQ(clamp(zero_dim, 0.0f, 1.0f).to_vector()[0], 1.0f);
  }
  // Integer and bool operands still become float32.
  EXPECT_EQ((Tensor::full(Shape{}, 3, Dtype::I32) * 2.0f).dtype(), Dtype::F32);
  EXPECT_EQ((Tensor::full(Shape{}, 1, Dtype::Bool) * 2.0f).dtype(), Dtype::F32);
  // where's float scalar is a scalar too (its mask takes no part).
  const Tensor mask = Tensor::from_vector(std::vector<bool>{true, false}, Shape{2});
  for (Dtype t : {Dtype::F16, Dtype::BF16}) {
    const Tensor zero_dim = Tensor::full(Shape{}, 1.5, t);
    EXPECT_EQ(where(mask, zero_dim, 2.0f).dtype(), t);
    EXPECT_EQ(where(mask, 0.1f, zero_dim).dtype(), t);
    const std::vector<float> got = where(mask, 0.1f, zero_dim).to(Dtype::F32).to_vector();
    EXPECT_EQ(got[0], t == Dtype::F16 ? to_float(to_half(0.1f)) : to_float(to_bfloat16(0.1f)));
    EXPECT_EQ(got[1], 1.5f);
  }
  EXPECT_EQ(where(mask, Tensor::full(Shape{}, 3, Dtype::I32), 2.0f).dtype(), Dtype::F32);
  // A 0-d float32 tensor is a tensor, not a scalar: float16 [3] with it stays float16.
  EXPECT_EQ((Tensor::full(Shape{3}, 1.5, Dtype::F16) * Tensor::full(Shape{}, 2.0, Dtype::F32)).dtype(), Dtype::F16);
}

// clamp with tensor bounds promotes x and both bounds together (torch's
// result_type of the three), then clamps in that type: for every triple of
// types with dimensions, the result type is the pairwise promotion of all
// three and each value min(max(x, lo), hi) of the operands converted to it
// (the values are small integers, exact in every type). Then 0-d bounds and
// wrapped scalars of a higher category.
TEST(DtypePromotion, ClampPromotesTheOperandAndBothBoundsTogether) {
  const Dtype types[] = {Dtype::Bool, Dtype::U8, Dtype::I32, Dtype::I64, Dtype::F16, Dtype::BF16, Dtype::F32};
  std::mt19937 rng(1129);
  auto make = [&](Dtype t, int64_t lo, int64_t hi, std::vector<double>* v) {
    std::vector<float> f(8);
    for (float& e : f) {
      e = static_cast<float>(std::uniform_int_distribution<int64_t>(lo, hi)(rng));
      if (t == Dtype::Bool) e = e > 0 ? 1.0f : 0.0f;
      if (t == Dtype::U8 && e < 0) e = -e;
    }
    v->assign(f.begin(), f.end());
    return Tensor::from_vector(f, Shape{8}).to(t);
  };
  for (Dtype tx : types)
    for (Dtype tl : types)
      for (Dtype th : types) {
        const Dtype want = promote_types(promote_types(tx, tl), th);
        const std::string what = std::string("clamp(") + dtype_name(tx) + ", " + dtype_name(tl) + ", " +
                                 dtype_name(th) + ")";
        std::vector<double> x, lo, hi;
        const Tensor X = make(tx, -9, 9, &x), L = make(tl, -6, 2, &lo), H = make(th, 0, 6, &hi);
        const Tensor y = clamp(X, L, H);
        ASSERT_EQ(y.dtype(), want) << what;
        const std::vector<float> got = y.to(Dtype::F32).to_vector();
        for (size_t i = 0; i < got.size(); ++i) {
          const double r = std::min(std::max(x[i], lo[i]), hi[i]);
          ASSERT_EQ(got[i], static_cast<float>(want == Dtype::Bool ? r != 0 : r)) << what << " element " << i;
        }
      }
  const Tensor u8 = Tensor::from_vector(std::vector<float>{19, 10}, Shape{2}).to(Dtype::U8);
  const Tensor f16_hi = Tensor::full(Shape{2}, 100.0, Dtype::F16);
  const Tensor a = clamp(u8, Tensor(-7), f16_hi);  // -7 in float16, not a uint8 249
  EXPECT_EQ(a.dtype(), Dtype::F16);
  EXPECT_EQ(a.to(Dtype::F32).to_vector(), (std::vector<float>{19, 10}));
  const Tensor b = clamp(u8, Tensor::full(Shape{}, -1, Dtype::I32), Tensor::full(Shape{}, 13.0, Dtype::F32));
  EXPECT_EQ(b.dtype(), Dtype::F32);  // a 0-d float bound of a higher category
  EXPECT_EQ(b.to_vector(), (std::vector<float>{13, 10}));
  const Tensor c = clamp(u8, Tensor(1000), Tensor::full(Shape{2}, 2000.0, Dtype::F32));
  EXPECT_EQ(c.to_vector(), (std::vector<float>{1000, 1000}));  // 1000 fits float32
}

// ---- integer scalars ---------------------------------------------------------------------

// v wrapped to the width of integer type t (two's complement), as int64.
int64_t wrap_to(Dtype t, int64_t v) {
  if (t == Dtype::I32) return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v)));
  if (t == Dtype::U8) return static_cast<uint8_t>(static_cast<uint64_t>(v));
  if (t == Dtype::Bool) return v != 0;
  return v;
}

// Python's floor division and remainder on int64 (no zero divisor, no overflow).
int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
int64_t floor_mod(int64_t a, int64_t b) { return a - floor_div(a, b) * b; }

std::vector<int64_t> read_as_int64(const Tensor& y) {
  std::vector<int64_t> out;
  switch (y.dtype()) {
    case Dtype::I32: for (int32_t v : y.to_vector<int32_t>()) out.push_back(v); break;
    case Dtype::I64: out = y.to_vector<int64_t>(); break;
    case Dtype::U8: for (uint8_t v : y.to_vector<uint8_t>()) out.push_back(v); break;
    case Dtype::Bool: for (bool v : y.to_vector<bool>()) out.push_back(v); break;
    default: ADD_FAILURE() << "not an integer result: " << dtype_name(y.dtype());
  }
  return out;
}

// A C++ integer operand (x + 1, eq(ids, 7), where(m, x, 0), clamp(ids, 0, 9))
// is torch's wrapped integer: an integer tensor keeps its type (bool becomes
// int64), the value converts to that type and one it cannot hold is an
// error; with a floating tensor it is the float scalar it converts to.
TEST_P(Dtypes, IntegerScalarsAreTorchsWrappedIntegers) {
  std::mt19937_64 rng(41);
  const std::vector<int64_t> scalars = {1, -1, 2, -3, 7, 100, 255, -255, 65537, 2147483647, -2147483647,
                                        int64_t{1} << 40, -(int64_t{1} << 33) - 5, int64_t{9007199254740993}};
  enum Op { Add, Sub, Mul, FloorDiv, Rem, Max, Min, Eq, Lt, And, Xor, Where, Clamp };
  const char* names[] = {"add", "sub", "mul", "floor_divide", "remainder", "maximum", "minimum", "eq", "lt",
                         "bitwise_and", "bitwise_xor", "where", "clamp"};
  int checked = 0;
  for (Dtype t : {Dtype::I32, Dtype::I64, Dtype::U8, Dtype::Bool}) {
    // Random values of t, none zero (divisors), none at int32's minimum (its quotient by -1 overflows).
    const int64_t n = 1 + static_cast<int64_t>(rng() % 37);
    std::vector<int64_t> xs;
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = wrap_to(t, static_cast<int64_t>(rng() >> (rng() % 64)) * (rng() % 2 ? 1 : -1));
      if (v == 0 || v == INT32_MIN || v == INT64_MIN) v = 1;
      xs.push_back(v);
    }
    Tensor x;
    switch (t) {
      case Dtype::I32: { std::vector<int32_t> v(xs.begin(), xs.end()); x = Tensor::from_vector(v, Shape{n}); break; }
      case Dtype::I64: x = Tensor::from_vector(xs, Shape{n}); break;
      case Dtype::U8: { std::vector<uint8_t> v(xs.begin(), xs.end()); x = Tensor::from_vector(v, Shape{n}); break; }
      default: { std::vector<bool> v(xs.begin(), xs.end()); x = Tensor::from_vector(v, Shape{n}); break; }
    }
    const Dtype ct = t == Dtype::Bool ? Dtype::I64 : t;  // the computation type
    const int64_t lo = t == Dtype::I32 ? INT32_MIN : t == Dtype::U8 ? -255 : INT64_MIN;
    const int64_t hi = t == Dtype::I32 ? INT32_MAX : t == Dtype::U8 ? 255 : INT64_MAX;
    const Tensor mask = gt(x, Tensor(wrap_to(ct, 1)));
    mask.sync();  // computed here: a refused where records nothing
    for (int64_t s : scalars)
      for (int op = Add; op <= Clamp; ++op)
        for (bool first : {false, true}) {
          if (first && (op == Where || op == Clamp)) continue;
          const std::string what = std::string(names[op]) + " of " + dtype_name(t) + " and " + std::to_string(s) +
                                   (first ? " (scalar first)" : "");
          const bool divides = op == FloorDiv || op == Rem;
          if (divides && first) continue;  // x holds the divisors' values only by chance
          if (t == Dtype::Bool && (op == Sub || divides)) continue;  // torch refuses these for bool (tested elsewhere)
          auto record = [&]() -> Tensor {
            switch (op) {
              case Add: return first ? s + x : x + s;
              case Sub: return first ? s - x : x - s;
              case Mul: return first ? s * x : x * s;
              case FloorDiv: return floor_divide(x, s);
              case Rem: return remainder(x, s);
              case Max: return first ? maximum(s, x) : maximum(x, s);
              case Min: return first ? minimum(s, x) : minimum(x, s);
              case Eq: return first ? eq(s, x) : eq(x, s);
              case Lt: return first ? lt(s, x) : lt(x, s);
              case And: return first ? (s & x) : (x & Tensor(s));
              case Xor: return first ? (s ^ x) : (x ^ Tensor(s));
              case Where: return where(mask, x, s);
              default: return clamp(x, -s, s);
            }
          };
          if (s < lo || s > hi || (op == Clamp && -s < lo)) {
            expect_error(what, [&] { (void)record().to_vector<int64_t>(); }, {"integer scalar", dtype_name(ct)});
            continue;
          }
          const Tensor y = record();
          const bool compares = op == Eq || op == Lt;
          const Dtype want_type = compares ? Dtype::Bool : ct;
          ASSERT_EQ(y.dtype(), want_type) << what;
          const int64_t sv = wrap_to(ct, s);  // the scalar in the computation type
          const std::vector<int64_t> got = read_as_int64(y);
          ASSERT_EQ(got.size(), xs.size()) << what;
          for (size_t i = 0; i < xs.size(); ++i) {
            const int64_t a = first ? sv : xs[i], b = first ? xs[i] : sv;
            const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
            int64_t want = 0;
            switch (op) {
              case Add: want = static_cast<int64_t>(ua + ub); break;
              case Sub: want = static_cast<int64_t>(ua - ub); break;
              case Mul: want = static_cast<int64_t>(ua * ub); break;
              case FloorDiv: want = floor_div(a, b); break;
              case Rem: want = floor_mod(a, b); break;
              case Max: want = std::max(a, b); break;
              case Min: want = std::min(a, b); break;
              case Eq: want = a == b; break;
              case Lt: want = a < b; break;
              case And: want = a & b; break;
              case Xor: want = a ^ b; break;
              case Where: want = xs[i] > wrap_to(ct, 1) ? xs[i] : sv; break;
              default: want = std::min(std::max(xs[i], wrap_to(ct, -s)), sv); break;
            }
            EXPECT_EQ(got[i], wrap_to(want_type, want)) << what << " at " << i << " (x = " << xs[i] << ")";
          }
          ++checked;
        }
  }
  EXPECT_GT(checked, 500);
  // With a floating tensor an integer is the float scalar it converts to: the same bits as with that float.
  for (Dtype t : {Dtype::F32, Dtype::F16, Dtype::BF16}) {
    const Tensor x = Tensor::from_vector(std::vector<float>{1.5f, -2.25f, 1e6f, 0.0f}, Shape{4}).to(t);
    for (int64_t s : scalars) {
      const float f = static_cast<float>(s);
      const std::vector<std::pair<Tensor, Tensor>> pairs = {
          {x + s, x + f}, {s - x, f - x}, {x * s, x * f}, {x / s, x / f}, {maximum(x, s), maximum(x, f)},
          {where(gt(x, 0.0f), x, s), where(gt(x, 0.0f), x, Tensor(f))}};
      for (const auto& [got, want] : pairs) {
        ASSERT_EQ(got.dtype(), t) << dtype_name(t) << " with " << s;
        EXPECT_EQ(got.to(Dtype::F32).to_vector(), want.to(Dtype::F32).to_vector()) << dtype_name(t) << " with " << s;
      }
    }
  }
  // True division of integers is float32, as in torch; a scalar alone is a 0-d int64 tensor.
  EXPECT_EQ((Tensor::full(Shape{2}, 7, Dtype::I32) / 2).to_vector(), (std::vector<float>{3.5f, 3.5f}));
  EXPECT_EQ(Tensor(5).dtype(), Dtype::I64);
  // A 0-d integer tensor keeps its type too (a 0-d int64 tensor would promote it).
  for (Dtype t : {Dtype::I32, Dtype::U8}) {
    const Tensor y = Tensor::full(Shape{}, 3, t) + 250;
    ASSERT_EQ(y.dtype(), t);
    EXPECT_EQ(read_as_int64(y)[0], 253);
  }
  EXPECT_EQ(Tensor(int64_t{1} << 62).to_vector<int64_t>()[0], int64_t{1} << 62);
  expect_error("unsigned above int64", [] { (void)Tensor(~uint64_t{0}); }, {"integer scalar", "int64"});
}

// True division of integers computes in float32, and torch converts each
// operand to float32 from its own type: -1 / x of uint8 is -1.0f / x (not
// 255 / x), a 0-d int64 2^40 meets an int32 tensor as 2^40, and a scalar
// uint8 cannot hold (300) is no error.
TEST_P(Dtypes, TrueDivisionConvertsEachIntegerOperandFromItsOwnType) {
  std::mt19937_64 rng(43);
  const int64_t scalars[] = {1, -1, 3, -7, 300, -256, 70000, int64_t{1} << 40, -(int64_t{1} << 33) - 5};
  auto make_int = [](Dtype t, const std::vector<int64_t>& v, const Shape& shape) {
    switch (t) {
      case Dtype::I32: return Tensor::from_vector(std::vector<int32_t>(v.begin(), v.end()), shape);
      case Dtype::I64: return Tensor::from_vector(v, shape);
      case Dtype::U8: return Tensor::from_vector(std::vector<uint8_t>(v.begin(), v.end()), shape);
      default: return Tensor::from_vector(std::vector<bool>(v.begin(), v.end()), shape);
    }
  };
  int checked = 0;
  for (Dtype t : {Dtype::I32, Dtype::I64, Dtype::U8, Dtype::Bool}) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 29);
    std::vector<int64_t> xs;
    for (int64_t i = 0; i < n; ++i)
      xs.push_back(wrap_to(t, static_cast<int64_t>(rng() >> (rng() % 64)) * (rng() % 2 ? 1 : -1)));
    const Tensor x = make_int(t, xs, Shape{n});
    for (int64_t s : scalars)
      for (int form = 0; form < 3; ++form) {  // a C++ integer, a 0-d int64 tensor, a 0-d int32 tensor
        if (form == 2 && (s > INT32_MAX || s < INT32_MIN)) continue;
        const Tensor z = form == 0 ? Tensor(s) : make_int(form == 1 ? Dtype::I64 : Dtype::I32, {s}, Shape{});
        for (bool first : {false, true}) {
          const std::string what = std::string(dtype_name(t)) + (first ? " under " : " over ") + std::to_string(s) +
                                   (form == 0 ? " (scalar)" : form == 1 ? " (0-d int64)" : " (0-d int32)");
          const Tensor y = first ? z / x : x / z;
          ASSERT_EQ(y.dtype(), Dtype::F32) << what;
          const std::vector<float> got = y.to_vector();
          ASSERT_EQ(got.size(), xs.size()) << what;
          for (size_t i = 0; i < xs.size(); ++i) {
            const float a = static_cast<float>(first ? s : xs[i]), b = static_cast<float>(first ? xs[i] : s);
            const float want = a / b;
            if (std::isnan(want)) EXPECT_TRUE(std::isnan(got[i])) << what << " at " << i;
            else EXPECT_EQ(got[i], want) << what << " at " << i << " (x = " << xs[i] << ")";
          }
          ++checked;
        }
      }
  }
  EXPECT_GT(checked, 150);
}

// A comparison in a 16-bit type compares its operands as that type holds
// them, as torch converts them first: 0.1f, a 0-d float32 tensor of 0.1 and
// an int32 2049 become the float16 values 0.0999755859375 and 2048.
TEST_P(Dtypes, SixteenBitComparisonsRoundTheOtherOperandToTheType) {
  std::mt19937 rng(12);
  for (Dtype t : {Dtype::F16, Dtype::BF16}) {
    std::vector<float> xs;
    for (int i = 0; i < 300; ++i) xs.push_back(std::ldexp(std::uniform_real_distribution<float>(-1, 1)(rng), static_cast<int>(rng() % 20) - 8));
    const std::vector<uint16_t> xb = bits16(t, xs);
    const Tensor x = tensor16(t, xb, {static_cast<int64_t>(xs.size())});
    for (int i = 0; i < 40; ++i) {
      // A constant the type cannot hold exactly, and sometimes one it can.
      const float c = i % 5 == 0 ? from16(t, xb[static_cast<size_t>(rng() % xb.size())])
                                 : std::ldexp(std::uniform_real_distribution<float>(-1, 1)(rng), static_cast<int>(rng() % 20) - 8);
      const double cr = round16(t, c);
      const Tensor zero_dim = Tensor::full(Shape{}, static_cast<double>(c), Dtype::F32);
      const std::vector<std::pair<Tensor, std::function<bool(double, double)>>> cases = {
          {eq(x, c), [](double a, double b) { return a == b; }},  {ne(c, x), [](double a, double b) { return b != a; }},
          {lt(x, c), [](double a, double b) { return a < b; }},   {ge(x, zero_dim), [](double a, double b) { return a >= b; }},
          {le(zero_dim, x), [](double a, double b) { return b <= a; }}, {gt(x, c), [](double a, double b) { return a > b; }}};
      for (size_t k = 0; k < cases.size(); ++k) {
        const std::vector<bool> got = cases[k].first.to_vector<bool>();
        for (size_t e = 0; e < xb.size(); ++e)
          ASSERT_EQ(got[e], cases[k].second(from16(t, xb[e]), cr))
              << dtype_name(t) << " case " << k << " x=" << from16(t, xb[e]) << " c=" << c;
      }
    }
    // A 16-bit value a kernel would keep in float32 registers (one + eps,
    // fused into the comparison) is compared as stored: rounded.
    const Tensor one = Tensor::full(Shape{2}, 1.0, t), eps = Tensor::full(Shape{2}, t == Dtype::F16 ? 0x1p-11 : 0x1p-8, t);
    EXPECT_EQ(eq(one + eps, 1.0f).to_vector<bool>(), std::vector<bool>(2, true)) << dtype_name(t);
    EXPECT_EQ(gt(one + eps, one).to_vector<bool>(), std::vector<bool>(2, false)) << dtype_name(t);
    EXPECT_EQ(lt(one, (one + eps) * 1.0f).to_vector<bool>(), std::vector<bool>(2, false)) << dtype_name(t);
    // So is one promoted to float32 with the other operand (torch converts
    // the stored 16-bit value): a float32 tensor, the other 16-bit type.
    const Tensor one32 = Tensor::full(Shape{2}, 1.0, Dtype::F32);
    const Dtype other = t == Dtype::F16 ? Dtype::BF16 : Dtype::F16;
    EXPECT_EQ(eq(one + eps, one32).to_vector<bool>(), std::vector<bool>(2, true)) << dtype_name(t);
    EXPECT_EQ(gt(one + eps, one32).to_vector<bool>(), std::vector<bool>(2, false)) << dtype_name(t);
    EXPECT_EQ(le(one + eps, Tensor::full(Shape{2}, 1.0, other)).to_vector<bool>(), std::vector<bool>(2, true))
        << dtype_name(t);
    EXPECT_EQ(eq(one32, one + eps).sum().item(), 2.0f) << dtype_name(t);
    // An integer tensor compared with a 16-bit one converts to it too.
    const Tensor h = Tensor::full(Shape{3}, 2048.0, t), i32 = Tensor::full(Shape{3}, 2049, Dtype::I32);
    EXPECT_EQ(eq(h, i32).to_vector<bool>(), std::vector<bool>(3, t == Dtype::F16 || round16(t, 2049.0f) == 2048.0));
  }
}

// layer_norm takes torch's types: a floating input, parameters of its type
// or float32 ones with a 16-bit input (computed in float32, rounded once to
// the input's type), and names itself for anything else.
TEST(DtypePromotion, LayerNormTakesTorchsTypes) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  std::vector<float> xs(3 * 40), ws(40), bs(40);
  for (float& v : xs) v = u(rng);
  for (float& v : ws) v = u(rng);
  for (float& v : bs) v = u(rng);
  const Tensor x32 = Tensor::from_vector(xs, Shape{3, 40}), w = Tensor::from_vector(ws, Shape{40}),
               b = Tensor::from_vector(bs, Shape{40});
  for (Dtype t : {Dtype::F16, Dtype::BF16}) {
    const Tensor x = x32.to(t);
    const Tensor y = layer_norm(x, {40}, w, b);
    ASSERT_EQ(y.dtype(), t);
    // The same float32 computation on the same values, rounded once.
    EXPECT_EQ(y.to_vector(), layer_norm(x.to(Dtype::F32), {40}, w, b).to(t).to_vector()) << dtype_name(t);
    EXPECT_EQ(layer_norm(x, {40}, w.to(t), b.to(t)).dtype(), t);
    // Parameters still pending are read as stored ones are: one rounding.
    const Tensor w16 = w.to(t), b16s = b.to(t);
    EXPECT_EQ(layer_norm(x, {40}, w16 * 1.0f, b16s + 0.0f).to_vector(),
              layer_norm(x.to(Dtype::F32), {40}, w16.to(Dtype::F32), b16s.to(Dtype::F32)).to(t).to_vector())
        << dtype_name(t);
    EXPECT_EQ(layer_norm(x, {40}, Tensor(), b).dtype(), t);
    const Dtype other = t == Dtype::F16 ? Dtype::BF16 : Dtype::F16;
    const Tensor w_other = w.to(other), b16 = b.to(t);
    for (const Tensor* c : {&x, &w_other, &b16}) c->sync();
    expect_error("other 16-bit weight", [&] { (void)layer_norm(x, {40}, w_other, Tensor()); },
                 {"layer_norm", dtype_name(t), std::string("weight ") + dtype_name(other) + "[40]", "float32"});
    expect_error("weight and bias of two types", [&] { (void)layer_norm(x, {40}, w, b16); },
                 {"layer_norm", "weight float32[40]", std::string("bias ") + dtype_name(t) + "[40]"});
  }
  const Tensor w16 = w.to(Dtype::F16), x_int = x32.to(Dtype::I32), mask = gt(x32, 0.0f), w_int = w.to(Dtype::I32);
  for (const Tensor* c : {&w16, &x_int, &mask, &w_int}) c->sync();
  expect_error("float16 weight of a float32 input", [&] { (void)layer_norm(x32, {40}, w16, Tensor()); },
               {"layer_norm", "float32[3, 40]", "weight float16[40]"});
  expect_error("int32 input", [&] { (void)layer_norm(x_int, {40}, Tensor(), Tensor()); },
               {"layer_norm", "int32[3, 40]", "floating"});
  expect_error("bool input", [&] { (void)layer_norm(mask, {40}, Tensor(), Tensor()); },
               {"layer_norm", "bool[3, 40]", "floating"});
  expect_error("int32 weight", [&] { (void)layer_norm(x32, {40}, w_int, Tensor()); }, {"layer_norm", "weight int32[40]"});
}

// A C++ bool is torch's wrapped bool: it changes no type. And torch refuses
// any subtraction with a bool operand, scalars included.
TEST(DtypePromotion, BoolScalarsChangeNoTypeAndBoolSubtractionIsRefused) {
  const Tensor i32 = Tensor::from_vector(std::vector<int32_t>{16777217, -4}, Shape{2});
  const Tensor m = Tensor::from_vector(std::vector<bool>{true, false}, Shape{2});
  const Tensor y = i32 + true;
  ASSERT_EQ(y.dtype(), Dtype::I32);
  EXPECT_EQ(y.to_vector<int32_t>(), (std::vector<int32_t>{16777218, -3}));
  for (const Tensor& b : {where(m, m, false), m * true, m & true, m + false}) {
    ASSERT_EQ(b.dtype(), Dtype::Bool);
    EXPECT_EQ(b.to_vector<bool>(), (std::vector<bool>{true, false}));
  }
  EXPECT_EQ(Tensor(true).dtype(), Dtype::Bool);
  const Tensor f = Tensor::full(Shape{2}, 1.5f);
  EXPECT_EQ((f * true).to_vector(), (std::vector<float>{1.5f, 1.5f}));
  expect_error("m - 1", [&] { (void)(m - 1); }, {"sub", "bool", "not supported"});
  expect_error("1 - m", [&] { (void)(1 - m); }, {"sub", "bool"});
  expect_error("m - 1.0f", [&] { (void)(m - 1.0f); }, {"sub", "bool"});
  expect_error("f - m", [&] { (void)(f - m); }, {"sub", "bool"});
  expect_error("i32 - true", [&] { (void)(i32 - true); }, {"sub", "bool"});
  expect_error("f - true", [&] { (void)(f - true); }, {"sub", "bool"});
  const Tensor f16 = Tensor::full(Shape{2}, 1.5, Dtype::F16);
  expect_error("true - f16", [&] { (void)(true - f16); }, {"sub", "bool"});
  expect_error("f - Tensor(true)", [&] { (void)(f - Tensor(true)); }, {"sub", "bool"});
  // An integer exponent is a wrapped integer: an integer base keeps its
  // type (test IntOps.IntegerPowersWrapAsTorchs), a float base takes it as
  // a float.
  EXPECT_EQ(pow(i32, 2).dtype(), Dtype::I32);
  EXPECT_EQ(pow(f, 2).to_vector(), pow(f, 2.0f).to_vector());
}

// Integer fill values are exact in every integer type (not through a
// float or a double), and one the type cannot hold is an error.
TEST(DtypePromotion, IntegerFillValuesAreExact) {
  const int64_t big = (int64_t{1} << 53) + 1;
  EXPECT_EQ(Tensor::full(Shape{2}, big, Dtype::I64).to_vector<int64_t>(), std::vector<int64_t>(2, big));
  EXPECT_EQ(Tensor::full(Shape{1}, INT64_MAX, Dtype::I64).to_vector<int64_t>()[0], INT64_MAX);
  EXPECT_EQ(Tensor::full(Shape{1}, INT64_MIN, Dtype::I64).to_vector<int64_t>()[0], INT64_MIN);
  EXPECT_EQ(Tensor::full(Shape{1}, INT32_MAX, Dtype::I32).to_vector<int32_t>()[0], INT32_MAX);
  EXPECT_EQ(Tensor::full(Shape{1}, -1, Dtype::U8).to_vector<uint8_t>()[0], 255);
  EXPECT_EQ(Tensor::full(Shape{1}, 16777217, Dtype::F32).to_vector()[0], 16777216.0f);  // rounded, as a float
  expect_error("i32 too big", [] { (void)Tensor::full(Shape{1}, int64_t{1} << 31, Dtype::I32); }, {"full", "int32"});
  expect_error("u8 too big", [] { (void)Tensor::full(Shape{1}, 256, Dtype::U8); }, {"full", "uint8"});
  const Tensor m = Tensor::from_vector(std::vector<bool>{true, false}, Shape{2});
  const Tensor i32 = Tensor::from_vector(std::vector<int32_t>{1, 2}, Shape{2});
  const Tensor i64 = Tensor::from_vector(std::vector<int64_t>{1, 2}, Shape{2});
  EXPECT_EQ(masked_fill(i32, m, 16777217).to_vector<int32_t>(), (std::vector<int32_t>{16777217, 2}));
  EXPECT_EQ(masked_fill(i32, m, INT32_MAX).to_vector<int32_t>(), (std::vector<int32_t>{INT32_MAX, 2}));
  EXPECT_EQ(masked_fill(i64, m, big).to_vector<int64_t>(), (std::vector<int64_t>{big, 2}));
  EXPECT_EQ(masked_fill(i64, m, Tensor(-100)).to_vector<int64_t>(), (std::vector<int64_t>{-100, 2}));
  EXPECT_EQ(masked_fill(Tensor::full(Shape{2}, 1.5f), m, 3).to_vector(), (std::vector<float>{3.0f, 1.5f}));
  expect_error("i32 fill too big", [&] { (void)masked_fill(i32, m, int64_t{1} << 40); }, {"masked_fill", "int32"});
  expect_error("a value of rank 1", [&] { (void)masked_fill(i32, m, Tensor::full(Shape{2}, 1, Dtype::I32)); },
               {"masked_fill", "0-d"});
}

TEST(DtypePromotion, WhatTheVectorUnitCannotDoYetIsAClearError) {
  Tensor i32 = Tensor::full({4}, 1, Dtype::I32), i64 = Tensor::full({4}, 1, Dtype::I64);
  Tensor u8 = Tensor::full({4}, 1, Dtype::U8), f16 = Tensor::full({4}, 1, Dtype::F16);
  Tensor mask = gt(f16, 0.0f);
  // Integer arithmetic and comparisons run in integer lanes (test_int32.cpp, test_int64.cpp).
  expect_error("i32 mean", [&] { (void)i32.mean(); }, {"mean", "int32[4]", "floating"});
  // torch has no integer softmax either.
  expect_error("i32 softmax", [&] { (void)softmax(i32, 0); }, {"softmax", "int32[4]", "floating"});
  expect_error("u8 log_softmax", [&] { (void)log_softmax(u8, -1); }, {"log_softmax", "uint8[4]", "floating"});
  expect_error("matmul f16 f32", [&] { (void)matmul(Tensor::full({2, 2}, 1, Dtype::F16), Tensor::ones({2, 2})); },
               {"matmul", "float16[2, 2]", "float32[2, 2]"});
  expect_error("matmul u8", [&] { (void)matmul(Tensor::full({2, 2}, 1, Dtype::U8), Tensor::full({2, 2}, 1, Dtype::U8)); },
               {"matmul", "uint8"});
  expect_error("where u8 mask", [&] { (void)where(u8, f16, f16); }, {"where", "bool"});
}

// ---- conversions -------------------------------------------------------------------------

std::vector<float> conversion_values() {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 2.5f, -2.5f, 255.0f, 256.0f, 300.7f, -300.7f,
                          65504.0f, 65519.0f, 65520.0f, 1e-8f, 6e-8f, 1e-40f, 3e38f, kInf, -kInf, kNaN,
                          2147483520.0f, 2147483648.0f, -2147483648.0f, 16777217.0f};
  std::mt19937 rng(5);
  for (int i = 0; i < 200; ++i) v.push_back(std::uniform_real_distribution<float>(-1000.0f, 1000.0f)(rng));
  for (int i = 0; i < 100; ++i) v.push_back(std::ldexp(std::uniform_real_distribution<float>(1.0f, 2.0f)(rng),
                                                       std::uniform_int_distribution<int>(-30, 20)(rng)));
  return v;
}

TEST_P(Dtypes, ToFromFloat32FollowsTheDocumentedRules) {
  const std::vector<float> v = conversion_values();
  const int64_t n = static_cast<int64_t>(v.size());
  Tensor x = Tensor::from_vector(v);
  Checker chk("to");
  for (Dtype t : {Dtype::F16, Dtype::BF16}) {
    const std::vector<uint16_t> got = read16(x.to(t));
    for (int64_t i = 0; i < n; ++i) {
      const float f = v[static_cast<size_t>(i)];
      const float g = from16(t, got[static_cast<size_t>(i)]);
      const double want = round16(t, f);
      if (std::isnan(f) ? !std::isnan(g) : (static_cast<double>(g) != want || std::signbit(g) != std::signbit(f)))
        chk.fail(cat(dtype_name(t), " i=", i), cat("from ", fstr(f), " got ", fstr(g), " want ", fstr(want)));
    }
  }
  const std::vector<int32_t> i32 = x.to(Dtype::I32).to_vector<int32_t>();
  const std::vector<int64_t> i64 = x.to(Dtype::I64).to_vector<int64_t>();
  const std::vector<uint8_t> u8 = x.to(Dtype::U8).to_vector<uint8_t>();
  const std::vector<bool> b = x.to(Dtype::Bool).to_vector<bool>();
  for (int64_t i = 0; i < n; ++i) {
    const double f = v[static_cast<size_t>(i)];
    const double tr = std::trunc(f);
    const int32_t w32 = (tr >= -2147483648.0 && tr <= 2147483647.0) ? static_cast<int32_t>(tr) : INT32_MIN;
    const int64_t w64 = (tr >= -0x1p63 && tr < 0x1p63) ? static_cast<int64_t>(tr) : INT64_MIN;
    if (i32[static_cast<size_t>(i)] != w32) chk.fail(cat("i32 i=", i), cat(fstr(f), " got ", i32[static_cast<size_t>(i)]));
    if (i64[static_cast<size_t>(i)] != w64) chk.fail(cat("i64 i=", i), cat(fstr(f), " got ", i64[static_cast<size_t>(i)]));
    if (u8[static_cast<size_t>(i)] != static_cast<uint8_t>(static_cast<uint32_t>(w32) & 255u))
      chk.fail(cat("u8 i=", i), cat(fstr(f), " got ", int{u8[static_cast<size_t>(i)]}));
    if (b[static_cast<size_t>(i)] != (f != 0.0 || std::isnan(f))) chk.fail(cat("bool i=", i), fstr(f));
  }
}

TEST_P(Dtypes, ConversionsRoundOnceAtTheirStore) {
  // x.to(f16).to(f32) is x rounded to f16, even when more ops follow in
  // what could have been one kernel; and int32 values convert to float by
  // rounding to nearest even.
  const std::vector<float> v = conversion_values();
  Tensor x = Tensor::from_vector(v);
  const std::vector<float> y = (x.to(Dtype::F16).to(Dtype::F32) * 1.0f).to_vector();
  const std::vector<float> z = (x.to(Dtype::BF16) + 0.0f).to(Dtype::F32).to_vector();
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i])) continue;
    EXPECT_EQ(static_cast<double>(y[i]), round16(Dtype::F16, v[i])) << v[i];
    EXPECT_EQ(static_cast<double>(z[i]), round16(Dtype::BF16, v[i]) + 0.0) << v[i];
  }
  const std::vector<int32_t> ids = {16777217, 16777219, -16777221, 123};
  EXPECT_EQ(Tensor::from_vector(ids, {4}).to(Dtype::F32).to_vector(),
            (std::vector<float>{16777216.0f, 16777220.0f, -16777220.0f, 123.0f}));
  // Bool bytes other than 0 and 1 are true.
  const uint8_t raw[] = {0, 1, 2, 255};
  Tensor m = Tensor::from_blob(raw, {4});
  EXPECT_EQ(m.dtype(), Dtype::U8);
  Tensor mb = Tensor::from_blob(static_cast<const void*>(raw), {4}, Dtype::Bool);
  EXPECT_EQ(where(mb, Tensor::ones({4}), Tensor::zeros({4})).to_vector(), (std::vector<float>{0, 1, 1, 1}));
  EXPECT_EQ(m.to(Dtype::Bool).to_vector<bool>(), (std::vector<bool>{false, true, true, true}));
}

// ---- ops on 16-bit floats, uint8 and bool ---------------------------------------------------

// Elementwise ops with 16-bit inputs and outputs are the f32 computation
// (inputs widened exactly) rounded once to the type: for ops f32 rounds
// correctly, exactly round16(f32 result).
TEST_P(Dtypes, SixteenBitArithmeticIsTheF32ResultRoundedOnce) {
  for (Dtype t : {Dtype::F16, Dtype::BF16}) {
    for (int64_t n : op_lengths()) {
      const std::vector<float> a = make_values(n, 3, uniform_gen(-300, 300), {0.0f, -0.0f, kInf, kNaN, 65504.0f});
      const std::vector<float> b = make_values(n, 4, uniform_gen(-4, 4), {1e-3f, -0.0f});
      const std::vector<uint16_t> ab = bits16(t, a), bb = bits16(t, b);
      Tensor x = tensor16(t, ab, {n}), y = tensor16(t, bb, {n});
      const std::vector<uint16_t> got = read16(maximum(x * y + x, y - 1.0f));
      Checker chk(cat("16-bit ", dtype_name(t), " n=", n));
      for (int64_t i = 0; i < n; ++i) {
        const float xa = from16(t, ab[static_cast<size_t>(i)]), yb = from16(t, bb[static_cast<size_t>(i)]);
        const float p = xa * yb;  // the f32 computation, as the vector unit does it (no fma: two roundings)
        const float r = std::max(p + xa, yb - 1.0f);
        const float g = from16(t, got[static_cast<size_t>(i)]);
        if (std::isnan(p + xa) || std::isnan(yb - 1.0f)) continue;  // maximum's NaN rule: tests/tracer/test_ops.cpp
        if (static_cast<double>(g) != round16(t, r) && !(g == 0 && r == 0))
          chk.fail(cat("i=", i), cat("x=", fstr(xa), " y=", fstr(yb), " got ", fstr(g), " want ", fstr(round16(t, r))));
      }
    }
  }
}

TEST_P(Dtypes, SixteenBitTranscendentalsAndReductionsAreWithinOneUlpOfTheType) {
  for (Dtype t : {Dtype::F16, Dtype::BF16}) {
    const int64_t rows = 7, cols = 1031;
    const std::vector<float> a = make_values(rows * cols, 9, uniform_gen(-3, 3));
    const std::vector<uint16_t> ab = bits16(t, a);
    Tensor x = tensor16(t, ab, {rows, cols});
    const std::vector<uint16_t> th = read16(tanh(x));
    const std::vector<uint16_t> sm = read16(softmax(x, 1));
    const std::vector<uint16_t> rs = read16(x.sum(1));
    const double ulp16 = t == Dtype::F16 ? 0x1p-10 : 0x1p-7;
    const double tiny = t == Dtype::F16 ? 0x1p-24 : 0x1p-133;  // the subnormal spacing
    Checker chk(cat("16-bit ", dtype_name(t)));
    for (int64_t r = 0; r < rows; ++r) {
      double mx = -1e30, se = 0, sum = 0;
      for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, static_cast<double>(from16(t, ab[static_cast<size_t>(r * cols + c)])));
      for (int64_t c = 0; c < cols; ++c) {
        const double v = from16(t, ab[static_cast<size_t>(r * cols + c)]);
        se += std::exp(v - mx);
        sum += v;
      }
      for (int64_t c = 0; c < cols; ++c) {
        const size_t i = static_cast<size_t>(r * cols + c);
        const double v = from16(t, ab[i]);
        const double want_t = std::tanh(v), want_s = std::exp(v - mx) / se;
        // One ulp of the 16-bit type (relative), beyond which the f32
        // computation's few-ulp error cannot move a correctly rounded value.
        if (std::fabs(from16(t, th[i]) - want_t) > std::max(ulp16 * std::fabs(want_t), tiny))
          chk.fail(cat("tanh r=", r, " c=", c), cat(fstr(from16(t, th[i])), " want ", fstr(want_t)));
        if (std::fabs(from16(t, sm[i]) - want_s) > std::max(ulp16 * want_s, tiny))
          chk.fail(cat("softmax r=", r, " c=", c), cat(fstr(from16(t, sm[i])), " want ", fstr(want_s)));
      }
      // The sum accumulates in f32 (error about cols * 2^-24 relative to the
      // sum of magnitudes), then rounds once to the type.
      double mag = 0;
      for (int64_t c = 0; c < cols; ++c) mag += std::fabs(from16(t, ab[static_cast<size_t>(r * cols + c)]));
      const double got = from16(t, rs[static_cast<size_t>(r)]);
      if (std::fabs(got - sum) > ulp16 * std::fabs(sum) + cols * 0x1p-24 * mag)
        chk.fail(cat("sum r=", r), cat(fstr(got), " want ", fstr(sum)));
    }
  }
}

// A sum of 16-bit floats over axes that are not adjacent is made of one
// reduction per run of axes; the partial sums stay float32, so the result
// is rounded once, as a sum over one run (rounding each partial sum to the
// type would put several of the type's ulps on the result). mean divides
// that sum, as torch's does.
TEST_P(Dtypes, SixteenBitSumsOverSeveralAxesRoundOnce) {
  for (Dtype t : {Dtype::F16, Dtype::BF16}) {
    const int64_t A = 9, B = 40, C = 11, n = A * C;
    const std::vector<uint16_t> xb = bits16(t, make_values(A * B * C, 21, uniform_gen(-3, 3)));
    const Tensor x = tensor16(t, xb, {A, B, C});
    const std::vector<uint16_t> sums = read16(x.sum({0, 2})), means = read16(x.mean({0, 2}));
    ASSERT_EQ(sums.size(), static_cast<size_t>(B));
    const double ulp16 = t == Dtype::F16 ? 0x1p-10 : 0x1p-7;
    int64_t exact = 0, exact_means = 0;
    Checker chk(cat("sum over axes 0 and 2, ", dtype_name(t)));
    for (int64_t b = 0; b < B; ++b) {
      double sum = 0;
      for (int64_t a = 0; a < A; ++a)
        for (int64_t c = 0; c < C; ++c) sum += from16(t, xb[static_cast<size_t>((a * B + b) * C + c)]);
      const float got = from16(t, sums[static_cast<size_t>(b)]);
      const double want = round16(t, static_cast<float>(sum));
      // The float32 sum of 99 terms is off by far less than half an ulp of
      // the type, so it rounds to the exact sum's value unless that lies
      // next to a rounding boundary.
      exact += got == want;
      if (std::fabs(got - want) > ulp16 * std::max(std::fabs(want), 1.0))
        chk.fail(cat("b=", b), cat(fstr(got), " want ", fstr(want)));
      // torch's CPU mean of a 16-bit type: the float32 sum divided in
      // float32, rounded once (not the rounded sum divided).
      const float mean = from16(t, means[static_cast<size_t>(b)]);
      const double want_mean = round16(t, static_cast<float>(sum / static_cast<double>(n)));
      exact_means += mean == want_mean;
      if (std::fabs(mean - want_mean) > ulp16 * std::max(std::fabs(want_mean), 1.0 / 64))
        chk.fail(cat("mean b=", b), cat(fstr(mean), " want ", fstr(want_mean)));
    }
    EXPECT_GE(exact, B - 2) << dtype_name(t) << ": sums not correctly rounded";
    EXPECT_GE(exact_means, B - 2) << dtype_name(t) << ": means not correctly rounded";
  }
}

// softmax and log_softmax of a 16-bit type along any axis are the float32
// computation rounded once (along the last axis one row kernel does it;
// along another the steps are several kernels, which round nothing between
// them): nearly every element is the exact value rounded, none is a whole
// ulp off.
TEST_P(Dtypes, SixteenBitSoftmaxRoundsOnceOnEveryAxis) {
  std::mt19937 rng(77);
  for (Dtype t : {Dtype::F16, Dtype::BF16})
    for (int trial = 0; trial < 6; ++trial) {
      const int rank = 2 + trial % 3;
      Shape shape;
      for (int i = 0; i < rank; ++i) shape.push_back(1 + static_cast<int64_t>(rng() % (rank == 4 ? 7 : 19)));
      const int64_t total = shape.numel();
      const std::vector<uint16_t> xb = bits16(t, make_values(total, 90 + trial, uniform_gen(-3, 3)));
      const Tensor x = tensor16(t, xb, shape);
      const double ulp16 = t == Dtype::F16 ? 0x1p-10 : 0x1p-7;
      for (int axis = 0; axis < rank; ++axis)
        for (bool log_form : {false, true}) {
          const std::vector<uint16_t> got = read16(log_form ? log_softmax(x, axis) : softmax(x, axis));
          ASSERT_EQ(got.size(), static_cast<size_t>(total));
          int64_t inner = 1;
          for (int i = axis + 1; i < rank; ++i) inner *= shape[i];
          const int64_t n = shape[axis];
          int64_t exact = 0;
          const std::string what = cat(log_form ? "log_softmax " : "softmax ", dtype_name(t), shape.to_string(), " axis ", axis);
          Checker chk(what);
          for (int64_t i = 0; i < total; ++i) {
            // The slice through i along axis: its maximum and sum of exponentials, in double.
            const int64_t base = i - ((i / inner) % n) * inner;
            double mx = -1e300, sum = 0;
            for (int64_t k = 0; k < n; ++k) mx = std::max(mx, static_cast<double>(from16(t, xb[static_cast<size_t>(base + k * inner)])));
            for (int64_t k = 0; k < n; ++k) sum += std::exp(from16(t, xb[static_cast<size_t>(base + k * inner)]) - mx);
            const double xi = from16(t, xb[static_cast<size_t>(i)]);
            const double want_exact = log_form ? xi - mx - std::log(sum) : std::exp(xi - mx) / sum;
            const double want = round16(t, static_cast<float>(want_exact));
            const float g = from16(t, got[static_cast<size_t>(i)]);
            exact += g == want;
            if (std::fabs(g - want) > ulp16 * std::max(std::fabs(want), 1.0 / 256))
              chk.fail(cat("element ", i), cat(fstr(g), " want ", fstr(want)));
          }
          EXPECT_GE(exact, total - total / 50 - 1) << what << ": not rounded once";
        }
    }
}

// A pending 16-bit value (a * b) reaches the compositions that compute in
// float32 unrounded, as it reaches one fused kernel: each result is the
// float32 computation on the float32 products, rounded once (the f32 path
// on products computed from the widened operands, bit for bit).
TEST_P(Dtypes, PendingSixteenBitInputsReachFloat32CompositionsUnrounded) {
  for (Dtype t : {Dtype::F16, Dtype::BF16})
    for (int trial = 0; trial < 4; ++trial) {
      const Shape shape{3 + trial, 5, 4 + 2 * trial};
      const int64_t total = shape.numel();
      const std::vector<uint16_t> ab = bits16(t, make_values(total, 300 + trial, uniform_gen(-2, 2))),
                                  bb = bits16(t, make_values(total, 400 + trial, uniform_gen(0.5, 1.5)));
      const Tensor a = tensor16(t, ab, shape), b = tensor16(t, bb, shape);
      const Tensor f = a.to(Dtype::F32) * b.to(Dtype::F32);  // the products a fused kernel holds
      f.sync();
      const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> ops = {
          {"mean over axes 0 and 2", [](const Tensor& x) { return x.mean({0, 2}); }},
          {"mean over axes 0 and 1", [](const Tensor& x) { return x.mean({0, 1}); }},
          {"softmax along axis 0", [](const Tensor& x) { return softmax(x, 0); }},
          {"log_softmax along axis 1", [](const Tensor& x) { return log_softmax(x, 1); }},
          {"softmax along the last axis", [](const Tensor& x) { return softmax(x, 2); }},
          {"var over axis 1", [](const Tensor& x) { return x.var({1}); }},
          {"std of all", [](const Tensor& x) { return x.std(); }},
      };
      for (const auto& [name, op] : ops) {
        const std::vector<uint16_t> got = read16(op(a * b)), want = read16(op(f).to(t));
        ASSERT_EQ(got.size(), want.size()) << name;
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_EQ(got[i], want[i]) << name << " of " << dtype_name(t) << shape.to_string() << " element " << i
                                     << ": the pending products were rounded first";
      }
    }
}

// A 16-bit reduction over a permuted view (a transpose) that other ops
// read is kept in float32 like any fused value: layer_norm, a sum times a
// scalar, a mean minus the input over transposed views give the bits they
// give over contiguous copies (the reduction read back through the view was
// stored rounded first; found by generated programs). Rows of two values
// whose mean is not a 16-bit number make any rounding of it visible.
TEST_P(Dtypes, SixteenBitReductionsOfPermutedViewsStayUnrounded) {
  std::mt19937 rng(8);
  for (Dtype t : {Dtype::F16, Dtype::BF16})
    for (int trial = 0; trial < 6; ++trial) {
      const int64_t R = 1 + static_cast<int64_t>(rng() % 5), C = 1 + static_cast<int64_t>(rng() % 9);
      const std::vector<uint16_t> xb = bits16(t, make_values(R * C, 500 + static_cast<uint32_t>(trial), uniform_gen(1, 2)));
      const Tensor x = tensor16(t, xb, {R, C});
      const Tensor xt = x.transpose(0, 1), xc = xt.contiguous() * 1.0f;  // * 1: a stored copy in every case
      const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> ops = {
          {"layer_norm", [&](const Tensor& v) { return layer_norm(v, Shape{R}, Tensor(), Tensor(), 1e-5f); }},
          {"sum times 3", [](const Tensor& v) { return v.sum({1}, true) * 3.0f; }},
          {"input minus its mean", [](const Tensor& v) { return v - v.mean({1}, true); }},
          {"max minus the input", [](const Tensor& v) { return v.max({0}, true) - v; }},
      };
      for (const auto& [name, op] : ops) {
        const std::vector<uint16_t> got = read16(op(xt)), want = read16(op(xc));
        ASSERT_EQ(got.size(), want.size()) << name;
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_EQ(got[i], want[i]) << name << " of " << dtype_name(t) << " [" << R << ", " << C << "] transposed, element " << i;
      }
    }
}

// Attention of 16-bit operands keeps its scores and probabilities in
// float32 and rounds the result once (torch's CPU kernel keeps them in
// float): nearly every output is the exact value rounded.
TEST_P(Dtypes, SixteenBitAttentionRoundsOnce) {
  for (Dtype t : {Dtype::F16, Dtype::BF16})
    for (bool causal : {false, true}) {
      const int64_t B = 2, L = 5, S = causal ? 5 : 9, E = 8;
      const std::vector<uint16_t> qb = bits16(t, make_values(B * L * E, 31, uniform_gen(-2, 2)));
      const std::vector<uint16_t> kb = bits16(t, make_values(B * S * E, 32, uniform_gen(-2, 2)));
      const std::vector<uint16_t> vb = bits16(t, make_values(B * S * E, 33, uniform_gen(-2, 2)));
      const Tensor q = tensor16(t, qb, {B, L, E}), k = tensor16(t, kb, {B, S, E}), v = tensor16(t, vb, {B, S, E});
      const std::vector<uint16_t> got = read16(scaled_dot_product_attention(q, k, v, Tensor(), causal));
      const double ulp16 = t == Dtype::F16 ? 0x1p-10 : 0x1p-7, scale = 1.0 / std::sqrt(static_cast<double>(E));
      int64_t exact = 0;
      Checker chk(cat("attention ", dtype_name(t), causal ? " causal" : ""));
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < L; ++i) {
          std::vector<double> p(static_cast<size_t>(S));
          double mx = -1e300, sum = 0;
          for (int64_t j = 0; j < S; ++j) {
            double dot = 0;
            for (int64_t e = 0; e < E; ++e)
              dot += static_cast<double>(from16(t, qb[static_cast<size_t>((b * L + i) * E + e)])) *
                     from16(t, kb[static_cast<size_t>((b * S + j) * E + e)]);
            p[static_cast<size_t>(j)] = causal && j > i ? -1e300 : dot * scale;
            mx = std::max(mx, p[static_cast<size_t>(j)]);
          }
          for (double& x : p) sum += x = std::exp(x - mx);
          for (int64_t e = 0; e < E; ++e) {
            double o = 0;
            for (int64_t j = 0; j < S; ++j) o += p[static_cast<size_t>(j)] / sum * from16(t, vb[static_cast<size_t>((b * S + j) * E + e)]);
            const double want = round16(t, static_cast<float>(o));
            const float g = from16(t, got[static_cast<size_t>((b * L + i) * E + e)]);
            exact += g == want;
            if (std::fabs(g - want) > ulp16 * std::max(std::fabs(want), 1.0 / 64))
              chk.fail(cat("b=", b, " i=", i, " e=", e), cat(fstr(g), " want ", fstr(want)));
          }
        }
      EXPECT_GE(exact, B * L * E * 95 / 100) << dtype_name(t) << (causal ? " causal" : "") << ": not rounded once";
    }
}

TEST_P(Dtypes, SixteenBitMatmulAccumulatesInF32) {
  for (Dtype t : {Dtype::F16, Dtype::BF16}) {
    const int64_t M = 17, K = 65, N = 33;
    const std::vector<float> a = make_values(M * K, 21, uniform_gen(-2, 2)), b = make_values(K * N, 22, uniform_gen(-2, 2));
    const std::vector<uint16_t> ab = bits16(t, a), bb = bits16(t, b);
    const std::vector<uint16_t> got = read16(matmul(tensor16(t, ab, {M, K}), tensor16(t, bb, {K, N})));
    const double ulp16 = t == Dtype::F16 ? 0x1p-10 : 0x1p-7;
    Checker chk(cat("matmul ", dtype_name(t)));
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double p = static_cast<double>(from16(t, ab[static_cast<size_t>(i * K + k)])) * from16(t, bb[static_cast<size_t>(k * N + j)]);
          s += p;
          mag += std::fabs(p);
        }
        const double g = from16(t, got[static_cast<size_t>(i * N + j)]);
        if (std::fabs(g - s) > ulp16 * std::fabs(s) + K * 0x1p-24 * mag)
          chk.fail(cat("i=", i, " j=", j), cat(fstr(g), " want ", fstr(s)));
      }
  }
}

// The cube widens 16-bit operands exactly and sums in f32 in its fixed
// order, so a 16-bit product (and its fused epilogue) is bit for bit the
// f32 computation on the widened values, rounded once: whatever the
// operands' layouts (transposed weights, strided slices, batches, one row).
TEST_P(Dtypes, SixteenBitProductsAreTheF32ProductRoundedOnce) {
  struct Case {
    int64_t M, K, N;
  };
  for (Dtype t : {Dtype::F16, Dtype::BF16}) {
    for (const Case& c : {Case{1, 768, 96}, Case{5, 33, 17}, Case{70, 65, 130}, Case{1, 7, 1}, Case{24, 0, 3}}) {
      const std::vector<uint16_t> xa = bits16(t, make_values(c.M * c.K, 51, uniform_gen(-2, 2)));
      const std::vector<uint16_t> wb = bits16(t, make_values(c.N * c.K, 52, uniform_gen(-2, 2)));
      const std::vector<uint16_t> bb = bits16(t, make_values(c.N, 53, uniform_gen(-1, 1)));
      Tensor x = tensor16(t, xa, {c.M, c.K}), w = tensor16(t, wb, {c.N, c.K}), bias = tensor16(t, bb, {c.N});
      Tensor x32 = x.to(Dtype::F32), w32 = w.to(Dtype::F32), b32 = bias.to(Dtype::F32);
      auto same = [&](const Tensor& y16, const Tensor& y32, const std::string& what) {
        ASSERT_EQ(y16.dtype(), t) << what;
        const std::vector<uint16_t> got = read16(y16), want = read16(y32.to(t));
        ASSERT_EQ(got.size(), want.size()) << what;
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_EQ(got[i], want[i]) << dtype_name(t) << " " << what << " M=" << c.M << " K=" << c.K << " N=" << c.N
                                     << " i=" << i;
      };
      same(linear(x, w, bias), linear(x32, w32, b32), "linear (W transposed)");
      // A bias still pending, and addmm's scaled input: the product's
      // epilogue takes them, rounded once as a stored bias is.
      same(linear(x, w, bias * 1.0f), linear(x32, w32, b32), "linear, pending bias");
      if (c.M > 0 && c.N > 0) {
        const Tensor wt = w.transpose(0, 1), wt32 = w32.transpose(0, 1);
        same(addmm(bias, x, wt, -1.5f, 0.25f), addmm(b32, x32, wt32, -1.5f, 0.25f), "addmm, beta and alpha");
        same(addmm(bias * 1.0f, x, wt), addmm(b32, x32, wt32), "addmm, pending input");
      }
      same(gelu(linear(x, w), GeluApprox::Tanh) * 0.5f, gelu(linear(x32, w32), GeluApprox::Tanh) * 0.5f,
           "gelu(linear) * 0.5");
      same(matmul(x, w.transpose(0, 1).contiguous()), matmul(x32, w32.transpose(0, 1).contiguous()), "matmul");
      if (c.K >= 2)
        same(matmul(x.slice(1, 0, c.K, 2), w.slice(1, 0, c.K, 2).transpose(0, 1)),
             matmul(x32.slice(1, 0, c.K, 2), w32.slice(1, 0, c.K, 2).transpose(0, 1)), "strided slices");
      same(matmul(x.reshape({1, c.M, c.K}).expand({3, c.M, c.K}), w.transpose(0, 1)),
           matmul(x32.reshape({1, c.M, c.K}).expand({3, c.M, c.K}), w32.transpose(0, 1)), "batch broadcast");
    }
  }
}

TEST_P(Dtypes, MasksAreOneBytePerElementAndSelect) {
  for (int64_t n : op_lengths()) {
    const std::vector<float> a = make_values(n, 31, uniform_gen(-1, 1), {kNaN, 0.0f, -0.0f});
    Tensor x = Tensor::from_vector(a);
    Tensor m = gt(x, 0.0f);
    ASSERT_EQ(m.dtype(), Dtype::Bool);
    const bool* mb = m.data<bool>();
    const std::vector<float> sel = where(m, x, x * -2.0f).to_vector();
    for (int64_t i = 0; i < n; ++i) {
      const float v = a[static_cast<size_t>(i)];
      ASSERT_EQ(mb[i], v > 0.0f) << i;
      const float want = v > 0.0f ? v : v * -2.0f;
      ASSERT_TRUE(same_float(sel[static_cast<size_t>(i)], want)) << i;
    }
    // uint8 in a float computation: converted exactly, then float math.
    std::vector<uint8_t> img(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) img[static_cast<size_t>(i)] = static_cast<uint8_t>(i * 37 + 11);
    const std::vector<float> norm = (Tensor::from_vector(img, {n}) * (1.0f / 255.0f) - 0.5f).to_vector();
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(norm[static_cast<size_t>(i)], static_cast<float>(img[static_cast<size_t>(i)]) * (1.0f / 255.0f) - 0.5f) << i;
    // max over uint8 keeps uint8.
    if (n > 0) {
      EXPECT_EQ(Tensor::from_vector(img, {n}).max().to_vector<uint8_t>()[0], *std::max_element(img.begin(), img.end()));
    }
  }
}

// Tiers agree bit for bit on typed kernels (the JIT declines what it does
// not convert; the interpreter then runs it).
TEST(DtypeTiers, InterpreterAndMachineCodeAgree) {
  DVM_SKIP_WITHOUT_JIT();
  SettingsGuard guard;
  const int64_t n = 4099;
  for (Dtype t : {Dtype::F16, Dtype::BF16}) {
    const std::vector<uint16_t> ab = bits16(t, make_values(n, 41, uniform_gen(-6, 6), {0.0f, kInf, kNaN}));
    auto program = [&] {
      Tensor x = tensor16(t, ab, {n});
      Tensor y = tanh(x * 1.5f + 0.25f);
      return read16(y);
    };
    dvm::set_tier_mode(TierMode::Off);
    const std::vector<uint16_t> interp = program();
    dvm::set_tier_mode(TierMode::Eager);
    const std::vector<uint16_t> jit = program();
    EXPECT_EQ(interp, jit) << dtype_name(t);
  }
}

INSTANTIATE_TEST_SUITE_P(Target, Dtypes, ::testing::ValuesIn(kTargets), target_name);

}  // namespace
}  // namespace dvm::testing
