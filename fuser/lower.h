// Lowering pass: one fused group -> bytecode, the list of arguments it reads
// and writes, and how its iteration space [P, R, C] maps onto the group's
// shape. Access patterns (contiguous, broadcast, strided, gather) are chosen
// from the layouts of the tensors; the sizes themselves stay out of the
// bytecode and go into the launch (bind()), and so do the user's scalars
// (scalar parameters): only constants of an op's definition are immediates.
#pragma once

#include <cstdint>
#include <vector>

#include "fuser/group.h"
#include "vm/bytecode.h"
#include "vm/launch.h"

namespace dvm::fuser {

// The iteration space: dims (innermost last) split into the form's parts
// (P, R and C for the forms so far).
struct Space {
  int ndims = 0;
  int64_t size[kMaxRank] = {};
  int parts = 3;                       // the form's parts (vm/forms.h)
  int part_end[vm::kMaxParts] = {};    // part k holds dims [part_end[k-1], part_end[k])
  int64_t extent(int part) const;
};

struct ArgSpec {
  detail::Node* node = nullptr;  // the leaf read, or the member stored
  // Where it came from: the member (its Node::index) and which of its inputs
  // (-1: the member itself, an output). A plan-cache replay rebuilds arguments from it.
  int32_t origin_node = -1;
  int8_t origin_slot = -1;
  bool output = false;
  vm::Op access = vm::Op::LD;     // LD, LDB, LDS, LDG, ST or STB
  int64_t strides[kMaxRank] = {};  // per Space dim, in elements
  int64_t offset = 0;              // element offset of the node's first value
};

// Where a user scalar the kernel reads as a scalar parameter comes from: a
// member (its Node::index) and its input slot holding a Const node, or slot
// -1 for the member's inline scalar (Node::value). A plan-cache replay reads
// this flush's values through it.
struct ScalarOrigin {
  int32_t node;
  int8_t slot;
};

// How a plan-cache hit rebuilds a lowered group without lowering it: the
// choices lower() made (which axes merge, where the parts split, each
// argument's access pattern) follow from the plan's signature alone, so a
// replay keeps them and reads this flush's extents and strides through them.
struct ReplayArg {
  int32_t node = -1;  // origin: a member (its Node::index)...
  int8_t slot = -1;   // ...and its input read (a leaf), or -1: its output
  vm::Op access = vm::Op::LD;
  // Per Space dim: which stride of the source (the leaf's, or the output's
  // fresh contiguous layout) it takes, or -1 for stride 0.
  int8_t src[kMaxRank] = {};
};
struct ReplayPlan {
  int ndims = 0, parts = 3;
  int part_end[vm::kMaxParts] = {};
  uint32_t axes[kMaxRank] = {};  // per Space dim: the full shape's axes whose extents multiply into its size (bit rank: K)
  int32_t k_node = -1;           // Contraction: the product, whose input 0's last extent is K
  int32_t product_b = -1;        // Contraction: the argument the cube reads as B in place, or -1
  std::vector<ReplayArg> args;
};

struct Lowered {
  vm::Bytecode bytecode;
  Space space;
  std::vector<ArgSpec> args;
  // Per scalar parameter of the kernel (PARAM s reads scalars[s]): this
  // flush's value, bound with the launch, and (from lower(), not from a
  // replay, which already has them) its origin.
  std::vector<float> scalars;
  std::vector<ScalarOrigin> scalar_origins;
  ReplayPlan replay;  // from lower() only
  // Contraction: the argument the cube reads as its operand B in place (no
  // prologue computes B), or -1. bind() may point it at a row-major copy.
  int32_t product_b = -1;
};

// The group's members must be computable now: every leaf they read is
// materialized (pending views whose input ran earlier are resolved here).
// placement: the partition's, per node of the flush.
Lowered lower(const Group& g, const std::vector<Placement>& placement);
// The same, or false when the group's kernel would be over one of the
// encoder's limits (arguments, live registers, instructions): the group must
// be split (split_group in fuser/partition.h).
bool try_lower(const Group& g, const std::vector<Placement>& placement, Lowered* out);

// A plan-cache replay: the space and arguments of a group whose kernel is
// known, for this flush's nodes and sizes (rp from its first lowering), and
// its scalar values, into *out (its bytecode untouched; its lists keep their
// capacity).
void replay(const Group& g, const ReplayPlan& rp, const std::vector<ScalarOrigin>& scalars,
            const std::vector<detail::Node*>& nodes, Lowered* out);

// The launch for a lowered group once every output node has its buffer,
// into an existing launch (reusing its argument storage).
void bind(const Lowered& low, vm::Launch* out);

// Points a product's operand B (argument `arg` of launch l, read from
// `storage` at `offset`), when stored by columns, at its row-major copy
// (tracer/row_copies.h) where the cube's small products gain by it: the same
// elements, so the same sums. bind() calls it; so does a graph's program,
// with `one_row`: products of one row read a copy too.
void read_b_by_rows(detail::Storage* storage, int64_t offset, Dtype dtype, vm::Op access, int arg,
                    vm::Launch& l, bool one_row = false);

// Gives a pending View whose input is now materialized its buffer.
void resolve_view(detail::Node* v);

}  // namespace dvm::fuser
