// Lowering pass: iteration space, access patterns, and bytecode of a group.
#include "fuser/lower.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <string>

#include "dvm/error.h"
#include "fuser/executor.h"
#include "fuser/op_map.h"
#include "tracer/row_copies.h"
#include "vm/encoder.h"
#include "vm/forms.h"
#include "vm/launcher.h"
#include "vm/parallel.h"

namespace dvm::fuser {
using detail::Node;
using detail::NodeKind;

int64_t Space::extent(int part) const {
  int64_t e = 1;
  for (int d = part ? part_end[part - 1] : 0; d < part_end[part]; ++d) e *= size[d];
  return e;
}

void resolve_view(Node* v) {
  if (v->storage) return;
  Node* base = v->in[0];
  if (!base->storage) throw Error("internal: view resolved before its input was computed");
  // Pending views hold strides relative to their input's contiguous layout;
  // the input is a fresh group output, so that layout is its buffer.
  base->storage->retain();
  v->storage = base->storage;
  v->offset += base->offset;
  v->drop_inputs();
}

namespace {

// Integer lanes (docs/DTYPES.md): int32 and uint8 values computed by
// elementwise ops live in registers as int32 bit patterns and compute with
// the I* opcodes, int64 values as int64s with the L* opcodes, wrapping as
// torch's integers do (uint8 after every op); every other value is f32. A
// value read in other lanes is converted: an integer to f32 to nearest even
// (what a load of it gives, so `i32 + f32` is torch's), int32 to int64
// exactly, int64 to int32 to its low 32 bits (torch's cast), f32 to int32
// toward zero (bool masks, uint8 reductions: exact).
enum class Lanes : uint8_t { F32, I32, I64 };
Lanes lanes_of(Dtype t) {
  if (t == Dtype::I64) return Lanes::I64;
  return t == Dtype::I32 || t == Dtype::U8 ? Lanes::I32 : Lanes::F32;
}

// Whether member n is a reduction of integers: sums of int32, uint8 and
// int64 values give int64 (torch's type), max and min of int32 and int64
// their own type; they fold in int64 lanes. So does a sum of bool (a count
// in int64: float32 lanes would lose ones past 2^24). An int64 reduction
// of float32 values (argmax's indices, and counts of bool up to 2^24 made
// sums of ones: detail::float_count_reduce) folds in float32 lanes and
// converts at its store.
bool int_reduction(const Node* n) {
  if (n->kind != NodeKind::Reduce || lanes_of(n->dtype) == Lanes::F32) return false;
  return lanes_of(n->in[0]->dtype) != Lanes::F32 || n->in[0]->dtype == Dtype::Bool;
}

// The lanes member n's value lives in: an integer copied from an integer
// stays in integer lanes (a float copied to an integer converts at its
// store).
Lanes value_lanes(const Node* n) {
  if (n->kind == NodeKind::Elementwise || int_reduction(n)) return lanes_of(n->dtype);
  if (n->kind == NodeKind::Copy && lanes_of(n->in[0]->dtype) != Lanes::F32) return lanes_of(n->dtype);
  return Lanes::F32;
}

bool is_comparison(detail::OpKind op) {
  using detail::OpKind;
  return op == OpKind::Eq || op == OpKind::Ne || op == OpKind::Lt || op == OpKind::Le || op == OpKind::Gt ||
         op == OpKind::Ge;
}

// The lanes a comparison compares in: torch compares integers (and bool
// with them) as integers, in the widest operand's lanes; with a float
// operand or a scalar, or bools alone, in f32.
Lanes comparison_lanes(const Node* n) {
  if (n->kind != NodeKind::Elementwise || !is_comparison(n->op) || n->scalar_pos >= 0) return Lanes::F32;
  Lanes l = Lanes::F32;
  for (int i = 0; i < n->nin; ++i) {
    const Dtype t = n->in[i]->dtype;
    if (t != Dtype::Bool && lanes_of(t) == Lanes::F32) return Lanes::F32;
    l = std::max(l, lanes_of(t));
  }
  return l;
}

// The lanes member n reads its input `slot` in.
Lanes reads_lanes(const Node* n, int slot) {
  if (n->kind == NodeKind::Copy) return value_lanes(n) == Lanes::F32 ? Lanes::F32 : lanes_of(n->in[0]->dtype);
  if (int_reduction(n)) return Lanes::I64;
  if (n->kind != NodeKind::Elementwise) return Lanes::F32;
  if (n->op == detail::OpKind::Where && slot == 0) return Lanes::F32;  // the mask: 0.0f / 1.0f
  const Lanes v = lanes_of(n->dtype);
  return v != Lanes::F32 ? v : comparison_lanes(n);
}

// The integer-lane opcode of an elementwise op on int32 (or, wide, int64)
// lanes.
vm::Op int_opcode(detail::OpKind op, bool wide) {
  using detail::OpKind;
  using vm::Op;
  auto pick = [wide](Op i32, Op i64) { return wide ? i64 : i32; };
  switch (op) {
    case OpKind::Neg: return pick(Op::INEG, Op::LNEG);
    case OpKind::Abs: return pick(Op::IABS, Op::LABS);
    case OpKind::Relu: return pick(Op::IMAX, Op::LMAX);  // with 0
    case OpKind::Add: return pick(Op::IADD, Op::LADD);
    case OpKind::Sub: return pick(Op::ISUB, Op::LSUB);
    case OpKind::Mul: return pick(Op::IMUL, Op::LMUL);
    case OpKind::Maximum: return pick(Op::IMAX, Op::LMAX);
    case OpKind::Minimum: return pick(Op::IMIN, Op::LMIN);
    case OpKind::Eq: return pick(Op::IEQ, Op::LEQ);
    case OpKind::Ne: return pick(Op::INE, Op::LNE);
    case OpKind::Lt: return pick(Op::ILT, Op::LLT);
    case OpKind::Le: return pick(Op::ILE, Op::LLE);
    case OpKind::Gt: return pick(Op::IGT, Op::LGT);
    case OpKind::Ge: return pick(Op::IGE, Op::LGE);
    case OpKind::Where: return pick(Op::SELECT, Op::LSELECT);  // moves bits
    case OpKind::FloorDivide: return pick(Op::IFLOORDIV, Op::LFLOORDIV);
    case OpKind::Remainder: return pick(Op::IREM, Op::LREM);
    case OpKind::BitwiseAnd: return pick(Op::IAND, Op::LAND);
    case OpKind::BitwiseOr: return pick(Op::IOR, Op::LOR);
    case OpKind::BitwiseXor: return pick(Op::IXOR, Op::LXOR);
    case OpKind::BitwiseNot: return pick(Op::INOT, Op::LNOT);
    default:
      throw Error(std::string("internal: op '") + detail::op_name(op) + "' has no integer-lane opcode");
  }
}

// Bool results of arithmetic and bitwise ops live in f32 lanes as 0.0f /
// 1.0f, as comparisons give them; these ops keep them so: add is logical or
// (max), mul and and logical and (min), xor not-equal, not `x == 0`. The
// other ops have no bool result (tracer/tensor.cpp).
bool bool_op(const Node* n) {
  using detail::OpKind;
  if (n->kind != NodeKind::Elementwise || n->dtype != Dtype::Bool) return false;
  switch (n->op) {
    case OpKind::Add: case OpKind::Mul: case OpKind::BitwiseAnd: case OpKind::BitwiseOr:
    case OpKind::BitwiseXor: case OpKind::BitwiseNot:
      return true;
    default:
      return false;
  }
}
vm::Op bool_opcode(detail::OpKind op) {
  using detail::OpKind;
  switch (op) {
    case OpKind::Add: case OpKind::BitwiseOr: return vm::Op::MAX;
    case OpKind::Mul: case OpKind::BitwiseAnd: return vm::Op::MIN;
    case OpKind::BitwiseXor: return vm::Op::NE;
    default: return vm::Op::EQ;  // not: with 0
  }
}

struct Builder {
  const Group& g;
  const std::vector<Placement>& placement;  // per node of the flush
  Lowered& out;
  // Working lists, kept per thread so that their capacity stays from group
  // to group (a flush lowers its groups one at a time, never nested).
  struct Scratch {
    // Strides of every argument over the axes of g.full, before collapsing.
    std::vector<std::array<int64_t, kMaxRank>> full_strides, strides;
    std::vector<uint8_t> arg_domain;  // Domain of the readers (loads) or member (stores)
    std::vector<uint8_t> arg_ints;  // per argument: it moves integer lanes
    std::vector<Lanes> val_lanes;   // per encoder value: its lanes
    std::vector<std::array<int32_t, 3>> converted;  // per encoder value: it in each lanes, once made
    std::vector<int> leaf_arg;        // per (member, input): arg index or -1
    std::vector<int> arg_index, out_arg;
    std::vector<vm::Encoder::Value> loaded, scalar_of;
    std::vector<std::pair<uint32_t, vm::Encoder::Value>> consts;
    std::vector<size_t> first_slot, order;
    std::vector<std::pair<int, vm::Encoder::Value>> block_stores;
  };
  // Per Space dim: the axes of g.full it covers (bit k; bit rank is a
  // product's K), set by make_space.
  uint32_t axes[kMaxRank] = {};
  const Node* product = nullptr;  // a Contraction group's product
  Scratch& scratch;
  std::vector<std::array<int64_t, kMaxRank>>& full_strides;
  std::vector<uint8_t>& arg_domain;
  std::vector<int>& leaf_arg;

  static Scratch& thread_scratch() {
    thread_local Scratch s;
    s.full_strides.clear();
    s.arg_domain.clear();
    s.leaf_arg.clear();
    return s;
  }
  Builder(const Group& grp, const std::vector<Placement>& pl, Lowered& o)
      : g(grp),
        placement(pl),
        out(o),
        scratch(thread_scratch()),
        full_strides(scratch.full_strides),
        arg_domain(scratch.arg_domain),
        leaf_arg(scratch.leaf_arg) {
    if (g.form == vm::Form::Contraction)
      for (const Node* m : g.members)
        if (m->kind == NodeKind::Contract) product = m;
  }

  const Placement& at(const Node* n) const { return placement[static_cast<size_t>(n->index)]; }

  // Is x computed by n's group (a value in a register, not an argument)?
  bool same_group(const Node* x, const Node* n) const {
    return x->pending && static_cast<size_t>(x->index) < placement.size() && at(x).group == at(n).group;
  }

  // The shape an input of n is broadcast to, and where that shape lives.
  bool reads_full(const Node* n) const {
    return n->kind == NodeKind::Reduce || at(n).domain == Domain::Full;
  }

  // Dims of the iteration space before collapsing: F's, and K after them
  // for a Contraction.
  int space_rank() const { return g.full.rank() + (g.form == vm::Form::Contraction ? 1 : 0); }

  int find_or_add_leaf(Node* leaf, const int64_t* fs, Domain d) {
    const int rank = space_rank();
    for (size_t a = 0; a < out.args.size(); ++a) {
      const ArgSpec& s = out.args[a];
      if (!s.output && s.node == leaf && arg_domain[a] == static_cast<uint8_t>(d) &&
          std::equal(fs, fs + rank, full_strides[a].begin()))
        return static_cast<int>(a);
    }
    ArgSpec s;
    s.node = leaf;
    s.offset = leaf->offset;
    out.args.push_back(s);
    std::array<int64_t, kMaxRank> f{};
    std::copy(fs, fs + rank, f.begin());
    full_strides.push_back(f);
    arg_domain.push_back(static_cast<uint8_t>(d));
    return static_cast<int>(out.args.size()) - 1;
  }

  // Pass 1: every argument with its strides over the full shape.
  void collect() {
    size_t most = 0;  // arguments at most: one per input, one per member
    for (const Node* n : g.members) most += n->nin + 1u;
    out.args.reserve(most);
    for (Node* n : g.members) {
      for (int i = 0; i < n->nin; ++i) {
        Node* x = n->in[i];
        int arg = -1;
        // The prologue's value, in registers, or a write's order-only input.
        if ((n == product && prologue_view(i)) || i >= n->data_inputs()) {
          leaf_arg.push_back(arg);
          continue;
        }
        if (x->kind == NodeKind::View && !x->storage && x->pending) resolve_view(x);
        if (!same_group(x, n) && x->kind != NodeKind::Const) {
          // Zeros past the full shape: an epilogue's read does not move
          // along a product's K (and the search compares K too).
          int64_t fs[kMaxRank] = {};
          const Domain d = leaf_strides(n, i, fs);
          arg = find_or_add_leaf(x, fs, d);
          ArgSpec& a = out.args[static_cast<size_t>(arg)];
          if (a.origin_node < 0) {
            a.origin_node = n->index;
            a.origin_slot = static_cast<int8_t>(i);
          }
        }
        leaf_arg.push_back(arg);
      }
      if (at(n).output) add_output(n);
    }
  }

  // Strides over the full shape of the leaf member n reads through input
  // `slot`, and the domain it is read in.
  // xs, when given, stands in for the leaf's strides.
  Domain leaf_strides(const Node* n, int slot, int64_t* fs, const int64_t* xs = nullptr) const {
    const Node* x = n->in[slot];
    if (!x->storage) throw Error("internal: group reads an input that was not computed");
    if (n->kind == NodeKind::Contract) {
      operand_strides(x->shape, xs ? xs : x->strides, slot, product_k(), fs);
      return Domain::Full;
    }
    const Domain d = at(n).domain;
    if (d == Domain::OperandA || d == Domain::OperandB) {  // a prologue reads x over its operand
      const int operand = d == Domain::OperandA ? 0 : 1;
      if (const Node* v = prologue_view(operand)) {
        // Through the view: x's strides over the view's input, each taken
        // to the view's axis that walks that input axis.
        int64_t over_input[kMaxRank], over_view[kMaxRank];
        int8_t axis[kMaxRank];
        broadcast_strides(x, v->in[0]->shape, over_input, xs);
        if (!view_axes(v, axis)) throw Error("internal: a prologue read through a view that does not walk whole axes");
        for (int k = 0; k < v->shape.rank(); ++k) over_view[k] = axis[k] < 0 ? 0 : over_input[axis[k]];
        operand_strides(v->shape, over_view, operand, product_k(), fs);
      } else {
        operand_strides(x->shape, xs ? xs : x->strides, operand, product_k(), fs);
      }
      return d;
    }
    const bool full = reads_full(n);
    const Shape& s = full ? g.full : n->shape;
    int64_t bs[kMaxRank];
    broadcast_strides(x, s, bs, xs);
    if (full) std::copy(bs, bs + g.full.rank(), fs);
    else to_full_space(g.full, g.red_begin, g.red_end, s, bs, fs);
    return full ? Domain::Full : Domain::Reduced;
  }

  // The extent of the group's product's K.
  int64_t product_k() const {
    if (!product) throw Error("internal: a Contraction group without its product");
    return product->in[0]->shape[product->in[0]->shape.rank() - 1];
  }

  // The view through which the group's product reads operand `slot` from
  // the prologue in this group (Placement::in_registers), or null.
  const Node* prologue_view(int slot) const {
    const Node* v = product->in[slot];
    return v->kind == NodeKind::View && v->pending && at(v).in_registers ? v : nullptr;
  }

  // Strides over [F..., K] of a value of shape xshape and strides xs read
  // as (or broadcast to) a product's operand: a [batch, M, K] (slot 0) or
  // b [batch, K, N] (slot 1), the batch dim broadcast to F's.
  void operand_strides(const Shape& xshape, const int64_t* xs, int slot, int64_t K, int64_t* fs) const {
    const int r = g.full.rank();
    Shape s;
    for (int i = 0; i < r - 2; ++i) s.push_back(g.full[i]);
    s.push_back(slot == 0 ? g.full[r - 2] : K);
    s.push_back(slot == 0 ? K : g.full[r - 1]);
    int64_t bs[kMaxRank];
    broadcast_strides(xshape, xs, s, bs);
    std::copy(bs, bs + r - 2, fs);
    fs[r - 2] = slot == 0 ? bs[r - 2] : 0;  // M
    fs[r - 1] = slot == 0 ? 0 : bs[r - 1];  // N
    fs[r] = slot == 0 ? bs[r - 1] : bs[r - 2];  // K
  }

  void add_output(Node* n) {
    ArgSpec s;
    s.node = n;
    s.output = true;
    s.origin_node = n->index;
    int64_t cs[kMaxRank], fs[kMaxRank];
    if (n->target) {  // a slice of its buffer (set when recorded)
      std::copy(n->strides, n->strides + n->shape.rank(), cs);
      s.offset = n->offset;
    } else {
      detail::contiguous_strides(n->shape, cs);
    }
    out.args.push_back(s);
    const Domain d = output_strides(n, cs, fs);
    std::array<int64_t, kMaxRank> f{};
    std::copy(fs, fs + g.full.rank(), f.begin());
    full_strides.push_back(f);
    arg_domain.push_back(static_cast<uint8_t>(d));
  }

  // Strides over the full shape of member n's output, whose buffer has the
  // strides cs (a size-1 axis moves nothing), and the domain it is in.
  Domain output_strides(const Node* n, const int64_t* cs, int64_t* fs) const {
    int64_t own[kMaxRank];
    for (int k = 0; k < n->shape.rank(); ++k) own[k] = n->shape[k] == 1 ? 0 : cs[k];
    const Domain d = at(n).domain;
    if (d == Domain::Full) std::copy(own, own + g.full.rank(), fs);
    else to_full_space(g.full, g.red_begin, g.red_end, n->shape, own, fs);
    return d;
  }

  // Pass 2: the iteration space. Reductions split the full shape at their
  // axes; elementwise groups first merge adjacent axes every argument walks
  // linearly, so most kernels run over one long C.
  void make_space() {
    Space& sp = out.space;
    sp.parts = vm::form_row(g.form).parts;  // three for every form so far: [P, R, C]
    const Shape& f = g.full;
    const int rank = f.rank();
    std::vector<std::array<int64_t, kMaxRank>>& strides = scratch.strides;
    strides.assign(out.args.size(), {});
    if (g.form == vm::Form::Contraction) {
      // [P = batch, R = M, C = N, K]: F is [M, N] or [batch, M, N].
      for (int k = 0; k < rank; ++k) sp.size[k] = f[k];
      sp.size[rank] = product_k();
      sp.ndims = rank + 1;
      for (int k = 0; k <= rank; ++k) axes[k] = 1u << k;
      sp.part_end[0] = rank - 2;
      sp.part_end[1] = rank - 1;
      sp.part_end[2] = rank;
      sp.part_end[3] = rank + 1;
      for (size_t a = 0; a < out.args.size(); ++a) strides[a] = full_strides[a];
    } else if (g.form != vm::Form::Elementwise) {
      for (int k = 0; k < rank; ++k) sp.size[k] = f[k];
      sp.ndims = rank;
      for (int k = 0; k < rank; ++k) axes[k] = 1u << k;
      const bool row = g.form == vm::Form::RowReduce;
      sp.part_end[0] = row ? row_split() : g.red_begin;
      sp.part_end[1] = row ? g.red_begin : g.red_end;
      sp.part_end[2] = rank;
      for (size_t a = 0; a < out.args.size(); ++a) strides[a] = full_strides[a];
    } else {
      int nd = 0;
      for (int k = 0; k < rank; ++k) {
        if (f[k] == 1) continue;
        bool merge = nd > 0;
        for (size_t a = 0; a < out.args.size() && merge; ++a)
          merge = strides[a][static_cast<size_t>(nd - 1)] == full_strides[a][static_cast<size_t>(k)] * f[k];
        if (merge) {
          sp.size[nd - 1] *= f[k];
          axes[nd - 1] |= 1u << k;
          for (size_t a = 0; a < out.args.size(); ++a)
            strides[a][static_cast<size_t>(nd - 1)] = full_strides[a][static_cast<size_t>(k)];
        } else {
          sp.size[nd] = f[k];
          axes[nd] = 1u << k;
          for (size_t a = 0; a < out.args.size(); ++a)
            strides[a][static_cast<size_t>(nd)] = full_strides[a][static_cast<size_t>(k)];
          ++nd;
        }
      }
      // A write whose innermost dim is strided in its buffer (a slice one
      // element wide along the buffer's inner axis: stack along a new last
      // axis) keeps that dim as C and stores it with STS (classify).
      sp.ndims = nd;
      // C = last dim, R = the one before, P = the rest; but every store
      // needs one stride per part, so where a write's slice is not linear
      // over those P dims (they cross its buffer's joined axis), R takes
      // more dims.
      sp.part_end[2] = nd;
      sp.part_end[1] = std::max(nd - 1, 0);
      sp.part_end[0] = std::max(nd - 2, 0);
      if (nd > 2) {
        Shape pr;  // the P and R dims
        for (int d = 0; d < nd - 1; ++d) pr.push_back(sp.size[d]);
        uint32_t splits = (1u << (nd - 1)) - 1;  // splits at [0, nd - 2]
        for (size_t a = 0; a < out.args.size(); ++a)
          if (out.args[a].output) splits &= linear_splits(pr, nd - 1, strides[a].data());
        if (splits) sp.part_end[0] = 31 - std::countl_zero(splits);
      }
    }
    for (size_t a = 0; a < out.args.size(); ++a) {
      std::copy(strides[a].begin(), strides[a].begin() + sp.ndims, out.args[a].strides);
      out.args[a].access = classify(out.args[a], a);
    }
  }

  // RowReduce: where the kept axes split into P and R. Per-row values (the
  // epilogue's loads, and stores of reductions) are read and written with
  // one stride per part, so the split must keep each of them linear; among
  // such splits, the one that lets the most other loads avoid a gather.
  int row_split() const {
    const int k = g.red_begin;
    uint32_t need = (2u << k) - 1;
    int linear[kMaxRank + 1] = {};  // per split: loads it keeps linear
    for (size_t a = 0; a < out.args.size(); ++a) {
      const uint32_t m = linear_splits(g.full, k, full_strides[a].data());
      if (out.args[a].output || arg_domain[a] == static_cast<uint8_t>(Domain::Reduced)) need &= m;
      for (int s = 0; s <= k; ++s) linear[s] += (m >> s) & 1u;
    }
    if (need == 0) throw Error("internal: no split of a row reduction keeps its per-row values linear");
    int best = -1;
    for (int s = 0; s <= k; ++s)
      if ((need >> s) & 1u && (best < 0 || linear[s] > linear[best])) best = s;
    return best;
  }

  // Linear stride of arg over one part, or false when its index is not linear.
  bool part_stride(const ArgSpec& s, int part, int64_t* stride) const {
    const Space& sp = out.space;
    const int b = part ? sp.part_end[part - 1] : 0, e = sp.part_end[part];
    int64_t t = 0, span = 1;
    bool first = true;
    for (int d = e - 1; d >= b; --d) {
      if (sp.size[d] == 1) continue;
      if (first) {
        t = s.strides[d];
        first = false;
      } else if (s.strides[d] != t * span) {
        return false;
      }
      span *= sp.size[d];
    }
    *stride = t;
    return true;
  }

  vm::Op classify(const ArgSpec& s, size_t a) const {
    int64_t st[vm::kMaxParts] = {};
    bool linear = true;
    for (int part = 0; part < out.space.parts; ++part) linear &= part_stride(s, part, &st[part]);
    const bool c_trivial = out.space.extent(2) <= 1;
    if (s.output) {
      if (!linear) throw Error("internal: output layout is not linear");
      if (arg_domain[a] == static_cast<uint8_t>(Domain::Reduced) && g.form == vm::Form::RowReduce)
        return vm::Op::STB;
      return st[2] == 1 || c_trivial ? vm::Op::ST : vm::Op::STS;
    }
    // A prologue's loads walk its operand's axes (strides over [P, R, K] or
    // [P, K, C], one dim each).
    if (arg_domain[a] == static_cast<uint8_t>(Domain::OperandA)) return vm::Op::LDOA;
    if (arg_domain[a] == static_cast<uint8_t>(Domain::OperandB)) return vm::Op::LDOB;
    if (!linear) return vm::Op::LDG;
    if (st[2] == 0) return vm::Op::LDB;
    if (st[2] == 1 || c_trivial) return vm::Op::LD;
    return vm::Op::LDS;
  }

  // The plan-cache replay of this group (ReplayPlan): the space's shape
  // and, per argument, which of its source's strides each Space dim takes.
  // Every stride above is selected from the source's strides or is 0, never
  // computed, so lowering the strides 1, 2, 3, ... names them.
  void make_replay() {
    ReplayPlan& rp = out.replay;
    const Space& sp = out.space;
    rp.ndims = sp.ndims;
    rp.parts = sp.parts;
    std::copy(sp.part_end, sp.part_end + vm::kMaxParts, rp.part_end);
    std::copy(axes, axes + kMaxRank, rp.axes);
    rp.k_node = product ? product->index : -1;
    rp.product_b = out.product_b;
    int64_t names[kMaxRank];
    for (int j = 0; j < kMaxRank; ++j) names[j] = j + 1;
    rp.args.resize(out.args.size());
    for (size_t a = 0; a < out.args.size(); ++a) {
      const ArgSpec& s = out.args[a];
      ReplayArg& ra = rp.args[a];
      ra.node = s.origin_node;
      ra.slot = s.origin_slot;
      ra.access = s.access;
      const Node* n = g.members.front();
      for (const Node* m : g.members)
        if (m->index == s.origin_node) n = m;
      int64_t fs[kMaxRank + 1] = {};
      if (s.output) output_strides(n, names, fs);
      else leaf_strides(n, s.origin_slot, fs, names);
      for (int d = 0; d < sp.ndims; ++d) {
        if (axes[d] == 0) {  // a dim of extent 1 of no axis
          ra.src[d] = -1;
          continue;
        }
        const int k = 31 - std::countl_zero(axes[d]);  // a merged dim's stride is its innermost axis's
        ra.src[d] = static_cast<int8_t>(fs[k] - 1);
      }
    }
  }

  // Pass 3: bytecode. ColReduce puts the prologue first, then the
  // reductions, then the epilogue.
  bool encode() {
    vm::Encoder enc(g.form);
    std::vector<int>& arg_index = scratch.arg_index;
    std::vector<vm::Encoder::Value>& loaded = scratch.loaded;
    arg_index.assign(out.args.size(), -1);
    loaded.assign(out.args.size(), -1);
    // Arguments that move integer lanes: outputs of integer-lane values,
    // inputs some member reads in integer lanes (int64 ones for an int64
    // argument, int32 ones for the others: no member reads an int64 in
    // int32 lanes).
    std::vector<uint8_t>& arg_ints = scratch.arg_ints;
    arg_ints.assign(out.args.size(), 0);
    {
      size_t s = 0;
      for (const Node* n : g.members)
        for (int i = 0; i < n->nin; ++i, ++s)
          if (leaf_arg[s] >= 0 && reads_lanes(n, i) != Lanes::F32) arg_ints[static_cast<size_t>(leaf_arg[s])] = 1;
      for (size_t a = 0; a < out.args.size(); ++a)
        if (out.args[a].output && value_lanes(out.args[a].node) != Lanes::F32) arg_ints[a] = 1;
    }
    for (size_t a = 0; a < out.args.size(); ++a)
      arg_index[a] = enc.add_arg(out.args[a].output ? vm::ArgRole::Output : vm::ArgRole::Input,
                               out.args[a].node->dtype, arg_ints[a] != 0);
    auto arg_lanes = [&](size_t a) {
      if (!arg_ints[a]) return Lanes::F32;
      return out.args[a].node->dtype == Dtype::I64 ? Lanes::I64 : Lanes::I32;
    };
    // Per encoder value: its lanes, and its conversions to the others once
    // made (or -1).
    std::vector<Lanes>& val_lanes = scratch.val_lanes;
    std::vector<std::array<int32_t, 3>>& converted = scratch.converted;
    val_lanes.clear();
    converted.clear();
    // Values an op makes without marking them are f32: the lists grow to
    // any value on first use.
    auto grow = [&](vm::Encoder::Value v) {
      if (val_lanes.size() <= static_cast<size_t>(v)) {
        val_lanes.resize(static_cast<size_t>(v) + 1, Lanes::F32);
        converted.resize(static_cast<size_t>(v) + 1, {-1, -1, -1});
      }
    };
    auto mark = [&](vm::Encoder::Value v, Lanes lanes) {
      if (v < 0) return v;
      grow(v);
      val_lanes[static_cast<size_t>(v)] = lanes;
      return v;
    };
    auto lanes = [&](vm::Encoder::Value v) {
      return v >= 0 && static_cast<size_t>(v) < val_lanes.size() ? val_lanes[static_cast<size_t>(v)] : Lanes::F32;
    };
    // v in the given lanes. f32 reaches int64 lanes through int32 ones (the
    // f32 values integer ops read are bools, 0.0f or 1.0f).
    auto as = [&](vm::Encoder::Value v, Lanes want) -> vm::Encoder::Value {
      if (v < 0) return v;
      const Lanes have = lanes(v);
      if (have == want) return v;
      grow(v);
      if (const vm::Encoder::Value made = converted[static_cast<size_t>(v)][static_cast<size_t>(want)]; made >= 0)
        return made;
      vm::Encoder::Value r;
      if (want == Lanes::I64) {
        const vm::Encoder::Value i32 = have == Lanes::I32 ? v : mark(enc.unary(vm::Op::FTOI, v), Lanes::I32);
        r = enc.unary(vm::Op::ITOL, i32);
      } else if (have == Lanes::I64) {
        r = enc.unary(want == Lanes::I32 ? vm::Op::LTOI : vm::Op::LTOF, v);
      } else {
        r = enc.unary(want == Lanes::I32 ? vm::Op::FTOI : vm::Op::ITOF, v);
      }
      mark(r, want);
      converted[static_cast<size_t>(v)][static_cast<size_t>(want)] = r;
      converted[static_cast<size_t>(r)][static_cast<size_t>(have)] = v;
      return r;
    };

    std::vector<std::pair<uint32_t, vm::Encoder::Value>>& consts = scratch.consts;
    consts.clear();
    auto constant = [&](float v) {
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      for (auto& [b, val] : consts)
        if (b == bits) return val;
      vm::Encoder::Value val = enc.constant(v);
      consts.emplace_back(bits, val);
      return val;
    };

    // A user's scalar is a scalar parameter per use, never merged by value:
    // the bytecode must not depend on which values happen to be equal.
    auto user_scalar = [&](const Node* n, int slot, float v) {
      out.scalar_origins.push_back({n->index, static_cast<int8_t>(slot)});
      out.scalars.push_back(v);
      return enc.param();
    };

    // Member index -> its first leaf_arg slot and its output argument.
    std::vector<size_t>& first_slot = scratch.first_slot;
    std::vector<int>& out_arg = scratch.out_arg;
    first_slot.assign(g.members.size(), 0);
    out_arg.assign(g.members.size(), -1);
    size_t slot = 0;
    for (size_t m = 0; m < g.members.size(); ++m) {
      first_slot[m] = slot;
      slot += g.members[m]->nin;
      if (!at(g.members[m]).output) continue;
      for (size_t a = 0; a < out.args.size(); ++a)
        if (out.args[a].output && out.args[a].node == g.members[m]) out_arg[m] = static_cast<int>(a);
    }

    std::vector<vm::Encoder::Value>& scalar_of = scratch.scalar_of;  // per (member, input): its parameter
    scalar_of.assign(slot, -1);
    std::vector<size_t>& order = scratch.order;
    order.resize(g.members.size());
    for (size_t m = 0; m < order.size(); ++m) order[m] = m;
    const bool col = g.form == vm::Form::ColReduce;
    auto phase = [&](size_t m) {
      const Node* n = g.members[m];
      if (n->kind == NodeKind::Reduce) return 1;
      return at(n).domain == Domain::Full ? 0 : 2;
    };
    if (col)
      std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return phase(x) < phase(y); });

    // Each member's value, by Node::index (kept per thread: its capacity
    // stays from group to group; only this group's members are read).
    thread_local std::vector<vm::Encoder::Value> values;
    if (values.size() < placement.size()) values.resize(placement.size());
    // Operand i of member m, in the representation m reads it in.
    auto operand = [&](size_t m, int i) -> vm::Encoder::Value {
      const Node* x = g.members[m]->in[i];
      const Lanes want = reads_lanes(g.members[m], i);
      int arg = leaf_arg[first_slot[m] + static_cast<size_t>(i)];
      if (arg >= 0) {
        if (loaded[static_cast<size_t>(arg)] < 0)
          loaded[static_cast<size_t>(arg)] =
              mark(enc.load(out.args[static_cast<size_t>(arg)].access, arg_index[static_cast<size_t>(arg)]),
                   arg_lanes(static_cast<size_t>(arg)));
        return as(loaded[static_cast<size_t>(arg)], want);
      }
      if (x->kind == NodeKind::Const) {
        if (x->immediate) return constant(x->value);
        // One parameter per use, even when the operand is asked for twice
        // (the ColReduce block's operands are gathered before it).
        vm::Encoder::Value& p = scalar_of[first_slot[m] + static_cast<size_t>(i)];
        if (p < 0) p = user_scalar(g.members[m], i, x->value);
        return p;
      }
      return as(values[static_cast<size_t>(x->index)], want);
    };
    // ColReduce keeps its reductions in one block: the loads and constants
    // they read come before the first, their stores after the last.
    bool in_block = false;
    std::vector<std::pair<int, vm::Encoder::Value>>& block_stores = scratch.block_stores;
    block_stores.clear();
    auto end_block = [&] {
      for (auto [a, v] : block_stores)
        enc.store(out.args[static_cast<size_t>(a)].access, arg_index[static_cast<size_t>(a)],
                  as(v, arg_lanes(static_cast<size_t>(a))));
      block_stores.clear();
      in_block = false;
    };
    for (size_t oi = 0; oi < order.size(); ++oi) {
      const size_t m = order[oi];
      Node* n = g.members[m];
      if (col && phase(m) == 1 && !in_block) {
        in_block = true;
        for (size_t oj = oi; oj < order.size() && phase(order[oj]) == 1; ++oj)
          for (int i = 0; i < g.members[order[oj]]->data_inputs(); ++i) operand(order[oj], i);
      } else if (in_block && phase(m) != 1) {
        end_block();
      }
      if (n->kind == NodeKind::Contract) {
        // The cube unit reads an operand from memory, or the value its
        // prologue (members of this group) computed.
        const size_t s0 = first_slot[m];
        const int a0 = leaf_arg[s0], a1 = leaf_arg[s0 + 1];
        vm::Encoder::Value r;
        out.product_b = a1;
        if (a0 >= 0 && a1 >= 0) {
          r = enc.mma(arg_index[static_cast<size_t>(a0)], arg_index[static_cast<size_t>(a1)]);
        } else {
          vm::Encoder::Value v[2];
          for (int i = 0; i < 2; ++i) {
            const int a = i == 0 ? a0 : a1;
            const Node* x = prologue_view(i) ? n->in[i]->in[0] : n->in[i];
            v[i] = a >= 0 ? enc.load(i == 0 ? vm::Op::LDOA : vm::Op::LDOB, arg_index[static_cast<size_t>(a)])
                          : as(values[static_cast<size_t>(x->index)], Lanes::F32);
          }
          r = enc.mma_values(v[0], v[1]);
        }
        values[static_cast<size_t>(n->index)] = r;
        if (out_arg[m] >= 0)
          enc.store(out.args[static_cast<size_t>(out_arg[m])].access, arg_index[static_cast<size_t>(out_arg[m])], r);
        continue;
      }
      vm::Encoder::Value v[3] = {-1, -1, -1};
      for (int i = 0; i < n->data_inputs(); ++i) v[i] = operand(m, i);
      if (n->scalar_pos >= 0) {  // an inline scalar operand
        for (int i = n->nin; i > n->scalar_pos; --i) v[i] = v[i - 1];
        v[n->scalar_pos] = n->immediate ? constant(n->value) : user_scalar(n, -1, n->value);
      }
      vm::Encoder::Value r;
      const Lanes value = value_lanes(n);
      if (value != Lanes::F32) {
        // Integer lanes; uint8 wraps to its 8 bits after every op that can
        // leave them (torch computes uint8 in uint8).
        const bool wide = value == Lanes::I64;
        bool wrap = n->dtype == Dtype::U8;
        if (n->kind == NodeKind::Copy) {
          r = as(v[0], value);
          wrap &= n->in[0]->dtype != Dtype::U8;
        } else if (n->kind == NodeKind::Reduce) {
          // Folds int64 lanes. Max and min of narrower types stay int64
          // until read or stored (`as` narrows them exactly then): a
          // ColReduce keeps its reductions in one block.
          const vm::Op op = n->op == detail::OpKind::Sum ? vm::Op::LRSUM
                            : n->op == detail::OpKind::Max ? vm::Op::LRMAX
                                                           : vm::Op::LRMIN;
          r = enc.reduce(op, v[0]);
          wrap = false;
        } else {
          const vm::Op op = int_opcode(n->op, wide);
          wrap &= op == vm::Op::IADD || op == vm::Op::ISUB || op == vm::Op::IMUL || op == vm::Op::INEG ||
                  op == vm::Op::INOT;
          if (n->op == detail::OpKind::Relu) {  // max with int 0 (the bits of 0.0f)
            r = enc.binary(op, v[0], wide ? mark(enc.unary(vm::Op::ITOL, constant(0.0f)), Lanes::I64) : constant(0.0f));
          } else if (vm::op_class(op) == vm::OpClass::Unary) {
            r = enc.unary(op, v[0]);
          } else if (vm::op_class(op) == vm::OpClass::Binary) {
            r = enc.binary(op, v[0], v[1]);
          } else {
            r = enc.ternary(op, v[0], v[1], v[2]);
          }
        }
        if (wrap) r = enc.binary(vm::Op::IAND, r, constant(std::bit_cast<float>(0xffu)));
        mark(r, n->kind == NodeKind::Reduce ? Lanes::I64 : value);
      } else if (const Lanes cmp = comparison_lanes(n); cmp != Lanes::F32) {
        r = mark(enc.binary(int_opcode(n->op, cmp == Lanes::I64), v[0], v[1]), Lanes::F32);  // 0.0f / 1.0f
      } else if (bool_op(n)) {
        const vm::Op op = bool_opcode(n->op);
        r = enc.binary(op, v[0], n->op == detail::OpKind::BitwiseNot ? constant(0.0f) : v[1]);
      } else if (n->kind == NodeKind::Copy) {
        r = v[0];
      } else {
        const vm::Op op = bytecode_op(n->op);
        switch (vm::op_class(op)) {
          case vm::OpClass::Unary: r = enc.unary(op, v[0]); break;
          case vm::OpClass::Binary: r = enc.binary(op, v[0], v[1]); break;
          case vm::OpClass::Ternary: r = enc.ternary(op, v[0], v[1], v[2]); break;
          case vm::OpClass::Reduce: r = enc.reduce(op, v[0]); break;
          default:
            throw Error(std::string("internal: op '") + detail::op_name(n->op) + "' has no vector opcode");
        }
      }
      values[static_cast<size_t>(n->index)] = r;
      if (out_arg[m] < 0) continue;
      if (in_block) block_stores.emplace_back(out_arg[m], r);
      else enc.store(out.args[static_cast<size_t>(out_arg[m])].access, arg_index[static_cast<size_t>(out_arg[m])],
                     as(r, arg_lanes(static_cast<size_t>(out_arg[m]))));
    }
    end_block();
    return enc.try_finish(&out.bytecode);
  }
};

}  // namespace

bool try_lower(const Group& g, const std::vector<Placement>& placement, Lowered* out) {
  Lowered low;
  Builder b(g, placement, low);
  b.collect();
  b.make_space();
  if (!b.encode()) return false;
  b.make_replay();
  *out = std::move(low);
  return true;
}

Lowered lower(const Group& g, const std::vector<Placement>& placement) {
  Lowered low;
  if (!try_lower(g, placement, &low)) {
    throw Error("internal: a group of " + std::to_string(g.members.size()) +
                " ops is over the encoder's limits; it must be split first");
  }
  return low;
}

void replay(const Group& g, const ReplayPlan& rp, const std::vector<ScalarOrigin>& scalars,
            const std::vector<Node*>& nodes, Lowered* out) {
  out->product_b = rp.product_b;
  out->scalars.clear();
  for (const ScalarOrigin& o : scalars) {
    const Node* n = nodes[static_cast<size_t>(o.node)];
    out->scalars.push_back(o.slot < 0 ? n->value : n->in[o.slot]->value);
  }
  Space& sp = out->space;
  sp.ndims = rp.ndims;
  sp.parts = rp.parts;
  std::copy(rp.part_end, rp.part_end + vm::kMaxParts, sp.part_end);
  int64_t extent[kMaxRank + 1];
  const int rank = g.full.rank();
  for (int k = 0; k < rank; ++k) extent[k] = g.full[k];
  if (rp.k_node >= 0) {
    const Shape& a = nodes[static_cast<size_t>(rp.k_node)]->in[0]->shape;
    extent[rank] = a[a.rank() - 1];
  }
  for (int d = 0; d < rp.ndims; ++d) {
    int64_t e = 1;
    for (uint32_t m = rp.axes[d]; m; m &= m - 1) e *= extent[std::countr_zero(m)];
    sp.size[d] = e;
  }
  out->args.resize(rp.args.size());
  for (size_t a = 0; a < rp.args.size(); ++a) {
    const ReplayArg& ra = rp.args[a];
    ArgSpec& s = out->args[a];
    Node* n = nodes[static_cast<size_t>(ra.node)];
    s.origin_node = ra.node;
    s.origin_slot = ra.slot;
    s.access = ra.access;
    int64_t own[kMaxRank];
    const int64_t* st = own;
    if (ra.slot < 0) {  // an output: a fresh contiguous buffer, or a write's slice
      s.node = n;
      s.output = true;
      s.offset = n->target ? n->offset : 0;
      if (n->target) st = n->strides;
      else detail::contiguous_strides(n->shape, own);
    } else {
      Node* x = n->in[ra.slot];
      if (x->kind == NodeKind::View && !x->storage && x->pending) resolve_view(x);
      if (!x->storage) throw Error("internal: group reads an input that was not computed");
      s.node = x;
      s.output = false;
      s.offset = x->offset;
      st = x->strides;
    }
    for (int d = 0; d < rp.ndims; ++d) s.strides[d] = ra.src[d] < 0 ? 0 : st[ra.src[d]];
  }
}

namespace {

// The products that read B from a row-major copy: the cube's small ones (its
// small-M path reads B's rows in place as they are; B stored by columns it
// transposes block by block on every call, in registers or into panels), of
// matrices worth a copy.
// One row, where the cube reads columns in place, gets a copy only while
// all copies hold at most kOneRowCopyBytes (the weights of a small model,
// which a decoder step reads from the caches: transposing them there costs
// more than reading them), unless the caller asks for one regardless (a
// static graph, which holds its constants for its lifetime): a copy doubles
// the weight's memory.
constexpr int64_t kRowCopyMaxRows = 16;
constexpr int64_t kRowCopyMinElems = 4096;
constexpr int64_t kOneRowCopyBytes = int64_t{24} << 20;

}  // namespace

void read_b_by_rows(detail::Storage* storage, int64_t offset, Dtype dtype, vm::Op access, int arg,
                    vm::Launch& l, bool one_row) {
  vm::ArgBinding& b = l.args[static_cast<size_t>(arg)];
  const int64_t K = l.K(), N = l.C();
  if (K < 2 || N < 2 || K * N < kRowCopyMinElems) return;
  const bool many_rows = l.R() > kRowCopyMaxRows;
  const int64_t budget = l.R() == 1 && !one_row && vm::one_row_reads_columns() ? kOneRowCopyBytes : -1;
  // Columns contiguous in k and apart (no overlap), one matrix for every batch.
  if (b.stride[vm::kK] != 1 || b.stride[vm::kC] < K || (l.P() > 1 && b.stride[vm::kP] != 0)) return;
  if (!storage || access == vm::Op::LDG || dtype != Dtype::F32 || !b.in) return;
  if (dry_run()) return;  // its buffers have no values to copy
  int64_t ld = 0;
  // Many rows amortize packing B by columns and make no copy, but read one
  // that small products made: a prompt and the decoder steps after it then
  // keep one matrix in the caches, not two.
  const float* copy = many_rows ? detail::existing_row_copy(storage, offset, K, N, b.stride[vm::kC], &ld)
                                : detail::row_copy(storage, offset, K, N, b.stride[vm::kC], vm::copy_by_rows, &ld, budget);
  if (!copy) return;
  b.in = copy;
  b.stride[vm::kP] = 0;
  b.stride[vm::kK] = ld;
  b.stride[vm::kC] = 1;
}

void bind(const Lowered& low, vm::Launch* out) {
  vm::Launch& l = *out;
  const Space& sp = low.space;
  for (int part = 0; part < vm::kMaxParts; ++part) l.extent[part] = part < sp.parts ? sp.extent(part) : 1;
  l.scalars.assign(low.scalars.begin(), low.scalars.end());
  l.item_threads = sp.parts > vm::kK ? vm::num_threads() : 1;  // a product's blocks (vm::mma_blocks)
  l.args.resize(low.args.size());
  for (size_t a = 0; a < low.args.size(); ++a) {
    const ArgSpec& s = low.args[a];
    vm::ArgBinding& b = l.args[a];
    // A reused launch keeps nothing of its last use that a reader looks at:
    // pointers, strides and gather dim counts are all set here; the gather
    // dims themselves are read only below their count (clearing all of them
    // would write hundreds of bytes per argument on every flush).
    void* base = s.node->storage ? s.node->storage->at(s.offset) : nullptr;
    b.in = s.output ? nullptr : base;
    b.out = s.output ? base : nullptr;
    for (int part = 0; part < vm::kMaxParts; ++part) {
      b.stride[part] = 0;
      b.ndims[part] = 0;
    }
    for (int part = 0; part < sp.parts; ++part) {
      const int lo = part ? sp.part_end[part - 1] : 0, hi = sp.part_end[part];
      // Linear stride: the innermost non-1 dim's (the classification
      // guaranteed the others agree unless the access is LDG).
      for (int d = hi - 1; d >= lo; --d)
        if (sp.size[d] != 1) {
          b.stride[part] = s.strides[d];
          break;
        }
      if (s.access == vm::Op::LDG) {
        uint8_t nd = 0;
        for (int d = lo; d < hi; ++d) {
          // A size-1 dim adds nothing to an offset; a size-0 one leaves its
          // part without elements (the R part of an epilogue operand beside
          // a reduction over an empty axis), and the gather must not divide
          // by it.
          if (sp.size[d] <= 1) continue;
          b.dim_size[part][nd] = sp.size[d];
          b.dim_stride[part][nd] = s.strides[d];
          ++nd;
        }
        b.ndims[part] = nd;
      }
    }
  }
  if (low.product_b >= 0) {
    const ArgSpec& s = low.args[static_cast<size_t>(low.product_b)];
    if (!s.output) read_b_by_rows(s.node->storage, s.offset, s.node->dtype, s.access, low.product_b, l);
  }
}

}  // namespace dvm::fuser
