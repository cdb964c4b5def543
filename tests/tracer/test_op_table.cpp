// The tracer's op table against the API: each function records the op its
// row names, with the arity and dtype the row gives, and errors use the
// row's name.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "dvm/dvm.h"
#include "tracer/node.h"
#include "tracer/ops.h"

namespace dvm {
namespace {

using detail::OpKind;

struct Case {
  OpKind op;
  std::function<Tensor(const Tensor&, const Tensor&)> f;  // on two [2, 3] operands
};

Tensor mask(const Tensor& t) { return t.defined() ? gt(t, 0.5f) : t; }

std::vector<Case> cases() {
  auto u = [](Tensor (*f)(const Tensor&)) { return [f](const Tensor& a, const Tensor&) { return f(a); }; };
  auto b = [](Tensor (*f)(const Tensor&, const Tensor&)) {
    return [f](const Tensor& a, const Tensor& c) { return f(a, c); };
  };
  return {
      {OpKind::Neg, u(neg)},
      {OpKind::Abs, u(abs)},
      {OpKind::Exp, u(exp)},
      {OpKind::Log, u(log)},
      {OpKind::Sqrt, u(sqrt)},
      {OpKind::Rsqrt, u(rsqrt)},
      {OpKind::Reciprocal, u(reciprocal)},
      {OpKind::Tanh, u(tanh)},
      {OpKind::Sigmoid, u(sigmoid)},
      {OpKind::Relu, u(relu)},
      {OpKind::GeluTanh, [](const Tensor& a, const Tensor&) { return gelu(a, GeluApprox::Tanh); }},
      {OpKind::GeluErf, [](const Tensor& a, const Tensor&) { return gelu(a, GeluApprox::None); }},
      {OpKind::Erf, u(erf)},
      {OpKind::Sin, u(sin)},
      {OpKind::Cos, u(cos)},
      {OpKind::Floor, u(floor)},
      {OpKind::Ceil, u(ceil)},
      {OpKind::Round, u(round)},
      {OpKind::Add, b(add)},
      {OpKind::Sub, b(sub)},
      {OpKind::Mul, b(mul)},
      {OpKind::Div, b(div)},
      {OpKind::Maximum, b(maximum)},
      {OpKind::Minimum, b(minimum)},
      {OpKind::Pow, [](const Tensor& a, const Tensor& c) { return pow(a, c); }},
      {OpKind::Eq, b(eq)},
      {OpKind::Ne, b(ne)},
      {OpKind::Lt, b(lt)},
      {OpKind::Le, b(le)},
      {OpKind::Gt, b(gt)},
      {OpKind::Ge, b(ge)},
      {OpKind::Where, [](const Tensor& a, const Tensor& c) { return where(gt(c, 0.5f), a, c); }},
      {OpKind::Sum, [](const Tensor& a, const Tensor&) { return a.sum({1}, true); }},
      {OpKind::Max, [](const Tensor& a, const Tensor&) { return a.max({1}, true); }},
      {OpKind::Min, [](const Tensor& a, const Tensor&) { return a.min({1}, true); }},
      // [2, 3] x [3, 2]: a contraction's shape is [2, 2].
      {OpKind::MatMul, [](const Tensor& a, const Tensor& c) { return matmul(a, c.defined() ? c.transpose(0, 1) : c); }},
      {OpKind::FloorDivide, b(floor_divide)},
      {OpKind::Remainder, b(remainder)},
      // Bitwise ops take bool and integer operands: masks of a and c (an
      // undefined a stays undefined, for the error check).
      {OpKind::BitwiseAnd, [](const Tensor& a, const Tensor& c) { return bitwise_and(mask(a), mask(c)); }},
      {OpKind::BitwiseOr, [](const Tensor& a, const Tensor& c) { return bitwise_or(mask(a), mask(c)); }},
      {OpKind::BitwiseXor, [](const Tensor& a, const Tensor& c) { return bitwise_xor(mask(a), mask(c)); }},
      {OpKind::BitwiseNot, [](const Tensor& a, const Tensor&) { return bitwise_not(mask(a)); }},
  };
}

TEST(OpTable, EveryOpIsRecordedAsItsRowSays) {
  const Tensor a = Tensor::uniform({2, 3}, 1), c = Tensor::uniform({2, 3}, 2);
  std::vector<bool> seen(detail::kNumOpKinds, false);
  for (const Case& k : cases()) {
    const char* name = detail::op_name(k.op);
    Tensor y = k.f(a, c);
    const detail::Node* n = y.node();
    ASSERT_EQ(n->op, k.op) << name;
    seen[static_cast<size_t>(k.op)] = true;
    EXPECT_EQ(n->nin, detail::op_arity(k.op)) << name;
    EXPECT_EQ(n->dtype, detail::op_result_dtype(k.op)) << name;
    const detail::ShapeRule rule = detail::op_shape_rule(k.op);
    const bool reduce = rule == detail::ShapeRule::Reduce, contract = rule == detail::ShapeRule::Contract;
    EXPECT_EQ(n->kind, reduce     ? detail::NodeKind::Reduce
                       : contract ? detail::NodeKind::Contract
                                  : detail::NodeKind::Elementwise)
        << name;
    EXPECT_EQ(n->shape, reduce ? (Shape{2, 1}) : contract ? (Shape{2, 2}) : (Shape{2, 3})) << name;
    // An undefined operand: the error names the op by its row's name.
    try {
      (void)k.f(Tensor(), c);
      ADD_FAILURE() << name << ": no error for an undefined operand";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
  for (int i = 1; i < detail::kNumOpKinds; ++i)
    EXPECT_TRUE(seen[static_cast<size_t>(i)]) << detail::op_name(static_cast<OpKind>(i)) << " has no case";
  flush();
}

TEST(OpTable, ComparisonsAreTheBoolOps) {
  for (int i = 0; i < detail::kNumOpKinds; ++i) {
    const OpKind op = static_cast<OpKind>(i);
    const std::string name = detail::op_name(op);
    const bool cmp = name == "eq" || name == "ne" || name == "lt" || name == "le" || name == "gt" || name == "ge";
    EXPECT_EQ(detail::op_info(op).dtype == detail::DtypeRule::Bool, cmp) << name;
  }
  // An inline scalar operand keeps the rule.
  EXPECT_EQ(gt(Tensor::uniform({4}, 1), 0.5f).dtype(), Dtype::Bool);
  EXPECT_EQ((Tensor::uniform({4}, 1) + 0.5f).dtype(), Dtype::F32);
  flush();
}

}  // namespace
}  // namespace dvm
