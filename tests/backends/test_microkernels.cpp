// Every micro-kernel of every supported table against a double-precision
// reference: all op classes, lengths 0..2*lanes+1 and 4099, unaligned pointers,
// guard elements after every output, in-place runs, vs/sv forms, reductions fed
// whole and in pieces, and bit-identical element-wise results across ISAs.
#include <gtest/gtest.h>

#include "tests/backends/ulp.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backends/isa.h"
#include "backends/microkernels.h"

namespace dvm::backends {
namespace {

using vm::Op;
using vm::OpClass;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr double kInfD = std::numeric_limits<double>::infinity();
constexpr uint32_t kGuardBits = 0x7fbadbadu;  // a signalling-NaN pattern no kernel makes
constexpr int kGuards = 19;                   // > one zmm beyond the end

// ---- helpers -------------------------------------------------------------------

using testing::ulp_error;

// Bit equality, except that any NaN equals any NaN (payloads may differ with
// the fma operand order the compiler picks).
bool same_bits(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

std::vector<const MicroKernels*> tables() {
  std::vector<const MicroKernels*> out;
  for (Isa isa : {Isa::Portable, Isa::Avx2, Isa::Avx512})
    if (const MicroKernels* mk = microkernels_for(isa)) out.push_back(mk);
  return out;
}

std::vector<int64_t> lengths(const MicroKernels& mk) {
  std::vector<int64_t> ns;
  for (int64_t n = 0; n <= 2 * mk.lanes + 1; ++n) ns.push_back(n);
  ns.push_back(4099);
  return ns;
}

std::vector<Op> ops_of(OpClass cls) {
  std::vector<Op> out;
  for (int i = 0; i < vm::kNumOps; ++i)
    if (vm::op_class(static_cast<Op>(i)) == cls && !vm::int64_op(static_cast<Op>(i))) out.push_back(static_cast<Op>(i));
  return out;
}

// An output buffer: one float of misalignment, n outputs, then guards.
struct Out {
  std::vector<float> buf;
  int64_t n;
  explicit Out(int64_t n_) : buf(n_ + 1 + kGuards), n(n_) {
    for (float& g : buf) g = std::bit_cast<float>(kGuardBits);
  }
  float* data() { return buf.data() + 1; }
  bool guards_intact() const {
    if (std::bit_cast<uint32_t>(buf[0]) != kGuardBits) return false;
    for (int64_t i = n + 1; i < static_cast<int64_t>(buf.size()); ++i)
      if (std::bit_cast<uint32_t>(buf[i]) != kGuardBits) return false;
    return true;
  }
};

// Inputs stored one float past an aligned start (so never 32/64-aligned).
struct In {
  std::vector<float> buf;
  explicit In(const std::vector<float>& v) : buf(v.size() + 1) { std::copy(v.begin(), v.end(), buf.begin() + 1); }
  const float* data() const { return buf.data() + 1; }
};

// ---- inputs --------------------------------------------------------------------

const float kSpecials[] = {kNaN, kInf, -kInf, 0.0f, -0.0f, 1e-40f, -1e-40f, std::numeric_limits<float>::max(),
                           -std::numeric_limits<float>::max(), 1.0f, -1.0f, 0.5f, -2.5f};

std::vector<float> inputs_for(Op op, int operand, size_t n, uint32_t seed) {
  std::mt19937 rng(seed * 131 + static_cast<uint32_t>(op) * 7 + static_cast<uint32_t>(operand));
  float lo = -10.0f, hi = 10.0f;
  if (op == Op::LOG || op == Op::SQRT || op == Op::RSQRT) lo = -1.0f, hi = 100.0f;
  if (op == Op::SIN || op == Op::COS) lo = -100.0f, hi = 100.0f;
  if (op == Op::EXP || op == Op::SIGMOID) lo = -100.0f, hi = 100.0f;
  if (op == Op::POW) operand == 0 ? (lo = -4.0f, hi = 4.0f) : (lo = -8.0f, hi = 8.0f);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::uniform_int_distribution<int> pick(0, 99);
  std::vector<float> v(n);
  for (float& x : v) {
    int k = pick(rng);
    if (k < 4) x = kSpecials[rng() % std::size(kSpecials)];
    else if (k < 10) x = std::round(dist(rng));  // integers: pow signs, round ties, equal compares
    else if (k < 14) x = std::round(dist(rng) * 2.0f) * 0.5f;  // halves: round-half-even
    else x = dist(rng);
  }
  return v;
}

// ---- references ----------------------------------------------------------------

double sigmoid_d(double x) {
  double e = std::exp(-std::fabs(x));
  return (x >= 0 ? 1.0 : e) / (1.0 + e);
}

double unary_ref(Op op, float xf) {
  double x = xf;
  switch (op) {
    case Op::NEG: return -x;
    case Op::ABS: return std::fabs(x);
    case Op::EXP: return std::exp(x);
    case Op::LOG: return std::log(x);
    case Op::SQRT: return std::sqrt(x);
    case Op::RSQRT: return 1.0 / std::sqrt(x);
    case Op::RECIP: return 1.0 / x;
    case Op::TANH: return std::tanh(x);
    case Op::SIGMOID: return sigmoid_d(x);
    case Op::RELU: return std::isnan(x) ? x : (x > 0 ? x : 0.0);
    case Op::GELU_TANH: {  // 0.5x(1+tanh u) == x*sigmoid(2u), the stable form
      if (std::isinf(x)) return x > 0 ? x : std::nan("");
      double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
      return x * sigmoid_d(2.0 * u);
    }
    case Op::GELU_ERF:  // 0.5x(1+erf(x/sqrt2)) == 0.5x*erfc(-x/sqrt2)
      if (std::isinf(x)) return x > 0 ? x : std::nan("");
      return 0.5 * x * std::erfc(-x * 0.7071067811865476);
    case Op::ERF: return std::erf(x);
    case Op::SIN: return std::sin(x);
    case Op::COS: return std::cos(x);
    case Op::FLOOR: return std::floor(x);
    case Op::CEIL: return std::ceil(x);
    case Op::ROUND: return std::nearbyint(x);
    default: return std::nan("");
  }
}

double binary_ref(Op op, float af, float bf) {
  double a = af, b = bf;
  switch (op) {
    case Op::ADD: return a + b;  // double then float rounding == float op
    case Op::SUB: return a - b;
    case Op::MUL: return a * b;
    case Op::DIV: return a / b;
    case Op::MAX: return std::isnan(a) || std::isnan(b) ? std::nan("") : std::max(a, b);
    case Op::MIN: return std::isnan(a) || std::isnan(b) ? std::nan("") : std::min(a, b);
    case Op::POW: return std::pow(a, b);
    case Op::EQ: return a == b;
    case Op::NE: return a != b;
    case Op::LT: return a < b;
    case Op::LE: return a <= b;
    case Op::GT: return a > b;
    case Op::GE: return a >= b;
    case Op::FLOORDIV: case Op::REM: {
      // torch: the remainder from the exact fmod, plus b where the signs
      // differ; the quotient (a - fmod) / b (exact while |a / b| < 2^24)
      // less that one, a zero quotient signed as a / b.
      if (b == 0 && op == Op::FLOORDIV) return a / b;
      const double m = std::fmod(a, b);
      const bool fix = m != 0 && (m < 0) != (b < 0);
      if (op == Op::REM) return fix ? static_cast<double>(static_cast<long double>(m) + b) : m;
      if (std::isnan(m)) return m;
      const double q = (a - m) / b - (fix ? 1 : 0);
      return q == 0 ? std::copysign(0.0, a / b) : q;
    }
    default: return std::nan("");
  }
}

// The int32-lane opcodes (appended after MMA): the result's bits, computed
// with exact integer arithmetic on the operands' bits (wrapping as uint32).
bool int_op(Op op) { return op > Op::MMA && op != Op::FLOORDIV && op != Op::REM; }
uint32_t int_ref(Op op, float xf, float yf) {
  const int32_t a = std::bit_cast<int32_t>(xf), b = std::bit_cast<int32_t>(yf);
  const uint32_t ua = static_cast<uint32_t>(a), ub = static_cast<uint32_t>(b);
  auto flag = [](bool c) { return std::bit_cast<uint32_t>(c ? 1.0f : 0.0f); };
  switch (op) {
    case Op::ITOF: return std::bit_cast<uint32_t>(static_cast<float>(a));
    case Op::FTOI:
      return xf >= -2147483648.0f && xf < 2147483648.0f ? static_cast<uint32_t>(static_cast<int32_t>(xf))
                                                         : 0x80000000u;
    case Op::INEG: return 0u - ua;
    case Op::IABS: return a < 0 ? 0u - ua : ua;
    case Op::INOT: return ~ua;
    case Op::IADD: return ua + ub;
    case Op::ISUB: return ua - ub;
    case Op::IMUL: return static_cast<uint32_t>(static_cast<int64_t>(a) * b);  // the low 32 bits
    case Op::IMAX: return a > b ? ua : ub;
    case Op::IMIN: return a < b ? ua : ub;
    case Op::IEQ: return flag(a == b);
    case Op::INE: return flag(a != b);
    case Op::ILT: return flag(a < b);
    case Op::ILE: return flag(a <= b);
    case Op::IGT: return flag(a > b);
    case Op::IGE: return flag(a >= b);
    case Op::IAND: return ua & ub;
    case Op::IOR: return ua | ub;
    case Op::IXOR: return ua ^ ub;
    case Op::IFLOORDIV: case Op::IREM: {  // Python's // and %, in int64; x // 0 = 0, x % 0 = x
      const int64_t x = a, y = b;
      int64_t q = y == 0 ? 0 : x / y;
      if (y != 0 && x % y != 0 && (x < 0) != (y < 0)) --q;
      return static_cast<uint32_t>(op == Op::IFLOORDIV ? q : x - q * y);
    }
    default: ADD_FAILURE() << "no int reference for " << vm::op_name(op); return 0;
  }
}

double ternary_ref(Op op, float a, float b, float c) {
  if (op == Op::SELECT) return a != 0 ? b : c;  // NaN != 0 is true
  return std::fma(a, b, c);                     // correctly rounded float fma
}

// Tolerance in ULPs (and an absolute floor) for one element, with the reason.
struct Tol {
  double ulps;
  double abs = 0;
};

Tol unary_tol(Op op, float x) {
  switch (op) {
    // Exact ops: one correctly rounded IEEE operation (or none).
    case Op::NEG: case Op::ABS: case Op::SQRT: case Op::RECIP: case Op::RELU:
    case Op::FLOOR: case Op::CEIL: case Op::ROUND:
      return {0};
    // Two roundings: sqrt (<= 0.5 ULP, i.e. <= 2^-24 relative, which 1/. turns
    // into <= 1 ULP of the result) and the division (0.5 ULP).
    case Op::RSQRT: return {1.5};
    // The documented bounds of docs/MATH.md (test_math.cpp measures them).
    case Op::EXP: case Op::LOG: case Op::ERF: return {1.5};
    case Op::SIN: case Op::COS:
      // Beyond 1e5 only |result| <= 1 is promised (test_math checks it).
      return std::fabs(x) <= 1e5f ? Tol{2} : Tol{2, 2.0};
    case Op::TANH: return {2};
    case Op::SIGMOID: return {2.5};
    // GELU: 4 + 2 k(x) ULPs with k the condition number |d ln f/d ln x| (see
    // test_math.cpp, Gelu); for x <= -5.6 the results are below 4.4e-8 in
    // magnitude and gelu_erf flushes them to 0: checked absolutely.
    case Op::GELU_TANH: {
      if (!std::isfinite(x)) return {4};
      double v = 1.5957691216057308 * (x + 0.044715 * double(x) * x * x);
      double k = std::fabs(1.0 + (1.0 - sigmoid_d(v)) * 1.5957691216057308 * (x + 3 * 0.044715 * double(x) * x * x));
      return {4.0 + 2.0 * k, x <= -5.6f ? 4.5e-8 : 0.0};
    }
    case Op::GELU_ERF: {
      if (!std::isfinite(x)) return {4};
      double z = x * 0.7071067811865476;
      double k = std::fabs(1.0 + z * 1.1283791670955126 * std::exp(-z * z) / std::erfc(-z));
      return {4.0 + 2.0 * k, x <= -5.6f ? 4.5e-8 : 0.0};
    }
    default: return {0};
  }
}

Tol binary_tol(Op op, float a, float b) {
  if (op == Op::POW) {  // documented bound, see test_math.cpp PowWithinGrowingBound
    double y = std::fabs(b * std::log(std::fabs(static_cast<double>(a))));
    return {2.0 + 3.0 * (std::isfinite(y) ? y : 0.0)};
  }
  if (op == Op::FLOORDIV || op == Op::REM) {
    // Exact (the remainder: the exact value rounded once, <= 0.5 ULP) while
    // |a / b| < 2^24; beyond, the rounded quotient is used as it is
    // (docs/DTYPES.md): not compared.
    const double q = std::fabs(static_cast<double>(a) / b);
    const bool moderate = !(q >= 16777216.0) || b == 0 || std::isinf(a) || std::isinf(b);
    return {moderate ? (op == Op::REM ? 0.5 : 0.0) : kInfD};
  }
  return {0};  // add/sub/mul/div: one rounding; max/min/compares: exact
}

bool within(float got, double want, Tol tol) {
  double e = ulp_error(got, want);
  if (e == 0 || e <= tol.ulps) return true;
  return tol.abs > 0 && std::isfinite(want) && std::fabs(got - want) <= tol.abs;
}

// pow's sign for a negative base and -0/+0 results vary legitimately only in
// the reference's zeros; everything else, including the sign of zero, must
// match for the exact ops.
bool zero_sign_ok(Op op, float got, double want) {
  if (got != 0 || want != 0) return true;
  if (op == Op::RELU || op == Op::MAX || op == Op::MIN) return true;  // +-0 ties: maxps order
  return std::signbit(got) == std::signbit(want);
}

// ---- element-wise kernels ------------------------------------------------------

TEST(MicroKernels, TablesAreComplete) {
  for (const MicroKernels* mk : tables()) {
    for (int i = 0; i < vm::kNumOps; ++i) {
      Op op = static_cast<Op>(i);
      if (vm::int64_op(op)) {
        if (vm::op_class(op) == OpClass::Reduce) EXPECT_NE(mk->long_reduce[i], nullptr) << vm::op_name(op);
        else EXPECT_NE(mk->wide[i], nullptr) << vm::op_name(op);
        continue;
      }
      switch (vm::op_class(op)) {
        case OpClass::Unary: EXPECT_NE(mk->unary[i], nullptr) << vm::op_name(op); break;
        case OpClass::Binary:
          EXPECT_NE(mk->binary[i], nullptr) << vm::op_name(op);
          EXPECT_NE(mk->binary_vs[i], nullptr) << vm::op_name(op);
          EXPECT_NE(mk->binary_sv[i], nullptr) << vm::op_name(op);
          break;
        case OpClass::Ternary: EXPECT_NE(mk->ternary[i], nullptr) << vm::op_name(op); break;
        case OpClass::Reduce:
          EXPECT_NE(mk->reduce_acc[i], nullptr) << vm::op_name(op);
          EXPECT_NE(mk->reduce_finish[i], nullptr) << vm::op_name(op);
          break;
        default: break;
      }
    }
    EXPECT_NE(mk->fill, nullptr);
    EXPECT_NE(mk->gather_strided, nullptr);
    EXPECT_EQ(mk->lanes, mk->isa == Isa::Portable ? 1 : mk->isa == Isa::Avx2 ? 8 : 16);
  }
  EXPECT_EQ(&active_microkernels(), microkernels_for(active_isa()));
}

TEST(MicroKernels, Unary) {
  for (const MicroKernels* mk : tables()) {
    for (Op op : ops_of(OpClass::Unary)) {
      auto fn = mk->unary[static_cast<int>(op)];
      for (int64_t n : lengths(*mk)) {
        std::vector<float> x = inputs_for(op, 0, n, static_cast<uint32_t>(n));
        In a(x);
        Out d(n);
        fn(d.data(), a.data(), n);
        ASSERT_TRUE(d.guards_intact()) << isa_name(mk->isa) << " " << vm::op_name(op) << " n=" << n;
        for (int64_t i = 0; i < n; ++i) {
          if (int_op(op)) {
            ASSERT_EQ(std::bit_cast<uint32_t>(d.data()[i]), int_ref(op, x[i], 0.0f))
                << isa_name(mk->isa) << " " << vm::op_name(op) << "(bits " << std::bit_cast<uint32_t>(x[i])
                << "), n=" << n;
            continue;
          }
          double want = unary_ref(op, x[i]);
          ASSERT_TRUE(within(d.data()[i], want, unary_tol(op, x[i])) && zero_sign_ok(op, d.data()[i], want))
              << isa_name(mk->isa) << " " << vm::op_name(op) << "(" << x[i] << ") = " << d.data()[i]
              << ", want " << want << " (" << ulp_error(d.data()[i], want) << " ulp), n=" << n;
        }
        // In place (d == a) gives the same bits.
        std::vector<float> inplace = x;
        fn(inplace.data(), inplace.data(), n);
        for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(same_bits(inplace[i], d.data()[i])) << vm::op_name(op);
      }
    }
  }
}

TEST(MicroKernels, BinaryAndBroadcastForms) {
  for (const MicroKernels* mk : tables()) {
    for (Op op : ops_of(OpClass::Binary)) {
      const int k = static_cast<int>(op);
      for (int64_t n : lengths(*mk)) {
        std::vector<float> x = inputs_for(op, 0, n, static_cast<uint32_t>(n));
        std::vector<float> y = inputs_for(op, 1, n, static_cast<uint32_t>(n) + 1000);
        for (int64_t i = 0; i < n; i += 5) y[i] = x[i];  // equal operands for the compares
        In a(x), b(y);
        Out d(n);
        mk->binary[k](d.data(), a.data(), b.data(), n);
        ASSERT_TRUE(d.guards_intact()) << isa_name(mk->isa) << " " << vm::op_name(op) << " n=" << n;
        for (int64_t i = 0; i < n; ++i) {
          if (int_op(op)) {
            ASSERT_EQ(std::bit_cast<uint32_t>(d.data()[i]), int_ref(op, x[i], y[i]))
                << isa_name(mk->isa) << " " << vm::op_name(op) << "(bits " << std::bit_cast<uint32_t>(x[i]) << ", "
                << std::bit_cast<uint32_t>(y[i]) << "), n=" << n;
            continue;
          }
          double want = binary_ref(op, x[i], y[i]);
          ASSERT_TRUE(within(d.data()[i], want, binary_tol(op, x[i], y[i])) && zero_sign_ok(op, d.data()[i], want))
              << isa_name(mk->isa) << " " << vm::op_name(op) << "(" << x[i] << ", " << y[i] << ") = " << d.data()[i]
              << ", want " << want << ", n=" << n;
        }
        if (n == 0) continue;
        // vs / sv: exactly binary() with a broadcast operand.
        for (float s : {y[0], x[n - 1], kNaN, 0.0f, -3.0f}) {
          std::vector<float> sv(n, s);
          In sb(sv);
          Out want_vs(n), got_vs(n), want_sv(n), got_sv(n);
          mk->binary[k](want_vs.data(), a.data(), sb.data(), n);
          mk->binary_vs[k](got_vs.data(), a.data(), s, n);
          mk->binary[k](want_sv.data(), sb.data(), a.data(), n);
          mk->binary_sv[k](got_sv.data(), s, a.data(), n);
          ASSERT_TRUE(got_vs.guards_intact() && got_sv.guards_intact()) << vm::op_name(op);
          for (int64_t i = 0; i < n; ++i) {
            ASSERT_TRUE(same_bits(got_vs.data()[i], want_vs.data()[i])) << vm::op_name(op) << " vs, s=" << s;
            ASSERT_TRUE(same_bits(got_sv.data()[i], want_sv.data()[i])) << vm::op_name(op) << " sv, s=" << s;
          }
        }
        // In place on either operand.
        std::vector<float> ia = x, ib = y;
        mk->binary[k](ia.data(), ia.data(), y.data(), n);
        mk->binary[k](ib.data(), x.data(), ib.data(), n);
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_TRUE(same_bits(ia[i], d.data()[i]) && same_bits(ib[i], d.data()[i])) << vm::op_name(op);
        }
      }
    }
  }
}

TEST(MicroKernels, Ternary) {
  for (const MicroKernels* mk : tables()) {
    for (Op op : ops_of(OpClass::Ternary)) {
      for (int64_t n : lengths(*mk)) {
        std::vector<float> x = inputs_for(op, 0, n, static_cast<uint32_t>(n));
        std::vector<float> y = inputs_for(op, 1, n, static_cast<uint32_t>(n) + 7);
        std::vector<float> z = inputs_for(op, 2, n, static_cast<uint32_t>(n) + 9);
        if (op == Op::SELECT)
          for (int64_t i = 0; i < n; i += 3) x[i] = i % 2 ? 0.0f : -0.0f;  // false masks
        In a(x), b(y), c(z);
        Out d(n);
        mk->ternary[static_cast<int>(op)](d.data(), a.data(), b.data(), c.data(), n);
        ASSERT_TRUE(d.guards_intact()) << isa_name(mk->isa) << " " << vm::op_name(op) << " n=" << n;
        for (int64_t i = 0; i < n; ++i) {
          double want = ternary_ref(op, x[i], y[i], z[i]);
          // Both exact: select moves bits, fma rounds once.
          ASSERT_TRUE(ulp_error(d.data()[i], want) == 0 && zero_sign_ok(op, d.data()[i], want))
              << isa_name(mk->isa) << " " << vm::op_name(op) << "(" << x[i] << ", " << y[i] << ", " << z[i]
              << ") = " << d.data()[i] << ", want " << want;
        }
      }
    }
  }
}

// Element-wise results are bit-identical across ISAs: every primitive is a
// correctly rounded IEEE operation and every function the same sequence.
TEST(MicroKernels, IsaTablesAgreeBitForBit) {
  std::vector<const MicroKernels*> ts = tables();
  if (ts.size() < 2) GTEST_SKIP() << "only the portable table is supported on this CPU";
  const int64_t n = 4099;
  for (int i = 0; i < vm::kNumOps; ++i) {
    Op op = static_cast<Op>(i);
    OpClass cls = vm::op_class(op);
    if (cls != OpClass::Unary && cls != OpClass::Binary && cls != OpClass::Ternary) continue;
    if (vm::int64_op(op)) continue;  // Int64Lanes below
    std::vector<float> x = inputs_for(op, 0, n, 99), y = inputs_for(op, 1, n, 98), z = inputs_for(op, 2, n, 97);
    std::vector<std::vector<float>> outs;
    for (const MicroKernels* mk : ts) {
      std::vector<float> d(n);
      if (cls == OpClass::Unary) mk->unary[i](d.data(), x.data(), n);
      if (cls == OpClass::Binary) mk->binary[i](d.data(), x.data(), y.data(), n);
      if (cls == OpClass::Ternary) mk->ternary[i](d.data(), x.data(), y.data(), z.data(), n);
      outs.push_back(std::move(d));
    }
    for (size_t t = 1; t < ts.size(); ++t)
      for (int64_t j = 0; j < n; ++j)
        ASSERT_TRUE(same_bits(outs[t][j], outs[0][j]))
            << vm::op_name(op) << " " << isa_name(ts[t]->isa) << " vs portable at x=" << x[j] << ": "
            << outs[t][j] << " != " << outs[0][j];
  }
}

// exp's last step is y * 2^n with one rounding: vscalefps on AVX-512, two
// products elsewhere. Where the result is subnormal (x below about -87.3)
// that rounding matters; every float in [-104, -86] step 2^-10 and the
// boundary neighbours must give the same bits on every table.
TEST(MicroKernels, ExpSubnormalTailAgreesAcrossIsas) {
  std::vector<const MicroKernels*> ts = tables();
  if (ts.size() < 2) GTEST_SKIP() << "only the portable table is supported on this CPU";
  std::vector<float> x;
  for (float v = -104.0f; v <= -86.0f; v += 1.0f / 1024) x.push_back(v);
  for (float v : {-103.97f, -87.33655f, -87.33654f, -88.72284f, -88.72283f, -103.278929f})
    for (int k = -3; k <= 3; ++k)
      x.push_back(std::bit_cast<float>(std::bit_cast<uint32_t>(v) + static_cast<uint32_t>(k)));
  const int64_t n = static_cast<int64_t>(x.size());
  const int e = static_cast<int>(Op::EXP);
  std::vector<float> ref(x.size());
  ts[0]->unary[e](ref.data(), x.data(), n);
  int subnormal = 0;
  for (float r : ref) subnormal += r != 0.0f && std::fpclassify(r) == FP_SUBNORMAL;
  EXPECT_GT(subnormal, 1000);  // the sweep does reach the range it is about
  for (size_t t = 1; t < ts.size(); ++t) {
    std::vector<float> d(x.size());
    ts[t]->unary[e](d.data(), x.data(), n);
    for (int64_t j = 0; j < n; ++j)
      ASSERT_TRUE(same_bits(d[j], ref[j])) << "exp " << isa_name(ts[t]->isa) << " at x=" << x[j];
  }
}

// ---- reductions ----------------------------------------------------------------

float fold(Op op, float acc, float x) {
  if (op == Op::RSUM) return acc + x;
  if (std::isnan(acc) || std::isnan(x)) return kNaN;
  return op == Op::RMAX ? std::max(acc, x) : std::min(acc, x);
}

// The canonical order (microkernels.h), one float at a time: element i goes
// to accumulator (i / W) mod 4, lane i mod W, in order of i; then
// t = op(op(a0, a1), op(a2, a3)) lane-wise; then the tree (j, j+W/2), ...,
// (0, 1) over t. (The identity in the lanes of a partial last vector changes
// nothing: op(acc, identity) == acc.)
float emulate_reduce(Op op, int lanes, float identity, const std::vector<float>& x) {
  const size_t W = static_cast<size_t>(lanes);
  std::vector<std::vector<float>> a(kReduceAccs, std::vector<float>(W, identity));
  for (size_t i = 0; i < x.size(); ++i) {
    float& s = a[(i / W) % kReduceAccs][i % W];
    s = fold(op, s, x[i]);
  }
  std::vector<float> t(W);
  for (size_t j = 0; j < W; ++j)
    t[j] = fold(op, fold(op, a[0][j], a[1][j]), fold(op, a[2][j], a[3][j]));
  for (size_t w = W / 2; w >= 1; w /= 2)
    for (size_t j = 0; j < w; ++j) t[j] = fold(op, t[j], t[j + w]);
  return t[0];
}

// The order before the four accumulators: one SIMD accumulator, lane i mod W.
float emulate_one_accumulator(Op op, int lanes, float identity, const std::vector<float>& x) {
  std::vector<float> acc(static_cast<size_t>(lanes), identity);
  for (size_t i = 0; i < x.size(); ++i) acc[i % acc.size()] = fold(op, acc[i % acc.size()], x[i]);
  for (size_t w = acc.size() / 2; w >= 1; w /= 2)
    for (size_t j = 0; j < w; ++j) acc[j] = fold(op, acc[j], acc[j + w]);
  return acc[0];
}

TEST(MicroKernels, Reductions) {
  std::mt19937 rng(4242);
  for (const MicroKernels* mk : tables()) {
    std::vector<int64_t> ns = lengths(*mk);
    for (int r = 0; r < 40; ++r) ns.push_back(rng() % 3000);
    for (Op op : ops_of(OpClass::Reduce)) {
      const int k = static_cast<int>(op);
      const float identity = mk->reduce_identity[k];
      EXPECT_TRUE(same_bits(identity, op == Op::RSUM ? 0.0f : op == Op::RMAX ? -kInf : kInf));
      for (int64_t n : ns) {
        for (bool with_nan : {false, true}) {
          std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
          std::vector<float> x(n);
          for (float& v : x) v = dist(rng);
          if (with_nan && n > 0) x[rng() % n] = kNaN;
          In a(x);
          ASSERT_EQ(mk->reduce_lanes, kReduceAccs * mk->lanes);
          std::vector<float> acc(mk->reduce_lanes, identity);
          mk->reduce_acc[k](acc.data(), a.data(), n);
          float got = mk->reduce_finish[k](acc.data());
          // 1) exactly the documented lane/tree order
          ASSERT_TRUE(same_bits(got, emulate_reduce(op, mk->lanes, identity, x)))
              << isa_name(mk->isa) << " " << vm::op_name(op) << " n=" << n;
          // 2) against double: max/min exact (NaN propagates); the sum within
          //    the classic bound n * 2^-24 * sum|x_i| of any summation order.
          if (op == Op::RSUM) {
            double s = 0, sa = 0;
            for (float v : x) s += v, sa += std::fabs(v);
            if (with_nan && n > 0) ASSERT_TRUE(std::isnan(got));
            else ASSERT_LE(std::fabs(got - s), static_cast<double>(n) * 0x1p-24 * sa) << "n=" << n;
          } else {
            float want = identity;
            for (float v : x) want = fold(op, want, v);
            ASSERT_TRUE(same_bits(got, want)) << vm::op_name(op) << " n=" << n;
          }
          // 3) fed in pieces whose lengths are multiples of reduce_lanes: same bits
          std::vector<float> acc2(mk->reduce_lanes, identity);
          int64_t i = 0;
          while (i < n) {
            int64_t piece = std::min<int64_t>(n - i, mk->reduce_lanes * static_cast<int64_t>(1 + rng() % 9));
            mk->reduce_acc[k](acc2.data(), a.data() + i, piece);
            i += piece;
          }
          ASSERT_TRUE(same_bits(mk->reduce_finish[k](acc2.data()), got)) << vm::op_name(op) << " pieces n=" << n;
        }
      }
    }
  }
}

// Pins the canonical order with sums whose float result depends on the
// association: big values of both signs that cancel in some groupings and
// swallow small ones in others. Lengths around every multiple of 4 * W up to
// 3 * 4 * W (+-1 element, +-1 vector) and a 512-float interpreter tile plus
// a partial one; the kernel must match the scalar re-implementation exactly,
// and the data must tell the canonical order from the one-accumulator order.
TEST(MicroKernels, ReductionOrderPinned) {
  std::mt19937 rng(777);
  for (const MicroKernels* mk : tables()) {
    const int64_t W = mk->lanes, B = kReduceAccs * W;
    std::vector<int64_t> ns;
    for (int64_t m = 0; m <= 3; ++m)
      for (int64_t d : {-W - 1, -W, -W + 1, int64_t{-1}, int64_t{0}, int64_t{1}, W - 1, W, W + 1, 2 * W + 3, 3 * W})
        if (m * B + d >= 0) ns.push_back(m * B + d);
    ns.push_back(512 + 3 * W + 5);
    int distinguishing = 0;
    for (int64_t n : ns) {
      std::vector<float> x(static_cast<size_t>(n));
      std::uniform_int_distribution<int> small(-8, 8);
      for (size_t i = 0; i < x.size(); ++i) {
        // 2^24-scale values (their halves absorb the small ones) and small integers
        const int r = static_cast<int>(rng() % 4);
        x[i] = r == 0 ? 16777216.0f : r == 1 ? -16777216.0f : static_cast<float>(small(rng)) + 0.25f;
      }
      In a(x);
      for (Op op : {Op::RSUM, Op::RMAX, Op::RMIN}) {
        const int k = static_cast<int>(op);
        std::vector<float> acc(mk->reduce_lanes, mk->reduce_identity[k]);
        mk->reduce_acc[k](acc.data(), a.data(), n);
        const float got = mk->reduce_finish[k](acc.data());
        const float want = emulate_reduce(op, mk->lanes, mk->reduce_identity[k], x);
        ASSERT_TRUE(same_bits(got, want))
            << isa_name(mk->isa) << " " << vm::op_name(op) << " n=" << n << ": " << got << " vs " << want;
        if (op == Op::RSUM &&
            !same_bits(want, emulate_one_accumulator(op, mk->lanes, mk->reduce_identity[k], x)))
          ++distinguishing;
      }
    }
    // The data must be able to tell the orders apart (W = 1 too: four
    // accumulators instead of one) for the check above to pin anything.
    EXPECT_GE(distinguishing, static_cast<int>(ns.size()) / 4) << isa_name(mk->isa);
  }
}

// Max/min reductions are order-independent, so every ISA must agree exactly;
// sums agree within the order bound checked above.
TEST(MicroKernels, ReductionIsasAgree) {
  std::vector<float> x(4099);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1e3f, 1e3f);
  for (float& v : x) v = dist(rng);
  for (Op op : {Op::RMAX, Op::RMIN}) {
    const int k = static_cast<int>(op);
    std::vector<float> results;
    for (const MicroKernels* mk : tables()) {
      std::vector<float> acc(mk->reduce_lanes, mk->reduce_identity[k]);
      mk->reduce_acc[k](acc.data(), x.data(), static_cast<int64_t>(x.size()));
      results.push_back(mk->reduce_finish[k](acc.data()));
    }
    for (float r : results) EXPECT_TRUE(same_bits(r, results[0])) << vm::op_name(op);
  }
}

// ---- fill and gather -----------------------------------------------------------

TEST(MicroKernels, FillAndGather) {
  std::vector<float> src(90000);  // base + 17 * 4099 fits; base - 2 * 4099 >= 0
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) * 0.25f - 7.0f;
  for (const MicroKernels* mk : tables()) {
    for (int64_t n : lengths(*mk)) {
      Out d(n);
      mk->fill(d.data(), -2.5f, n);
      ASSERT_TRUE(d.guards_intact()) << "fill n=" << n;
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(d.data()[i], -2.5f);
      for (int64_t stride : {1, 0, 3, -2, 17}) {
        const float* base = src.data() + 9000 + 1;  // unaligned; room both ways
        Out g(n);
        mk->gather_strided(g.data(), base, stride, n);
        ASSERT_TRUE(g.guards_intact()) << "gather n=" << n << " stride=" << stride;
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(g.data()[i], base[i * stride]) << "stride=" << stride;
      }
    }
  }
}

// ---- int64 lanes ---------------------------------------------------------------

// The int64-lane ops of every table against references computed in 128-bit
// integers (wrapped to 64 bits at the end) and, for ltof, in long double
// (whose 64-bit significand holds an int64 exactly, so its one rounding to
// float is the correctly rounded result); outputs have guard elements.
__extension__ typedef __int128 i128;  // (GCC's; __extension__: -Wpedantic)
__extension__ typedef unsigned __int128 u128;
int64_t wrap64(i128 v) { return static_cast<int64_t>(static_cast<uint64_t>(static_cast<u128>(v))); }
// Python's floor division, with x // 0 = 0 and x % 0 = x.
i128 floor_div(i128 a, i128 b) {
  if (b == 0) return 0;
  i128 q = a / b;
  if (q * b != a && (a < 0) != (b < 0)) --q;
  return q;
}

std::vector<int64_t> int64_inputs(int64_t n, uint32_t seed) {
  const int64_t special[] = {0, 1, -1, 2, -2, 3, -7, 7, INT64_MIN, INT64_MAX, INT64_MIN + 1, INT64_MAX - 1,
                             int64_t{1} << 32, (int64_t{1} << 32) - 1, -(int64_t{1} << 32), INT32_MIN, INT32_MAX,
                             (int64_t{1} << 53) + 1, (int64_t{1} << 24) + 1, -((int64_t{1} << 62) + 12345)};
  std::mt19937_64 rng(seed);
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t r = rng();
    // specials, small values, and every magnitude (a random shift)
    v[static_cast<size_t>(i)] = r % 4 == 0   ? special[(r >> 8) % std::size(special)]
                                : r % 4 == 1 ? static_cast<int64_t>(r >> 32) % 100 - 50
                                             : static_cast<int64_t>(rng()) >> (r >> 58);
  }
  return v;
}

// The reference of op on element i: an int64 (wide results) or the bits of
// the 4-byte result.
int64_t int64_reference(Op op, int64_t a, int64_t b, float m, int32_t ai) {
  const i128 x = a, y = b;
  switch (op) {
    case Op::ITOL: return ai;
    case Op::LTOI: return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(a) & 0xffffffffu));
    case Op::LTOF: return std::bit_cast<uint32_t>(static_cast<float>(static_cast<long double>(a)));
    case Op::LNEG: return wrap64(-x);
    case Op::LABS: return wrap64(x < 0 ? -x : x);
    case Op::LNOT: return wrap64(-x - 1);
    case Op::LADD: return wrap64(x + y);
    case Op::LSUB: return wrap64(x - y);
    case Op::LMUL: return wrap64(static_cast<i128>(static_cast<u128>(x) * static_cast<u128>(y)));
    case Op::LMAX: return x > y ? a : b;
    case Op::LMIN: return x < y ? a : b;
    case Op::LAND: return a & b;
    case Op::LOR: return a | b;
    case Op::LXOR: return a ^ b;
    case Op::LFLOORDIV: return wrap64(floor_div(x, y));
    case Op::LREM: return y == 0 ? a : wrap64(x - floor_div(x, y) * y);
    case Op::LSELECT: return std::isnan(m) || m != 0.0f ? a : b;
    default: break;
  }
  bool r = false;
  switch (op) {
    case Op::LEQ: r = x == y; break;
    case Op::LNE: r = x != y; break;
    case Op::LLT: r = x < y; break;
    case Op::LLE: r = x <= y; break;
    case Op::LGT: r = x > y; break;
    default: r = x >= y; break;  // LGE
  }
  return std::bit_cast<uint32_t>(r ? 1.0f : 0.0f);
}

TEST(MicroKernels, Int64LanesAgainst128BitReferences) {
  const int64_t n = 4099;
  const std::vector<int64_t> a = int64_inputs(n, 1), b0 = int64_inputs(n, 2);
  std::vector<int64_t> b = b0;
  for (int64_t i = 0; i < n; i += 13) b[static_cast<size_t>(i)] = 0;  // division by zero
  for (int64_t i = 5; i < n; i += 17) b[static_cast<size_t>(i)] = -1;  // INT64_MIN // -1
  for (int64_t i = 7; i < n; i += 19) b[static_cast<size_t>(i)] = a[static_cast<size_t>(i)];  // equal
  std::vector<int32_t> ai(static_cast<size_t>(n));
  std::vector<float> mask(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    ai[static_cast<size_t>(i)] = static_cast<int32_t>(a[static_cast<size_t>(i)] >> 7);
    mask[static_cast<size_t>(i)] = i % 5 == 0 ? kNaN : i % 3 == 0 ? -0.0f : static_cast<float>(i % 2);
  }
  for (const MicroKernels* mk : tables()) {
    for (int i = 0; i < vm::kNumOps; ++i) {
      const Op op = static_cast<Op>(i);
      if (!vm::int64_op(op)) continue;
      if (vm::op_class(op) == OpClass::Reduce) {  // a fold from the identity, in 128 bits, wrapped
        for (int64_t len : lengths(*mk)) {
          const int64_t m = std::min(len, n);
          i128 want = op == Op::LRSUM ? 0 : op == Op::LRMAX ? INT64_MIN : INT64_MAX;
          for (int64_t j = 0; j < m; ++j) {
            const i128 x = a[static_cast<size_t>(j)];
            want = op == Op::LRSUM ? want + x : op == Op::LRMAX ? std::max(want, x) : std::min(want, x);
          }
          ASSERT_EQ(mk->long_reduce[i](mk->long_identity[i], a.data(), m), wrap64(want))
              << vm::op_name(op) << " " << isa_name(mk->isa) << " n=" << m;
        }
        continue;
      }
      const bool wide = vm::int64_operand(op, 0);
      for (int64_t len : lengths(*mk)) {
        const int64_t m = std::min(len, n);
        // Guards: 64-bit words after the output (4-byte outputs fill half).
        std::vector<uint64_t> out(static_cast<size_t>(m + kGuards), 0x7fbadbad7fbadbadull);
        const void* src0 = op == Op::ITOL ? static_cast<const void*>(ai.data())
                           : op == Op::LSELECT ? static_cast<const void*>(mask.data())
                                               : static_cast<const void*>(a.data());
        const void* src1 = op == Op::LSELECT ? static_cast<const void*>(a.data()) : b.data();
        mk->wide[i](out.data(), src0, src1, b.data(), m);
        const auto* out32 = reinterpret_cast<const uint32_t*>(out.data());
        for (int64_t j = 0; j < m; ++j) {
          const size_t k = static_cast<size_t>(j);
          const int64_t want = int64_reference(op, a[k], b[k], mask[k], ai[k]);
          const int64_t got = wide ? static_cast<int64_t>(out[k]) : static_cast<int64_t>(out32[k]);
          ASSERT_EQ(got, wide ? want : static_cast<int64_t>(static_cast<uint32_t>(want)))
              << vm::op_name(op) << " " << isa_name(mk->isa) << " n=" << m << " a=" << a[k] << " b=" << b[k];
        }
        const size_t first_guard = wide ? static_cast<size_t>(m) : static_cast<size_t>(m + 1) / 2;
        for (size_t g = first_guard + 1; g < out.size(); ++g)
          ASSERT_EQ(out[g], 0x7fbadbad7fbadbadull) << vm::op_name(op) << " wrote past n=" << m;
        if (!wide && m % 2 == 1) {
          ASSERT_EQ(out32[m], 0x7fbadbadu) << vm::op_name(op) << " wrote past n=" << m;
        }
      }
    }
  }
}

// ---- ISA selection -------------------------------------------------------------

TEST(Isa, ParseAndClamp) {
  Isa isa;
  EXPECT_TRUE(parse_isa("portable", &isa) && isa == Isa::Portable);
  EXPECT_TRUE(parse_isa("avx2", &isa) && isa == Isa::Avx2);
  EXPECT_TRUE(parse_isa("avx512", &isa) && isa == Isa::Avx512);
  EXPECT_FALSE(parse_isa("sse", &isa));
  EXPECT_TRUE(isa_supported(Isa::Portable));
  EXPECT_NE(microkernels_for(Isa::Portable), nullptr);
  const Isa before = active_isa();
  EXPECT_EQ(set_isa(Isa::Portable), Isa::Portable);
  EXPECT_EQ(active_microkernels().isa, Isa::Portable);
  EXPECT_EQ(set_isa(Isa::Avx512), detected_isa());  // never above the CPU
  set_isa(before);
  for (Isa i : {Isa::Avx2, Isa::Avx512})
    EXPECT_EQ(microkernels_for(i) != nullptr, isa_supported(i)) << isa_name(i);
}

}  // namespace
}  // namespace dvm::backends
