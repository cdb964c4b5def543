// The fuser on graphs built node by node, with no trace and no Tensor: the
// groups partition finds, where it places each node, and what lowering
// makes of a group.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "fuser/lower.h"
#include "fuser/partition.h"
#include "tracer/node.h"
#include "vm/disasm.h"

namespace dvm {
namespace {

using detail::Node;
using detail::NodeKind;
using detail::OpKind;
using fuser::Domain;

// Nodes made by hand. Leaves own a buffer; every other node is pending, in
// the order made (a flush's record order), as a flush hands them over.
class Graph {
 public:
  std::vector<Node*> flushed;

  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph() {
    for (auto it = owned_.rbegin(); it != owned_.rend(); ++it) {
      (*it)->pending = false;
      (*it)->counts.fetch_and(0xffffffffu);  // drops observe()'s marks
      (*it)->release();
    }
  }

  Node* leaf(const Shape& s) {
    Node* n = detail::new_node(NodeKind::Leaf, OpKind::None, Dtype::F32, s);
    n->storage = detail::Storage::allocate(s.numel());
    detail::contiguous_strides(s, n->strides);
    return keep(n);
  }
  Node* op(OpKind k, std::initializer_list<Node*> ins, const Shape& s) {
    Node* n = detail::new_node(NodeKind::Elementwise, k, detail::op_result_dtype(k), s);
    int i = 0;
    for (Node* x : ins) detail::set_input(n, i++, x);
    return pend(n);
  }
  // op with an inline float operand at position pos.
  Node* op_scalar(OpKind k, Node* x, float v, int pos) {
    Node* n = detail::new_node(NodeKind::Elementwise, k, detail::op_result_dtype(k), x->shape);
    detail::set_input(n, 0, x);
    n->scalar_pos = static_cast<int8_t>(pos);
    n->value = v;
    return pend(n);
  }
  // A reduction over the axes [a, b) of x, kept as size 1.
  Node* reduce(OpKind k, Node* x, int a, int b) {
    Shape s = x->shape;
    for (int i = a; i < b; ++i) s[i] = 1;
    Node* n = detail::new_node(NodeKind::Reduce, k, Dtype::F32, s);
    n->red_begin = static_cast<int8_t>(a);
    n->red_end = static_cast<int8_t>(b);
    n->keepdim = true;
    detail::set_input(n, 0, x);
    return pend(n);
  }
  // The transpose of a pending rank-2 node (strides over its contiguous layout).
  Node* transpose(Node* x) {
    Node* n = detail::new_node(NodeKind::View, OpKind::None, x->dtype, Shape{x->shape[1], x->shape[0]});
    n->strides[0] = 1;
    n->strides[1] = x->shape[1];
    detail::set_input(n, 0, x);
    return pend(n);
  }
  Node* copy(Node* x) {
    Node* n = detail::new_node(NodeKind::Copy, OpKind::None, x->dtype, x->shape);
    detail::set_input(n, 0, x);
    return pend(n);
  }
  // A value a Tensor handle would hold: the flush must store it.
  static void observe(Node* n) { n->counts.fetch_add(uint64_t{1} << 32); }

 private:
  std::vector<Node*> owned_;  // one reference each

  Node* keep(Node* n) {
    n->retain();
    owned_.push_back(n);
    return n;
  }
  Node* pend(Node* n) {
    n->pending = true;
    n->needed = true;
    flushed.push_back(n);
    return keep(n);
  }
};

std::vector<const fuser::Group*> live(const fuser::Plan& p) {
  std::vector<const fuser::Group*> out;
  for (int g : p.order) out.push_back(&p.groups[static_cast<size_t>(g)]);
  return out;
}

const fuser::Placement& at(const fuser::Plan& p, const Node* n) {
  return p.placement[static_cast<size_t>(n->index)];
}

TEST(HandGraph, ElementwiseChainIsOneGroupStoringOnlyWhatIsObserved) {
  Graph gr;
  Node* x = gr.leaf({4, 8});
  Node* y = gr.leaf({8});
  Node* a = gr.op(OpKind::Exp, {x}, {4, 8});
  Node* b = gr.op(OpKind::Add, {a, y}, {4, 8});
  Node* c = gr.op(OpKind::Relu, {b}, {4, 8});
  Graph::observe(c);
  fuser::Plan plan = fuser::partition(gr.flushed);
  auto groups = live(plan);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0]->form, vm::Form::Elementwise);
  EXPECT_EQ(groups[0]->members, (std::vector<Node*>{a, b, c}));
  EXPECT_FALSE(at(plan, a).output);
  EXPECT_FALSE(at(plan, b).output);
  EXPECT_TRUE(at(plan, c).output);

  fuser::Lowered low = fuser::lower(*groups[0], plan.placement);
  ASSERT_EQ(low.args.size(), 3u);  // x, y, c
  EXPECT_EQ(low.args[0].node, x);
  EXPECT_EQ(low.args[1].node, y);
  EXPECT_EQ(low.args[2].node, c);
  EXPECT_TRUE(low.args[2].output);
  const std::string text = vm::disassemble(low.bytecode);
  for (const char* op : {"exp", "add", "relu"}) EXPECT_NE(text.find(op), std::string::npos) << op << "\n" << text;
}

TEST(HandGraph, SoftmaxShapedGraphIsOneRowKernelWithItsDomains) {
  Graph gr;
  Node* x = gr.leaf({4, 8});
  Node* m = gr.reduce(OpKind::Max, x, 1, 2);
  Node* d = gr.op(OpKind::Sub, {x, m}, {4, 8});
  Node* e = gr.op(OpKind::Exp, {d}, {4, 8});
  Node* s = gr.reduce(OpKind::Sum, e, 1, 2);
  Node* r = gr.op(OpKind::Reciprocal, {s}, {4, 1});
  Node* y = gr.op(OpKind::Mul, {e, r}, {4, 8});
  Graph::observe(y);
  fuser::Plan plan = fuser::partition(gr.flushed);
  auto groups = live(plan);
  ASSERT_EQ(groups.size(), 1u);
  const fuser::Group& g = *groups[0];
  EXPECT_EQ(g.form, vm::Form::RowReduce);
  EXPECT_EQ(g.full, (Shape{4, 8}));
  EXPECT_EQ(g.red_begin, 1);
  EXPECT_EQ(g.red_end, 2);
  EXPECT_EQ(g.members.size(), 6u);
  for (const Node* n : {m, s, r}) EXPECT_EQ(at(plan, n).domain, Domain::Reduced) << n->index;
  for (const Node* n : {d, e, y}) EXPECT_EQ(at(plan, n).domain, Domain::Full) << n->index;
  for (const Node* n : gr.flushed) EXPECT_EQ(at(plan, n).output, n == y) << n->index;

  fuser::Lowered low = fuser::lower(g, plan.placement);
  const std::string text = vm::disassemble(low.bytecode);
  for (const char* op : {"rmax", "rsum", "recip", "exp"}) EXPECT_NE(text.find(op), std::string::npos) << op << "\n" << text;
  EXPECT_EQ(low.args.size(), 2u);  // x read once, y stored
}

TEST(HandGraph, ReductionOverOuterAxesIsAColumnKernelWithItsEpilogue) {
  Graph gr;
  Node* x = gr.leaf({16, 8, 32});
  Node* sq = gr.op(OpKind::Mul, {x, x}, {16, 8, 32});
  Node* s = gr.reduce(OpKind::Sum, sq, 1, 2);
  Node* y = gr.op_scalar(OpKind::Mul, s, 0.5f, 1);
  Graph::observe(y);
  fuser::Plan plan = fuser::partition(gr.flushed);
  auto groups = live(plan);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0]->form, vm::Form::ColReduce);
  EXPECT_EQ(at(plan, sq).domain, Domain::Full);
  EXPECT_EQ(at(plan, y).domain, Domain::Reduced);
  fuser::Lowered low = fuser::lower(*groups[0], plan.placement);
  EXPECT_EQ(low.space.extent(0), 16);
  EXPECT_EQ(low.space.extent(1), 8);
  EXPECT_EQ(low.space.extent(2), 32);
}

TEST(HandGraph, ViewOfAPendingValueStoresItAndOrdersTheReader) {
  Graph gr;
  Node* x = gr.leaf({3, 4});
  Node* a = gr.op_scalar(OpKind::Mul, x, 2.0f, 1);
  Node* v = gr.transpose(a);
  Node* c = gr.copy(v);
  Node* y = gr.op(OpKind::Neg, {c}, {4, 3});
  Graph::observe(y);
  fuser::Plan plan = fuser::partition(gr.flushed);
  auto groups = live(plan);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0]->members, (std::vector<Node*>{a}));
  EXPECT_EQ(groups[1]->members, (std::vector<Node*>{c, y}));
  EXPECT_EQ(at(plan, v).group, -1);  // views join no group
  EXPECT_TRUE(at(plan, a).output);    // the view reads it from memory
  EXPECT_FALSE(at(plan, c).output);
  EXPECT_TRUE(at(plan, y).output);
  const int first = plan.order[0];
  EXPECT_EQ(groups[1]->deps, (std::vector<int>{first}));
}

TEST(HandGraph, ComparisonsAreBoolAndWhereReadsTheMask) {
  Graph gr;
  Node* x = gr.leaf({64});
  Node* k = gr.op_scalar(OpKind::Gt, x, 0.0f, 1);
  EXPECT_EQ(k->dtype, Dtype::Bool);
  Node* y = gr.op(OpKind::Where, {k, x, x}, {64});
  Graph::observe(y);
  fuser::Plan plan = fuser::partition(gr.flushed);
  auto groups = live(plan);
  ASSERT_EQ(groups.size(), 1u);
  fuser::Lowered low = fuser::lower(*groups[0], plan.placement);
  const std::string text = vm::disassemble(low.bytecode);
  EXPECT_NE(text.find("gt"), std::string::npos) << text;
  EXPECT_NE(text.find("select"), std::string::npos) << text;
}

}  // namespace
}  // namespace dvm
