// The lazy tensor API: handles, ops (check, infer, record) and observers.
#include "dvm/tensor.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <type_traits>

#include "tracer/capture.h"
#include "tracer/host_values.h"
#include "tracer/node.h"
#include "tracer/operands.h"
#include "tracer/ops.h"
#include "tracer/shape_rules.h"
#include "tracer/trace.h"

namespace dvm {
using detail::Node;
using detail::NodeKind;
using detail::OpKind;
using detail::describe;
using detail::need;

// ---------------------------------------------------------------------------
// Handles
// ---------------------------------------------------------------------------
namespace {
// Whether n is pending in this thread's trace: its handle counts may then
// change without atomic operations (Node::dropped_handles). Only this
// thread sets or clears an owner equal to its own trace.
bool pending_here(const Node* n) {
  const detail::Trace* o = n->owner.load(std::memory_order_relaxed);
  return o != nullptr && o == detail::t_trace;
}
}  // namespace

Tensor::Tensor(Node* node) : node_(node) {
  if (!node_) return;
  if (pending_here(node_) && node_->dropped_handles > 0) --node_->dropped_handles;
  else node_->retain(Node::kUserRef);
}
Tensor::Tensor(const Tensor& o) : Tensor(o.node_) {}
Tensor::Tensor(Tensor&& o) noexcept : node_(o.node_) { o.node_ = nullptr; }
Tensor& Tensor::operator=(const Tensor& o) {
  if (this != &o) {
    Tensor tmp(o);
    std::swap(node_, tmp.node_);
  }
  return *this;
}
Tensor& Tensor::operator=(Tensor&& o) noexcept {
  std::swap(node_, o.node_);
  return *this;
}
Tensor::~Tensor() {
  if (!node_) return;
  if (pending_here(node_)) ++node_->dropped_handles;
  else node_->release(Node::kUserRef);
}

void detail::undefined_operand(const char* op) {
  throw Error(std::string(op) + ": tensor is undefined (default-constructed)");
}

// Only the thread that recorded a pending node can compute it (flushing
// another thread's trace would need a lock on every record).
void detail::foreign_operand(const char* op, const Node* n) {
  throw Error(std::string(op) + ": operand " + std::string(dtype_name(n->dtype)) + n->shape.to_string() +
              " is pending in another thread's trace (not computed yet); only the thread that recorded"
              " it can compute it: observe it there (sync()) before sharing it");
}

// A tensor whose flush failed has no values: its reads and its uses as an
// operand say which error lost them.
void detail::failed_operand(const char* op, const Node* n) {
  throw Error(std::string(op) + ": tensor " + dtype_name(n->dtype) + n->shape.to_string() +
              " has no value: the flush that should have computed it failed: " + detail::failure_message(n));
}

std::string detail::describe(const Node* n) { return std::string(dtype_name(n->dtype)) + n->shape.to_string(); }

namespace {

// Element i of a buffer of type t as float32, as the vector unit's loads
// convert it (backends/convert.h).
float elem_as_float(Dtype t, const void* p, int64_t i) {
  switch (t) {
    case Dtype::F32: return static_cast<const float*>(p)[i];
    case Dtype::F16: return to_float(Half{static_cast<const uint16_t*>(p)[i]});
    case Dtype::BF16: return to_float(BFloat16{static_cast<const uint16_t*>(p)[i]});
    case Dtype::I32: return static_cast<float>(static_cast<const int32_t*>(p)[i]);
    case Dtype::I64: return static_cast<float>(static_cast<const int64_t*>(p)[i]);
    case Dtype::U8: return static_cast<float>(static_cast<const uint8_t*>(p)[i]);
    case Dtype::Bool: return static_cast<const uint8_t*>(p)[i] != 0 ? 1.0f : 0.0f;
  }
  return 0.0f;
}

// Writes a user's value as element i of a buffer of type t (full, arange):
// floats rounded to nearest even, integers truncated toward zero; a value an
// integer type cannot hold is an error, not a wrapped number.
void store_value(const char* op, Dtype t, void* p, int64_t i, double v) {
  auto integer = [&](double lo, double hi) {
    const double r = std::trunc(v);
    if (!(r >= lo && r <= hi))
      throw Error(std::string(op) + ": value " + std::to_string(v) + " does not fit " + dtype_name(t) +
                  " (expected " + std::to_string(static_cast<int64_t>(lo)) + " to " +
                  std::to_string(static_cast<int64_t>(hi)) + ")");
    return r;
  };
  switch (t) {
    case Dtype::F32: static_cast<float*>(p)[i] = static_cast<float>(v); return;
    case Dtype::F16: static_cast<uint16_t*>(p)[i] = to_half(static_cast<float>(v)).bits; return;
    case Dtype::BF16: static_cast<uint16_t*>(p)[i] = to_bfloat16(static_cast<float>(v)).bits; return;
    case Dtype::I32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(integer(-2147483648.0, 2147483647.0)); return;
    case Dtype::I64:  // doubles above 2^63 - 1024 round up to 2^63, outside int64
      static_cast<int64_t*>(p)[i] = static_cast<int64_t>(integer(-9223372036854775808.0, 9223372036854774784.0));
      return;
    case Dtype::U8: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(integer(0.0, 255.0)); return;
    case Dtype::Bool: static_cast<uint8_t*>(p)[i] = v != 0.0 ? 1 : 0; return;
  }
}

}  // namespace

void detail::check_dtype(const char* op, Dtype t) {
  if (static_cast<int>(t) >= kNumDtypes) throw Error(std::string(op) + ": unknown dtype " + std::to_string(static_cast<int>(t)));
}

namespace {

// Whether the vector unit's f32 registers hold every value of t exactly:
// all types but int32 and int64.
bool exact_in_f32(Dtype t) { return t != Dtype::I32 && t != Dtype::I64; }

int category(Dtype t) { return t == Dtype::Bool ? 0 : is_integral(t) ? 1 : 2; }

// torch's result_type: operands with dimensions decide the type; a 0-d
// tensor changes it only when it is of a higher category (bool < integer <
// floating); a float scalar (the 2.0f of x * 2.0f, torch's wrapped number)
// only when it is of a higher category than every tensor operand, 0-d
// ones included (a 0-d float16 times 2.0f stays float16); an integer
// scalar (Tensor(int), torch's wrapped integer) only turns bool into int64.
struct Promotion {
  bool have_dim = false, have_zero = false, have_scalar = false, have_int_scalar = false, have_bool_scalar = false;
  Dtype dim = Dtype::F32, zero = Dtype::F32;
  void add(Dtype t, bool zero_dim) {
    if (zero_dim) {
      zero = have_zero ? promote_types(zero, t) : t;
      have_zero = true;
    } else {
      dim = have_dim ? promote_types(dim, t) : t;
      have_dim = true;
    }
  }
  void add(const Node* n) {
    if (n->kind == NodeKind::Const && !n->storage && n->shape.rank() == 0) {
      have_scalar = true;  // 2.0f, as binary ops take it (where's operand too)
      return;
    }
    if (n->int_scalar) {  // a bool scalar changes no type: the lowest category
      if (n->dtype == Dtype::Bool) have_bool_scalar = true;
      else have_int_scalar = true;
      return;
    }
    add(n->dtype, n->shape.rank() == 0);
  }
  void add_float_scalar() { have_scalar = true; }
  Dtype result() const {
    if (!have_dim && !have_zero)
      return have_scalar ? Dtype::F32 : have_int_scalar ? Dtype::I64 : have_bool_scalar ? Dtype::Bool : Dtype::F32;
    const Dtype t = !have_dim                                         ? zero
                    : !have_zero || category(zero) <= category(dim) ? dim
                                                                      : promote_types(dim, zero);
    if (have_scalar && category(t) < category(Dtype::F32)) return promote_types(t, Dtype::F32);
    // An integer scalar promotes bool only, to int64 (torch's default integer type).
    return have_int_scalar && t == Dtype::Bool ? Dtype::I64 : t;
  }
};

}  // namespace

Dtype detail::result_type(const Node* const* nodes, int n) {
  Promotion pr;
  for (int i = 0; i < n; ++i) pr.add(nodes[i]);
  return pr.result();
}

bool detail::wrapped_scalar(const Node* n) {
  return n->int_scalar || (n->kind == NodeKind::Const && !n->storage && n->shape.rank() == 0);
}

namespace {

// Whether converting t to u loses values (torch converts every operand to
// the computation type first: an int64 0-d operand of an int32 tensor's op
// keeps its low 32 bits, an int32 one of a uint8 tensor's its low 8).
bool narrowing_int(Dtype t, Dtype u) {
  if (!is_integral(t) || !is_integral(u) || t == u) return false;
  return u == Dtype::U8 || (u == Dtype::I32 && t == Dtype::I64);
}

// The value of an integer scalar (Tensor(int), a 0-d int64 leaf; or
// Tensor(bool), a 0-d bool leaf).
int64_t int_scalar_value(const Node* n) {
  return n->dtype == Dtype::Bool ? *static_cast<const uint8_t*>(n->storage->data)
                                 : *static_cast<const int64_t*>(n->storage->data);
}

bool comparison(OpKind op) {
  return op == OpKind::Eq || op == OpKind::Ne || op == OpKind::Lt || op == OpKind::Le || op == OpKind::Gt ||
         op == OpKind::Ge;
}

// v as the 16-bit float type t holds it (round to nearest even).
float round_to(Dtype t, float v) { return t == Dtype::F16 ? to_float(to_half(v)) : to_float(to_bfloat16(v)); }

// The C++ integers integer type t takes, as torch's checked conversion of
// one: uint8 also takes -255 to -1 (they wrap, so that x - 1 and x + -1
// agree).
void integer_range(Dtype t, int64_t* lo, int64_t* hi) {
  *lo = t == Dtype::I32 ? INT32_MIN : t == Dtype::U8 ? -255 : INT64_MIN;
  *hi = t == Dtype::I32 ? INT32_MAX : t == Dtype::U8 ? 255 : INT64_MAX;
}

// An integer scalar must fit the integer type t its op computes in.
void check_int_scalar_fits(const char* op, int64_t v, Dtype t) {
  int64_t lo = 0, hi = 0;
  integer_range(t, &lo, &hi);
  if (v < lo || v > hi)
    throw Error(std::string(op) + ": the integer scalar " + std::to_string(v) + " does not fit " + dtype_name(t) +
                ", the type the op computes in (expected " + std::to_string(lo) + " to " + std::to_string(hi) +
                "; torch refuses it too)");
}

std::string describe_all(Node* const* nodes, int k) {
  std::string s;
  for (int i = 0; i < k; ++i) s += (i ? " and " : "") + describe(nodes[i]);
  return s;
}

// torch refuses a subtraction with any bool operand (sub_check).
void check_bool_sub(OpKind op, Node* const* nodes, int k, bool scalar) {
  if (op != OpKind::Sub) return;
  for (int i = 0; i < k; ++i)
    if (nodes[i]->dtype == Dtype::Bool)
      throw Error("sub: subtraction with a bool operand (" + describe_all(nodes, k) + (scalar ? " and a scalar" : "") +
                  ") is not supported, as in torch; to invert a mask use ~ or logical_not()");
}

// Ops the vector unit computes in integer lanes for integer results, with
// torch's wrap-around (fuser/lower.cpp).
bool int_lanes_op(OpKind op) {
  switch (op) {
    case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Neg: case OpKind::Abs:
    case OpKind::Relu: case OpKind::Maximum: case OpKind::Minimum: case OpKind::Where:
    case OpKind::FloorDivide: case OpKind::Remainder:
      return true;
    default:
      return false;
  }
}

// Ops whose integer results f32 computes exactly for uint8 and bool (no
// arithmetic: the result is one of the operands).
bool selects(OpKind op) {
  return op == OpKind::Maximum || op == OpKind::Minimum || op == OpKind::Max || op == OpKind::Min ||
         op == OpKind::Where;
}

// Arithmetic on bool operands, as torch: add is logical or and mul logical
// and (bool results); sub and neg are errors, as are floor division and
// remainder; the other ops and reductions count true as 1 and give float32
// (torch: int64 for sum).
Dtype bool_result(OpKind op, Node* const* nodes, int k) {
  switch (op) {
    case OpKind::Add: case OpKind::Mul: return Dtype::Bool;
    case OpKind::Sub:
      throw Error("sub: subtraction of bool operands (" + describe_all(nodes, k) +
                  ") is not supported, as in torch; to invert a mask use ~ or logical_not()");
    case OpKind::Neg:
      throw Error("neg: negation of a bool operand (" + describe_all(nodes, k) +
                  ") is not supported, as in torch; to invert a mask use ~ or logical_not()");
    case OpKind::FloorDivide: case OpKind::Remainder:
      throw Error(std::string(detail::op_name(op)) + ": bool operands (" + describe_all(nodes, k) +
                  ") are not supported, as in torch; convert with .to() first");
    default: return Dtype::F32;
  }
}

// The dtype of op's result on operands promoted to t (by the op table's
// dtype rule), or a dvm::Error naming the op and its operands where the
// vector unit, which computes in f32, cannot give torch's result yet.
Dtype result_dtype(OpKind op, Dtype t, Node* const* nodes, int k) {
  const char* name = detail::op_name(op);
  switch (detail::op_info(op).dtype) {
    case detail::DtypeRule::Float:
      return is_floating(t) ? t : Dtype::F32;
    case detail::DtypeRule::Bool:
      return Dtype::Bool;  // integers compare in integer lanes
    case detail::DtypeRule::Bits:
      if (!is_floating(t)) return t;
      throw Error(std::string(name) + ": " + describe_all(nodes, k) + " promote to " + dtype_name(t) +
                  "; bitwise ops take bool and integer operands only (torch refuses floating types too)");
    default:
      if (is_floating(t) || (selects(op) && exact_in_f32(t))) return t;
      if (is_integral(t) && int_lanes_op(op)) return t;
      if (t == Dtype::Bool) return bool_result(op, nodes, k);
      throw Error(std::string(name) + ": " + dtype_name(t) + " arithmetic on " + describe_all(nodes, k) +
                  " is not supported yet (the vector unit computes in float32); convert with"
                  " .to(dvm::Dtype::F32) first");
  }
}

void check_shape(const char* op, const Shape& s) { detail::check_extents(op, s); }

using detail::record;

Node* make_const(const Shape& s, float v, bool immediate = false) {
  Node* n = detail::new_node(NodeKind::Const, OpKind::None, Dtype::F32, s);
  n->value = v;
  n->immediate = immediate;
  return n;
}

// Whether n is a pending 16-bit value a kernel would compute in float32
// registers without rounding it (a fused chain rounds only what it stores):
// a comparison must see it rounded, as it would be once stored.
bool fused_sixteen_bit(const Node* n) {
  return (n->dtype == Dtype::F16 || n->dtype == Dtype::BF16) && n->pending && n->kind != NodeKind::Leaf &&
         n->kind != NodeKind::Const && n->kind != NodeKind::Copy;
}

}  // namespace

bool detail::float_count_fits(int64_t count, int axis) {
  if (CaptureHooks* g = capture(); g && g->symbolic(count)) [[unlikely]] {
    g->float_count(count, axis);
    return true;
  }
  return count <= kFloatExactCount;
}

Tensor detail::float_count_reduce(OpKind op, const Tensor& x, int begin, int end, bool keepdim) {
  Node* in = need(x, detail::op_name(op));
  if (in->dtype != Dtype::F32 || begin < 0 || end > in->shape.rank() || begin >= end)
    throw Error("internal: float_count_reduce of " + describe(in) + " over axes [" + std::to_string(begin) + ", " +
                std::to_string(end) + ")");
  Shape out;
  for (int i = 0; i < in->shape.rank(); ++i)
    if (i < begin || i >= end) out.push_back(in->shape[i]);
    else if (keepdim) out.push_back(1);
  // An int64 reduction of float32 values: fuser/lower.cpp folds it in
  // float32 lanes and converts at the store.
  Node* n = detail::new_node(NodeKind::Reduce, op, Dtype::I64, out);
  n->red_begin = static_cast<int8_t>(begin);
  n->red_end = static_cast<int8_t>(end);
  n->keepdim = keepdim;
  detail::set_input(n, 0, in);
  return record(n);
}

Tensor detail::widened(const Tensor& x) {
  const Node* n = need(x, "to");
  if (n->dtype == Dtype::F32) return x;
  if (fused_sixteen_bit(n) && n->shape.rank() > 0) {
    // A one-element float32 tensor of x's rank (a 0-d one would not widen:
    // torch's promotion lets a dimensioned 16-bit operand decide).
    Shape ones;
    for (int i = 0; i < n->shape.rank(); ++i) ones.push_back(1);
    return x * Tensor::full(ones, 1.0, Dtype::F32);
  }
  return x.to(Dtype::F32);
}

namespace {

// x as type t holds it: converted, and a fused 16-bit value stored first
// (a conversion is always stored, so it is rounded).
Tensor as_stored(const Tensor& x, Dtype t) {
  return fused_sixteen_bit(x.node()) ? x.to(Dtype::F32).to(t) : x.to(t);
}

// An op of the Broadcast shape rule on its operands (as many as its arity).
Tensor elementwise(OpKind op, std::initializer_list<const Tensor*> ins) {
  const char* name = detail::op_name(op);
  Node* nodes[3] = {};
  int k = 0;
  const Shape* shape = nullptr;
  std::optional<Shape> broadcast;  // engaged only when shapes differ (no zeroing per op)
  for (const Tensor* t : ins) {
    nodes[k] = need(*t, name);
    if (k == 0) {
      shape = &nodes[0]->shape;
    } else if (!(*shape == nodes[k]->shape)) {
      broadcast.emplace(detail::broadcast_shapes(name, *shape, nodes[k]->shape));
      shape = &*broadcast;
    }
    ++k;
  }
  // where's mask takes no part in the promotion. All-f32 operands (the
  // common case, on every recorded op) give the op table's f32 result.
  const int first = op == OpKind::Where ? 1 : 0;
  bool all_f32 = true;
  for (int i = first; i < k; ++i) all_f32 &= nodes[i]->dtype == Dtype::F32;
  if (all_f32 && detail::op_info(op).dtype != detail::DtypeRule::Bits)  // Bits: f32 is an error
    return record(detail::new_node(NodeKind::Elementwise, op, detail::op_result_dtype(op), *shape, nodes, k));
  check_bool_sub(op, nodes, k, false);
  Promotion pr;
  for (int i = first; i < k; ++i) pr.add(nodes[i]);
  const Dtype dt = result_dtype(op, pr.result(), nodes + first, k - first);
  // The type the op computes in: the promoted one, or float32 for true
  // division of integers, to which torch converts each operand from its own
  // type (-1 / u8 is -1.0f / x, not 255 / x).
  const Dtype t = detail::op_info(op).dtype == detail::DtypeRule::Float && is_floating(dt) ? dt : pr.result();
  // Integer operands that the computation type t cannot hold are converted
  // to it first, as torch does (a 0-d operand of another type).
  Tensor casts[3];
  int i = 0;
  for (const Tensor* in : ins) {
    if (i >= first && nodes[i]->int_scalar) {
      const int64_t v = int_scalar_value(nodes[i]);
      if (is_floating(t)) {  // a float scalar parameter, as 2.0f is
        casts[i] = Tensor(make_const(Shape{}, static_cast<float>(v)));
        nodes[i] = casts[i].node();
      } else {
        check_int_scalar_fits(name, v, t);
      }
    }
    // A comparison in a 16-bit type compares the operands as that type
    // holds them (torch converts them to it first): 0.1f is 0.1 rounded.
    // A 16-bit operand a kernel would keep unrounded is compared as stored,
    // whatever the type the comparison promotes to.
    if (comparison(op) &&
        (((t == Dtype::F16 || t == Dtype::BF16) && nodes[i]->dtype != t) || fused_sixteen_bit(nodes[i]))) {
      casts[i] = as_stored(casts[i].defined() ? casts[i] : *in, t);
      nodes[i] = casts[i].node();
    }
    if (i >= first && narrowing_int(nodes[i]->dtype, t)) {
      casts[i] = in->to(t);
      nodes[i] = casts[i].node();
    }
    ++i;
  }
  return record(detail::new_node(NodeKind::Elementwise, op, dt, *shape, nodes, k));
}

// The scalar of a binary op with x of a type other than float32 (out of
// line: the float32 path stays small enough to inline): a subtraction with
// a bool is refused, and a 16-bit comparison compares with the scalar as
// the type holds it (as torch).
[[gnu::noinline]] float scalar_for_type(OpKind op, Node* x, float s) {
  check_bool_sub(op, &x, 1, true);
  return (x->dtype == Dtype::F16 || x->dtype == Dtype::BF16) && comparison(op) ? round_to(x->dtype, s) : s;
}

// A binary op with one float operand kept inline in the node (position pos):
// one node per op instead of two. `immediate`: s belongs to the caller's
// definition (a composition's constant), not to the user.
Tensor binary_scalar(OpKind op, const Tensor& t, float s, int pos, bool immediate = false) {
  const char* name = detail::op_name(op);
  Node* x = need(t, name);
  if (x->dtype != Dtype::F32) [[unlikely]] {
    s = scalar_for_type(op, x, s);
    if (comparison(op) && fused_sixteen_bit(x)) return binary_scalar(op, as_stored(t, x->dtype), s, pos, immediate);
  }
  Dtype dt = detail::op_result_dtype(op);  // an f32 operand: the op table's result
  if (x->dtype != Dtype::F32 || detail::op_info(op).dtype == detail::DtypeRule::Bits) {
    Promotion pr;
    pr.add(x);
    pr.add_float_scalar();
    dt = result_dtype(op, pr.result(), &x, 1);
  }
  Node* n = detail::new_node(NodeKind::Elementwise, op, dt, x->shape, &x, 1);
  n->scalar_pos = static_cast<int8_t>(pos);
  n->value = s;
  n->immediate = immediate;
  return record(n);
}

// x * 1: a new empty tensor of x's shape, for compositions over an empty
// axis. The 1 is the composition's own constant (an immediate).
Tensor empty_copy(const Tensor& x) { return binary_scalar(OpKind::Mul, x, 1.0f, 1, true); }

bool is_inline_scalar(const Tensor& t) {
  const Node* n = t.node();
  return n && n->kind == NodeKind::Const && !n->storage && n->shape.rank() == 0;
}

Tensor unary(OpKind op, const Tensor& x) { return elementwise(op, {&x}); }
// Whether t is a floating tensor other than a scalar: an integer scalar
// with it becomes an inline float scalar, as 2.0f is.
bool floating_tensor(const Tensor& t) {
  const Node* n = t.node();
  return n && !n->int_scalar && !is_inline_scalar(t) && is_floating(n->dtype);
}

// An integer or bool scalar with a floating tensor is the float scalar it
// converts to, inline as 2.0f is; else an operand of the promotion.
[[gnu::noinline]] Tensor binary_with_int_scalar(OpKind op, const Tensor& a, const Tensor& b) {
  Node* both[2] = {a.node(), b.node()};
  check_bool_sub(op, both, 2, false);
  if (b.node()->int_scalar && floating_tensor(a))
    return binary_scalar(op, a, static_cast<float>(int_scalar_value(b.node())), 1);
  if (a.node()->int_scalar && floating_tensor(b))
    return binary_scalar(op, b, static_cast<float>(int_scalar_value(a.node())), 0);
  return elementwise(op, {&a, &b});
}

Tensor binary(OpKind op, const Tensor& a, const Tensor& b) {
  if (is_inline_scalar(b) && a.defined() && !is_inline_scalar(a))
    return binary_scalar(op, a, b.node()->value, 1, b.node()->immediate);
  if (is_inline_scalar(a) && b.defined() && !is_inline_scalar(b))
    return binary_scalar(op, b, a.node()->value, 0, a.node()->immediate);
  if (a.defined() && b.defined() && (a.node()->int_scalar || b.node()->int_scalar)) [[unlikely]]
    return binary_with_int_scalar(op, a, b);
  return elementwise(op, {&a, &b});
}

// Whether a view (shape, offset) of values that exist is recorded as a
// graph's op rather than made at once: its extents or its offset involve a
// symbol of the graph being captured (wpe.narrow(0, P, S)), so each run
// makes its own. Only of values stored contiguously from their buffer's
// start (a leaf, an op's result computed before the graph, such as a
// weight converted with to(), or a contiguous view of one from its start,
// such as arange(40).reshape({10, 4})), whose layout is the one a pending
// node's view is relative to.
bool captured_view_of_values(const Node* x, const Shape& shape, int64_t offset) {
  const detail::CaptureHooks* g = detail::capture();
  if (!g || x->offset != 0 || !x->is_contiguous()) [[likely]]
    return false;
  if (offset != 0 && g->symbolic(offset)) return true;
  for (int64_t d : shape)
    if (g->symbolic(d)) return true;
  return false;
}

// A view of x with the given shape, strides and offset (relative to x's
// layout when x is pending, else to x's buffer).
Tensor make_view(Node* x, const Shape& shape, const int64_t* strides, int64_t offset) {
  if (x->kind == NodeKind::Const && !x->storage) return Tensor(make_const(shape, x->value, x->immediate));
  Node* v = detail::new_node(NodeKind::View, OpKind::None, x->dtype, shape);
  std::copy(strides, strides + shape.rank(), v->strides);
  v->offset = offset;
  if (x->storage && !captured_view_of_values(x, shape, offset)) {  // a view of values that exist: no trace node at all
    x->storage->retain();
    v->storage = x->storage;
    return Tensor(v);
  }
  // A view of a pending view composes into a view of the pending input (a
  // captured view of values reads the view that holds them).
  detail::set_input(v, 0, x->kind == NodeKind::View && !x->storage ? x->in[0] : x);
  return record(v);
}

// Layout of x as seen by a new view: buffer strides, or contiguous strides
// for a pending node (its values will be stored contiguously).
void layout_of(const Node* x, int64_t* strides, int64_t* offset) {
  if (x->storage || x->kind == NodeKind::View) {
    std::copy(x->strides, x->strides + x->shape.rank(), strides);
    *offset = x->offset;
  } else {
    detail::contiguous_strides(x->shape, strides);
    *offset = 0;
  }
}

// Whether x is a view permute() made of a tensor that is not a view, and
// then with perm[i] the input axis its axis i is (Node::permute_code).
bool permuted_view(const Node* x, std::vector<int>* perm) {
  if (x->kind != NodeKind::View || !(x->permute_code >> 31)) return false;
  perm->resize(static_cast<size_t>(x->shape.rank()));
  for (int i = 0; i < x->shape.rank(); ++i) (*perm)[static_cast<size_t>(i)] = static_cast<int>(x->permute_code >> (3 * i) & 7u);
  return true;
}

// A Reduce op over axes. Errors name the op, or the composition `caller`
// that uses it.
Tensor reduce(OpKind op, const Tensor& x, const std::vector<int>& axes_in, bool keepdim,
              const char* caller = nullptr) {
  const char* name = caller ? caller : detail::op_name(op);
  Node* in = need(x, name);
  // Integers as torch's: a sum is int64, max and min keep the type (all
  // fold in int64 lanes, fuser/lower.cpp); a sum of bool counts the trues
  // in int64 too.
  const bool count = op == OpKind::Sum && in->dtype == Dtype::Bool;
  const Dtype dt = is_integral(in->dtype) || count ? (op == OpKind::Sum ? Dtype::I64 : in->dtype)
                                                   : result_dtype(op, in->dtype, &in, 1);
  std::vector<int> axes = detail::normalize_axes(name, axes_in, in->shape);
  if (op != OpKind::Sum)
    for (int a : axes)
      if (in->shape[a] == 0)
        throw Error(std::string(name) + ": reduction over axis " + std::to_string(a) + " of shape " +
                    in->shape.to_string() + ", which is empty (expected a non-empty axis: " + name +
                    " has no identity)");
  if (in->shape.rank() == 0) {
    // A scalar reduces to itself, in the type the reduction gives.
    return dt == in->dtype ? x : x.to(dt);
  }
  // A permuted view (a transpose) is reduced in its input's order and the
  // result permuted back: the kernels then read rows and columns of the
  // input, not elements a stride apart along the reduced axis. Not for a
  // 16-bit float result: read back through the permuted view it is stored
  // first, rounded, where ops fused with the reduction read it in float32
  // (layer_norm's mean).
  if (std::vector<int> perm; dt != Dtype::F16 && dt != Dtype::BF16 && permuted_view(in, &perm)) {
    std::vector<int> inverse(perm.size()), base_axes;
    for (size_t i = 0; i < perm.size(); ++i) inverse[static_cast<size_t>(perm[i])] = static_cast<int>(i);
    for (int a : axes) base_axes.push_back(perm[static_cast<size_t>(a)]);
    std::sort(base_axes.begin(), base_axes.end());
    const Tensor r = reduce(op, x.permute(inverse), base_axes, true, caller).permute(perm);
    if (keepdim) return r;
    Shape out;
    for (int i = 0; i < in->shape.rank(); ++i)
      if (!std::binary_search(axes.begin(), axes.end(), i)) out.push_back(in->shape[i]);
    return r.reshape(out);
  }
  // One node per run of adjacent axes, innermost run first, each keeping its
  // axes as size 1 so later runs' axis numbers stay valid.
  Tensor cur = x;
  size_t end = axes.size();
  const bool single_run = axes.back() - axes.front() + 1 == static_cast<int>(axes.size());
  // A count over one run of axes folds its ones in float32 lanes, which
  // machine code runs (not int64 lanes), where that is exact.
  if (count && single_run) {
    int64_t n = 1;
    for (int a : axes) n *= in->shape[a];
    if (detail::float_count_fits(n, axes.front()))
      return detail::float_count_reduce(OpKind::Sum, where(x, 1.0f, 0.0f), axes.front(), axes.back() + 1, keepdim);
  }
  while (end > 0) {
    size_t begin = end - 1;
    while (begin > 0 && axes[begin - 1] == axes[begin] - 1) --begin;
    Node* src = cur.node();
    Shape out;
    const bool kd = keepdim || !single_run;
    for (int i = 0; i < src->shape.rank(); ++i) {
      bool red = i >= axes[begin] && i <= axes[end - 1];
      if (!red) out.push_back(src->shape[i]);
      else if (kd) out.push_back(1);
    }
    // A sum over several runs of axes keeps its partial sums of 16-bit
    // floats in float32: the result is rounded once, as a single run's.
    const bool partial = begin > 0 && op == OpKind::Sum && (dt == Dtype::F16 || dt == Dtype::BF16);
    Node* n = detail::new_node(NodeKind::Reduce, op, partial ? Dtype::F32 : dt, out);
    n->red_begin = static_cast<int8_t>(axes[begin]);
    n->red_end = static_cast<int8_t>(axes[end - 1] + 1);
    n->keepdim = kd;
    detail::set_input(n, 0, src);
    cur = record(n);
    end = begin;
  }
  if (!keepdim && !single_run) {
    Shape out;
    for (int i = 0; i < in->shape.rank(); ++i)
      if (!std::binary_search(axes.begin(), axes.end(), i)) out.push_back(in->shape[i]);
    cur = cur.reshape(out);
  }
  return cur;
}

// Elements each output of a reduction over axes (already normalized) sums.
int64_t reduced_count(const Shape& s, const std::vector<int>& axes) {
  int64_t c = 1;
  for (int a : axes) c *= s[a];
  return c;
}

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A scalar that depends on sizes (an element count), passed to kernels as a
// one-element input rather than an immediate: the bytecode, and so the
// kernel, stays the same whatever the sizes.
// `count`, or 1 / count when `reciprocal`. A graph being captured is told,
// so that each of its runs puts its own count there.
// `op` names it in an allocation's error.
Tensor size_scalar(int64_t count, const char* op, bool reciprocal = false) {
  Tensor t = detail::new_leaf(Shape{}, op);
  Node* n = t.node();
  const double c = static_cast<double>(count);
  n->storage->f32()[0] = static_cast<float>(reciprocal ? 1.0 / c : c);
  if (detail::CaptureHooks* g = detail::capture()) [[unlikely]] g->size_scalar(n, count, reciprocal);
  return t;
}

}  // namespace

void detail::canonical_bools(uint8_t* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) b[i] = b[i] != 0;
}

Tensor detail::new_leaf(const Shape& shape, const char* op, Dtype dtype) {
  check_shape(op, shape);
  Tensor t = detail::handle_of_new(detail::new_node(NodeKind::Leaf, OpKind::None, dtype, shape));  // frees it if allocation fails
  Node* n = t.node();
  n->storage = allocate_result(op, shape, dtype);
  detail::contiguous_strides(shape, n->strides);
  return t;
}

detail::Storage* detail::allocate_result(const char* op, const Shape& shape, Dtype dtype) {
  try {
    return detail::Storage::allocate(shape.numel(), dtype);
  } catch (const Error& e) {  // out of memory: say for what
    throw Error(std::string(op) + ": " + e.what() + " (for its result " + dtype_name(dtype) + shape.to_string() + ")");
  }
}

void detail::fill_range(void* data, Dtype t, int64_t count, double start, double step) {
  // The common types in loops the compiler vectorizes (argmax fills a range
  // per call for a long axis). Both ends fit t (check_range_fits), so every
  // value between does, and a cast truncates as store_value does.
  auto fill = [&](auto* d) {
    using T = std::remove_pointer_t<decltype(d)>;
    for (int64_t i = 0; i < count; ++i) d[i] = static_cast<T>(start + static_cast<double>(i) * step);
  };
  switch (t) {
    case Dtype::F32: fill(static_cast<float*>(data)); return;
    case Dtype::I32: fill(static_cast<int32_t*>(data)); return;
    case Dtype::I64: fill(static_cast<int64_t*>(data)); return;
    default: break;
  }
  for (int64_t i = 0; i < count; ++i) store_value("arange", t, data, i, start + static_cast<double>(i) * step);
}

// ---------------------------------------------------------------------------
// Creation
// ---------------------------------------------------------------------------
Tensor::Tensor(float value) : Tensor(make_const(Shape{}, value)) { node()->float_scalar = true; }

Tensor Tensor::bool_scalar(bool value) {
  const uint8_t byte = value ? 1 : 0;
  Tensor t = copy_of(&byte, 1, Shape{}, Dtype::Bool, "bool scalar");
  t.node()->int_scalar = true;
  return t;
}

Tensor Tensor::integer_scalar(int64_t value, bool too_large) {
  if (too_large)
    throw Error("integer scalar: an unsigned value above 9223372036854775807 does not fit int64 (expected a value "
                "int64 can hold)");
  Tensor t = copy_of(&value, 1, Shape{}, Dtype::I64, "integer scalar");
  t.node()->int_scalar = true;
  return t;
}

Tensor Tensor::from_blob(const float* data, Shape shape) {
  check_shape("from_blob", shape);
  if (!data && shape.numel() > 0) throw Error("from_blob: null data for shape " + shape.to_string());
  Tensor t = detail::handle_of_new(detail::new_node(NodeKind::Leaf, OpKind::None, Dtype::F32, shape));  // frees it if allocation fails
  Node* n = t.node();
  n->storage = detail::Storage::wrap(data, shape.numel());
  detail::contiguous_strides(shape, n->strides);
  return t;
}

Tensor Tensor::from_blob(const void* data, Shape shape, Dtype dtype) {
  check_shape("from_blob", shape);
  detail::check_dtype("from_blob", dtype);
  if (!data && shape.numel() > 0) throw Error("from_blob: null data for shape " + shape.to_string());
  Tensor t = detail::handle_of_new(detail::new_node(NodeKind::Leaf, OpKind::None, dtype, shape));  // frees it if allocation fails
  Node* n = t.node();
  n->storage = detail::Storage::wrap(data, shape.numel(), dtype);
  detail::contiguous_strides(shape, n->strides);
  return t;
}

Tensor Tensor::copy_of(const void* values, int64_t count, Shape shape, Dtype dtype, const char* op) {
  check_shape(op, shape);
  detail::check_dtype(op, dtype);
  if (count != shape.numel())
    throw Error(std::string(op) + ": " + std::to_string(count) + " values for shape " + shape.to_string() +
                " (expected " + std::to_string(shape.numel()) + ")");
  Tensor t = detail::new_leaf(shape, op, dtype);
  if (count > 0) std::memcpy(t.node()->storage->data, values, static_cast<size_t>(count) * dtype_size(dtype));
  if (dtype == Dtype::Bool) detail::canonical_bools(static_cast<uint8_t*>(t.node()->storage->data), count);
  return t;
}

Tensor Tensor::from_copy(const void* data, Shape shape, Dtype dtype) {
  check_shape("from_copy", shape);
  if (!data && shape.numel() > 0) throw Error("from_copy: null data for shape " + shape.to_string());
  return copy_of(data, shape.numel(), shape, dtype, "from_copy");
}

Tensor Tensor::from_vector(const std::vector<float>& values, Shape shape) {
  check_shape("from_vector", shape);
  if (static_cast<int64_t>(values.size()) != shape.numel())
    throw Error("from_vector: " + std::to_string(values.size()) + " values for shape " +
                shape.to_string() + " (expected " + std::to_string(shape.numel()) + ")");
  Tensor t = detail::new_leaf(shape, "from_vector");
  if (!values.empty())
    std::memcpy(t.node()->storage->data, values.data(), values.size() * sizeof(float));
  return t;
}

Tensor Tensor::from_vector(const std::vector<float>& values) {
  return from_vector(values, Shape{static_cast<int64_t>(values.size())});
}

Tensor Tensor::full(Shape shape, float value) {
  check_shape("full", shape);
  return Tensor(make_const(shape, value));
}

namespace {
// A finite value beyond a floating type's largest is refused, as torch's
// checked conversion of a scalar refuses it (an infinity passes).
void check_float_fits(const char* op, Dtype dtype, double value) {
  if (!is_floating(dtype) || !std::isfinite(value)) return;
  const double most = dtype == Dtype::F16 ? 65504.0 : dtype == Dtype::BF16 ? 3.3895313892515355e38 : FLT_MAX;
  if (std::fabs(value) > most) {
    char text[192];
    std::snprintf(text, sizeof text, "%s: value %.9g does not fit %s (expected -%.9g to %.9g, or an infinity)", op,
                  value, dtype_name(dtype), most, most);
    throw Error(text);
  }
}
}  // namespace

void detail::check_range_fits(Dtype t, double start, double step, int64_t count) {
  if (count <= 0) return;
  // The values run from start to the last one: both ends fit, or neither does.
  int64_t scratch = 0;
  for (const double v : {start, start + static_cast<double>(count - 1) * step}) {
    check_float_fits("arange", t, v);
    store_value("arange", t, &scratch, 0, v);
  }
}

Tensor Tensor::full(Shape shape, double value, Dtype dtype) {
  detail::check_dtype("full", dtype);
  check_float_fits("full", dtype, value);
  if (dtype == Dtype::F32) return full(shape, static_cast<float>(value));
  Tensor t = detail::new_leaf(shape, "full", dtype);
  void* d = t.node()->storage->data;
  if (shape.numel() > 0) store_value("full", dtype, d, 0, value);
  for (int64_t i = 1; i < shape.numel(); ++i)
    std::memcpy(static_cast<char*>(d) + i * dtype_size(dtype), d, dtype_size(dtype));
  return t;
}

Tensor Tensor::full_integer(Shape shape, int64_t value, bool too_large, Dtype dtype) {
  detail::check_dtype("full", dtype);
  if (too_large)
    throw Error("full: an unsigned value above 9223372036854775807 does not fit int64 (expected a value int64 can hold)");
  if (is_floating(dtype) || dtype == Dtype::Bool) return full(std::move(shape), static_cast<double>(value), dtype);
  // (A float value outside 0 to 255 stays an error for uint8.)
  int64_t lo = 0, hi = 0;
  integer_range(dtype, &lo, &hi);
  if (value < lo || value > hi)
    throw Error("full: value " + std::to_string(value) + " does not fit " + dtype_name(dtype) + " (expected " +
                std::to_string(lo) + " to " + std::to_string(hi) + ")");
  Tensor t = detail::new_leaf(shape, "full", dtype);
  char* d = static_cast<char*>(t.node()->storage->data);
  const int32_t v32 = static_cast<int32_t>(value);
  const uint8_t v8 = static_cast<uint8_t>(value);
  const void* one = dtype == Dtype::I64 ? static_cast<const void*>(&value) : dtype == Dtype::I32 ? static_cast<const void*>(&v32) : &v8;
  for (int64_t i = 0; i < shape.numel(); ++i) std::memcpy(d + i * dtype_size(dtype), one, dtype_size(dtype));
  return t;
}

namespace {
// A double as an error shows it: every digit it needs (1e-30 is not 0.000000).
std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}
}  // namespace

Tensor Tensor::arange(double start, double end, double step, Dtype dtype) {
  detail::check_dtype("arange", dtype);
  if (dtype == Dtype::Bool)  // torch has no bool range either
    throw Error("arange: bool is not a range type (expected a numeric dtype, as torch)");
  if (step == 0.0 || !std::isfinite(step) || !std::isfinite(start) || !std::isfinite(end))
    throw Error("arange: start, end and step must be finite and step non-zero (got " + number(start) + ", " +
                number(end) + ", " + number(step) + ")");
  if ((step > 0 && end < start) || (step < 0 && end > start))  // torch refuses it too
    throw Error("arange: from " + number(start) + " to " + number(end) + " by " + number(step) +
                ": the step's sign does not lead from start to end (expected end >= start for a positive step, "
                "end <= start for a negative one)");
  const double n = std::ceil((end - start) / step);
  if (!(n <= static_cast<double>(kMaxElements)))
    throw Error("arange: " + number(start) + " to " + number(end) + " by " + number(step) +
                " has too many elements (expected at most " + std::to_string(kMaxElements) + ")");
  const int64_t count = n > 0 ? static_cast<int64_t>(n) : 0;
  if (detail::CaptureHooks* g = detail::capture(); g && g->symbolic(count)) [[unlikely]] {
    // A graph's run fills it at the bound length: pending, like an input.
    // Its last value depends on the binding (each run checks it); the
    // capture's number for the length is no value of the user's.
    detail::check_range_fits(dtype, start, step, 1);
    Node* leaf = detail::new_node(NodeKind::Leaf, OpKind::None, dtype, Shape{count});
    detail::contiguous_strides(leaf->shape, leaf->strides);
    Tensor t = detail::record(leaf);
    g->range(leaf, start, step);
    return t;
  }
  detail::check_range_fits(dtype, start, step, count);
  Tensor t = detail::new_leaf(Shape{count}, "arange", dtype);
  detail::fill_range(t.node()->storage->data, dtype, count, start, step);
  return t;
}

Tensor Tensor::arange(float start, float end, float step) {
  return arange(static_cast<double>(start), static_cast<double>(end), static_cast<double>(step), Dtype::F32);
}

Tensor Tensor::uniform(Shape shape, uint64_t seed, float lo, float hi) {
  if (!(lo <= hi)) throw Error("uniform: expected lo <= hi, got " + std::to_string(lo) + " > " + std::to_string(hi));
  if (!std::isfinite(lo) || !std::isfinite(hi))  // (torch refuses them too: the draws would be NaN or infinite)
    throw Error("uniform: expected finite bounds, got lo = " + std::to_string(lo) + ", hi = " + std::to_string(hi));
  Tensor t = detail::new_leaf(shape, "uniform");
  uint64_t state = seed;
  float* d = t.node()->storage->f32();
  for (int64_t i = 0; i < shape.numel(); ++i) {
    double u = static_cast<double>(splitmix64(state) >> 40) * 0x1.0p-24;  // [0, 1)
    d[i] = static_cast<float>(lo + (static_cast<double>(hi) - lo) * u);
  }
  return t;
}

Tensor Tensor::normal(Shape shape, uint64_t seed, float mean, float stddev) {
  if (!(stddev >= 0.0f)) throw Error("normal: expected stddev >= 0, got " + std::to_string(stddev));
  Tensor t = detail::new_leaf(shape, "normal");
  uint64_t state = seed;
  float* d = t.node()->storage->f32();
  const double two_pi = 6.283185307179586;
  for (int64_t i = 0; i < shape.numel(); i += 2) {
    double u1 = (static_cast<double>(splitmix64(state) >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    double u2 = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
    double r = std::sqrt(-2.0 * std::log(u1));
    d[i] = static_cast<float>(mean + stddev * r * std::cos(two_pi * u2));
    if (i + 1 < shape.numel()) d[i + 1] = static_cast<float>(mean + stddev * r * std::sin(two_pi * u2));
  }
  return t;
}

// ---------------------------------------------------------------------------
// Properties and observers
// ---------------------------------------------------------------------------
// Shape and dtype never change after recording: readable on any thread.
const Shape& Tensor::shape() const {
  if (!node_) detail::undefined_operand("shape");
  return node_->shape;
}
Dtype Tensor::dtype() const {
  if (!node_) detail::undefined_operand("dtype");
  return node_->dtype;
}
int64_t Tensor::size(int axis) const {
  const Shape& s = shape();
  return s[detail::normalize_axis("size", axis, s.rank(), s)];
}

void Tensor::sync() const { detail::materialize(need(*this, "sync")); }

void detail::copy_values(const Node* n, void* out) {
  const int64_t count = n->shape.numel();
  if (!n->storage) {
    std::fill(static_cast<float*>(out), static_cast<float*>(out) + count, n->value);
    return;
  }
  const size_t es = n->storage->elem_size;
  const int rank = n->shape.rank();
  int64_t idx[kMaxRank] = {};
  const char* base = static_cast<const char*>(n->storage->at(n->offset));
  char* o = static_cast<char*>(out);
  if (n->is_contiguous()) {  // the common case: one copy
    if (count > 0) std::memcpy(o, base, static_cast<size_t>(count) * es);
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    int64_t off = 0;
    for (int k = 0; k < rank; ++k) off += idx[k] * n->strides[k];
    std::memcpy(o + static_cast<size_t>(i) * es, base + off * static_cast<int64_t>(es), es);
    for (int k = rank - 1; k >= 0; --k) {
      if (++idx[k] < n->shape[k]) break;
      idx[k] = 0;
    }
  }
}

namespace {

// n's values as float32: gathered in n's type, then converted as loads do.
void gather_f32(const Node* n, float* out) {
  if (n->dtype == Dtype::F32 || !n->storage) {
    detail::copy_values(n, out);
    return;
  }
  std::vector<unsigned char> raw(static_cast<size_t>(n->shape.numel()) * dtype_size(n->dtype));
  detail::copy_values(n, raw.data());
  for (int64_t i = 0; i < n->shape.numel(); ++i) out[i] = elem_as_float(n->dtype, raw.data(), i);
}

[[noreturn]] void wrong_type(const char* op, const Node* n, Dtype expected) {
  throw Error(std::string(op) + ": tensor " + describe(n) + " read as " + dtype_name(expected) +
              " (expected the tensor's own type; .to(dvm::Dtype) converts, to_vector() gives float32)");
}
}  // namespace

std::vector<float> Tensor::to_vector() const {
  Node* n = need(*this, "to_vector");
  detail::materialize(n);
  std::vector<float> out;
  try {
    out.resize(static_cast<size_t>(n->shape.numel()));
  } catch (const std::exception&) {  // std::bad_alloc, or std::length_error past a vector's max_size()
    throw Error("out of memory: to_vector of " + describe(n));
  }
  gather_f32(n, out.data());
  return out;
}

size_t Tensor::host_elements(Dtype expected, const char* op) const {
  const Node* n = need(*this, op);
  if (n->dtype != expected) wrong_type(op, n, expected);
  return static_cast<size_t>(n->shape.numel());
}

void Tensor::out_of_host_memory(const char* op) const {
  throw Error("out of memory: " + std::string(op) + " of " + describe(need(*this, op)));
}

void Tensor::copy_to(void* out, Dtype expected, const char* op) const {
  Node* n = need(*this, op);
  if (n->dtype != expected) wrong_type(op, n, expected);
  detail::materialize(n);
  detail::copy_values(n, out);
}

namespace {
bool zeros_and_ones(const void* bytes, int64_t count) {
  const auto* b = static_cast<const uint8_t*>(bytes);
  uint8_t above = 0;
  for (int64_t i = 0; i < count; ++i) above |= static_cast<uint8_t>(b[i] & 0xfe);
  return above == 0;
}
}  // namespace

const void* Tensor::typed_data(Dtype expected) const {
  Node* n = need(*this, "data");
  if (n->dtype != expected) wrong_type("data", n, expected);
  detail::materialize(n);
  if (n->storage && n->is_contiguous()) {
    const void* p = n->storage->at(n->offset);
    // A user's bool buffer may hold any byte (nonzero is true), and a bool
    // other than 0 or 1 is undefined behaviour to read: such a buffer is
    // handed out through a copy of 0s and 1s (dvm's own buffers hold no other).
    if (n->dtype != Dtype::Bool || n->storage->owned || zeros_and_ones(p, n->shape.numel())) return p;
  }
  // A constant, a strided view or a user's bool buffer of other bytes: a
  // contiguous copy kept beside the node
  // (never a write to the node's layout or to this handle, which other
  // threads may be reading). The first copy stored wins; it lives as long
  // as the node.
  if (const detail::Storage* d = n->dense.load(std::memory_order_acquire)) return d->data;
  detail::Storage* copy = nullptr;
  if (n->storage && n->dtype == Dtype::F32) {
    Tensor c = contiguous();  // a kernel makes the copy
    detail::materialize(c.node());
    Node* cn = c.node();
    if (cn->storage && cn->offset == 0 && cn->is_contiguous()) {
      copy = cn->storage;
      copy->retain();
    }
  }
  if (!copy) {  // other types are copied as bytes: no conversion on the way
    copy = detail::Storage::allocate(n->shape.numel(), n->dtype);
    detail::copy_values(n, copy->data);
    if (n->dtype == Dtype::Bool) detail::canonical_bools(static_cast<uint8_t*>(copy->data), n->shape.numel());
  }
  detail::Storage* expected_copy = nullptr;
  if (!n->dense.compare_exchange_strong(expected_copy, copy, std::memory_order_acq_rel, std::memory_order_acquire)) {
    copy->release();
    return expected_copy->data;
  }
  return copy->data;
}

const float* Tensor::data() const { return static_cast<const float*>(typed_data(Dtype::F32)); }

float Tensor::item() const {
  Node* n = need(*this, "item");
  if (n->shape.numel() != 1)
    throw Error("item: tensor of shape " + n->shape.to_string() + " has " +
                std::to_string(n->shape.numel()) + " elements (expected exactly 1)");
  detail::materialize(n);
  return n->storage ? elem_as_float(n->dtype, n->storage->data, n->offset) : n->value;
}

// ---------------------------------------------------------------------------
// Views
// ---------------------------------------------------------------------------
Tensor Tensor::reshape(Shape shape) const {
  Node* x = need(*this, "reshape");
  Shape to = detail::infer_reshape("reshape", x->shape, shape);
  int64_t st[kMaxRank], ts[kMaxRank], off;
  layout_of(x, st, &off);
  if (detail::reshape_strides(x->shape, st, to, ts)) return make_view(x, to, ts, off);
  Tensor c = contiguous();
  // A contiguous layout always reshapes; never retry on the same node.
  if (c.node() == x)
    throw Error("internal: reshape of " + describe(x) + " to " + to.to_string() + " found no strides");
  return c.reshape(to);
}

Tensor Tensor::permute(const std::vector<int>& axes) const {
  Node* x = need(*this, "permute");
  const int rank = x->shape.rank();
  if (static_cast<int>(axes.size()) != rank)
    throw Error("permute: " + std::to_string(axes.size()) + " axes for shape " + x->shape.to_string() +
                " (expected " + std::to_string(rank) + ")");
  bool seen[kMaxRank] = {};
  Shape s;
  int64_t st[kMaxRank], ps[kMaxRank], off;
  layout_of(x, st, &off);
  uint32_t code = uint32_t{1} << 31;  // Node::permute_code
  bool identity = true;
  for (int i = 0; i < rank; ++i) {
    int a = detail::normalize_axis("permute", axes[static_cast<size_t>(i)], rank, x->shape);
    if (seen[a]) throw Error("permute: axis " + std::to_string(a) + " repeats for shape " + x->shape.to_string());
    seen[a] = true;
    s.push_back(x->shape[a]);
    ps[i] = st[a];
    code |= static_cast<uint32_t>(a) << (3 * i);
    identity = identity && a == i;
  }
  Tensor v = make_view(x, s, ps, off);
  if (!identity && x->kind != NodeKind::View && v.node()->kind == NodeKind::View) v.node()->permute_code = code;
  return v;
}

Tensor Tensor::permute(std::initializer_list<int> axes) const { return permute(std::vector<int>(axes)); }

Tensor Tensor::transpose(int a, int b) const {
  Node* x = need(*this, "transpose");
  const int rank = x->shape.rank();
  a = detail::normalize_axis("transpose", a, rank, x->shape, true);
  b = detail::normalize_axis("transpose", b, rank, x->shape, true);
  if (rank == 0) return *this;  // torch: a 0-d tensor transposes axis 0 (or -1) with itself
  std::vector<int> axes(static_cast<size_t>(rank));
  for (int i = 0; i < rank; ++i) axes[static_cast<size_t>(i)] = i;
  std::swap(axes[static_cast<size_t>(a)], axes[static_cast<size_t>(b)]);
  return permute(axes);
}

Tensor Tensor::slice(int axis, int64_t start, int64_t end, int64_t step) const {
  Node* x = need(*this, "slice");
  const int rank = x->shape.rank();
  axis = detail::normalize_axis("slice", axis, rank, x->shape);
  if (step <= 0)
    throw Error("slice: step must be positive, got " + std::to_string(step) + " slicing axis " +
                std::to_string(axis) + " of shape " + x->shape.to_string());
  const int64_t n = x->shape[axis];
  if (start < 0) start += n;
  if (end < 0) end += n;
  // A graph being captured keeps a symbolic start or length past a
  // constant extent (wpe.narrow(0, P, S) of a 1024-row wpe): each run
  // checks its bounds.
  detail::CaptureHooks* g = detail::capture();
  if (!(g && ((start > n && g->symbolic(start)) || (end > n && end > start && g->symbolic(end - start))))) [[likely]] {
    start = std::clamp<int64_t>(start, 0, n);
    end = std::clamp<int64_t>(end, start, n);
  }
  if (g && end > start && (g->symbolic(n) || g->symbolic(start) || g->symbolic(end - start))) [[unlikely]]
    g->slice_bounds(start, end - start, n, axis);
  int64_t st[kMaxRank], off;
  layout_of(x, st, &off);
  Shape s = x->shape;
  // ceil((end - start) / step) without forming end - start + step - 1,
  // which overflows for a step near INT64_MAX.
  const int64_t len = end - start;
  s[axis] = len == 0 ? 0 : (len - 1) / step + 1;
  if (s[axis] > 0) off += start * st[axis];
  // With one element or none the step never applies, and st * step could
  // overflow; with more, step < n keeps st * step within the buffer.
  if (s[axis] > 1) st[axis] *= step;
  // The same for a start made from the extent (narrow(0, -16, 16): S - 16).
  // A start near a symbol's number is no product of symbols either
  // (symbolic(), with no text as one), and compile() sees only the offset
  // it makes, times the stride, which may look like a constant.
  if (g && s[axis] > 0 && start > 0 && g->symbolic(n) && g->extent_text(start).empty() &&
      g->derived_length(start, n)) [[unlikely]]
    throw Error(std::string(g->what()) + ": slice of axis " + std::to_string(axis) + " of " + describe(x) +
                " starts at " + std::to_string(start) + ", an offset that looks computed from " + g->extent_text(n) +
                " (such as " + g->extent_text(n) + " - 16, which a negative start makes); a graph's offsets are "
                "products of symbols and constants");
  // (A length near a symbol's number is left to compile(), which names the sum.)
  if (g && s[axis] > 0 && g->symbolic(n) && !g->symbolic(s[axis]) && g->derived_length(s[axis], n)) [[unlikely]]
    throw Error(std::string(g->what()) + ": slice of axis " + std::to_string(axis) + " of " + describe(x) +
                " keeps " + std::to_string(s[axis]) + " of its " + g->extent_text(n) +
                " elements, a length that looks computed from " + g->extent_text(n) +
                " (a difference such as " + g->extent_text(n) + " - 20, or a division such as chunk(), split() "
                "or a step of 2 make); a graph's extents are products of symbols and constants");
  return make_view(x, s, st, off);
}

Tensor Tensor::expand(Shape shape) const {
  Node* x = need(*this, "expand");
  const int rank = shape.rank(), lead = rank - x->shape.rank();
  if (lead < 0)
    throw Error("expand: cannot expand shape " + x->shape.to_string() + " to fewer dims " + shape.to_string());
  int64_t st[kMaxRank], es[kMaxRank], off;
  layout_of(x, st, &off);
  const Shape asked = shape;
  for (int k = 0; k < rank; ++k) {
    int j = k - lead;
    if (shape[k] < -1 || (j < 0 && shape[k] == -1))
      throw Error("expand: extent " + std::to_string(shape[k]) + " at axis " + std::to_string(k) + " of " +
                  asked.to_string() + " expanding " + x->shape.to_string() +
                  " (expected extents >= 0, or -1 to keep an existing axis)");
    if (j < 0) {
      es[k] = 0;
      continue;
    }
    if (shape[k] == -1) shape[k] = x->shape[j];
    if (x->shape[j] == shape[k]) es[k] = st[j];
    else if (x->shape[j] == 1) es[k] = 0;
    else
      throw Error("expand: shape " + x->shape.to_string() + " cannot expand to " + shape.to_string() +
                  " (axis " + std::to_string(k) + ": " + std::to_string(x->shape[j]) +
                  " must equal the target or be 1)");
  }
  if (!detail::extents_fit(shape))
    detail::check_extents("expand", shape, " (expanding " + x->shape.to_string() + ")");
  return make_view(x, shape, es, off);
}

Tensor Tensor::contiguous() const {
  Node* x = need(*this, "contiguous");
  if ((x->storage && x->is_contiguous()) || (x->pending && x->kind != NodeKind::View) ||
      (x->kind == NodeKind::Const && !x->storage))
    return *this;
  Node* n = detail::new_node(NodeKind::Copy, OpKind::None, x->dtype, x->shape);
  detail::set_input(n, 0, x);
  return record(n);
}

Tensor Tensor::to(Dtype dtype) const {
  Node* x = need(*this, "to");
  detail::check_dtype("to", dtype);
  if (x->dtype == dtype) return *this;
  // A Copy node of another type: its value is its input's, rounded to its
  // type when stored (the fuser stores every conversion, fuser/partition.cpp).
  Node* n = detail::new_node(NodeKind::Copy, OpKind::None, dtype, x->shape);
  detail::set_input(n, 0, x);
  return record(n);
}

// ---------------------------------------------------------------------------
// Reductions
// ---------------------------------------------------------------------------
Tensor Tensor::sum(std::initializer_list<int> axes, bool keepdim) const { return sum(std::vector<int>(axes), keepdim); }
Tensor Tensor::sum(const std::vector<int>& axes, bool keepdim) const {
  return reduce(OpKind::Sum, *this, axes, keepdim);
}
Tensor Tensor::sum() const { return reduce(OpKind::Sum, *this, {}, false); }
Tensor Tensor::max(std::initializer_list<int> axes, bool keepdim) const { return max(std::vector<int>(axes), keepdim); }
Tensor Tensor::max(const std::vector<int>& axes, bool keepdim) const {
  return reduce(OpKind::Max, *this, axes, keepdim);
}
Tensor Tensor::max() const { return reduce(OpKind::Max, *this, {}, false); }
Tensor Tensor::min(std::initializer_list<int> axes, bool keepdim) const { return min(std::vector<int>(axes), keepdim); }
Tensor Tensor::min(const std::vector<int>& axes, bool keepdim) const {
  return reduce(OpKind::Min, *this, axes, keepdim);
}
Tensor Tensor::min() const { return reduce(OpKind::Min, *this, {}, false); }
Tensor Tensor::mean(std::initializer_list<int> axes, bool keepdim) const { return mean(std::vector<int>(axes), keepdim); }
namespace {
// torch's mean needs a floating type (bool, which counts true as 1, is
// accepted: docs/DTYPES.md).
void check_mean_operand(const Tensor& x) {
  Node* in = need(x, "mean");
  if (is_integral(in->dtype))
    throw Error("mean: " + describe(in) +
                " is not floating; mean needs a floating type, as in torch (convert with .to() first)");
}
}  // namespace

Tensor Tensor::mean(const std::vector<int>& axes, bool keepdim) const {
  const detail::RecordTogether together;  // one flush for every op below
  check_mean_operand(*this);
  if (dtype() == Dtype::Bool) return to(Dtype::F32).mean(axes, keepdim);  // the fraction of trues
  const std::vector<int> norm = detail::normalize_axes("mean", axes, shape());
  // Over axes that are not adjacent (several reductions), a 16-bit mean is
  // taken in float32 and rounded once, as a single reduction's is (torch:
  // float32 sum, division, one rounding).
  if ((dtype() == Dtype::F16 || dtype() == Dtype::BF16) && !norm.empty() &&
      norm.back() - norm.front() + 1 != static_cast<int>(norm.size()))
    return detail::widened(*this).mean(axes, keepdim).to(dtype());
  // The count's buffer first: a memory limit it passes records nothing.
  const Tensor count = size_scalar(reduced_count(shape(), norm), "mean");
  Tensor s = reduce(OpKind::Sum, *this, axes, keepdim, "mean");
  Tensor m = s / count;
  return m.dtype() == s.dtype() ? m : m.to(s.dtype());  // a 0-d sum: as mean() above
}
Tensor Tensor::mean() const {
  const detail::RecordTogether together;  // one flush for every op below
  check_mean_operand(*this);
  if (dtype() == Dtype::Bool) return to(Dtype::F32).mean();
  const Tensor count = size_scalar(numel(), "mean");  // (first, as above)
  Tensor s = reduce(OpKind::Sum, *this, {}, false, "mean");
  // s is 0-d like the count, so the division would promote a 16-bit float
  // to float32; the mean keeps the operand's type (torch).
  Tensor m = s / count;
  return m.dtype() == s.dtype() ? m : m.to(s.dtype());
}

// ---------------------------------------------------------------------------
// Elementwise ops
// ---------------------------------------------------------------------------
Tensor neg(const Tensor& x) { return unary(OpKind::Neg, x); }
Tensor abs(const Tensor& x) { return unary(OpKind::Abs, x); }
Tensor exp(const Tensor& x) { return unary(OpKind::Exp, x); }
Tensor log(const Tensor& x) { return unary(OpKind::Log, x); }
Tensor sqrt(const Tensor& x) { return unary(OpKind::Sqrt, x); }
Tensor rsqrt(const Tensor& x) { return unary(OpKind::Rsqrt, x); }
Tensor reciprocal(const Tensor& x) { return unary(OpKind::Reciprocal, x); }
Tensor tanh(const Tensor& x) { return unary(OpKind::Tanh, x); }
Tensor sigmoid(const Tensor& x) { return unary(OpKind::Sigmoid, x); }
Tensor relu(const Tensor& x) { return unary(OpKind::Relu, x); }
Tensor gelu(const Tensor& x, GeluApprox approx) {
  if (approx != GeluApprox::None && approx != GeluApprox::Tanh)
    throw Error("gelu: approximation " + std::to_string(static_cast<int>(approx)) +
                " is none of GeluApprox::None (0, the erf form) and GeluApprox::Tanh (1)");
  return approx == GeluApprox::Tanh ? unary(OpKind::GeluTanh, x) : unary(OpKind::GeluErf, x);
}
Tensor erf(const Tensor& x) { return unary(OpKind::Erf, x); }
Tensor sin(const Tensor& x) { return unary(OpKind::Sin, x); }
Tensor cos(const Tensor& x) { return unary(OpKind::Cos, x); }
// Integers are their own floor, ceil and round (torch returns them as they are).
Tensor floor(const Tensor& x) { return is_integral(need(x, "floor")->dtype) ? x : unary(OpKind::Floor, x); }
Tensor ceil(const Tensor& x) { return is_integral(need(x, "ceil")->dtype) ? x : unary(OpKind::Ceil, x); }
Tensor round(const Tensor& x) { return is_integral(need(x, "round")->dtype) ? x : unary(OpKind::Round, x); }

Tensor add(const Tensor& a, const Tensor& b) { return binary(OpKind::Add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(OpKind::Sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(OpKind::Mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(OpKind::Div, a, b); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary(OpKind::Maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary(OpKind::Minimum, a, b); }
namespace {
// An integer or bool base to a C++ integer power, as torch's integer pow:
// the exponent's binary expansion of multiplies, which wrap as the type's
// mul does. A negative exponent is refused, as torch refuses it.
Tensor integer_pow(const Tensor& a, int64_t e) {
  Node* x = need(a, "pow");
  if (e < 0)
    throw Error("pow: " + describe_all(&x, 1) + " to the negative power " + std::to_string(e) +
                ": integers to negative integer powers are not allowed, as in torch; convert with"
                " .to(dvm::Dtype::F32) first");
  // A bool base with an integer exponent computes in int64 (torch's wrapped integer).
  const Tensor base = x->dtype == Dtype::Bool ? a.to(Dtype::I64) : a;
  if (e == 0) return base * 0 + 1;
  Tensor result, square = base;
  for (;;) {
    if (e & 1) result = result.defined() ? result * square : square;
    e >>= 1;
    if (e == 0) return result;
    square = square * square;
  }
}
}  // namespace

Tensor pow(const Tensor& a, const Tensor& b) {
  if (a.defined() && b.defined() && b.node()->int_scalar && !is_floating(a.node()->dtype) &&
      !is_inline_scalar(a)) [[unlikely]]
    return integer_pow(a, int_scalar_value(b.node()));
  // A C++ number (Tensor(2.0f), Tensor(2)) is the float overload's exponent
  // for a floating base (a 0-d constant too), as torch's Python number is; a
  // 0-d tensor (Tensor::scalar(2.0f)) is a tensor exponent, as
  // torch.tensor(2.0) is.
  if (a.defined() && b.defined() && (b.node()->float_scalar || b.node()->int_scalar) && is_floating(a.node()->dtype))
    return pow(a, b.node()->float_scalar ? b.node()->value : static_cast<float>(int_scalar_value(b.node())));
  return binary(OpKind::Pow, a, b);
}
Tensor pow(const Tensor& a, float b) {
  // torch's pow of a floating tensor to these scalars is another op, with
  // its exactness and its special values (pow(-inf, 0.5) is NaN, as
  // sqrt(-inf); pow(x, 2) is x * x, exact where x * x is).
  if (a.defined() && is_floating(a.node()->dtype)) {
    if (b == 2.0f) return a * a;
    if (b == 3.0f) return a * a * a;
    if (b == 0.5f) return sqrt(a);
    if (b == -0.5f) return rsqrt(a);
    if (b == -1.0f) return reciprocal(a);
    if (b == -2.0f) return reciprocal(a * a);
  }
  return binary_scalar(OpKind::Pow, a, b, 1);
}
Tensor eq(const Tensor& a, const Tensor& b) { return binary(OpKind::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary(OpKind::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary(OpKind::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary(OpKind::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary(OpKind::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary(OpKind::Ge, a, b); }

Tensor floor_divide(const Tensor& a, const Tensor& b) { return binary(OpKind::FloorDivide, a, b); }
Tensor remainder(const Tensor& a, const Tensor& b) { return binary(OpKind::Remainder, a, b); }
Tensor bitwise_and(const Tensor& a, const Tensor& b) { return binary(OpKind::BitwiseAnd, a, b); }
Tensor bitwise_or(const Tensor& a, const Tensor& b) { return binary(OpKind::BitwiseOr, a, b); }
Tensor bitwise_xor(const Tensor& a, const Tensor& b) { return binary(OpKind::BitwiseXor, a, b); }
Tensor bitwise_not(const Tensor& x) { return unary(OpKind::BitwiseNot, x); }

// The logical ops: x != 0 per operand (NaN is true, as in torch), then the
// bitwise op on the bool masks.
Tensor logical_not(const Tensor& x) {
  need(x, "logical_not");
  return eq(x, 0.0f);
}
namespace {
// A logical op's operands, checked under its own name before the masks
// are recorded.
void logical_operands(const Tensor& a, const Tensor& b, const char* op) {
  const Node* x = need(a, op);
  const Node* y = need(b, op);
  (void)detail::broadcast_shapes(op, x->shape, y->shape);
}
}  // namespace

Tensor logical_and(const Tensor& a, const Tensor& b) {
  logical_operands(a, b, "logical_and");
  return bitwise_and(ne(a, 0.0f), ne(b, 0.0f));
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  logical_operands(a, b, "logical_or");
  return bitwise_or(ne(a, 0.0f), ne(b, 0.0f));
}
Tensor logical_xor(const Tensor& a, const Tensor& b) {
  logical_operands(a, b, "logical_xor");
  return ne(ne(a, 0.0f), ne(b, 0.0f));
}

Tensor where(const Tensor& mask, const Tensor& a, const Tensor& b) {
  Node* m = need(mask, "where");
  if (m->dtype != Dtype::Bool)
    throw Error("where: mask " + describe(m) + " must be bool (a comparison result such as lt(x, y))");
  return elementwise(OpKind::Where, {&mask, &a, &b});
}

Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, float b) { return binary_scalar(OpKind::Add, a, b, 1); }
Tensor operator-(const Tensor& a, float b) { return binary_scalar(OpKind::Sub, a, b, 1); }
Tensor operator*(const Tensor& a, float b) { return binary_scalar(OpKind::Mul, a, b, 1); }
Tensor operator/(const Tensor& a, float b) { return binary_scalar(OpKind::Div, a, b, 1); }
Tensor operator+(float a, const Tensor& b) { return binary_scalar(OpKind::Add, b, a, 0); }
Tensor operator-(float a, const Tensor& b) { return binary_scalar(OpKind::Sub, b, a, 0); }
Tensor operator*(float a, const Tensor& b) { return binary_scalar(OpKind::Mul, b, a, 0); }
Tensor operator/(float a, const Tensor& b) { return binary_scalar(OpKind::Div, b, a, 0); }
Tensor operator~(const Tensor& x) { return bitwise_not(x); }
Tensor operator&(const Tensor& a, const Tensor& b) { return bitwise_and(a, b); }
Tensor operator|(const Tensor& a, const Tensor& b) { return bitwise_or(a, b); }
Tensor operator^(const Tensor& a, const Tensor& b) { return bitwise_xor(a, b); }

// ---------------------------------------------------------------------------
// Contractions: one MatMul node per product, [batch, M, K] x [batch, K, N]
// with at most one batch dim (broadcast when it is 1 or absent); matmul()
// brings every other case to that form with views, and the result back.
// ---------------------------------------------------------------------------
namespace {

bool is_constant(const Tensor& t) {
  const Node* n = t.node();
  return n->kind == NodeKind::Const && !n->storage;
}

Shape concat(const Shape& a, std::initializer_list<int64_t> tail) {
  Shape s = a;
  for (int64_t v : tail) s.push_back(v);
  return s;
}

Shape leading(const Shape& s, int drop) {
  Shape out;
  for (int i = 0; i + drop < s.rank(); ++i) out.push_back(s[i]);
  return out;
}

// The first of the batch dims from which B's extents are all 1 to the end,
// when A's batch dims before it equal B's: A's dims from there fold into M,
// so B is read once per remaining batch instead of copied once per folded
// one (grouped-query attention: q [b, h, g, 1, d] against a key cache
// [b, h, 1, d, s]). -1 when B has no such trailing dims. Decided by B's
// extents alone; every output element is the same sum in the same order
// either way, so the bits do not depend on it.
int fold_into_rows(const Shape& ba, const Shape& bb) {
  if (bb.rank() != ba.rank()) return -1;
  int j = bb.rank();
  while (j > 0 && bb[j - 1] == 1) --j;
  if (j == bb.rank()) return -1;
  for (int i = 0; i < j; ++i)
    if (ba[i] != bb[i]) return -1;
  return j;
}

Tensor contract(const Tensor& a, const Tensor& b, const Shape& out) {
  // The cube unit reads its operands from memory (a constant, which has no
  // buffer, becomes one first), widens 16-bit floats exactly as it reads
  // them, sums in f32 and rounds the product to its type once, at its store.
  const Tensor ca = is_constant(a) ? empty_copy(a) : a, cb = is_constant(b) ? empty_copy(b) : b;
  Node* ins[2] = {need(ca, "matmul"), need(cb, "matmul")};
  return record(detail::new_node(NodeKind::Contract, OpKind::MatMul, a.dtype(), out, ins, 2));
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  Node* x = need(a, "matmul");
  Node* y = need(b, "matmul");
  if (x->dtype != y->dtype || !is_floating(x->dtype))
    throw Error("matmul: operands " + describe(x) + " and " + describe(y) +
                " must have one floating type (float32, float16 or bfloat16), as torch.matmul requires");
  const int ra = x->shape.rank(), rb = y->shape.rank();
  if (ra == 0 || rb == 0)
    throw Error("matmul: both operands need at least one dimension, got " + describe(x) + " and " + describe(y));
  const int64_t K = x->shape[ra - 1], Kb = y->shape[rb == 1 ? 0 : rb - 2];
  if (K != Kb)
    throw Error("matmul: inner dimensions differ: " + describe(x) + " and " + describe(y) + " (expected a's last extent, " +
                std::to_string(K) + ", to equal b's " + (rb == 1 ? "only" : "second to last") + " extent, " +
                std::to_string(Kb) + ")");
  // A transpose times a vector is the vector times the transpose's input:
  // a row of B read by rows, not a column of A read a stride apart. The
  // products and their order (k ascending) are the same, so are the bits.
  if (std::vector<int> perm; ra == 2 && rb == 1 && permuted_view(x, &perm)) return matmul(b, a.transpose(0, 1));
  const Tensor A = ra == 1 ? a.reshape({1, K}) : a;
  const Tensor B = rb == 1 ? b.reshape({K, 1}) : b;
  const Shape& sa = A.shape();
  const Shape& sb = B.shape();
  const int64_t M = sa[sa.rank() - 2], N = sb[sb.rank() - 1];
  const Shape ba = leading(sa, 2), bb = leading(sb, 2);
  if (!detail::broadcastable(ba, bb))
    throw Error("matmul: the batch dimensions of " + describe(x) + " and " + describe(y) + " (" + ba.to_string() +
                " and " + bb.to_string() + ") do not broadcast (expected equal extents or 1)");
  const Shape batch = detail::broadcast_shapes("matmul", ba, bb);  // (names a result too large)
  const Shape out = concat(batch, {M, N});
  detail::check_extents("matmul", out);
  Tensor r;
  if (batch.rank() <= 1) {
    r = contract(A, B, out);
  } else if (const int j = fold_into_rows(ba, bb); j >= 0) {
    int64_t lead = 1, rows = M;
    for (int i = 0; i < ba.rank(); ++i) (i < j ? lead : rows) *= ba[i];
    if (j == 0) r = contract(A.reshape({rows, K}), B.reshape({K, N}), Shape{rows, N}).reshape(out);
    else r = contract(A.reshape({lead, rows, K}), B.reshape({lead, K, N}), Shape{lead, rows, N}).reshape(out);
  } else {
    // One batch dim: the batch dims collapse (a copy only where an operand
    // broadcasts over them or cannot be viewed so); an operand without any
    // batch dim stays 2-D and is read once per batch.
    const int64_t nb = batch.numel();
    const Tensor A3 = ba.rank() == 0 ? A : A.expand(concat(batch, {M, K})).reshape({nb, M, K});
    const Tensor B3 = bb.rank() == 0 ? B : B.expand(concat(batch, {K, N})).reshape({nb, K, N});
    r = contract(A3, B3, Shape{nb, M, N}).reshape(out);
  }
  if (ra == 1 && rb == 1) return r.reshape(Shape{});
  if (ra == 1) return r.reshape(concat(batch, {N}));
  if (rb == 1) return r.reshape(concat(batch, {M}));
  return r;
}

// Products take two operands of one floating type (as torch's); `op` is the
// call the user made, named in the error.
void check_one_floating_type(const char* op, const Node* x, const Node* y) {
  if (x->dtype != y->dtype || !is_floating(x->dtype))
    throw Error(std::string(op) + ": operands " + describe(x) + " and " + describe(y) +
                " must have one floating type (float32, float16 or bfloat16), as torch requires");
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  Node* x = need(a, "bmm");
  Node* y = need(b, "bmm");
  if (x->shape.rank() != 3 || y->shape.rank() != 3 || x->shape[0] != y->shape[0] || x->shape[2] != y->shape[1])
    throw Error("bmm: expected [B, M, K] and [B, K, N] with the same B and K, got " + describe(x) + " and " +
                describe(y));
  check_one_floating_type("bmm", x, y);
  return matmul(a, b);
}

namespace {
// An operand t broadcast along a kernel's rows (a bias, a weight), as that
// kernel's member reads it: t's own shape when t has values, else a view
// of t expanded to `shape`. The view makes t's producer store it and the
// consumer join the kernel that computes its other operand (a product's
// epilogue, layer_norm's row kernel), so a 16-bit result is still rounded
// once; a pending t of a smaller shape would have the consumer start a
// kernel of its own, and that operand stored (rounded) first.
Tensor rowwise_operand(const Tensor& t, const Shape& shape) {
  return t.node()->pending && !(t.shape() == shape) ? t.expand(shape) : t;
}
}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const detail::RecordTogether together;  // one flush for every op below
  Node* n = need(x, "linear");
  Node* w = need(weight, "linear");
  if (w->shape.rank() != 2 || n->shape.rank() == 0 || n->shape[n->shape.rank() - 1] != w->shape[1])
    throw Error("linear: expected input [..., in] and weight [out, in], got " + describe(n) + " and " + describe(w));
  if (bias.defined() && !(bias.shape() == Shape{w->shape[0]}))
    throw Error("linear: bias must have shape " + Shape{w->shape[0]}.to_string() + " (weight " + describe(w) +
                "), got " + describe(need(bias, "linear")));
  check_one_floating_type("linear", n, w);
  if (bias.defined() && bias.dtype() != n->dtype)  // torch's addmm refuses it too: no silent promotion
    throw Error("linear: bias " + describe(need(bias, "linear")) + " must have the input's type " +
                dtype_name(n->dtype) + " (convert it with .to())");
  Tensor y = matmul(x, weight.transpose(0, 1));
  return bias.defined() ? y + rowwise_operand(bias, y.shape()) : y;
}

Tensor addmm(const Tensor& input, const Tensor& a, const Tensor& b, float beta, float alpha) {
  const detail::RecordTogether together;  // one flush for every op below
  Node* x = need(a, "addmm");
  Node* y = need(b, "addmm");
  if (x->shape.rank() != 2 || y->shape.rank() != 2 || x->shape[1] != y->shape[0])
    throw Error("addmm: expected a [M, K] and b [K, N], got " + describe(x) + " and " + describe(y));
  check_one_floating_type("addmm", x, y);
  if (input.defined() && input.dtype() != x->dtype)  // as torch: no silent promotion of the product
    throw Error("addmm: input " + describe(need(input, "addmm")) + " must have the operands' type " +
                dtype_name(x->dtype) + " (convert it with .to())");
  Tensor p = matmul(a, b);
  // As torch (and BLAS): alpha 0 ignores the product, beta 0 the input,
  // their NaNs and infinities too. The product recorded above checked the
  // shapes; nothing reads it, so it is never computed.
  if (alpha == 0.0f) p = Tensor::full(p.shape(), 0.0, p.dtype());
  else if (alpha != 1.0f) p = p * alpha;
  if (beta == 0.0f) return p;
  Node* in = need(input, "addmm");
  try {
    (void)detail::broadcast_shapes("addmm", in->shape, p.shape());
  } catch (const Error&) {
    throw Error("addmm: input " + describe(in) + " does not broadcast to the product's shape " + p.shape().to_string());
  }
  if (!(detail::broadcast_shapes("addmm", in->shape, p.shape()) == p.shape()))
    throw Error("addmm: input " + describe(in) + " must broadcast to the product's shape " + p.shape().to_string());
  // beta * input of the product's shape: it joins the product's epilogue
  // (a [N] input's product with beta would be a kernel of its own).
  const Tensor in_full = input.shape() == p.shape() ? input : input.expand(p.shape());
  // Without the product the result is beta * input itself: adding a zero
  // product would turn an input's -0 into +0.
  if (alpha == 0.0f) return in_full * beta;
  return beta == 1.0f ? p + rowwise_operand(input, p.shape()) : p + in_full * beta;
}

// ---------------------------------------------------------------------------
// Compositions: built from the ops above; the fuser makes each one kernel.
// ---------------------------------------------------------------------------
namespace {
// softmax and log_softmax take floating types, as torch's (which has no
// integer kernels for them).
void need_floating_softmax(const Node* n, const char* op) {
  if (!is_floating(n->dtype))
    throw Error(std::string(op) + ": " + describe(n) +
                " is not of a floating type (expected float32, float16 or bfloat16, as torch; convert with .to() first)");
}

bool sixteen_bit_off_last_axis(const Node* n, int axis) {
  return (n->dtype == Dtype::F16 || n->dtype == Dtype::BF16) && axis != n->shape.rank() - 1;
}
}  // namespace

Tensor softmax(const Tensor& x, int axis) {
  const detail::RecordTogether together;  // one flush for every op below
  Node* n = need(x, "softmax");
  need_floating_softmax(n, "softmax");
  axis = detail::normalize_axis("softmax", axis, n->shape.rank(), n->shape, true);
  if (n->shape.rank() > 0 && n->shape[axis] == 0) return empty_copy(x);  // nothing to normalize
  // Along another axis than the last the steps are several kernels: a
  // 16-bit softmax is taken in float32 and rounded once, as a row's is.
  if (sixteen_bit_off_last_axis(n, axis)) return softmax(detail::widened(x), axis).to(n->dtype);
  Tensor e = exp(x - x.max({axis}, true));
  // One reciprocal per slice and a multiply per element, as PyTorch's CPU
  // softmax does: a divide per element cost a quarter of W3's time (vdivps
  // is 4x an fma on Zen 4) for half an ULP less error.
  return e * reciprocal(e.sum({axis}, true));
}

Tensor log_softmax(const Tensor& x, int axis) {
  const detail::RecordTogether together;  // one flush for every op below
  Node* n = need(x, "log_softmax");
  need_floating_softmax(n, "log_softmax");
  axis = detail::normalize_axis("log_softmax", axis, n->shape.rank(), n->shape, true);
  if (n->shape.rank() > 0 && n->shape[axis] == 0) return empty_copy(x);
  if (sixteen_bit_off_last_axis(n, axis)) return log_softmax(detail::widened(x), axis).to(n->dtype);
  Tensor shifted = x - x.max({axis}, true);
  return shifted - log(exp(shifted).sum({axis}, true));
}

Tensor layer_norm(const Tensor& x, Shape normalized_shape, const Tensor& weight, const Tensor& bias,
                  float eps) {
  const detail::RecordTogether together;  // one flush for every op below
  Node* n = need(x, "layer_norm");
  const int k = normalized_shape.rank(), rank = n->shape.rank();
  bool ok = k >= 1 && k <= rank;
  for (int i = 0; ok && i < k; ++i) ok = n->shape[rank - k + i] == normalized_shape[i];
  if (!ok)
    throw Error("layer_norm: normalized_shape " + normalized_shape.to_string() +
                " must be a non-empty suffix of the input shape " + n->shape.to_string());
  for (const Tensor* t : {&weight, &bias})
    if (t->defined() && !(t->shape() == normalized_shape))
      throw Error("layer_norm: weight and bias must have shape " + normalized_shape.to_string() +
                  ", got " + t->shape().to_string());
  // torch's types: a floating input; weight and bias of its type, or both
  // float32 with a 16-bit input (its mixed types); the result of its type.
  if (!is_floating(n->dtype))
    throw Error("layer_norm: input " + describe(n) +
                " is not of a floating type (expected float32, float16 or bfloat16, as torch; convert with .to() first)");
  const Dtype params = weight.defined() ? weight.dtype() : bias.defined() ? bias.dtype() : n->dtype;
  for (const Tensor* t : {&weight, &bias})
    if (t->defined() && (t->dtype() != params || (params != n->dtype && params != Dtype::F32)))
      throw Error("layer_norm: input " + describe(n) + " with " + (weight.defined() ? "weight " + describe(weight.node()) : "") +
                  (weight.defined() && bias.defined() ? " and " : "") + (bias.defined() ? "bias " + describe(bias.node()) : "") +
                  " (expected weight and bias of the input's type, or both float32 with a float16 or bfloat16 input, as torch)");
  std::vector<int> axes;
  for (int i = rank - k; i < rank; ++i) axes.push_back(i);
  const Tensor inv = size_scalar(normalized_shape.numel(), "layer_norm", true);
  // One run of trailing axes: a single reduction node each.
  auto rowsum = [&](const Tensor& t) { return reduce(OpKind::Sum, t, axes, true, "layer_norm"); };
  // A row whose largest and smallest values are equal takes that value as
  // its mean, exactly: the float32 sum's rounding error, which 1 / sqrt(eps)
  // turns into an output, made a constant row of 4567.89 normalize to -0.15
  // where torch's Welford mean gives 0. (The reductions of the first pass
  // are recorded together, so that a split long row's passes run on
  // machine code: vm/split_launch.cpp.)
  Tensor m = rowsum(x);
  if (normalized_shape.numel() > 0) {  // (max and min have no identity: an empty row's mean stays 0 / 0)
    const Tensor hi = reduce(OpKind::Max, x, axes, true, "layer_norm"), lo = reduce(OpKind::Min, x, axes, true, "layer_norm");
    // Compared as the kernel holds them: both are values of x, so a 16-bit
    // x needs none of a 16-bit comparison's rounding (which would store them).
    Node* both[2] = {hi.node(), lo.node()};
    const Tensor same = record(detail::new_node(NodeKind::Elementwise, OpKind::Eq, Dtype::Bool, hi.shape(), both, 2));
    m = where(same, hi, m * inv);
  } else {
    m = m * inv;
  }
  const Tensor dev = x - m;
  const Tensor var = rowsum(dev * dev) * inv;
  Tensor y = dev * rsqrt(var + eps);
  if (weight.defined()) y = y * rowwise_operand(weight, n->shape);
  if (bias.defined()) y = y + rowwise_operand(bias, n->shape);
  return y.dtype() == n->dtype ? y : y.to(n->dtype);  // float32 parameters of a 16-bit input
}

}  // namespace dvm
