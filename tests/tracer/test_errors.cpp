// Bad input is a dvm::Error at record time, with a message that names the op,
// the shapes involved and what was expected, and records nothing: the
// pending trace, the counters and the runtime settings stay as they were.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dvm/dvm.h"
#include "dvm/weights_file.h"
#include "tests/tracer/tracer_testing.h"
#include "tracer/trace.h"

namespace dvm::testing {
namespace {

// Every test starts with something pending, so "nothing recorded" is checked
// against a non-empty trace, and makes sure that pending work still computes
// correctly after the errors.
class Errors : public ::testing::Test {
 protected:
  void SetUp() override {
    x23 = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
    pending = x23 * 2.0f + 1.0f;
    ASSERT_GT(detail::Trace::current().pending(), 0u);
  }
  void TearDown() override {
    const std::vector<float> want = {3, 5, 7, 9, 11, 13};
    EXPECT_EQ(pending.to_vector(), want) << "pending work was damaged by a failed op";
  }
  Tensor x23, pending;
};

TEST_F(Errors, IncompatibleBroadcast) {
  Tensor a = Tensor::ones({2, 3}), b = Tensor::ones({4}), c = Tensor::ones({3, 1, 5});
  expect_error("add", [&] { dvm::add(a, b); }, {"add", "[2, 3]", "[4]"});
  expect_error("operator+", [&] { (void)(a + b); }, {"add", "[2, 3]", "[4]"});
  expect_error("sub", [&] { dvm::sub(b, x23); }, {"sub", "[4]", "[2, 3]"});
  expect_error("mul pending", [&] { dvm::mul(pending, c); }, {"mul", "[2, 3]", "[3, 1, 5]"});
  expect_error("div", [&] { dvm::div(a, c); }, {"div", "[2, 3]", "[3, 1, 5]"});
  expect_error("maximum", [&] { dvm::maximum(a, b); }, {"maximum", "[2, 3]", "[4]"});
  expect_error("minimum", [&] { dvm::minimum(a, b); }, {"minimum", "[2, 3]", "[4]"});
  expect_error("pow", [&] { dvm::pow(a, b); }, {"pow", "[2, 3]", "[4]"});
  expect_error("eq", [&] { dvm::eq(a, b); }, {"eq", "[2, 3]", "[4]"});
  expect_error("ne", [&] { dvm::ne(a, b); }, {"ne", "[2, 3]", "[4]"});
  expect_error("lt", [&] { dvm::lt(a, b); }, {"lt", "[2, 3]", "[4]"});
  expect_error("le", [&] { dvm::le(a, b); }, {"le", "[2, 3]", "[4]"});
  expect_error("gt", [&] { dvm::gt(a, b); }, {"gt", "[2, 3]", "[4]"});
  expect_error("ge", [&] { dvm::ge(a, b); }, {"ge", "[2, 3]", "[4]"});
  Tensor mask = dvm::gt(a, 0.0f);
  const size_t with_mask = detail::Trace::current().pending();
  expect_error("where a", [&] { dvm::where(mask, b, a); }, {"where", "[2, 3]", "[4]"});
  expect_error("where b", [&] { dvm::where(mask, a, b); }, {"where", "[2, 3]", "[4]"});
  EXPECT_EQ(detail::Trace::current().pending(), with_mask);
}

// Errors name the call the user made and the shapes it was given, not the
// op it is built from (bmm, addmm and linear are matmuls; stack unsqueezes).
TEST_F(Errors, CompositionsNameThemselves) {
  const Tensor b3 = Tensor::ones({4, 2, 3}), c3 = Tensor::ones({4, 4, 5});
  expect_error("bmm", [&] { (void)bmm(b3, c3); }, {"bmm:", "[4, 2, 3]", "[4, 4, 5]"});
  expect_error("addmm", [&] { (void)addmm(Tensor::ones({5}), Tensor::ones({2, 3}), Tensor::ones({4, 5})); },
               {"addmm:", "[2, 3]", "[4, 5]"});
  const Tensor w = Tensor::ones({5, 3});
  expect_error("linear types", [&] { (void)linear(Tensor::full({2, 3}, 1.0, Dtype::F16), w); },
               {"linear:", "float16[2, 3]", "float32[5, 3]", "one floating type"});
  const Tensor r8 = Tensor::ones({1, 1, 1, 1, 1, 1, 1, 1});
  expect_error("stack rank 8", [&] { (void)stack({r8, r8}, 0); }, {"stack:", "most axes"});
  // index_select of a 0-d tensor takes exactly one index, 0, and stays 0-d (torch).
  const Tensor s = Tensor::full(Shape{}, 5.0f) * 1.0f;
  const Tensor picked = index_select(s, 0, Tensor::from_vector(std::vector<int64_t>{0}, Shape{1}));
  EXPECT_EQ(picked.shape(), Shape{});
  EXPECT_EQ(picked.item(), 5.0f);
  expect_error("index_select 0-d, two indices",
               [&] { (void)index_select(s, 0, Tensor::from_vector(std::vector<int64_t>{0, 0}, Shape{2})); },
               {"index_select", "exactly one"});
}

// Ops built from others name the call the user made: the logical ops (ne
// and the bitwise ops), clamp with integer bounds (maximum, minimum),
// from_copy; and a matmul whose batches broadcast to too many elements
// says so rather than that they do not broadcast.
TEST_F(Errors, DerivedOpsNameTheCall) {
  const Tensor a = Tensor::ones({2}), b = Tensor::ones({3}), u8 = Tensor::full({2}, 1, Dtype::U8);
  expect_error("logical_and", [&] { (void)logical_and(a, b); }, {"logical_and:", "[2] and [3]"});
  expect_error("logical_or", [&] { (void)logical_or(a, b); }, {"logical_or:", "[2] and [3]"});
  expect_error("logical_xor", [&] { (void)logical_xor(a, b); }, {"logical_xor:", "[2] and [3]"});
  expect_error("clamp", [&] { (void)clamp(u8, -1000, 5); }, {"clamp:", "-1000", "uint8"});
  expect_error("clamp_min", [&] { (void)clamp_min(u8, 300); }, {"clamp_min:", "300", "uint8"});
  expect_error("clamp_max", [&] { (void)clamp_max(u8, -300); }, {"clamp_max:", "-300", "uint8"});
  const float buf[4] = {};
  expect_error("from_copy", [&] { (void)Tensor::from_copy(buf, {4}, static_cast<Dtype>(200)); }, {"from_copy:", "200"});
  const int64_t g = int64_t{1} << 40;
  const Tensor x = Tensor::ones({1, 1, 1}).expand({g, 1, 1}), y = Tensor::ones({1, 1, 1, 1}).expand({g, 1, 1, 1});
  expect_error_message("matmul of batches too large", [&] { (void)matmul(x, y); }, {"matmul", "too many elements"});
  EXPECT_EQ(matmul(Tensor::ones({3, 1, 1}), Tensor::ones({3, 1, 1, 1})).shape(), (Shape{3, 3, 1, 1}));
}

// Tensor bounds clamp as torch.clamp's: broadcast, either one may be
// undefined (no bound), and integer tensors stay integers.
TEST_F(Errors, ClampTakesTensorBounds) {
  const Tensor x = Tensor::from_vector({-3, -1, 0, 2, 5, 9}, {2, 3});
  const Tensor lo = Tensor::from_vector({-2, 0, 1}, {3});
  EXPECT_EQ(clamp(x, lo, Tensor::from_vector({4, 4}, {2, 1})).to_vector(), (std::vector<float>{-2, 0, 1, 2, 4, 4}));
  EXPECT_EQ(clamp_min(x, lo).to_vector(), (std::vector<float>{-2, 0, 1, 2, 5, 9}));
  EXPECT_EQ(clamp(x, Tensor(), Tensor::full({}, 1.5f)).to_vector(), (std::vector<float>{-3, -1, 0, 1.5, 1.5, 1.5}));
  // Not both (torch: "At least one of 'min' or 'max' must not be None").
  expect_error("clamp with no bound", [&] { (void)clamp(x, Tensor(), Tensor()); }, {"clamp", "[2, 3]", "no bound"});
  const Tensor ids = Tensor::from_vector(std::vector<int32_t>{-7, 3, 12}, {3});
  const Tensor top = Tensor::from_vector(std::vector<int32_t>{10, 2, 11}, {3});
  const Tensor c = clamp_max(ids, top);
  ASSERT_EQ(c.dtype(), Dtype::I32);
  EXPECT_EQ(c.to_vector<int32_t>(), (std::vector<int32_t>{-7, 2, 11}));
}

TEST_F(Errors, BadAxis) {
  expect_error("sum(2)", [&] { x23.sum(2); }, {"sum", "axis 2", "[2, 3]"});
  expect_error("sum(-3)", [&] { x23.sum(-3); }, {"sum", "-3", "[2, 3]"});
  expect_error("mean({0, 5})", [&] { x23.mean({0, 5}); }, {"mean", "5", "[2, 3]"});
  expect_error("max(2)", [&] { pending.max(2); }, {"max", "2", "[2, 3]"});
  expect_error("min(-4)", [&] { x23.min(-4, true); }, {"min", "-4", "[2, 3]"});
  expect_error("softmax", [&] { dvm::softmax(x23, 2); }, {"softmax", "2", "[2, 3]"});
  expect_error("log_softmax", [&] { dvm::log_softmax(x23, -3); }, {"log_softmax", "-3", "[2, 3]"});
  expect_error("transpose", [&] { x23.transpose(0, 2); }, {"transpose", "2", "[2, 3]"});
  expect_error("slice", [&] { x23.slice(2, 0, 1); }, {"slice", "2", "[2, 3]"});
  expect_error("size", [&] { (void)x23.size(2); }, {"size", "2", "[2, 3]"});
  Tensor s = Tensor::scalar(1.0f);
  expect_error("sum(1) of a scalar", [&] { s.sum(1); }, {"sum", "[]"});  // torch takes 0 and -1
  expect_error("slice of a scalar", [&] { s.slice(0, 0, 1); }, {"slice", "a 0-d tensor has no axis 0"});
}

TEST_F(Errors, RepeatedAxis) {
  expect_error("sum({1, -1})", [&] { x23.sum({1, -1}); }, {"sum", "1", "[2, 3]", "twice"});
  expect_error("mean({0, 0})", [&] { x23.mean({0, 0}, true); }, {"mean", "0", "[2, 3]"});
  expect_error("max({0, -2})", [&] { pending.max({0, -2}); }, {"max", "0", "[2, 3]"});
  expect_error("min({1, 1})", [&] { x23.min({1, 1}); }, {"min", "1", "[2, 3]"});
}

TEST_F(Errors, WhereNeedsBoolMask) {
  Tensor a = Tensor::ones({2, 3});
  expect_error("where float mask", [&] { dvm::where(x23, a, a); }, {"where", "[2, 3]", "bool"});
  expect_error("where pending float mask", [&] { dvm::where(pending, a, 0.0f); }, {"where", "[2, 3]", "bool"});
  expect_error("where scalar mask", [&] { dvm::where(Tensor(1.0f), a, a); }, {"where", "bool"});
}

TEST_F(Errors, ArgumentsOutsideTheirDomain) {
  const float inf = std::numeric_limits<float>::infinity();
  for (const auto& [lo, hi] : std::vector<std::pair<float, float>>{{-inf, inf}, {0.0f, inf}, {-inf, -inf}, {inf, inf}})
    expect_error("uniform", [&] { (void)Tensor::uniform({4}, 1, lo, hi); }, {"uniform", "finite bounds", "inf"});
  expect_error("gelu", [&] { (void)gelu(x23, static_cast<GeluApprox>(7)); }, {"gelu", "approximation 7", "Tanh"});
  expect_error("save_weights", [&] { save_weights("", {{"x", x23}}); }, {"save_weights", "path is empty"});
}

// A correction near INT64_MIN: count - correction is taken in double (in
// int64 it wrapped, and var gave inf): 4.5 / (2 - c).
TEST_F(Errors, VarWithAnExtremeCorrection) {
  const Tensor x = Tensor::from_vector({0, 3}, {2});
  for (const int64_t c : {-(int64_t{1} << 62), INT64_MIN + 1, INT64_MIN}) {
    const double want = 4.5 / (2.0 - static_cast<double>(c));
    EXPECT_NEAR(x.var(std::vector<int>{0}, c).item(), want, want * 1e-6) << c;
    EXPECT_NEAR(x.std(std::vector<int>{0}, c).item(), std::sqrt(want), std::sqrt(want) * 1e-6) << c;
  }
}

TEST_F(Errors, ItemNeedsOneElement) {
  Tensor empty = Tensor::from_vector({}, {0});
  expect_error("item of empty", [&] { (void)empty.item(); }, {"item", "[0]", "0 elements"});
  expect_error("item of [2, 3]", [&] { (void)x23.item(); }, {"item", "[2, 3]", "6"});
  // A pending multi-element result is rejected before anything computes.
  expect_error("item of pending", [&] { (void)pending.item(); }, {"item", "[2, 3]", "6"});
  Tensor empty2 = Tensor::from_vector({}, {3, 0});
  expect_error("item of [3, 0]", [&] { (void)empty2.item(); }, {"item", "[3, 0]"});
}

TEST_F(Errors, ReshapeWrongCount) {
  expect_error("reshape [4]", [&] { x23.reshape({4}); }, {"reshape", "[2, 3]", "[4]", "6"});
  expect_error("reshape pending [7, -1]", [&] { pending.reshape({4, -1}); }, {"reshape", "[2, 3]", "[4, -1]"});
  expect_error("reshape [0, -1]", [&] { x23.reshape({0, -1}); }, {"reshape", "[2, 3]", "[0, -1]"});
}

TEST_F(Errors, ReshapeNegativeExtent) {
  expect_error("reshape negative", [&] { x23.reshape({-2, -3}); }, {"reshape", "[2, 3]", "[-2, -3]"});
}

TEST_F(Errors, ReshapeTwoInferred) {
  expect_error("reshape [-1, -1]", [&] { x23.reshape({-1, -1}); }, {"reshape", "[2, 3]", "[-1, -1]"});
}

TEST_F(Errors, ExpandIncompatible) {
  expect_error("expand [4, 3]", [&] { x23.expand({4, 3}); }, {"expand", "[2, 3]", "[4, 3]"});
  expect_error("expand [2, 6]", [&] { pending.expand({5, 2, 6}); }, {"expand", "[2, 3]", "[5, 2, 6]"});
  expect_error("expand to fewer dims", [&] { x23.expand({3}); }, {"expand", "[2, 3]", "[3]"});
  expect_error("broadcast_to", [&] { x23.broadcast_to({3, 3}); }, {"expand", "[2, 3]", "[3, 3]"});
}

TEST_F(Errors, PermuteBadAxes) {
  expect_error("permute 1 axis", [&] { x23.permute({0}); }, {"permute", "[2, 3]", "2"});
  expect_error("permute 3 axes", [&] { x23.permute({0, 1, 2}); }, {"permute", "[2, 3]", "3"});
  expect_error("permute repeated", [&] { x23.permute({1, 1}); }, {"permute", "[2, 3]", "1"});
  expect_error("permute repeated negative", [&] { pending.permute({0, -2}); }, {"permute", "[2, 3]", "0"});
  expect_error("permute out of range", [&] { x23.permute({0, 2}); }, {"permute", "[2, 3]", "2"});
}

TEST_F(Errors, SliceNonPositiveStep) {
  expect_error("slice step 0", [&] { x23.slice(1, 0, 3, 0); }, {"slice", "step", "0", "[2, 3]"});
  expect_error("slice step -1", [&] { pending.slice(0, 0, 2, -1); }, {"slice", "step", "-1", "[2, 3]"});
}

TEST_F(Errors, FromVectorWrongCount) {
  expect_error("from_vector", [&] { Tensor::from_vector({1, 2, 3, 4, 5}, {2, 3}); },
               {"from_vector", "5", "[2, 3]", "6"});
  expect_error("from_vector scalar", [&] { Tensor::from_vector({}, Shape{}); }, {"from_vector", "0", "[]", "1"});
}

TEST_F(Errors, MaxMinOverEmptyAxis) {
  Tensor e = Tensor::from_vector({}, {2, 0});
  expect_error("max(1)", [&] { e.max(1); }, {"max", "[2, 0]", "empty"});
  expect_error("min(-1)", [&] { e.min(-1, true); }, {"min", "[2, 0]", "empty"});
  expect_error("max()", [&] { e.max(); }, {"max", "[2, 0]", "empty"});
  expect_error("min({0, 1})", [&] { e.min({0, 1}); }, {"min", "[2, 0]", "empty"});
  // Reducing the non-empty axis of an empty tensor is fine (an empty result).
  Tensor ok = e.max(0);
  EXPECT_EQ(ok.shape(), Shape({0}));
  EXPECT_TRUE(ok.to_vector().empty());
}

TEST_F(Errors, LayerNormShapes) {
  Tensor x = Tensor::ones({2, 4});
  Tensor w3 = Tensor::ones({3}), w4 = Tensor::ones({4});
  expect_error("normalized_shape [3]", [&] { dvm::layer_norm(x, {3}, w3, Tensor()); },
               {"layer_norm", "[3]", "[2, 4]"});
  expect_error("normalized_shape [1, 2, 4]", [&] { dvm::layer_norm(x, {1, 2, 4}, Tensor(), Tensor()); },
               {"layer_norm", "[1, 2, 4]", "[2, 4]"});
  expect_error("normalized_shape []", [&] { dvm::layer_norm(x, Shape{}, Tensor(), Tensor()); },
               {"layer_norm", "[]", "[2, 4]"});
  expect_error("weight [3]", [&] { dvm::layer_norm(x, {4}, w3, Tensor()); }, {"layer_norm", "[4]", "[3]"});
  expect_error("bias [3]", [&] { dvm::layer_norm(x, {4}, w4, w3); }, {"layer_norm", "[4]", "[3]"});
  expect_error("weight [2, 4]", [&] { dvm::layer_norm(x, {4}, x, Tensor()); }, {"layer_norm", "[4]", "[2, 4]"});
}

TEST_F(Errors, UndefinedTensor) {
  Tensor u;
  EXPECT_FALSE(u.defined());
  expect_error("exp", [&] { dvm::exp(u); }, {"exp", "undefined"});
  expect_error("gelu", [&] { dvm::gelu(u); }, {"gelu", "undefined"});
  expect_error("add left", [&] { dvm::add(u, x23); }, {"add", "undefined"});
  expect_error("add right", [&] { dvm::add(x23, u); }, {"add", "undefined"});
  expect_error("operator*", [&] { (void)(u * 2.0f); }, {"mul", "undefined"});
  expect_error("operator- float", [&] { (void)(2.0f - u); }, {"sub", "undefined"});
  expect_error("pow float", [&] { dvm::pow(u, 2.0f); }, {"pow", "undefined"});
  expect_error("where mask", [&] { dvm::where(u, x23, x23); }, {"where", "undefined"});
  Tensor mask = dvm::gt(x23, 0.0f);
  expect_error("where a", [&] { dvm::where(mask, u, x23); }, {"where", "undefined"});
  expect_error("where b", [&] { dvm::where(mask, x23, u); }, {"where", "undefined"});
  expect_error("sum", [&] { u.sum(); }, {"sum", "undefined"});
  expect_error("mean", [&] { u.mean(0); }, {"mean", "undefined"});
  expect_error("reshape", [&] { u.reshape({1}); }, {"reshape", "undefined"});
  expect_error("slice", [&] { u.slice(0, 0, 1); }, {"slice", "undefined"});
  expect_error("contiguous", [&] { u.contiguous(); }, {"contiguous", "undefined"});
  expect_error("softmax", [&] { dvm::softmax(u, 0); }, {"softmax", "undefined"});
  expect_error("layer_norm", [&] { dvm::layer_norm(u, {1}, Tensor(), Tensor()); }, {"layer_norm", "undefined"});
  expect_error("to_vector", [&] { (void)u.to_vector(); }, {"to_vector", "undefined"});
  expect_error("item", [&] { (void)u.item(); }, {"item", "undefined"});
  expect_error("data", [&] { (void)u.data(); }, {"data", "undefined"});
  expect_error("shape", [&] { (void)u.shape(); }, {"shape", "undefined"});
}

TEST_F(Errors, TraceLimitMustBePositive) {
  TraceLimitGuard guard;
  const int64_t limit = dvm::trace_limit();
  expect_error("set_trace_limit(0)", [] { dvm::set_trace_limit(0); }, {"set_trace_limit", "0"});
  expect_error("set_trace_limit(-5)", [] { dvm::set_trace_limit(-5); }, {"set_trace_limit", "-5"});
  EXPECT_EQ(dvm::trace_limit(), limit);
}

TEST_F(Errors, UnknownIsa) {
  const std::string isa = dvm::isa();
  expect_error("set_isa(bogus)", [] { dvm::set_isa("bogus"); }, {"set_isa", "bogus", "portable", "avx2", "avx512"});
  expect_error("set_isa(\"\")", [] { dvm::set_isa(""); }, {"set_isa", "portable"});
  expect_error("set_isa(AVX2)", [] { dvm::set_isa("AVX2"); }, {"set_isa", "AVX2"});
  EXPECT_EQ(dvm::isa(), isa);
}

// A pending value belongs to the thread that recorded it; observing it on
// another thread is an error with a message, not a race.
TEST_F(Errors, ObservingAnotherThreadsPendingValue) {
  std::string msg;
  bool threw = false;
  std::thread t([&] {
    try {
      (void)pending.to_vector();
    } catch (const Error& e) {
      threw = true;
      msg = e.what();
    }
  });
  t.join();
  EXPECT_TRUE(threw) << "observing another thread's pending tensor did not throw";
  EXPECT_NE(msg.find("thread"), std::string::npos) << msg;
}

TEST_F(Errors, RankAboveTheMaximum) {
  expect_error("Shape of rank 9", [] { Shape s{1, 1, 1, 1, 1, 1, 1, 1, 1}; }, {"rank", "9", "8"});
  expect_error("expand to rank 9", [&] { x23.expand({1, 1, 1, 1, 1, 1, 1, 2, 3}); }, {"rank", "8"});
  Tensor r8 = Tensor::ones({1, 1, 1, 1, 1, 1, 2, 3});
  expect_error("add to rank 9", [&] { dvm::add(r8, Tensor::ones({2, 1, 1, 1, 1, 1, 1, 1, 1})); }, {"rank", "8"});
}

// An error in the middle of building a program leaves the program usable.
TEST_F(Errors, RecordingContinuesAfterAnError) {
  Tensor y = dvm::exp(x23);
  EXPECT_THROW(dvm::add(y, Tensor::ones({4})), Error);
  Tensor z = y + 1.0f;
  const std::vector<float> out = z.to_vector();
  const std::vector<float> in = {1, 2, 3, 4, 5, 6};
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i)
    EXPECT_LE(ulp_error(out[i], static_cast<double>(static_cast<float>(std::exp(in[i]))) + 1.0), 2.5) << i;
}

}  // namespace
}  // namespace dvm::testing
