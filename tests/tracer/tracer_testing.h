// Shared helpers for the tracer tests: ULP distances against a double
// reference, an ISA fixture, seeded inputs with special values, and a checker
// that reports the first few mismatches of a sweep with their context.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <functional>
#include <ostream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backends/isa.h"
#include "dvm/dvm.h"
#include "tests/error_testing.h"
#include "tests/jit_built.h"
#include "tracer/trace.h"

namespace dvm::testing {

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------
// Runs f, which must throw dvm::Error whose message contains every string of
// `parts`, without recording, computing or flushing anything.
template <class F>
inline void expect_error(const std::string& what, F&& f, const std::vector<std::string>& parts) {
  auto& trace = detail::Trace::current();
  const size_t pending = trace.pending();
  const Stats before = dvm::stats();
  expect_error_message(what, f, parts);
  EXPECT_EQ(trace.pending(), pending) << what << ": the failed op recorded nodes";
  const Stats after = dvm::stats();
  EXPECT_EQ(after.flushes, before.flushes) << what << ": the failed op flushed the trace";
  EXPECT_EQ(after.nodes_computed, before.nodes_computed) << what << ": the failed op computed something";
  EXPECT_EQ(after.kernels_launched, before.kernels_launched) << what;
}

// Observes y with the kernel log on; returns the launches that computed it
// (its operands already computed).
inline std::vector<KernelRun> run_logged(const Tensor& y) {
  dvm::set_kernel_log(true);
  (void)dvm::take_kernel_log();
  y.sync();
  std::vector<KernelRun> log = dvm::take_kernel_log();
  dvm::set_kernel_log(false);
  return log;
}

// ---------------------------------------------------------------------------
// Floats
// ---------------------------------------------------------------------------
// The machine-code ISAs this CPU has, as set_isa names them.
inline std::vector<const char*> machine_code_isas() {
  std::vector<const char*> out;
  for (const char* name : {"avx2", "avx512"}) {
    backends::Isa isa;
    if (backends::parse_isa(name, &isa) && backends::isa_supported(isa)) out.push_back(name);
  }
  return out;
}

inline constexpr float kInf = std::numeric_limits<float>::infinity();
inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
// Unit roundoff of float: every correctly rounded operation has relative
// error at most u.
inline constexpr double kU = 0x1.0p-24;

inline uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// Exact equality for results that must be bit-identical: NaN matches NaN
// (payloads are not part of the contract), and +0 differs from -0.
inline bool same_float(float got, float want) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want);
  return bits_of(got) == bits_of(want);
}

// The spacing of floats at a reference value, as docs/MATH.md defines it:
// 2^(e-23) for |ref| in [2^e, 2^(e+1)), 2^-149 below FLT_MIN, and ±inf
// counted as ±2^128.
inline double ulp_at(double ref) {
  double a = std::fabs(ref);
  if (std::isinf(a)) a = 0x1.0p128;
  if (a < 0x1.0p-126) return 0x1.0p-149;
  int e = 0;
  std::frexp(a, &e);  // a = m * 2^e with m in [0.5, 1)
  return std::ldexp(1.0, e - 1 - 23);
}

// Error of `got` in float ULPs at the double reference `ref`. NaN must meet
// NaN (error 0, else +inf); an exact zero reference must be met with the same
// sign of zero; infinities count as ±2^128 (docs/MATH.md), and so does a
// reference beyond the float range (whose correctly rounded value is inf).
inline double ulp_error(float got, double ref) {
  if (std::isnan(ref) || std::isnan(got))
    return std::isnan(ref) && std::isnan(got) ? 0.0 : std::numeric_limits<double>::infinity();
  if (ref == 0.0 && got == 0.0)
    return std::signbit(ref) == std::signbit(got) ? 0.0 : std::numeric_limits<double>::infinity();
  auto clamp = [](double v) { return std::fabs(v) >= 0x1.0p128 ? std::copysign(0x1.0p128, v) : v; };
  const double r = clamp(ref);
  return std::fabs(clamp(got) - r) / ulp_at(r);
}

inline std::string fstr(double v) {
  std::ostringstream s;
  s.precision(9);
  s << v;
  if (std::isfinite(v) && v != 0) s << " (" << std::hexfloat << v << ")";
  return s.str();
}

// Concatenates anything streamable (a stream rather than operator+, which
// trips g++ 12's -Wrestrict false positive on "literal" + std::string).
template <class... T>
std::string cat(const T&... parts) {
  std::ostringstream s;
  (s << ... << parts);
  return s.str();
}

// ---------------------------------------------------------------------------
// Reporting
// ---------------------------------------------------------------------------
// Collects the mismatches of one sweep: the first few are reported with
// their full context, the rest only counted, so a broken op does not flood
// the log.
class Checker {
 public:
  explicit Checker(std::string ctx) : ctx_(std::move(ctx)) {}
  Checker(const Checker&) = delete;
  Checker& operator=(const Checker&) = delete;
  ~Checker() {
    if (fails_ > kShown) ADD_FAILURE() << ctx_ << ": " << fails_ << " mismatches in all";
  }
  void fail(const std::string& where, const std::string& what) {
    if (fails_++ < kShown) ADD_FAILURE() << ctx_ << " " << where << ": " << what;
  }
  int fails() const { return fails_; }

 private:
  static constexpr int kShown = 6;
  std::string ctx_;
  int fails_ = 0;
};

// ---------------------------------------------------------------------------
// ISAs
// ---------------------------------------------------------------------------
// Where a parameterized test runs: an ISA and a tier. "interp" runs every
// kernel on the tile interpreter (TierMode::Off); "jit" compiles every kernel
// to machine code before its first run (TierMode::Eager; a kernel the JIT
// declines stays interpreted, as in production).
struct Target {
  const char* isa;
  TierMode tier;
  const char* name;
};

inline const Target kTargets[] = {
    {"portable", TierMode::Off, "portable_interp"}, {"avx2", TierMode::Off, "avx2_interp"},
    {"avx2", TierMode::Eager, "avx2_jit"},         {"avx512", TierMode::Off, "avx512_interp"},
    {"avx512", TierMode::Eager, "avx512_jit"},
};

inline void PrintTo(const Target& t, std::ostream* os) { *os << t.name; }

inline std::string target_name(const ::testing::TestParamInfo<Target>& info) { return info.param.name; }

// Runs each test of a suite once per target; SetUp forces that ISA and tier
// (and skips when the CPU lacks the ISA), TearDown restores both.
class IsaTest : public ::testing::TestWithParam<Target> {
 protected:
  void SetUp() override {
    saved_isa_ = dvm::isa();
    saved_tier_ = dvm::tier_mode();
    backends::Isa want;
    ASSERT_TRUE(backends::parse_isa(GetParam().isa, &want)) << GetParam().isa;
    if (!backends::isa_supported(want)) GTEST_SKIP() << "this CPU lacks " << GetParam().isa;
    if (GetParam().tier != TierMode::Off) { DVM_SKIP_WITHOUT_JIT(); }
    dvm::set_isa(GetParam().isa);
    ASSERT_EQ(dvm::isa(), std::string(GetParam().isa));
    dvm::set_tier_mode(GetParam().tier);
  }
  void TearDown() override {
    dvm::set_isa(saved_isa_);
    dvm::set_tier_mode(saved_tier_);
  }

 private:
  std::string saved_isa_;
  TierMode saved_tier_ = TierMode::Auto;
};

// Lengths every op runs at: 0 .. 2*16+1 (empty, every tail of AVX-512's 16
// lanes and of AVX2's 8, two full vectors plus one) and a large odd length.
inline std::vector<int64_t> short_lengths() {
  std::vector<int64_t> n;
  for (int64_t i = 0; i <= 2 * 16 + 1; ++i) n.push_back(i);
  return n;
}
inline std::vector<int64_t> op_lengths() {
  auto n = short_lengths();
  n.push_back(4099);
  return n;
}
// Row reductions also run rows longer than 4096 elements (several passes
// over the row).
inline std::vector<int64_t> row_lengths() {
  auto n = op_lengths();
  n.push_back(5003);
  return n;
}

// ---------------------------------------------------------------------------
// Inputs
// ---------------------------------------------------------------------------
// Draws one value of an op's input domain.
using Gen = std::function<float(std::mt19937&)>;

inline Gen uniform_gen(float lo, float hi) {
  return [lo, hi](std::mt19937& r) { return std::uniform_real_distribution<float>(lo, hi)(r); };
}
// Log-uniform positive values in [lo, hi].
inline Gen log_uniform_gen(float lo, float hi) {
  return [lo, hi](std::mt19937& r) {
    double t = std::uniform_real_distribution<double>(std::log(lo), std::log(hi))(r);
    return static_cast<float>(std::exp(t));
  };
}

// n values of g with specials[k] placed at every fifth position (2, 7, 12,
// ...), so special values land in full vectors and in every tail.
inline std::vector<float> make_values(int64_t n, uint32_t seed, const Gen& g,
                                      const std::vector<float>& specials = {}) {
  std::mt19937 rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    float x = g(rng);
    if (!specials.empty() && i % 5 == 2)
      x = specials[static_cast<size_t>((i / 5 + seed) % specials.size())];
    v[static_cast<size_t>(i)] = x;
  }
  return v;
}

inline int64_t numel_of(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

inline std::string shape_str(const std::vector<int64_t>& s) { return Shape(s).to_string(); }

// Row-major strides of s.
inline std::vector<int64_t> row_major_strides(const Shape& s) {
  std::vector<int64_t> st(static_cast<size_t>(s.rank()));
  int64_t t = 1;
  for (int i = s.rank() - 1; i >= 0; --i) {
    st[static_cast<size_t>(i)] = t;
    t *= s[i];
  }
  return st;
}

// Row-major multi-index of flat position i in shape s.
inline void unravel(int64_t i, const std::vector<int64_t>& s, int64_t* idx) {
  for (int k = static_cast<int>(s.size()) - 1; k >= 0; --k) {
    const int64_t d = s[static_cast<size_t>(k)];
    idx[k] = d ? i % d : 0;
    i = d ? i / d : 0;
  }
}

// Flat position in `in` (numpy-broadcast to `out`) of the output multi-index.
inline int64_t broadcast_index(const int64_t* out_idx, const std::vector<int64_t>& out,
                               const std::vector<int64_t>& in) {
  const size_t lead = out.size() - in.size();
  int64_t off = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    const int64_t d = in[k];
    off = off * d + (d == 1 ? 0 : out_idx[lead + k]);
  }
  return off;
}

inline std::vector<int64_t> broadcast_shape(const std::vector<int64_t>& a,
                                            const std::vector<int64_t>& b) {
  const size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> o(r);
  for (size_t k = 0; k < r; ++k) {
    const int64_t da = k + a.size() >= r ? a[k + a.size() - r] : 1;
    const int64_t db = k + b.size() >= r ? b[k + b.size() - r] : 1;
    o[k] = da == 1 ? db : da;
  }
  return o;
}

// Restores the trace limit of this thread on scope exit.
// Restores ISA, tier mode, thread count and JIT threshold on scope exit
// (after any background compile has finished).
struct SettingsGuard {
  std::string isa = dvm::isa();
  TierMode tier = dvm::tier_mode();
  int threads = dvm::num_threads();
  int64_t jit_threshold = dvm::jit_threshold();
  ~SettingsGuard() {
    dvm::wait_for_jit();
    dvm::set_isa(isa);
    dvm::set_tier_mode(tier);
    dvm::set_num_threads(threads);
    dvm::set_jit_threshold(jit_threshold);
  }
};

struct TraceLimitGuard {
  int64_t saved = dvm::trace_limit();
  ~TraceLimitGuard() { dvm::set_trace_limit(saved); }
};

}  // namespace dvm::testing
