// The checks every op of the tensor API makes on its operands, shared by
// the files that define the ops (tensor.cpp, view_ops.cpp, compositions.cpp).
#pragma once

#include <string>

#include "dvm/tensor.h"
#include "tracer/node.h"
#include "tracer/trace.h"

namespace dvm::detail {

// The errors need() raises, out of the recording path.
[[noreturn, gnu::cold, gnu::noinline]] void undefined_operand(const char* op);
[[noreturn, gnu::cold, gnu::noinline]] void foreign_operand(const char* op, const Node* n);
[[noreturn, gnu::cold, gnu::noinline]] void failed_operand(const char* op, const Node* n);

// The node of an operand or an observed tensor: defined, not pending in
// another thread's trace (checked before anything reads the fields that
// thread's flush may be writing: only that thread can compute it), and not
// lost by a failed flush; else dvm::Error naming op.
inline Node* need(const Tensor& t, const char* op) {
  Node* n = t.node();
  if (!n) [[unlikely]] undefined_operand(op);
  // A node pending in this thread's trace has that trace as its owner, and
  // t_trace is set once the trace exists.
  const Trace* owner = n->owner.load(std::memory_order_acquire);
  if (owner != nullptr && owner != t_trace) [[unlikely]] foreign_operand(op, n);
  if (n->failed) [[unlikely]] failed_operand(op, n);
  return n;
}

// A dtype value that names a type (a cast int from the C API may not).
void check_dtype(const char* op, Dtype t);

// The handle of a node just made, which no other thread can see yet: its
// first reference is counted with a plain store.
inline Tensor handle_of_new(Node* n) {
  n->counts.store(Node::kUserRef, std::memory_order_relaxed);
  return Tensor(n, Tensor::Adopt{});
}

// Hands a new pending node to the trace and returns its handle.
inline Tensor record(Node* n) {
  // n is new and no other thread can see it yet: its first two references
  // (the handle's, the trace's) are counted with one plain store.
  n->counts.store(Node::kUserRef + Node::kRef, std::memory_order_relaxed);
  Tensor t(n, Tensor::Adopt{});  // the Tensor holds it before the trace may flush
  Trace* trace = t_trace;
  (trace ? *trace : Trace::for_record(n)).record(n);
  return t;
}

// x as float32 for a composition that computes in float32 (a 16-bit mean
// over several axes, softmax off the last axis, var, std): a pending 16-bit
// value a kernel keeps in float32 registers reaches it unrounded, as it
// would reach one fused kernel (a float32 multiply by one, which fuses);
// any other x is converted (to()).
Tensor widened(const Tensor& x);

// Whether whole numbers up to `count` (the indices along an axis of count
// elements, a count of as many trues) may fold in float32 lanes, which are
// exact up to kFloatExactCount (tracer/capture.h) and which machine code
// has registers for (int64 lanes it has not). A count made of a graph's
// symbols may: each run checks it (CaptureHooks::float_count), so a run
// and the lazy path at its sizes decide alike.
bool float_count_fits(int64_t count, int axis);

// The min (op Min) or sum (op Sum) of x, float32 whole numbers (indices,
// ones), over axes [begin, end): folded in float32 lanes and stored as
// int64, exact where float_count_fits.
Tensor float_count_reduce(OpKind op, const Tensor& x, int begin, int end, bool keepdim);

// torch's result_type of n operands (tensors, 0-d tensors, and the
// wrapped scalars of 2.0f and Tensor(int)), as the binary ops promote.
Dtype result_type(const Node* const* nodes, int n);

// Whether n is a wrapped scalar (2.0f, Tensor(int)), which takes the type
// of the op it is an operand of.
bool wrapped_scalar(const Node* n);

// "dtype[shape]" of n, as error messages name tensors.
std::string describe(const Node* n);

}  // namespace dvm::detail
