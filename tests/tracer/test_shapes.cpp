// Shape arithmetic at its limits: element counts that overflow int64, view
// extents computed from extreme arguments, negative extents, 0-d tensors
// given an axis, and the release of very long unobserved chains.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dvm/dvm.h"
#include "tests/tracer/tracer_testing.h"
#include "tracer/trace.h"

namespace dvm {
// Readable shapes in assertion messages.
static void PrintTo(const Shape& s, std::ostream* os) { *os << s.to_string(); }
}  // namespace dvm

namespace dvm::testing {
namespace {

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
__extension__ typedef __int128 i128;  // exact reference arithmetic

std::string shape_str(const std::vector<int64_t>& d) { return Shape(d).to_string(); }

// The independent reference of the shape rule: the product of the extents
// (size-0 extents counted as 1, so that the strides of the other axes are
// representable too) must not exceed kMaxElements.
bool fits(const std::vector<int64_t>& d) {
  i128 p = 1;
  for (int64_t e : d) {
    p *= e > 1 ? e : 1;
    if (p > kMaxElements) return false;
  }
  return true;
}
int64_t count(const std::vector<int64_t>& d) {
  i128 p = 1;
  for (int64_t e : d) p *= e;
  return static_cast<int64_t>(p);
}

// Extents from every regime: empty, unit, small, powers of two up to 2^62,
// and the int64 extremes.
int64_t random_extent(std::mt19937_64& rng) {
  switch (rng() % 6) {
    case 0: return static_cast<int64_t>(rng() % 2);  // 0 or 1
    case 1: return static_cast<int64_t>(rng() % 5);
    case 2: return int64_t{1} << (rng() % 63);
    case 3: return (int64_t{1} << (rng() % 62)) + static_cast<int64_t>(rng() % 3);
    case 4: return kI64Max - static_cast<int64_t>(rng() % 2);
    default: return static_cast<int64_t>(rng() % 100000);
  }
}
std::vector<int64_t> random_dims(std::mt19937_64& rng, int rank) {
  std::vector<int64_t> d;
  for (int i = 0; i < rank; ++i) d.push_back(random_extent(rng));
  return d;
}

TEST(ShapeLimits, NumelOverflowIsAnError) {
  EXPECT_EQ(Shape({int64_t{1} << 30, int64_t{1} << 30}).numel(), int64_t{1} << 60);
  EXPECT_EQ(Shape({0, kI64Max}).numel(), 0);
  expect_error("numel [2^40, 2^40]", [] { (void)Shape({int64_t{1} << 40, int64_t{1} << 40}).numel(); },
               {"[1099511627776, 1099511627776]", "overflow"});
  expect_error("numel [INT64_MAX, 2]", [] { (void)Shape({kI64Max, 2}).numel(); }, {"overflow"});
}

TEST(ShapeLimits, CreationRejectsHugeShapes) {
  const std::vector<int64_t> big = {int64_t{1} << 40, int64_t{1} << 40};
  expect_error("full [INT64_MAX, 2]", [] { Tensor::full({kI64Max, 2}, 1.0f); },
               {"full", "[9223372036854775807, 2]"});
  expect_error("zeros 2^40 x 2^40", [&] { Tensor::zeros(Shape(big)); }, {"full", shape_str(big)});
  expect_error("ones 2^62 x 2", [] { Tensor::ones({int64_t{1} << 62, 2}); }, {"full"});
  expect_error("uniform", [&] { Tensor::uniform(Shape(big), 1); }, {"uniform", shape_str(big)});
  expect_error("normal", [&] { Tensor::normal(Shape(big), 1); }, {"normal", shape_str(big)});
  float one = 1.0f;
  expect_error("from_blob", [&] { Tensor::from_blob(&one, Shape(big)); }, {"from_blob", shape_str(big)});
  expect_error("from_vector", [&] { Tensor::from_vector({1.0f}, Shape(big)); }, {"from_vector", shape_str(big)});
  // The element count of [2^40, 2^40] wraps to 0: it must not look empty.
  expect_error("full 0-count wrap", [&] { Tensor::full(Shape(big), 2.0f).sum(); }, {"full"});
  // More elements than a float buffer's byte count can describe.
  expect_error("full 2^62", [] { Tensor::full({int64_t{1} << 62}, 0.0f); }, {"full", "[4611686018427387904]"});
}

TEST(ShapeLimits, NegativeExtentsAreRejectedEverywhere) {
  expect_error("full", [] { Tensor::full({2, -1}, 0.0f); }, {"full", "[2, -1]"});
  expect_error("zeros", [] { Tensor::zeros({-3}); }, {"full", "[-3]"});
  expect_error("uniform", [] { Tensor::uniform({kI64Min}, 3); }, {"uniform", "negative"});
  expect_error("from_vector", [] { Tensor::from_vector({}, {-1, 0}); }, {"from_vector", "[-1, 0]"});
  Tensor x = Tensor::from_vector({1, 2, 3, 4}, {2, 2});
  expect_error("reshape -2", [&] { x.reshape({-2, -2}); }, {"reshape", "[-2, -2]"});
  expect_error("reshape INT64_MIN", [&] { x.reshape({kI64Min, -1}); }, {"reshape"});
  expect_error("expand -2 -3", [&] { x.expand({-2, -3}); }, {"expand", "[-2, -3]"});
  Tensor u = Tensor::from_vector({5}, {1, 1});
  expect_error("expand [1, 1] to -2 -3", [&] { u.expand({-2, -3}); }, {"expand", "[-2, -3]", "[1, 1]"});
  expect_error("expand [1, 1] to 3 INT64_MIN", [&] { u.expand({3, kI64Min}); }, {"expand", "[1, 1]"});
  Tensor pu = u * 1.0f;
  expect_error("pending expand -7", [&] { pu.expand({-7, 1}); }, {"expand", "-7"});
  expect_error("expand of a constant", [&] { Tensor::ones({1}).expand({-2}); }, {"expand", "-2"});
  expect_error("expand -2 kept", [&] { x.expand({2, -2}); }, {"expand", "-2"});
  expect_error("expand leading -1", [&] { x.expand({-1, 2, 2}); }, {"expand", "-1"});
  expect_error("expand leading -5", [&] { x.expand({-5, 2, 2}); }, {"expand", "-5"});
  // -1 keeps the extent.
  EXPECT_EQ(x.expand({3, -1, -1}).shape(), Shape({3, 2, 2}));
  EXPECT_EQ(x.reshape({-1, 1}).shape(), Shape({4, 1}));
}

TEST(ShapeLimits, ReshapeOverflowIsAnErrorNotARecursion) {
  Tensor x = Tensor::from_vector({1, 2, 3, 4}, {4});
  const int64_t h = (int64_t{1} << 62) + 1;
  // (2^62 + 1) * 4 wraps to 4 in int64: the count must not match.
  expect_error("reshape [2^62+1, 4]", [&] { x.reshape({h, 4}); }, {"reshape", "[4611686018427387905, 4]"});
  Tensor p = x * 2.0f;  // pending: the path that made a copy and retried
  expect_error("pending reshape [2^62+1, 4]", [&] { p.reshape({h, 4}); }, {"reshape", "[4]"});
  expect_error("reshape [-1, 2^62+1, 4]", [&] { x.reshape({-1, h, 4}); }, {"reshape"});
  expect_error("reshape [2^32+1, 2^32-1...]",
               [&] { x.reshape({(int64_t{1} << 32) + 1, (int64_t{1} << 32) - 1, 4}); }, {"reshape"});
  // An empty tensor may take any shape with a zero extent, within the limit.
  Tensor e = Tensor::from_vector({}, {0, 3});
  EXPECT_EQ(e.reshape({5, 0, 7}).shape(), Shape({5, 0, 7}));
  expect_error("empty reshape huge", [&] { e.reshape({0, kI64Max, 2}); }, {"reshape"});
  EXPECT_EQ(p.to_vector(), (std::vector<float>{2, 4, 6, 8}));
}

TEST(ShapeLimits, BroadcastAndExpandOverflow) {
  const int64_t b40 = int64_t{1} << 40;
  Tensor a = Tensor::full({b40, 1}, 1.0f), b = Tensor::full({1, b40}, 1.0f);
  expect_error("add", [&] { (void)(a + b); }, {"add", "[1099511627776, 1]", "[1, 1099511627776]"});
  Tensor mask = dvm::gt(a, 0.0f);
  expect_error("where", [&] { dvm::where(mask, a, b); }, {"where"});
  Tensor one = Tensor::from_vector({1}, {1, 1});
  expect_error("expand", [&] { one.expand({b40, b40}); }, {"expand", "[1099511627776, 1099511627776]"});
  expect_error("expand lead", [&] { one.expand({b40, b40, 1}); }, {"expand"});
  EXPECT_EQ(one.expand({b40, 1}).shape(), Shape({b40, 1}));
}

// Random shapes from every regime against the reference rule: creation,
// broadcasting against a size-1 shape, and expand either succeed with the
// exact shape and count or throw dvm::Error.
TEST(ShapeLimits, RandomShapesAgainstReference) {
  std::mt19937_64 rng(14);
  int accepted = 0, rejected = 0;
  for (int it = 0; it < 3000; ++it) {
    const int rank = 1 + static_cast<int>(rng() % 4);
    std::vector<int64_t> d = random_dims(rng, rank);
    const std::string what = "shape " + shape_str(d);
    if (fits(d)) {
      ++accepted;
      Tensor t = Tensor::full(Shape(d), 1.0f);
      EXPECT_EQ(t.numel(), count(d)) << what;
      std::vector<int64_t> ones(d.size(), 1);
      Tensor u = Tensor::full(Shape(ones), 2.0f);
      EXPECT_EQ(u.expand(Shape(d)).numel(), count(d)) << what;
      Tensor v = Tensor::from_vector({3.0f}, Shape(ones));
      EXPECT_EQ(v.expand(Shape(d)).shape(), Shape(d)) << what;
      EXPECT_EQ(v.reshape({1}).expand(Shape(d)).shape(), Shape(d)) << what;
      if (count(d) <= 64) {
        const std::vector<float> got = v.expand(Shape(d)).sum().to_vector();
        EXPECT_EQ(got, std::vector<float>{3.0f * static_cast<float>(count(d))}) << what;
      }
    } else {
      ++rejected;
      expect_error("full " + what, [&] { Tensor::full(Shape(d), 1.0f); }, {"full", shape_str(d)});
      expect_error("zeros " + what, [&] { Tensor::zeros(Shape(d)); }, {"full"});
      std::vector<int64_t> ones(d.size(), 1);
      Tensor v = Tensor::from_vector({3.0f}, Shape(ones));
      expect_error("expand " + what, [&] { v.expand(Shape(d)); }, {"expand", shape_str(d)});
      // Split the shape in two halves that broadcast to it.
      std::vector<int64_t> lo = d, hi = d;
      for (size_t i = 0; i < d.size(); ++i) (i % 2 ? lo[i] : hi[i]) = 1;
      if (fits(lo) && fits(hi)) {
        Tensor a = Tensor::full(Shape(lo), 1.0f), b = Tensor::full(Shape(hi), 1.0f);
        expect_error("mul " + what, [&] { (void)(a * b); }, {"mul", shape_str(lo), shape_str(hi)});
      }
    }
  }
  EXPECT_GT(accepted, 300);
  EXPECT_GT(rejected, 300);
}

// Reference slice extent: the indices start, start + step, ... below end,
// counted in 128-bit arithmetic.
std::vector<int64_t> ref_slice(int64_t n, int64_t start, int64_t end, int64_t step) {
  i128 s = start, e = end;
  if (s < 0) s += n;
  if (e < 0) e += n;
  s = std::min<i128>(std::max<i128>(s, 0), n);
  e = std::min<i128>(std::max<i128>(e, s), n);
  std::vector<int64_t> idx;
  for (i128 i = s; i < e; i += step) idx.push_back(static_cast<int64_t>(i));
  return idx;
}

TEST(ShapeLimits, SliceWithExtremeSteps) {
  Tensor x = Tensor::arange(10);
  Tensor a = x.slice(0, 2, 10, kI64Max);
  EXPECT_EQ(a.shape(), Shape({1}));
  EXPECT_EQ(a.to_vector(), std::vector<float>{2});
  EXPECT_EQ(x.slice(0, 0, 10, kI64Max - 1).shape(), Shape({1}));
  EXPECT_EQ(x.slice(0, 9, kI64Max, kI64Max).to_vector(), std::vector<float>{9});
  EXPECT_EQ(x.slice(0, kI64Min, kI64Max, kI64Max).to_vector(), std::vector<float>{0});
  EXPECT_EQ(x.slice(0, 5, 5, kI64Max).shape(), Shape({0}));
  // A huge step on an outer axis: the inner layout stays intact.
  Tensor m = Tensor::arange(12).reshape({4, 3});
  Tensor r = m.slice(0, 1, 4, int64_t{1} << 62);
  EXPECT_EQ(r.shape(), Shape({1, 3}));
  EXPECT_EQ(r.to_vector(), (std::vector<float>{3, 4, 5}));
  EXPECT_EQ((m * 1.0f).slice(0, -1, kI64Max, kI64Max).to_vector(), (std::vector<float>{9, 10, 11}));
  expect_error("step 0", [&] { x.slice(0, 0, 1, 0); }, {"slice", "step"});
  expect_error("step INT64_MIN", [&] { x.slice(0, 0, 1, kI64Min); }, {"slice", "step"});

  // Random arguments, every regime, on stored and pending inputs.
  std::mt19937_64 rng(9);
  const int64_t specials[] = {0, 1, -1, 2, -2, 3, 7, kI64Max, kI64Min, kI64Max - 1, kI64Min + 1,
                              int64_t{1} << 62, -(int64_t{1} << 62)};
  auto pick = [&](int64_t n) {
    if (rng() % 2) return specials[rng() % std::size(specials)];
    return static_cast<int64_t>(rng() % static_cast<uint64_t>(2 * n + 3)) - n - 1;
  };
  for (int it = 0; it < 2000; ++it) {
    const int64_t n = static_cast<int64_t>(rng() % 9);
    const int64_t inner = 1 + static_cast<int64_t>(rng() % 3);
    std::vector<float> v(static_cast<size_t>(n * inner));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
    Tensor t = Tensor::from_vector(v, {n, inner});
    if (rng() % 2) t = t + 0.0f;
    const int64_t start = pick(n), end = pick(n);
    int64_t step = pick(n);
    if (step <= 0) step = step == kI64Min ? kI64Max : (step == 0 ? 1 : -step);
    const std::vector<int64_t> idx = ref_slice(n, start, end, step);
    const std::string what = "slice(0, " + std::to_string(start) + ", " + std::to_string(end) + ", " +
                             std::to_string(step) + ") of [" + std::to_string(n) + ", " + std::to_string(inner) + "]";
    Tensor s = t.slice(0, start, end, step);
    ASSERT_EQ(s.shape(), Shape({static_cast<int64_t>(idx.size()), inner})) << what;
    std::vector<float> want;
    for (int64_t i : idx)
      for (int64_t j = 0; j < inner; ++j) want.push_back(static_cast<float>(i * inner + j));
    EXPECT_EQ(s.to_vector(), want) << what;
    // Through a second slice and a transposed view as well.
    EXPECT_EQ(s.transpose(0, 1).contiguous().transpose(0, 1).to_vector(), want) << what;
  }
}

// A chain this long released recursively needs tens of megabytes of stack
// (one release/destroy frame pair per node), past the 8 MiB default of the
// main thread and of std::thread.
constexpr int kChain = 1'000'000;

TEST(LongChains, UnobservedChainIsReleasedAtFlush) {
  const int64_t old_limit = dvm::trace_limit();
  dvm::set_trace_limit(4 * kChain);
  {
    Tensor keep = Tensor::from_vector({1, 2, 3}, {3}) * 2.0f;
    Tensor y = Tensor::from_vector({1, 2, 3}, {3});
    for (int i = 0; i < kChain; ++i) y = y * 1.0f;
    y = Tensor();
    EXPECT_GE(detail::Trace::current().pending(), static_cast<size_t>(kChain));
    dvm::flush();
    EXPECT_EQ(detail::Trace::current().pending(), 0u);
    EXPECT_EQ(keep.to_vector(), (std::vector<float>{2, 4, 6}));
  }
  dvm::set_trace_limit(old_limit);
}

TEST(LongChains, UnobservedBinaryChainIsReleasedAtFlush) {
  // Every node has two inputs that die with it (the chain and a temporary
  // that is itself a short chain): both sides of the release are long.
  const int64_t old_limit = dvm::trace_limit();
  dvm::set_trace_limit(4 * kChain);
  {
    Tensor x = Tensor::from_vector({1, 2}, {2});
    Tensor keep = x + 1.0f;
    Tensor y = x * 1.0f;
    for (int i = 0; i < kChain / 3; ++i) y = dvm::where(dvm::gt(y, 0.0f), y, x * 2.0f);
    y = Tensor();
    dvm::flush();
    EXPECT_EQ(detail::Trace::current().pending(), 0u);
    EXPECT_EQ(keep.to_vector(), (std::vector<float>{2, 3}));
    // Nodes recorded after the release reuse the freed blocks correctly.
    Tensor z = x;
    for (int i = 0; i < 1000; ++i) z = z + 1.0f;
    EXPECT_EQ(z.to_vector(), (std::vector<float>{1001, 1002}));
  }
  dvm::set_trace_limit(old_limit);
}

TEST(LongChains, UnobservedChainIsReleasedAtThreadExit) {
  std::thread t([] {
    dvm::set_trace_limit(4 * kChain);
    Tensor y = Tensor::from_vector({1, 2}, {2}) + 0.0f;
    for (int i = 0; i < kChain; ++i) y = y + 1.0f;
    // The handle dies first; the trace still holds the chain when the
    // thread exits.
  });
  t.join();
  SUCCEED();
}

// ---------------------------------------------------------------------------
// 0-d tensors given an axis: torch accepts axis 0 and -1 (a 0-d tensor acts
// as one of shape [1] for axis wrapping) and reduces it to itself.
// ---------------------------------------------------------------------------
std::vector<float> scalar_values() {
  std::vector<float> v = {0.0f, -0.0f, 1.5f, -3.25f, 1e30f, -1e-40f, kInf, -kInf, kNaN};
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-100.0f, 100.0f);
  for (int i = 0; i < 8; ++i) v.push_back(u(rng));
  return v;
}

void expect_scalar(const Tensor& t, float want, const std::string& what) {
  EXPECT_EQ(t.rank(), 0) << what;
  EXPECT_EQ(t.dtype(), Dtype::F32) << what;
  const float got = t.item();
  EXPECT_TRUE(same_float(got, want) || (got == 0.0f && want == 0.0f)) << what << ": got " << got << ", want " << want;
}

TEST(ZeroDim, ReductionsOverAxisZeroAndMinusOne) {
  for (float v : scalar_values()) {
    for (int kind = 0; kind < 3; ++kind) {
      // A fresh operand per op: observing a reduction of a constant
      // observes the constant itself.
      auto s = [&] {
        return kind == 0 ? Tensor::scalar(v)
               : kind == 1 ? Tensor::from_vector({v}, Shape{})
                           : Tensor::from_vector({v}, Shape{}) * 1.0f;
      };
      const std::string what = "value " + std::to_string(v) + " kind " + std::to_string(kind);
      for (int axis : {0, -1}) {
        for (bool kd : {false, true}) {
          expect_scalar(s().sum(axis, kd), v, what + " sum");
          expect_scalar(s().max(axis, kd), v, what + " max");
          expect_scalar(s().min(axis, kd), v, what + " min");
          expect_scalar(s().mean(axis, kd), v, what + " mean");
        }
      }
      expect_scalar(s().mean(), v, what + " mean()");
      expect_scalar(s().sum(), v, what + " sum()");
      // softmax: exp(x - x) / exp(x - x); NaN where x - x is (x = ±inf, NaN).
      const float sm = std::isfinite(v) ? 1.0f : kNaN;
      const float lsm = std::isfinite(v) ? 0.0f : kNaN;
      for (int axis : {0, -1}) {
        expect_scalar(dvm::softmax(s(), axis), sm, what + " softmax");
        expect_scalar(dvm::log_softmax(s(), axis), lsm, what + " log_softmax");
      }
    }
  }
}

TEST(ZeroDim, TransposeOfAxisZero) {
  Tensor s = Tensor::from_vector({2.0f}, Shape{});
  expect_scalar(s.transpose(0, -1), 2.0f, "transpose(0, -1)");
  expect_scalar((s * 3.0f).transpose(-1, -1), 6.0f, "pending transpose(-1, -1)");
  expect_error("transpose(0, 1)", [&] { s.transpose(0, 1); }, {"transpose", "1", "[]"});
}

TEST(ZeroDim, AxisOutOfRangeStillRejected) {
  Tensor s = Tensor::from_vector({2.0f}, Shape{});
  expect_error("sum(1)", [&] { s.sum(1); }, {"sum", "axis 1", "[]"});
  expect_error("sum(-2)", [&] { s.sum(-2); }, {"sum", "-2", "[]"});
  expect_error("sum({0, -1})", [&] { s.sum({0, -1}); }, {"sum", "twice"});
  expect_error("softmax(1)", [&] { dvm::softmax(s, 1); }, {"softmax", "1", "[]"});
  expect_error("log_softmax(-2)", [&] { dvm::log_softmax(s, -2); }, {"log_softmax", "-2", "[]"});
}

TEST(ZeroDim, BoolMaskSumsAreInt64AndMaxIsBool) {
  for (float v : {-1.0f, 2.0f}) {
    Tensor mask = dvm::gt(Tensor::from_vector({v}, Shape{}), 0.0f);
    ASSERT_EQ(mask.dtype(), Dtype::Bool);
    const float want = v > 0 ? 1.0f : 0.0f;
    const int64_t count = v > 0 ? 1 : 0;
    // The rank-1 rule this must match.
    Tensor mask1 = dvm::gt(Tensor::from_vector({v}, {1}), 0.0f);
    EXPECT_EQ(mask1.sum().dtype(), Dtype::I64);
    // sum counts the trues in int64, as torch's.
    for (const Tensor& s : {mask.sum(), mask.sum(0), mask1.sum()}) {
      EXPECT_EQ(s.dtype(), Dtype::I64);
      EXPECT_EQ(s.rank(), 0);
      EXPECT_EQ(s.to_vector<int64_t>(), std::vector<int64_t>{count});
    }
    // max and min select an element: a bool, as in torch.
    EXPECT_EQ(mask.max().dtype(), Dtype::Bool);
    EXPECT_EQ(mask.min(0).dtype(), Dtype::Bool);
    EXPECT_EQ(mask.max().item(), want);
    EXPECT_EQ(mask.min(0).item(), want);
    // mean is the fraction of trues, in float32.
    expect_scalar(mask.mean(), want, "mean()");
    EXPECT_EQ(mask.max(-1, true).item(), want);
    expect_scalar(mask.mean(0), want, "mean(0)");
    // The count computes with floats as an integer does: float32.
    expect_scalar(mask.sum() + 1.0f, want + 1.0f, "sum() + 1");
  }
}

}  // namespace
}  // namespace dvm::testing
