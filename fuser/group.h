// Fused groups: what the partition pass produces and the later passes
// (lowering, binding, execution) consume.
#pragma once

#include <cstdint>
#include <vector>

#include "dvm/shape.h"
#include "tracer/node.h"
#include "vm/bytecode.h"

namespace dvm::fuser {

// Where a member's values live in its group's iteration space.
//   Full:    one value per element of the group's full shape F.
//   Reduced: one value per element of F with the reduced axes folded
//            (a reduction result, or an op on reduction results).
//   OperandA, OperandB: a Contraction's prologue: one value per element of
//            its product's operand a [batch, M, K] or b [batch, K, N].
enum class Domain : uint8_t { Full = 0, Reduced = 1, OperandA = 2, OperandB = 3 };

struct Group {
  vm::Form form = vm::Form::Elementwise;
  Shape full;             // F: the shape every Full member has
  int red_begin = 0;      // reduced axes of F are [red_begin, red_end)
  int red_end = 0;
  std::vector<detail::Node*> members;  // a topological order
  std::vector<int> deps;  // groups whose outputs this group reads
  // RowReduce: where the kept axes [0, red_begin) may split into P and R
  // (bit s: P = [0, s), R = [s, red_begin)) so that every per-row load of
  // the epilogue is linear in both parts (LDB has one stride per part).
  uint32_t row_splits = ~0u;
  // A conversion (a Copy node of another dtype) to a type other than
  // float32: its value must be rounded to its type, which only its store
  // does, so nothing else joins its group.
  bool sealed = false;
  // Its members are writes into one buffer (Node::target), each disjoint
  // from the ones before it (Node::disjoint_write), all of the group's
  // shape: cat's or stack's pieces, stored by one kernel.
  bool disjoint_writes = false;
  // A member computes or reads int64 values (its kernel then folds whole
  // rows: int64 lanes are never split), or sums floats (whose order a split
  // launch changes). Never both: a float sum's bits would then depend on
  // what it was fused with (an argmax of the same value in the same flush).
  bool int64_values = false;
  bool float_sum = false;
  bool alive = true;      // false once merged into another group...
  int merged_into = -1;   // ...this one
};

// Where partition put one node of the flush. Kept per node, indexed by
// Node::index (the node's position in the flushed list).
struct Placement {
  int32_t group = -1;             // fused group, -1 for none (views)
  Domain domain = Domain::Full;   // within the group
  bool output = false;            // stored by its group (observed or read elsewhere)
  // A view a product reads from its prologue in registers: its input is
  // not stored for it.
  bool in_registers = false;
};

struct Plan {
  std::vector<Group> groups;         // dead (merged) groups included
  std::vector<int> order;            // live groups, dependencies first
  std::vector<Placement> placement;  // per node of the flush
};

// True when s is F with the axes [a, b) removed or kept as size 1; when b
// is F's rank, also with some of the extent-1 axes kept that a row
// reduction extends [a, b) over (partition.cpp, place_reduce).
bool is_reduced_shape(const Shape& s, const Shape& full, int a, int b);

// Strides of x when broadcast (numpy rules) to shape s. A pending non-view
// node has no strides yet: it will be a fresh contiguous buffer. xs, when
// given, stands in for x's strides.
void broadcast_strides(const detail::Node* x, const Shape& s, int64_t* out, const int64_t* xs = nullptr);

// Strides of a node of shape xshape with strides xs when broadcast to s.
void broadcast_strides(const Shape& xshape, const int64_t* xs, const Shape& s, int64_t* out);

// Whether pending view v reads its input element for element along whole
// axes: no offset, and each axis of v longer than 1 either broadcasts
// (stride 0) or walks one distinct axis of the input's contiguous layout
// (a permute or transpose, axes of extent 1 added or dropped, an expand).
// axis[i]: the input's axis that v's axis i walks, or -1.
bool view_axes(const detail::Node* v, int8_t* axis);

// Strides over a Reduced-domain shape s (of a group with full shape `full`
// and reduced axes [a, b)), moved onto the full shape's axes (the folded
// axes get stride 0).
void to_full_space(const Shape& full, int a, int b, const Shape& s, const int64_t* in, int64_t* out);

// Split points s in [0, k] (bit s) at which strides over the axes [0, k) of
// `full` are linear over [0, s) and over [s, k) alike (size-1 axes ignored).
uint32_t linear_splits(const Shape& full, int k, const int64_t* strides);

}  // namespace dvm::fuser
