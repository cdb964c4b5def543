// dvm::Graph and dvm::Executable (include/dvm/graph.h): a capture records the
// graph through the ordinary ops on a thread whose trace may not flush; the
// executable keeps each recorded op with its extents, strides and offsets
// as monomials of the symbols (graph/symbolic.h), and a run rebuilds the ops
// at the bound sizes, checks that every op's extents fit its operands', and
// hands them to the tracer's flush, as the lazy path would.
#include "dvm/graph.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <new>
#include <string_view>
#include <unordered_map>

#include "fuser/executor.h"
#include "graph/executable_state.h"
#include "graph/program.h"
#include "graph/symbolic.h"
#include "tracer/buffer_pool.h"
#include "tracer/capture.h"
#include "tracer/host_values.h"
#include "tracer/thread_counters.h"
#include "tracer/node.h"
#include "tracer/operands.h"
#include "tracer/shape_rules.h"
#include "tracer/trace.h"
#include "vm/profile.h"

namespace dvm {
namespace detail {

struct GraphState final : CaptureHooks {
  std::vector<std::string> symbols;
  struct In {
    std::string name;
    Tensor t;
  };
  std::vector<In> inputs;
  std::vector<std::pair<std::string, Tensor>> outputs;
  struct Size {
    int64_t count;
    bool reciprocal;
    Tensor keep;  // holds the leaf, so its address is not reused during the capture
  };
  std::unordered_map<const Node*, Size> sizes;
  struct Range {
    double start, step;
  };
  std::unordered_map<const Node*, Range> ranges;  // pending leaves of arange (the trace holds them)
  bool done = false;

  const char* what() const override { return "graph capture"; }
  bool symbolic(int64_t extent) const override {
    Monomial m;
    return !graph::factor(extent, static_cast<int>(symbols.size()), &m) || !m.constant();
  }
  std::string extent_text(int64_t extent) const override {
    Monomial m;
    if (!graph::factor(extent, static_cast<int>(symbols.size()), &m) || m.constant()) return {};
    return m.to_string(symbols);
  }
  bool derived_length(int64_t length, int64_t axis) const override { return graph::derived_length(length, axis); }
  void size_scalar(Node* leaf, int64_t count, bool reciprocal) override {
    sizes[leaf] = {count, reciprocal, Tensor(leaf)};
  }
  void range(Node* leaf, double start, double step) override { ranges[leaf] = {start, step}; }
  struct Bound {
    int64_t start, span, extent;
    int axis;
    ExtentBound::Op op;
  };
  std::vector<Bound> bounds;
  void slice_bounds(int64_t start, int64_t span, int64_t extent, int axis) override {
    bounds.push_back({start, span, extent, axis, ExtentBound::kSlice});
  }
  void kept_axis(int64_t extent, int axis) override { bounds.push_back({0, 2, extent, axis, ExtentBound::kSqueeze}); }
  void float_count(int64_t count, int axis) override {
    bounds.push_back({0, count, kFloatExactCount, axis, ExtentBound::kFloatCount});
  }
  // Ends the capture: this thread's pending nodes fail with `why` and leave.
  // Their shapes still hold the numbers the capture stood in for the
  // symbols, so the message names them ("B stood for 40031").
  void end(const char* why) noexcept {
    if (done) return;
    done = true;
    set_capture(nullptr);
    std::shared_ptr<const std::string> message;
    try {
      std::string text = why;
      for (size_t i = 0; i < symbols.size(); ++i)
        text += (i ? ", " : "; in its shape, ") + symbols[i] + " stood for " +
                std::to_string(graph::probe(static_cast<int>(i)));
      message = std::make_shared<const std::string>(std::move(text));
    } catch (...) {  // the nodes still fail, with a generic message
    }
    // After this thread's trace is gone (a graph destroyed after main
    // returned), its pending nodes were let go with it.
    if (detail::t_trace) Trace::current().abandon(message);
  }
};

namespace {

// The launch programs an executable keeps (one per relations of the
// extents), compile()'s among them.
constexpr size_t kMaxPrograms = 8;

bool valid_name(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

// How errors name a recorded node: its op, or what it is when it has none.
std::string node_label(NodeKind kind, OpKind op) {
  if (op != OpKind::None) return op_name(op);
  return kind == NodeKind::View ? "a view (slice, narrow, permute, ...)" : "a tensor";
}

std::string dims_text(const std::vector<Monomial>& dims, const std::vector<std::string>& names) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + dims[i].to_string(names);
  return s + "]";
}

}  // namespace
}  // namespace detail

using detail::GNode;
using detail::Monomial;
using detail::Sum;
using detail::Node;
using detail::NodeKind;
using detail::OpKind;

// ---------------------------------------------------------------------------
// Graph
// ---------------------------------------------------------------------------

Graph::Graph() {
  if (detail::capture())
    throw Error("dvm::Graph: another graph is being built on this thread (compile or destroy it first)");
  detail::Trace::current().flush();  // what the lazy path left pending is computed first
  s_ = std::make_unique<detail::GraphState>();
  detail::set_capture(s_.get());
}

Graph::~Graph() {
  if (!s_ || s_->done) return;
  // Only the thread that made it can end its capture; elsewhere the state
  // is left to that thread (which stays in it) rather than freed under it.
  if (detail::capture() != s_.get()) {
    (void)s_.release();
    return;
  }
  s_->end("a tensor of a dvm::Graph that was destroyed without compile() has no values");
}

namespace {
// The graph is open and this is its thread (the capture is per thread).
void check_open(const std::unique_ptr<detail::GraphState>& s, const char* op) {
  if (!s || s->done) throw Error(std::string("dvm::Graph::") + op + ": the graph was already compiled");
  if (detail::capture() != s.get())
    throw Error(std::string("dvm::Graph::") + op + ": called on a thread other than the one that made the graph");
}
}  // namespace

Dim Graph::symbol(const std::string& name) {
  check_open(s_, "symbol");
  if (!detail::valid_name(name))
    throw Error("dvm::Graph::symbol: '" + name + "' is not a valid name (letters, digits and '_', not empty)");
  if (std::find(s_->symbols.begin(), s_->symbols.end(), name) != s_->symbols.end())
    throw Error("dvm::Graph::symbol: '" + name + "' is already a symbol of this graph");
  if (static_cast<int>(s_->symbols.size()) >= graph::kMaxSymbols)
    throw Error("dvm::Graph::symbol: a graph has at most " + std::to_string(graph::kMaxSymbols) + " symbols");
  s_->symbols.push_back(name);
  return Dim(graph::probe(static_cast<int>(s_->symbols.size()) - 1));
}

Tensor Graph::input(const std::string& name, const std::vector<Dim>& shape, Dtype dtype) {
  check_open(s_, "input");
  if (!detail::valid_name(name))
    throw Error("dvm::Graph::input: '" + name + "' is not a valid name (letters, digits and '_', not empty)");
  for (const auto& in : s_->inputs)
    if (in.name == name) throw Error("dvm::Graph::input: '" + name + "' is already an input of this graph");
  for (const auto& o : s_->outputs)
    if (o.first == name)
      throw Error("dvm::Graph::input: '" + name + "' is already an output of this graph (inputs and outputs need "
                  "distinct names)");
  detail::check_dtype("dvm::Graph::input", dtype);
  if (static_cast<int>(shape.size()) > kMaxRank)
    throw Error("dvm::Graph::input '" + name + "': " + std::to_string(shape.size()) + " extents (at most " +
                std::to_string(kMaxRank) + ")");
  Shape s;
  for (const Dim& d : shape) {
    Monomial m;
    if (!graph::factor(d, static_cast<int>(s_->symbols.size()), &m) || m.coeff < 1)
      throw Error("dvm::Graph::input '" + name + "': extent " + std::to_string(d) +
                  " is not a positive product of this graph's symbols and a constant" +
                  graph::probe_collision(d, s_->symbols));
    s.push_back(d);
  }
  detail::check_extents("dvm::Graph::input", s, " (input '" + name + "')");
  Node* n = detail::new_node(NodeKind::Leaf, OpKind::None, dtype, s);
  detail::contiguous_strides(s, n->strides);
  Tensor t = detail::record(n);  // pending: nothing reads its values until a run
  s_->inputs.push_back({name, t});
  return t;
}

void Graph::output(const std::string& name, const Tensor& t) {
  check_open(s_, "output");
  if (!detail::valid_name(name))
    throw Error("dvm::Graph::output: '" + name + "' is not a valid name (letters, digits and '_', not empty)");
  for (const auto& o : s_->outputs)
    if (o.first == name) throw Error("dvm::Graph::output: '" + name + "' is already an output of this graph");
  // Inputs and outputs share one namespace (a saved executable's ports).
  for (const auto& in : s_->inputs)
    if (in.name == name)
      throw Error("dvm::Graph::output: '" + name + "' is already an input of this graph (inputs and outputs need "
                  "distinct names)");
  Node* n = detail::need(t, "dvm::Graph::output");
  if (!n->pending)
    throw Error("dvm::Graph::output '" + name + "': the tensor was not computed by this graph's ops (it is a "
                "constant: made before the graph, or with its values during the capture, as Tensor::ones is); an "
                "output must be the result of an op recorded in the graph");
  s_->outputs.emplace_back(name, t);
}

namespace {

// Builds the executable's description of the captured ops (the capture is
// still on: the nodes are pending in this thread's trace).
struct Describe {
  detail::GraphState& g;
  detail::ExecutableState& x;
  std::unordered_map<const Node*, int32_t> index;     // pending node -> its GNode
  std::unordered_map<const Node*, int32_t> constant;  // external node -> constants
  int symbols() const { return static_cast<int>(g.symbols.size()); }

  Monomial read(int64_t v, const Node* n, const char* what) {
    Monomial m;
    if (!graph::factor(v, symbols(), &m))
      throw Error("dvm::Graph::compile: " + std::string(what) + " " + std::to_string(v) + " of " +
                  detail::node_label(n->kind, n->op) +
                  " " + detail::describe(n) +
                  " is not a product of the graph's symbols and a constant (sums and differences of symbols, "
                  "such as S - 1 or a cat along a symbolic axis, are not supported yet)" +
                  graph::probe_collision(v, g.symbols));
    return m;
  }
  // A view's offset in its operand's contiguous layout, from the
  // coordinates of its first element: each coordinate (a number, or a
  // symbol's: narrow(0, P, 1)) times the operand's stride along it, summed
  // by monomial (x[3:4, :, :, 3:4] of [4, 4, A, 4] starts at 48 * A + 3,
  // which as a number cannot be told from a constant).
  Sum view_offset(const Node* n) {
    const Node* in = n->in[0];
    const int rank = in->shape.rank();
    if (n->offset == 0 || in->shape.numel() == 0) return graph::sum_of(read(n->offset, n, "offset"));
    const std::vector<Monomial> dims = read_shape(in);
    Sum sum;
    int64_t rest = n->offset, inner = in->shape.numel();
    for (int d = 0; d < rank; ++d) {
      inner /= in->shape[d];
      const int64_t c = rest / inner;
      rest -= c * inner;
      if (c == 0) continue;
      Monomial t = read(c, n, "offset coordinate");
      for (int e = d + 1; e < rank; ++e)
        if (!graph::multiply(t, dims[static_cast<size_t>(e)], &t)) return graph::sum_of(read(n->offset, n, "offset"));
      auto same = std::find_if(sum.terms.begin(), sum.terms.end(), [&](const Monomial& u) { return u.exp == t.exp; });
      if (same == sum.terms.end()) sum.terms.push_back(t);
      else if (__builtin_add_overflow(same->coeff, t.coeff, &same->coeff))
        return graph::sum_of(read(n->offset, n, "offset"));
    }
    std::erase_if(sum.terms, [](const Monomial& t) { return t.coeff == 0; });
    if (rest != 0) return graph::sum_of(read(n->offset, n, "offset"));
    return sum;
  }
  std::vector<Monomial> read_shape(const Node* n) {
    std::vector<Monomial> s;
    for (int64_t d : n->shape) s.push_back(read(d, n, "extent"));
    return s;
  }

  // The reference to input node `in` of a GNode: a rebuilt node or a constant.
  int32_t ref(const Node* in) {
    if (auto it = index.find(in); it != index.end()) return it->second;
    if (auto it = constant.find(in); it != constant.end()) return -1 - it->second;
    if (auto it = g.sizes.find(in); it != g.sizes.end()) {
      GNode s;
      s.kind = NodeKind::Leaf;
      s.size = static_cast<int>(x.sizes.size());
      x.sizes.push_back({read(it->second.count, in, "element count"), it->second.reciprocal});
      x.nodes.push_back(s);
      return index[in] = static_cast<int32_t>(x.nodes.size() - 1);
    }
    if (in->kind == NodeKind::Const && !in->storage) {
      // A constant's extents may be symbols (full({B, S}, 0)): rebuilt per run.
      GNode c;
      c.kind = NodeKind::Const;
      c.dtype = in->dtype;
      c.value = in->value;
      c.immediate = in->immediate;
      c.shape = read_shape(in);
      x.nodes.push_back(c);
      return index[in] = static_cast<int32_t>(x.nodes.size() - 1);
    }
    for (int64_t d : in->shape)
      if (g.symbolic(d))
        throw Error("dvm::Graph::compile: " + detail::describe(in) +
                    " holds values made during the capture with an extent that is a symbol (other than arange's, "
                    "such as a mask filled on the host): not supported");
    if (!graph::layout_inside(in))
      throw Error("dvm::Graph::compile: " + detail::describe(in) + " is a view made during the capture that reaches " +
                  "outside the values it views (a view of a strided tensor whose extents or offset are symbols: " +
                  "make the tensor contiguous before the graph)");
    x.constants.push_back(Tensor(const_cast<Node*>(in)));
    return -1 - (constant[in] = static_cast<int32_t>(x.constants.size() - 1));
  }

  // arange's pending leaf: its length a product of symbols, its start and
  // step numbers (one made from a Dim would be the capture's number).
  void add_range(const Node* n, double start, double step) {
    for (double v : {start, step})
      if (v == std::trunc(v) && v != 0.0 && std::fabs(v) < 0x1p62 && g.symbolic(static_cast<int64_t>(std::fabs(v))))
        throw Error("dvm::Graph::compile: arange of " + detail::describe(n) + " starts or steps by " +
                    std::to_string(static_cast<int64_t>(v)) + ", a size made of symbols: not supported (only its " +
                    "length may be symbolic)");
    GNode r;
    r.kind = NodeKind::Leaf;
    r.dtype = n->dtype;
    r.shape = read_shape(n);
    r.range = static_cast<int>(x.ranges.size());
    x.ranges.push_back({r.shape[0], start, step, n->dtype});
    x.nodes.push_back(std::move(r));
    index[n] = static_cast<int32_t>(x.nodes.size() - 1);
  }

  void add(const Node* n, int input) {
    if (n->target)
      throw Error("dvm::Graph::compile: " + detail::describe(n) +
                  " is written into a buffer (by cat or KVCache::append): not supported in a graph yet");
    GNode gn;
    gn.kind = n->kind;
    gn.op = n->op;
    gn.dtype = n->dtype;
    gn.keepdim = n->keepdim;
    gn.immediate = n->immediate;
    gn.red_begin = n->red_begin;
    gn.red_end = n->red_end;
    gn.scalar_pos = n->scalar_pos;
    gn.nin = n->nin;
    gn.value = n->value;
    gn.input = input;
    gn.shape = read_shape(n);
    if (n->kind == NodeKind::View) {
      for (int i = 0; i < n->shape.rank(); ++i) gn.strides.push_back(read(n->strides[i], n, "stride"));
      gn.offset = view_offset(n);
    }
    for (int i = 0; i < n->nin; ++i) gn.in[i] = ref(n->in[i]);
    x.nodes.push_back(std::move(gn));
    index[n] = static_cast<int32_t>(x.nodes.size() - 1);
  }
};

}  // namespace

namespace {

// The executable's relations (ExecutableState::relations) and views.
void collect_relations(detail::ExecutableState& x) {
  auto add = [&](const Monomial& m) {
    if (std::find(x.relations.begin(), x.relations.end(), m) == x.relations.end()) x.relations.push_back(m);
  };
  auto product = [&](const Monomial& a, const Monomial& b) {
    Monomial m;
    if (graph::multiply(a, b, &m)) add(m);
  };
  for (size_t i = 0; i < x.nodes.size(); ++i) {
    const GNode& g = x.nodes[i];
    Monomial fit = graph::constant(1), suffix = graph::constant(1);
    for (const Monomial& e : g.shape) {
      add(e);
      if (!graph::multiply(fit, e.constant() ? graph::constant(std::max<int64_t>(e.coeff, 1)) : e, &fit)) break;
    }
    add(fit);
    if (g.kind != NodeKind::View) continue;
    // The operand: a node of the graph, or a constant (wpe.narrow(0, 0, S)).
    std::vector<Monomial> operand;
    if (g.in[0] >= 0) {
      operand = x.nodes[static_cast<size_t>(g.in[0])].shape;
    } else {
      const Node* c = x.constants[static_cast<size_t>(-1 - g.in[0])].node();
      for (int d = 0; d < c->shape.rank(); ++d) operand.push_back(graph::constant(c->shape[d]));
    }
    x.views.push_back({g.shape, g.strides, std::move(operand), g.offset});
    for (const Monomial& t : g.offset.terms) add(t);
    for (size_t d = g.shape.size(); d-- > 0;) {
      add(g.strides[d]);
      product(g.strides[d], g.shape[d]);  // where the next outer dim would continue it
      add(suffix);                        // the contiguous stride of dim d
      if (!graph::multiply(suffix, g.shape[d], &suffix)) break;
    }
  }
  for (const Tensor& c : x.constants)
    for (int d = 0; d < c.node()->shape.rank(); ++d) add(graph::constant(c.node()->shape[d]));
  for (auto* ports : {&x.inputs, &x.outputs})
    for (detail::Port& p : *ports) {
      p.numel = graph::constant(1);
      for (const Monomial& e : p.shape)
        if (!graph::multiply(p.numel, e, &p.numel)) p.numel = graph::constant(kMaxElements);
    }
}

// The captured extents' bounds as monomials (detail::ExtentBound), each
// once. One whose numbers are no monomials (S - 1) is left out: compile()
// refuses such a view by its extent, offset or length anyway.
void add_bounds(const detail::GraphState& g, detail::ExecutableState* x) {
  const int symbols = static_cast<int>(g.symbols.size());
  for (const detail::GraphState::Bound& b : g.bounds) {
    detail::ExtentBound c;
    c.axis = b.axis;
    c.op = b.op;
    if (!graph::factor(b.start, symbols, &c.start) || !graph::factor(b.span, symbols, &c.span) ||
        !graph::factor(b.extent, symbols, &c.extent))
      continue;
    if (std::find(x->bounds.begin(), x->bounds.end(), c) == x->bounds.end()) x->bounds.push_back(c);
  }
}
}  // namespace

Executable Graph::compile() {
  check_open(s_, "compile");
  if (s_->outputs.empty()) throw Error("dvm::Graph::compile: the graph has no outputs (Graph::output)");
  Executable exe;
  exe.s_ = std::make_unique<detail::ExecutableState>();
  detail::ExecutableState& x = *exe.s_;
  x.symbols = s_->symbols;
  try {
    const std::vector<Node*>& pending = detail::Trace::current().pending_nodes();
    // What the outputs reach, and the inputs, in record order.
    std::unordered_map<const Node*, bool> needed;
    for (const auto& o : s_->outputs) needed[o.second.node()] = true;
    for (const auto& in : s_->inputs) needed[in.t.node()] = true;
    for (auto it = pending.rbegin(); it != pending.rend(); ++it) {
      if (!needed.count(*it)) continue;
      for (int i = 0; i < (*it)->nin; ++i)
        if ((*it)->in[i]->pending) needed[(*it)->in[i]] = true;
    }
    Describe d{*s_, x, {}, {}};
    std::unordered_map<const Node*, int> input_of;
    for (size_t i = 0; i < s_->inputs.size(); ++i) input_of[s_->inputs[i].t.node()] = static_cast<int>(i);
    for (Node* n : pending) {
      if (!needed.count(n)) continue;
      auto in = input_of.find(n);
      if (auto r = s_->ranges.find(n); r != s_->ranges.end()) {
        d.add_range(n, r->second.start, r->second.step);
        continue;
      }
      if (n->kind == NodeKind::Leaf && in == input_of.end())
        throw Error("internal: dvm::Graph::compile: a pending leaf that is not a graph input");
      d.add(n, in == input_of.end() ? -1 : in->second);
    }
    for (const auto& in : s_->inputs) {
      const Node* n = in.t.node();
      x.inputs.push_back({in.name, n->dtype, d.read_shape(n), d.index.at(n), {}});
    }
    for (const auto& o : s_->outputs) {
      const Node* n = o.second.node();
      x.outputs.push_back({o.first, n->dtype, d.read_shape(n), d.index.at(n), {}});
    }
    add_bounds(*s_, &x);
  } catch (...) {
    s_->end("a tensor of a dvm::Graph whose compile() failed has no values");
    throw;
  }
  s_->end("a tensor of a dvm::Graph has no values: it was recorded to be computed by the Executable's run()");
  collect_relations(x);
  x.recorded_ops = static_cast<int64_t>(x.nodes.size());
  exe.make_kernels();
  return exe;
}

// ---------------------------------------------------------------------------
// Executable
// ---------------------------------------------------------------------------

Executable::Executable() = default;
Executable::~Executable() = default;
Executable::Executable(Executable&&) noexcept = default;
Executable& Executable::operator=(Executable&&) noexcept = default;

namespace {

const detail::ExecutableState& state(const std::unique_ptr<detail::ExecutableState>& s, const char* op) {
  if (!s) throw Error(std::string("dvm::Executable::") + op + ": an empty executable (moved from, or never compiled)");
  return *s;
}

std::string binding_text(const detail::ExecutableState& x, const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + x.symbols[i] + " = " + std::to_string(v[i]);
  return s.empty() ? "no symbols" : s;
}

// Every captured extent's bound holds at binding v (ExtentBound).
void check_bounds(const detail::ExecutableState& x, const std::vector<int64_t>& v, const char* op) {
  for (const detail::ExtentBound& b : x.bounds) {
    int64_t start = 0, span = 0, extent = 0;
    const bool ok = b.start.eval(v.data(), &start) && b.span.eval(v.data(), &span) &&
                    b.extent.eval(v.data(), &extent);
    if (ok && start <= extent && span <= extent - start) continue;
    auto text = [&](const Monomial& m, int64_t value) {
      const std::string t = m.to_string(x.symbols);
      return m.constant() || !ok ? t : t + " = " + std::to_string(value);
    };
    const std::string where = std::string("dvm::Executable::") + op + " at " + binding_text(x, v) + ": ";
    if (b.op == detail::ExtentBound::kFloatCount)
      throw Error(where + "an argmax, argmin or sum of bool reduces " + text(b.span, span) +
                  " elements along axis " + std::to_string(b.axis) + ", past " +
                  std::to_string(detail::kFloatExactCount) +
                  ": a graph finds such indices and counts in float32, exact up to 2^24 (the lazy path takes "
                  "int64 past that)");
    if (b.op == detail::ExtentBound::kSqueeze)
      throw Error(where + "a squeeze kept axis " + std::to_string(b.axis) + " of extent " + text(b.extent, extent) +
                  " when the graph was captured, which the lazy path drops at an extent of 1 (reshape to the shape "
                  "you mean instead of squeezing a symbolic axis)");
    throw Error(where + "a view (a slice or narrow) of axis " + std::to_string(b.axis) + " keeps " +
                text(b.span, span) + " elements from " + text(b.start, start) + ", outside the axis's extent " +
                text(b.extent, extent) +
                " (a graph keeps the lengths it captured: it does not clamp a slice's end to the extent as the lazy "
                "path does, and a narrow must fit)");
  }
}

// Every arange of symbolic length ends at a value its type holds at
// binding v (the lazy path's arange refuses one that does not).
void check_ranges(const detail::ExecutableState& x, const std::vector<int64_t>& v, const char* op) {
  for (const detail::RangeLeaf& r : x.ranges) {
    int64_t count = 0;
    if (!r.count.eval(v.data(), &count)) continue;  // an overflow: the run names the extent
    try {
      detail::check_range_fits(r.dtype, r.start, r.step, count);
    } catch (const Error& e) {
      throw Error(std::string("dvm::Executable::") + op + " at " + binding_text(x, v) + ": " + e.what() +
                  " (an arange of length " + r.count.to_string(x.symbols) + ")");
    }
  }
}

// Every symbol's value, in symbol order, from bindings, into *out; errors
// name op.
void bind(const detail::ExecutableState& x, const Bindings& bindings, const char* op, std::vector<int64_t>* out) {
  std::vector<int64_t>& v = *out;
  v.assign(x.symbols.size(), -1);
  for (const auto& [name, value] : bindings) {
    auto it = std::find(x.symbols.begin(), x.symbols.end(), name);
    if (it == x.symbols.end())
      throw Error(std::string("dvm::Executable::") + op + ": '" + name + "' is not a symbol of this graph");
    int64_t& slot = v[static_cast<size_t>(it - x.symbols.begin())];
    if (slot >= 0) throw Error(std::string("dvm::Executable::") + op + ": symbol '" + name + "' is bound twice");
    if (value < 1)
      throw Error(std::string("dvm::Executable::") + op + ": symbol '" + name + "' is bound to " +
                  std::to_string(value) + " (expected at least 1)");
    slot = value;
  }
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] < 0) throw Error(std::string("dvm::Executable::") + op + ": symbol '" + x.symbols[i] + "' is not bound");
  check_bounds(x, v, op);
  check_ranges(x, v, op);
}
std::vector<int64_t> bind(const detail::ExecutableState& x, const Bindings& bindings, const char* op) {
  std::vector<int64_t> v;
  bind(x, bindings, op, &v);
  return v;
}

// `what()` names the tensor for errors (built only when one is raised).
// `fn` names the call for errors ("run", "shape").
template <class What>
Shape eval_shape(const detail::ExecutableState& x, const std::vector<Monomial>& dims, const std::vector<int64_t>& v,
                 What&& what, const char* fn = "run") {
  Shape s;
  for (const Monomial& m : dims) {
    int64_t e = 0;
    if (!m.eval(v.data(), &e))
      throw Error(std::string("dvm::Executable::") + fn + " at " + binding_text(x, v) + ": the extent " +
                  m.to_string(x.symbols) + " of " + what() + " overflows int64");
    s.push_back(e);
  }
  if (!detail::extents_fit(s)) [[unlikely]]
    detail::check_extents((std::string("dvm::Executable::") + fn).c_str(), s,
                          " (" + what() + " at " + binding_text(x, v) + ")");
  return s;
}

const detail::Port* find_port(const std::vector<detail::Port>& ports, const std::string& name) {
  for (const detail::Port& p : ports)
    if (p.name == name) return &p;
  return nullptr;
}

// The pointer given for each port, in port order: every port exactly once,
// no unknown name, no null pointer, into *out; errors say `what` ("input",
// "output").
template <class Ptr>
void by_port(const std::vector<detail::Port>& ports, const std::vector<std::pair<std::string, Ptr>>& given,
             const char* what, std::vector<Ptr>* out) {
  std::vector<Ptr>& ptr = *out;
  ptr.assign(ports.size(), nullptr);
  for (const auto& [name, p] : given) {
    const detail::Port* port = find_port(ports, name);
    if (!port) throw Error("dvm::Executable::run: '" + name + "' is not an " + what + " of this graph");
    Ptr& slot = ptr[static_cast<size_t>(port - ports.data())];
    if (slot) throw Error("dvm::Executable::run: " + std::string(what) + " '" + name + "' is given twice");
    if (!p) throw Error("dvm::Executable::run: " + std::string(what) + " '" + name + "' is a null pointer");
    slot = p;
  }
  for (size_t i = 0; i < ptr.size(); ++i)
    if (!ptr[i]) throw Error("dvm::Executable::run: " + std::string(what) + " '" + ports[i].name + "' is not given");
}

// An input's or output's port by name; errors name op.
const detail::Port& port_named(const detail::ExecutableState& x, const std::string& name, const char* op) {
  const detail::Port* p = find_port(x.inputs, name);
  if (!p) p = find_port(x.outputs, name);
  if (!p)
    throw Error(std::string("dvm::Executable::") + op + ": '" + name +
                "' is neither an input nor an output of this graph");
  return *p;
}

// Whether `in` broadcasts to `out` (numpy's rule, out already the result).
bool broadcasts_to(const Shape& in, const Shape& out) {
  if (in.rank() > out.rank()) return false;
  for (int i = 1; i <= in.rank(); ++i) {
    const int64_t a = in[in.rank() - i], b = out[out.rank() - i];
    if (a != b && a != 1) return false;
  }
  return true;
}

// Whether a rebuilt op's extents fit its operands' (a graph whose extents
// were read as constants where the capture's sizes made them numbers would
// otherwise read outside its operands at other sizes).
bool fits(const GNode& g, const Shape& out, Node* const* ins) {
  switch (g.kind) {
    case NodeKind::Elementwise:
      for (int i = 0; i < g.nin; ++i)
        if (!broadcasts_to(ins[i]->shape, out)) return false;
      return true;
    case NodeKind::Copy:
      return ins[0]->shape == out;
    case NodeKind::Reduce: {
      const Shape& in = ins[0]->shape;
      Shape want;
      for (int i = 0; i < in.rank(); ++i) {
        if (i < g.red_begin || i >= g.red_end) want.push_back(in[i]);
        else if (g.keepdim) want.push_back(1);
      }
      return want == out;
    }
    case NodeKind::Contract: {
      const Shape &a = ins[0]->shape, &b = ins[1]->shape;
      if (a.rank() < 2 || b.rank() < 2 || out.rank() != std::max(a.rank(), b.rank())) return false;
      if (a[a.rank() - 1] != b[b.rank() - 2] || out[out.rank() - 2] != a[a.rank() - 2] ||
          out[out.rank() - 1] != b[b.rank() - 1])
        return false;
      for (int i = 3; i <= out.rank(); ++i) {
        const int64_t o = out[out.rank() - i];
        const int64_t ea = i <= a.rank() ? a[a.rank() - i] : 1, eb = i <= b.rank() ? b[b.rank() - i] : 1;
        if ((ea != o && ea != 1) || (eb != o && eb != 1) || (ea != o && eb != o)) return false;
      }
      return true;
    }
    default:
      return true;
  }
}

}  // namespace

namespace {

// A view's strides and offset (relative to its operand's contiguous layout
// of `operand_numel` elements) under values v, into strides and *offset;
// false when one overflows or an element it reaches lies outside the operand.
bool view_fits(const std::vector<Monomial>& view_strides, const Sum& view_offset, const Shape& shape,
               const int64_t* v, int64_t operand_numel, int64_t* strides, int64_t* offset) {
  int64_t lo = 0, hi = 0;
  bool ok = view_offset.eval(v, offset), empty = false;
  for (int d = 0; ok && d < shape.rank(); ++d) {
    ok = view_strides[static_cast<size_t>(d)].eval(v, &strides[d]);
    if (shape[d] == 0) empty = true;
    int64_t reach = 0;
    ok = ok && !__builtin_mul_overflow(shape[d] > 0 ? shape[d] - 1 : 0, strides[d], &reach) &&
         !__builtin_add_overflow(reach < 0 ? lo : hi, reach, reach < 0 ? &lo : &hi);
  }
  return ok && (empty || (*offset + lo >= 0 && *offset + hi < operand_numel));
}

Shape eval_dims(const std::vector<Monomial>& dims, const int64_t* v, bool* ok) {
  Shape s;
  for (const Monomial& m : dims) {
    int64_t e = 0;
    *ok = *ok && m.eval(v, &e);
    s.push_back(e);
  }
  return s;
}

// The first view of the graph that reaches outside its operand under v, or
// null.
const detail::ViewCheck* view_outside(const detail::ExecutableState& x, const int64_t* v) {
  for (const detail::ViewCheck& c : x.views) {
    bool ok = true;
    const Shape shape = eval_dims(c.shape, v, &ok), in = eval_dims(c.operand, v, &ok);
    int64_t strides[kMaxRank], offset = 0;
    if (!ok || !view_fits(c.strides, c.offset, shape, v, in.numel(), strides, &offset)) return &c;
  }
  return nullptr;
}

// The bytes [lo, hi) a port's buffer spans at binding v (bind() checked the
// extents, so its element count evaluates).
struct ByteRange {
  uintptr_t lo = 0, hi = 0;
  bool overlaps(const ByteRange& o) const { return lo < o.hi && o.lo < hi; }
};
ByteRange port_bytes(const detail::Port& p, const void* ptr, const int64_t* v) {
  int64_t n = 0;
  if (!p.numel.eval(v, &n)) n = kMaxElements;  // never: counted as the largest, to be safe
  const uintptr_t lo = reinterpret_cast<uintptr_t>(ptr);
  return {lo, lo + static_cast<uintptr_t>(n) * dtype_size(p.dtype)};
}

// Whether an output's bytes overlap an input's: then the outputs are
// computed first and copied, as a rebuilding run does. (Outputs never
// overlap each other: run() refuses that, check_outputs_apart.)
bool outputs_overlap(const detail::ExecutableState& x, const int64_t* v, const std::vector<const void*>& in,
                     const std::vector<void*>& out) {
  for (size_t o = 0; o < out.size(); ++o) {
    const ByteRange w = port_bytes(x.outputs[o], out[o], v);
    for (size_t i = 0; i < in.size(); ++i)
      if (w.overlaps(port_bytes(x.inputs[i], in[i], v))) return true;
  }
  return false;
}

// Two outputs whose bytes overlap are a dvm::Error: which value would the
// shared bytes hold? (An output over an input is allowed: outputs_overlap.)
void check_outputs_apart(const detail::ExecutableState& x, const std::vector<int64_t>& binding,
                         const std::vector<void*>& out) {
  // Each port's element count fits first: one that overflows would make
  // any two ranges overlap. (Its product is all a run evaluates; only a
  // port that does not fit is evaluated extent by extent, for the error.)
  const int64_t* v = binding.data();
  for (const std::vector<detail::Port>* ports : {&x.inputs, &x.outputs})
    for (const detail::Port& p : *ports) {
      int64_t n = 0;
      if (!p.numel.eval(v, &n) || n >= kMaxElements) [[unlikely]]
        (void)eval_shape(x, p.shape, binding, [&] { return "'" + p.name + "'"; });
    }
  for (size_t o = 1; o < out.size(); ++o) {
    const ByteRange w = port_bytes(x.outputs[o], out[o], v);
    for (size_t p = 0; p < o; ++p)
      if (w.overlaps(port_bytes(x.outputs[p], out[p], v)))
        throw Error("dvm::Executable::run: outputs '" + x.outputs[p].name + "' and '" + x.outputs[o].name +
                    "' were given overlapping buffers (expected each output its own memory)");
  }
}

// Records the graph's ops at the sizes of v as the lazy path's nodes (each
// told to the builder), the outputs into *outs.
void rebuild(const detail::ExecutableState& x, const std::vector<int64_t>& v, const std::vector<const void*>& in_ptr,
             graph::ProgramBuilder* builder, std::vector<Tensor>* outs, const char* caller = "run") {
  // Rebuild the ops at these sizes; the flush of the first output computes them all.
  std::vector<Tensor> built(x.nodes.size());
  auto node_of = [&](int32_t ref) { return ref >= 0 ? built[static_cast<size_t>(ref)].node() : x.constants[static_cast<size_t>(-1 - ref)].node(); };
  for (size_t i = 0; i < x.nodes.size(); ++i) {
    const GNode& g = x.nodes[i];
    auto what = [&] { return detail::node_label(g.kind, g.op) + " (op " + std::to_string(i) + ")"; };
    const Shape shape = eval_shape(x, g.shape, v, what, caller);
    if (g.input >= 0) {
      Tensor t(detail::new_node(NodeKind::Leaf, OpKind::None, g.dtype, shape));
      Node* n = t.node();
      n->storage = detail::Storage::wrap(in_ptr[static_cast<size_t>(g.input)], shape.numel(), g.dtype);
      detail::contiguous_strides(shape, n->strides);
      builder->add_node(n, static_cast<int32_t>(i));
      built[i] = std::move(t);
      continue;
    }
    if (g.size >= 0) {
      const detail::SizeScalar& sz = x.sizes[static_cast<size_t>(g.size)];
      int64_t count = 0;
      if (!sz.count.eval(v.data(), &count))
        throw Error(std::string("dvm::Executable::") + caller + " at " + binding_text(x, v) + ": an element count overflows int64");
      Tensor t(detail::new_node(NodeKind::Leaf, OpKind::None, Dtype::F32, Shape{}));
      Node* n = t.node();
      if (fuser::dry_run()) {  // planning only (memory()): no value, no buffer
        n->storage = fuser::dry_run_storage(1, Dtype::F32);
      } else {
        n->storage = detail::allocate_result("an element count of dvm::Executable", Shape{}, Dtype::F32);
        const double c = static_cast<double>(count);
        n->storage->f32()[0] = static_cast<float>(sz.reciprocal ? 1.0 / c : c);
      }
      builder->add_node(n, static_cast<int32_t>(i));
      built[i] = std::move(t);
      continue;
    }
    if (g.range >= 0) {
      const detail::RangeLeaf& r = x.ranges[static_cast<size_t>(g.range)];
      Tensor t;
      if (fuser::dry_run()) {  // planning only (memory()): no values
        t = Tensor(detail::new_node(NodeKind::Leaf, OpKind::None, r.dtype, shape));
        t.node()->storage = fuser::dry_run_storage(shape.numel(), r.dtype);
        detail::contiguous_strides(shape, t.node()->strides);
      } else {
        t = detail::new_leaf(shape, "arange", r.dtype);
        detail::fill_range(t.node()->storage->data, r.dtype, shape.numel(), r.start, r.step);
      }
      builder->add_node(t.node(), static_cast<int32_t>(i));
      built[i] = std::move(t);
      continue;
    }
    if (g.kind == NodeKind::Const) {
      Tensor t(detail::new_node(NodeKind::Const, OpKind::None, g.dtype, shape));
      t.node()->value = g.value;
      t.node()->immediate = g.immediate;
      builder->add_node(t.node(), static_cast<int32_t>(i));
      built[i] = std::move(t);
      continue;
    }
    Node* ins[3] = {nullptr, nullptr, nullptr};
    for (int k = 0; k < g.nin; ++k) ins[k] = node_of(g.in[k]);
    if (!fits(g, shape, ins))
      throw Error(std::string("dvm::Executable::") + caller + " at " + binding_text(x, v) + ": " + what() + " gives " + shape.to_string() +
                  ", which does not fit its operands (a size computed from a dvm::Dim during the capture, such as "
                  "S / 2, is a constant of the graph)");
    // A view of an input (values that exist) is no trace node, as in the
    // lazy path: it shares the input's buffer.
    const bool view_of_values = g.kind == NodeKind::View && ins[0]->storage;
    Node* n = view_of_values ? detail::new_node(g.kind, g.op, g.dtype, shape)
                             : detail::new_node(g.kind, g.op, g.dtype, shape, ins, g.nin);
    Tensor own = view_of_values ? Tensor(n) : Tensor();  // frees n if a check below throws
    n->keepdim = g.keepdim;
    n->immediate = g.immediate;
    n->red_begin = g.red_begin;
    n->red_end = g.red_end;
    n->scalar_pos = g.scalar_pos;
    n->value = g.value;
    if (g.kind == NodeKind::View &&
        !view_fits(g.strides, g.offset, shape, v.data(), ins[0]->shape.numel(), n->strides, &n->offset)) {
      if (!view_of_values) own = detail::record(n);  // recorded so that it is freed with the others
      throw Error(std::string("dvm::Executable::") + caller + " at " + binding_text(x, v) + ": " + what() + " of " + shape.to_string() +
                  " reads outside its operand " + ins[0]->shape.to_string() +
                  " (a size computed from a dvm::Dim during the capture, such as S / 2, is a constant of the graph)");
    }
    builder->add_node(n, static_cast<int32_t>(i));
    if (view_of_values) {
      ins[0]->storage->retain();
      n->storage = ins[0]->storage;
      n->offset += ins[0]->offset;
      built[i] = std::move(own);
      continue;
    }
    built[i] = detail::record(n);
  }
  // Only the outputs stay observable, so the ops fuse as the lazy path's
  // (a recorded op is kept by the trace, a value by its consumers' edges).
  for (size_t o = 0; o < x.outputs.size(); ++o) (*outs)[o] = built[static_cast<size_t>(x.outputs[o].node)];
}

// The program for relations `key`: the one made under them, or for a loaded
// executable compile()'s (any binding's values); null if neither. Under x.mu.
const graph::Program* find_program(const detail::ExecutableState& x, const std::vector<int32_t>& key) {
  const graph::Program* generic = nullptr;
  for (const auto& q : x.programs) {
    if (q->key == key) return q.get();
    if (q->key == x.generic_key) generic = q.get();
  }
  return x.loaded ? generic : nullptr;
}

// A binding whose sizes overflow: a rebuilding run names the extent; a
// loaded executable, which has no ops to rebuild, says so itself.
bool overflow(const detail::ExecutableState& x, const std::vector<int64_t>& v, bool must) {
  if (must)
    throw Error("dvm::Executable::run at " + binding_text(x, v) +
                ": an extent overflows or passes the largest tensor dvm supports");
  return false;
}

// An output's scratch buffer from the buffer pool, so that the memory
// limit and memory_stats() count it as they count a tensor's buffer.
struct PoolBlock {
  void* data = nullptr;
  size_t bytes = 0;
  PoolBlock() = default;
  PoolBlock(const PoolBlock&) = delete;
  PoolBlock& operator=(const PoolBlock&) = delete;
  ~PoolBlock() { detail::pool_free(data, bytes + 1); }
  void allocate(size_t n) {
    try {
      data = detail::pool_allocate(n + 1);  // one byte more: an empty output has an address
    } catch (const std::bad_alloc&) {
      throw Error("out of memory: dvm::Executable::run computes an output given over an input into a buffer of " +
                  std::to_string(n) + " bytes first, and the system has no block that large");
    }
    bytes = n;
  }
};

[[noreturn]] void view_outside_error(const detail::ExecutableState& x, const std::vector<int64_t>& v,
                                     const detail::ViewCheck& c, const char* caller) {
  bool ok = true;
  throw Error(std::string("dvm::Executable::") + caller + " at " + binding_text(x, v) + ": a view of " +
              eval_dims(c.shape, v.data(), &ok).to_string() + " reads outside its operand " +
              eval_dims(c.operand, v.data(), &ok).to_string());
}

// Whether this thread's launches are observed (a kernel log, the profiler,
// a fusion record): a run then rebuilds its ops, whose launches they see,
// instead of replaying a program (unless a loaded executable must replay).
bool launches_observed() { return fuser::kernel_log() || vm::profile::on() || fuser::fusion_record(); }

// A run by the program made for v's relations, if there is one and no
// other run holds it; false when the ops must be rebuilt. A loaded
// executable, which has no ops, always replays or throws.
bool replay(const detail::ExecutableState& x, const std::vector<int64_t>& v, const std::vector<const void*>& in,
            const std::vector<void*>& out) {
  const bool must = x.loaded;
  if (!must && launches_observed()) return false;
  thread_local std::vector<int32_t> key;
  if (!graph::relation_key(x, v.data(), &key)) return overflow(x, v, must);
  std::unique_lock<std::mutex> lock(x.mu, std::defer_lock);
  if (must) lock.lock();
  else if (!lock.try_lock()) return false;
  const graph::Program* p = find_program(x, key);
  if (!p) {
    if (must)
      throw Error("dvm::Executable::run at " + binding_text(x, v) + ": the loaded executable has no program to run " +
                  "(it was saved without the program of distinct extents)");
    return false;
  }
  if (const detail::ViewCheck* c = view_outside(x, v.data())) {
    if (!must) return false;  // the rebuilt view names the error
    view_outside_error(x, v, *c, "run");
  }
  // A loaded program's numbers come from a file: each run checks where its
  // arguments reach (so does the plan check, which keeps the check honest).
  const bool check = must || fuser::plan_check();
  // Outputs that overlap inputs are computed into scratch
  // buffers first, so no kernel reads what another has written over.
  if (outputs_overlap(x, v.data(), in, out)) {
    std::vector<PoolBlock> scratch(out.size());
    std::vector<void*> tmp(out.size());
    for (size_t o = 0; o < out.size(); ++o) {
      int64_t n = 0;
      if (!x.outputs[o].numel.eval(v.data(), &n)) return false;
      scratch[o].allocate(static_cast<size_t>(n) * dtype_size(x.outputs[o].dtype));
      tmp[o] = scratch[o].data;
    }
    if (!graph::run_program(x, *p, v.data(), in.data(), tmp.data(), x.scratch, check)) return overflow(x, v, must);
    for (size_t o = 0; o < out.size(); ++o) std::memcpy(out[o], tmp[o], scratch[o].bytes);
  } else if (!graph::run_program(x, *p, v.data(), in.data(), out.data(), x.scratch, check)) {
    return overflow(x, v, must);
  }
  ++graph::program_stats().replays;
  return true;
}

// Installs a program builder as this thread's plan observer for one run.
struct Observing {
  explicit Observing(graph::ProgramBuilder* b) { fuser::set_plan_observer(b); }
  ~Observing() { fuser::set_plan_observer(nullptr); }
  Observing(const Observing&) = delete;
  Observing& operator=(const Observing&) = delete;
};

// The plan check (DVM_PLAN_CHECK) of a replay: the ops rebuilt at the same
// binding give the outputs' bytes and a program of the same kernels.
// An output's values into the caller's buffer (bools as 0 or 1: an input
// passed through may hold any nonzero byte for true).
void write_output(const Node* n, void* dst) {
  detail::copy_values(n, dst);
  if (n->dtype == Dtype::Bool) detail::canonical_bools(static_cast<uint8_t*>(dst), n->shape.numel());
}

void check_replay(const detail::ExecutableState& x, const std::vector<int64_t>& v,
                  const std::vector<const void*>& in, const std::vector<void*>& out) {
  detail::Trace::current().flush();  // the rebuilt ops flush alone, as in a rebuilding run
  graph::ProgramBuilder builder(x, v.data());
  std::vector<Tensor> outs(x.outputs.size());
  // The check's own launches are not the run's: the stats leave them out.
  using detail::Count;
  const int64_t launched = detail::thread_counted(Count::KernelsLaunched);
  const int64_t ran = detail::thread_counted(Count::KernelsRun);
  {
    const Observing observing(&builder);
    rebuild(x, v, in, &builder, &outs);
    for (const Tensor& t : outs) t.sync();
  }
  detail::count(Count::KernelsLaunched, launched - detail::thread_counted(Count::KernelsLaunched));
  detail::count(Count::KernelsRun, ran - detail::thread_counted(Count::KernelsRun));
  for (size_t o = 0; o < outs.size(); ++o) {
    const size_t bytes = static_cast<size_t>(outs[o].numel()) * dtype_size(x.outputs[o].dtype);
    std::vector<char> want(bytes);
    write_output(outs[o].node(), want.data());
    if (std::memcmp(want.data(), out[o], bytes) != 0)
      throw Error("internal: the replay of a graph's program at " + binding_text(x, v) + " wrote other bytes to '" +
                  x.outputs[o].name + "' than its rebuilt ops compute");
  }
  const std::shared_ptr<graph::Program> fresh = builder.finish();
  std::lock_guard<std::mutex> lock(x.mu);
  for (const auto& p : x.programs) {
    if (!fresh || p->key != fresh->key) continue;
    bool same = p->launches.size() == fresh->launches.size();
    for (size_t i = 0; same && i < p->launches.size(); ++i)
      same = p->launches[i].kernel->bytecode() == fresh->launches[i].kernel->bytecode();
    if (!same)
      throw Error("internal: the program a graph replayed at " + binding_text(x, v) +
                  " launches other kernels than its rebuilt ops");
    return;
  }
  throw Error("internal: the rebuilt ops of a graph at " + binding_text(x, v) +
              " make no program with the relations of the one replayed");
}

// Whether a run at v plans its relations before it runs: they have no
// program yet, and the run would replay one (launches_observed).
bool plans_first(const detail::ExecutableState& x, const std::vector<int64_t>& v) {
  if (x.loaded || launches_observed()) return false;
  std::vector<int32_t> key;
  if (!graph::relation_key(x, v.data(), &key)) return false;
  std::lock_guard<std::mutex> lock(x.mu);
  return find_program(x, key) == nullptr;
}

// Keeps a program made by a rebuilding run (the newest few, one per key).
void keep(const detail::ExecutableState& x, std::shared_ptr<const graph::Program> p) {
  std::lock_guard<std::mutex> lock(x.mu);
  for (const auto& q : x.programs)
    if (q->key == p->key) return;
  if (x.programs.size() >= detail::kMaxPrograms) {  // the oldest goes, but never compile()'s
    auto oldest = x.programs.begin();
    if ((*oldest)->key == x.generic_key) ++oldest;
    x.programs.erase(oldest);
  }
  x.programs.push_back(std::move(p));
}

}  // namespace

namespace {

// A run that rebuilds the recorded ops at binding v (its kernels encoded,
// its program kept); with write_outputs false, a dry run whose launches
// never happen: nothing reads the inputs' pointers or writes the outputs'.
void rebuild_run(const detail::ExecutableState& x, const std::vector<int64_t>& v,
                 const std::vector<const void*>& in_ptr, const std::vector<void*>& out_ptr, bool write_outputs,
                 const char* caller = "run") {
  ++graph::program_stats().rebuilds;
  // Work the lazy path left pending on this thread is computed first, so
  // that the flushes below hold the graph's ops alone.
  detail::Trace::current().flush();
  graph::ProgramBuilder builder(x, v.data());
  std::vector<Tensor> outs(x.outputs.size());
  {
    const Observing observing(&builder);
    rebuild(x, v, in_ptr, &builder, &outs, caller);
    // Compute every output first (one flush), then write them: a failure
    // leaves every output as it was.
    for (const Tensor& t : outs) t.sync();
  }
  if (write_outputs)
    for (size_t o = 0; o < outs.size(); ++o) write_output(outs[o].node(), out_ptr[o]);
  if (std::shared_ptr<graph::Program> p = builder.finish()) keep(x, std::move(p));
}

}  // namespace

void Executable::run(const GraphInputs& inputs, const GraphOutputs& outputs, const Bindings& bindings) const {
  const detail::ExecutableState& x = state(s_, "run");
  // Kept between runs so that a replay allocates nothing (run() never
  // nests on a thread: nothing it calls runs user code).
  thread_local std::vector<int64_t> v;
  thread_local std::vector<const void*> in_ptr;
  thread_local std::vector<void*> out_ptr;
  bind(x, bindings, "run", &v);
  by_port(x.inputs, inputs, "input", &in_ptr);
  by_port(x.outputs, outputs, "output", &out_ptr);
  check_outputs_apart(x, v, out_ptr);
  if (detail::capture())
    throw Error("dvm::Executable::run: a dvm::Graph is being built on this thread (compile it first)");
  try {
    // Relations not planned yet are planned first (a dry run, as memory()
    // plans them) and then replayed: the first run at them uses the arena
    // memory() reports, not the lazy path's buffers.
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (replay(x, v, in_ptr, out_ptr)) {
        // (Outputs over inputs leave nothing to compare against.)
        if (fuser::plan_check() && !x.loaded && !outputs_overlap(x, v.data(), in_ptr, out_ptr)) [[unlikely]]
          check_replay(x, v, in_ptr, out_ptr);
        return;
      }
      if (attempt == 1 || !plans_first(x, v)) break;
      plan_at(bindings, "run");
    }
    rebuild_run(x, v, in_ptr, out_ptr, true);
  } catch (const std::bad_alloc&) {
    throw Error("out of memory: dvm::Executable::run at " + binding_text(x, v) +
                " (Executable::memory gives the bytes its arena needs)");
  } catch (const Error& e) {
    // The memory limit or the host's allocator refused a buffer: say which
    // run (an engine may hold several executables).
    if (!std::string_view(e.what()).starts_with("out of memory")) throw;
    throw Error(std::string(e.what()) + " (in dvm::Executable::run at " + binding_text(x, v) +
                "; Executable::memory gives the bytes its arena needs)");
  }
}


namespace {

// Values for the symbols under which every distinct monomial of the graph
// (extents, strides, offsets) has a value of its own, none of them 0 or 1:
// the extents then relate as they do for any binding, so the kernels a run
// at these values makes are the ones every such binding uses. Empty when
// none is found among a few tries or the tensors would be large.
std::vector<int64_t> generic_binding(const detail::ExecutableState& x) {
  std::vector<const Monomial*> all;
  for (const GNode& g : x.nodes) {
    for (const Monomial& m : g.shape) all.push_back(&m);
    for (const Monomial& m : g.strides) all.push_back(&m);
  }
  for (int attempt = 0; attempt < 16; ++attempt) {
    std::vector<int64_t> v;
    int64_t p = 11 + 2 * attempt;
    while (v.size() < x.symbols.size()) {
      bool prime = p > 1;
      for (int64_t d = 2; d * d <= p; ++d) prime = prime && p % d != 0;
      if (prime) v.push_back(p);
      ++p;
    }
    std::unordered_map<int64_t, const Monomial*> seen;
    bool ok = true;
    for (const Monomial* m : all) {
      int64_t e = 0;
      if (!m->eval(v.data(), &e) || std::llabs(e) > (int64_t{1} << 22)) return {};
      if (m->constant()) continue;
      if (e == 0 || e == 1 || e == -1) ok = false;
      auto [it, fresh] = seen.emplace(e, m);
      if (!fresh && (it->second->coeff != m->coeff || it->second->exp != m->exp)) ok = false;
    }
    for (const Monomial* m : all)
      if (m->constant() && seen.count(m->coeff)) ok = false;  // a symbolic extent equal to a constant one
    if (ok) return v;
  }
  return {};
}

}  // namespace

void Executable::plan_at(const Bindings& b, const char* caller) const {
  const detail::ExecutableState& x = *s_;
  const std::vector<int64_t> v = bind(x, b, caller);
  std::vector<int32_t> key;
  if (graph::relation_key(x, v.data(), &key)) {
    std::lock_guard<std::mutex> lock(x.mu);
    if (find_program(x, key)) return;  // planned already
  }
  if (detail::capture())
    throw Error(std::string("dvm::Executable::") + caller +
                ": these sizes relate in a way not planned yet, and planning them records ops while a dvm::Graph "
                "is being built on this thread (compile it first)");
  // The run plans, encodes and makes its program but launches nothing, so
  // no port's memory is touched: each gets an address of its own, far
  // enough from the others that no two ranges overlap, and no buffer.
  std::vector<const void*> in_ptr;
  std::vector<void*> out_ptr;
  uintptr_t next = uintptr_t{1} << 32;
  auto fake = [&](const detail::Port& p) {
    const uintptr_t at = next;
    const Shape ps = eval_shape(x, p.shape, v, [&] { return "'" + p.name + "'"; }, caller);
    const uintptr_t bytes = static_cast<uintptr_t>(ps.numel()) * dtype_size(p.dtype);
    next += (bytes + 127) / 64 * 64;
    return reinterpret_cast<void*>(at);
  };
  for (const detail::Port& p : x.inputs) in_ptr.push_back(fake(p));
  for (const detail::Port& p : x.outputs) out_ptr.push_back(fake(p));
  // Work the lazy path left pending on this thread is computed first, for
  // real: a dry flush would leave it without values.
  detail::Trace::current().flush();
  struct DryRun {
    DryRun() { fuser::set_dry_run(true); }
    ~DryRun() { fuser::set_dry_run(false); }
  } dry;
  rebuild_run(x, v, in_ptr, out_ptr, false, caller);
}

void Executable::make_kernels() const {
  const detail::ExecutableState& x = *s_;
  const std::vector<int64_t> v = generic_binding(x);
  if (v.empty() && !x.symbols.empty()) return;
  Bindings b;
  for (size_t i = 0; i < v.size(); ++i) b.emplace_back(x.symbols[i], v[i]);
  // A failure (a graph that fits only other sizes) leaves the kernels to
  // the first run.
  try {
    plan_at(b);
  } catch (const std::exception&) {  // dvm::Error, or out of memory for the scratch buffers
    return;
  }
  std::vector<int32_t> key;
  if (graph::relation_key(x, v.data(), &key)) {
    std::lock_guard<std::mutex> lock(x.mu);
    for (const auto& p : x.programs)
      if (p->key == key) x.generic_key = key;
  }
  // An extent of 1 is a structure of its own (what broadcasts): the lazy
  // path may fuse it otherwise. Each symbol at 1 alone, and all of them at
  // once, are planned too, so that runs at such bindings compile nothing.
  const size_t n = x.symbols.size();
  if (n == 0 || n + 2 > detail::kMaxPrograms) return;
  for (size_t i = 0; i <= n; ++i) {
    if (i == n && n == 1) break;  // (the one symbol at 1 was planned)
    Bindings ones = b;
    for (size_t k = 0; k < n; ++k)
      if (k == i || i == n) ones[k].second = 1;
    try {
      plan_at(ones);
    } catch (const std::exception&) {  // sizes the graph does not fit: left to a run
    }
  }
}

int64_t Executable::memory(const Bindings& bindings) const {
  const detail::ExecutableState& x = state(s_, "memory");
  const std::vector<int64_t> v = bind(x, bindings, "memory");
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::vector<int32_t> key;
    if (graph::relation_key(x, v.data(), &key)) {
      std::lock_guard<std::mutex> lock(x.mu);
      if (const graph::Program* p = find_program(x, key)) {
        // A binding no run can take (a view past its constant) has no memory to plan.
        if (const detail::ViewCheck* c = view_outside(x, v.data())) view_outside_error(x, v, *c, "memory");
        return graph::program_memory_bytes(x, *p, v.data(), x.scratch);
      }
    }
    if (attempt == 0 && !x.loaded) plan_at(bindings, "memory");  // plans these relations (or names what is wrong)
  }
  return -1;
}

Shape Executable::shape(const std::string& name, const Bindings& bindings) const {
  const detail::ExecutableState& x = state(s_, "shape");
  const detail::Port& p = port_named(x, name, "shape");
  return eval_shape(x, p.shape, bind(x, bindings, "shape"), [&] { return "'" + name + "'"; }, "shape");
}

Dtype Executable::dtype(const std::string& name) const {
  return port_named(state(s_, "dtype"), name, "dtype").dtype;
}

std::vector<std::string> Executable::symbols() const { return state(s_, "symbols").symbols; }

std::vector<std::string> Executable::inputs() const {
  std::vector<std::string> n;
  for (const detail::Port& p : state(s_, "inputs").inputs) n.push_back(p.name);
  return n;
}

std::vector<std::string> Executable::outputs() const {
  std::vector<std::string> n;
  for (const detail::Port& p : state(s_, "outputs").outputs) n.push_back(p.name);
  return n;
}

std::string Executable::describe() const {
  const detail::ExecutableState& x = state(s_, "describe");
  std::string s;
  for (const auto* ports : {&x.inputs, &x.outputs})
    for (const detail::Port& p : *ports)
      s += (ports == &x.inputs ? "input " : "output ") + p.name + ": " + dtype_name(p.dtype) +
           detail::dims_text(p.shape, x.symbols) + "\n";
  return s;
}

int64_t Executable::ops() const { return state(s_, "ops").recorded_ops; }

}  // namespace dvm
