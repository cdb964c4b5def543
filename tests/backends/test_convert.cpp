// The element conversions of backends/convert.h against references built
// another way (exact rounding in double, x86's F16C instructions), and every
// micro-kernel table's contiguous conversions against convert.h bit for bit,
// with guard bytes after every output.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backends/convert.h"
#include "backends/isa.h"
#include "backends/microkernels.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace dvm::backends {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// x rounded to nearest even on the grid of a binary format with `man`
// explicit mantissa bits and minimum normal exponent emin (subnormals below
// it), overflowing to infinity from max_finite + half an ulp; in double, so
// every step is exact.
double round_to_format(double x, int man, int emin, double overflow_at) {
  if (x == 0 || std::isinf(x)) return x;
  int e = 0;
  std::frexp(std::fabs(x), &e);  // |x| = m * 2^e, m in [0.5, 1)
  e -= 1;                        // |x| = 1.m * 2^e
  if (e < emin) e = emin;
  const double q = std::ldexp(1.0, e - man);
  const double r = std::nearbyint(x / q) * q;  // the default rounding mode: half to even
  if (std::fabs(r) >= overflow_at) return std::copysign(kInf, x);
  return r;
}
double ref_f16(float f) { return round_to_format(f, 10, -14, 65520.0); }
double ref_bf16(float f) { return round_to_format(f, 7, -126, 0x1.ffp127); }

double decode_f16(uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  const double s = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 31) return m ? std::numeric_limits<double>::quiet_NaN() : s * kInf;
  if (e == 0) return s * std::ldexp(m, -24);
  return s * std::ldexp(1024 + m, e - 25);
}

// f32 inputs that matter for a 16-bit format: every representable value, the
// midpoints between neighbours and one f32 ulp either side of each (ties and
// near-ties), plus seeded random patterns of every exponent.
std::vector<float> probe_values(bool bf16) {
  std::vector<float> v;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float x = bf16 ? bf16_to_f32(static_cast<uint16_t>(h)) : static_cast<float>(decode_f16(static_cast<uint16_t>(h)));
    if (std::isnan(x)) continue;
    v.push_back(x);
    const float next = bf16 ? bf16_to_f32(static_cast<uint16_t>(h + 1)) : static_cast<float>(decode_f16(static_cast<uint16_t>(h + 1)));
    if (h + 1 < 65536 && std::isfinite(x) && std::isfinite(next) && (h & 0x7fff) != 0x7fff) {
      const float mid = static_cast<float>((static_cast<double>(x) + next) / 2);
      v.push_back(mid);
      v.push_back(std::nextafter(mid, kInf));
      v.push_back(std::nextafter(mid, -kInf));
    }
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = rng();
    float f;
    std::memcpy(&f, &u, 4);
    v.push_back(f);
  }
  return v;
}

TEST(Convert, F16ToF32IsExactEverywhere) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = f16_to_f32(static_cast<uint16_t>(h));
    const double want = decode_f16(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << h;
      // Quiet, with the sign and payload kept.
      EXPECT_EQ(f32_bits(got), ((h & 0x8000u) << 16) | 0x7fc00000u | ((h & 0x3ffu) << 13)) << h;
      continue;
    }
    ASSERT_EQ(static_cast<double>(got), want) << h;
    ASSERT_EQ(std::signbit(got), std::signbit(want)) << h;
  }
}

TEST(Convert, F32ToF16RoundsToNearestEven) {
  for (float f : probe_values(false)) {
    const uint16_t h = f32_to_f16(f);
    if (std::isnan(f)) {
      EXPECT_EQ(h & 0x7e00u, 0x7e00u) << f;  // a quiet NaN
      EXPECT_EQ(h >> 15, f32_bits(f) >> 31) << f;
      continue;
    }
    const double want = ref_f16(f);
    const double got = decode_f16(h);
    ASSERT_EQ(got, want) << std::hexfloat << f;
    ASSERT_EQ(std::signbit(got), std::signbit(f)) << std::hexfloat << f;
  }
}

TEST(Convert, Bf16RoundsToNearestEvenAndNaNIsCanonical) {
  for (float f : probe_values(true)) {
    const uint16_t b = f32_to_bf16(f);
    if (std::isnan(f)) {
      EXPECT_EQ(b, 0x7fc0u);
      continue;
    }
    const double want = ref_bf16(f);
    const float got = bf16_to_f32(b);
    ASSERT_EQ(static_cast<double>(got), want) << std::hexfloat << f;
    ASSERT_EQ(std::signbit(got), std::signbit(f)) << std::hexfloat << f;
  }
  for (uint32_t b = 0; b < 65536; ++b)
    EXPECT_EQ(f32_bits(bf16_to_f32(static_cast<uint16_t>(b))), b << 16);
}

#if defined(__x86_64__)
[[gnu::target("f16c")]] uint16_t f16c_from_f32(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
[[gnu::target("f16c")]] float f16c_to_f32(uint16_t h) { return _cvtsh_ss(h); }

// The SIMD tables use F16C: convert.h must give its bits, NaNs included.
TEST(Convert, F16MatchesF16CBitForBit) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "this CPU has no F16C";
  for (uint32_t h = 0; h < 65536; ++h)
    ASSERT_EQ(f32_bits(f16_to_f32(static_cast<uint16_t>(h))), f32_bits(f16c_to_f32(static_cast<uint16_t>(h)))) << h;
  std::vector<float> v = probe_values(false);
  for (uint32_t nan : {0x7fc00000u, 0xffc00001u, 0x7f800001u, 0xff812345u, 0x7fffffffu}) v.push_back(f32_from_bits(nan));
  for (float f : v) ASSERT_EQ(f32_to_f16(f), f16c_from_f32(f)) << std::hexfloat << f << " " << f32_bits(f);
}
#endif

TEST(Convert, IntegerStoresTruncateAndSaturateToIndefinite) {
  struct Case {
    float f;
    int32_t i32;
    int64_t i64;
    uint8_t u8;
    uint8_t b;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Case cases[] = {
      {0.0f, 0, 0, 0, 0},
      {-0.0f, 0, 0, 0, 0},
      {2.9f, 2, 2, 2, 1},
      {-2.9f, -2, -2, 254, 1},
      {255.5f, 255, 255, 255, 1},
      {256.0f, 256, 256, 0, 1},
      {-1.0f, -1, -1, 255, 1},
      {2147483520.0f, 2147483520, 2147483520, 0x80, 1},  // the largest f32 below 2^31
      {2147483648.0f, INT32_MIN, 2147483648LL, 0, 1},
      {-2147483648.0f, INT32_MIN, -2147483648LL, 0, 1},
      {-2147483904.0f, INT32_MIN, -2147483904LL, 0, 1},
      {9.3e18f, INT32_MIN, INT64_MIN, 0, 1},
      {kInf, INT32_MIN, INT64_MIN, 0, 1},
      {-kInf, INT32_MIN, INT64_MIN, 0, 1},
      {nan, INT32_MIN, INT64_MIN, 0, 1},
      {1e-40f, 0, 0, 0, 1},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(f32_to_i32(c.f), c.i32) << c.f;
    EXPECT_EQ(f32_to_i64(c.f), c.i64) << c.f;
    EXPECT_EQ(f32_to_u8(c.f), c.u8) << c.f;
    EXPECT_EQ(f32_to_bool(c.f), c.b) << c.f;
  }
  // Loads: int32 and int64 round to nearest even; bool is any nonzero byte.
  const int32_t i32s[] = {16777217, -16777219, INT32_MAX, INT32_MIN};
  for (int32_t i : i32s) EXPECT_EQ(load_elem(Dtype::I32, &i, 0), static_cast<float>(static_cast<double>(i))) << i;
  const int64_t big = (int64_t{1} << 40) + 1;
  EXPECT_EQ(load_elem(Dtype::I64, &big, 0), 0x1p40f);
  const uint8_t bytes[] = {0, 1, 2, 255};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(load_elem(Dtype::Bool, bytes, i), i ? 1.0f : 0.0f);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(load_elem(Dtype::U8, bytes, i), static_cast<float>(bytes[i]));
}

// Every table's contiguous conversions give convert.h's bits, at every
// length through two vectors and a long odd one, from unaligned addresses,
// writing nothing past the end.
TEST(Convert, EveryTableMatchesConvertH) {
  std::mt19937 rng(11);
  std::vector<float> src_f(1100);
  for (size_t i = 0; i < src_f.size(); ++i) {
    switch (i % 7) {
      case 0: src_f[i] = std::uniform_real_distribution<float>(-70000.0f, 70000.0f)(rng); break;
      case 1: src_f[i] = std::uniform_real_distribution<float>(-300.0f, 300.0f)(rng); break;
      case 2: src_f[i] = f32_from_bits(rng()); break;
      case 3: src_f[i] = std::uniform_real_distribution<float>(-1e-5f, 1e-5f)(rng); break;
      default: src_f[i] = std::uniform_real_distribution<float>(-3e9f, 3e9f)(rng); break;
    }
  }
  std::vector<unsigned char> raw(1100 * 8 + 64);
  for (auto& b : raw) b = static_cast<unsigned char>(rng());
  for (Isa isa : {Isa::Portable, Isa::Avx2, Isa::Avx512}) {
    const MicroKernels* mk = microkernels_for(isa);
    if (!mk) continue;
    for (int ti = 0; ti < kNumDtypes; ++ti) {
      const Dtype t = static_cast<Dtype>(ti);
      const size_t es = dtype_size(t);
      for (int64_t n : {0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 1031}) {
        // Loads, from an address one element past a 64-byte aligned one
        // (element-aligned, as every tensor's data is; not vector-aligned).
        const unsigned char* in = raw.data() + es;
        std::vector<float> got(static_cast<size_t>(n) + 20, -7.0f);
        mk->load_cvt[ti](got.data(), in, n);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(f32_bits(got[static_cast<size_t>(i)]), f32_bits(load_elem(t, in, i)))
              << isa_name(isa) << " load " << dtype_name(t) << " n=" << n << " i=" << i;
        for (size_t i = static_cast<size_t>(n); i < got.size(); ++i) ASSERT_EQ(got[i], -7.0f);
        // Stores, three elements past an aligned address, guard bytes after.
        std::vector<unsigned char> out(static_cast<size_t>(n) * es + 3 * es + 64, 0xa5), want = out;
        mk->store_cvt[ti](out.data() + 3 * es, src_f.data() + 1, n);
        for (int64_t i = 0; i < n; ++i) store_elem(t, want.data() + 3 * es, i, src_f[static_cast<size_t>(i) + 1]);
        ASSERT_EQ(out, want) << isa_name(isa) << " store " << dtype_name(t) << " n=" << n;
      }
    }
  }
}

}  // namespace
}  // namespace dvm::backends
