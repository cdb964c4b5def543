// Live intervals and the linear-scan register allocator over the neutral IR
// (regalloc.h).
#include "backends/jit/regalloc.h"

#include <algorithm>
#include <cstdint>

namespace dvm::backends::jit {
namespace {

// Classes of registers: 0 vector, 1 mask.
constexpr int kVecClass = 0, kMaskClass = 1;

// Bits [first, end) of a 32-bit register set.
uint32_t reg_range(int first, int end) {
  uint32_t m = 0;
  for (int r = first; r < end; ++r) m |= 1u << r;
  return m;
}

// Live intervals, use counts, register classes and the accumulator aliases.
void intervals(const std::vector<Node>& nodes, const TargetCaps& caps, Allocation* al) {
  const size_t n = nodes.size();
  al->end.assign(n, -1);
  al->nuses.assign(n, 0);
  al->mask_class.assign(n, 0);
  // Plain pointers: a byte store (mask_class) may alias anything, so through
  // the vectors every access would reload their data pointers.
  const Node* nd = nodes.data();
  int32_t* end = al->end.data();
  int32_t* nuses = al->nuses.data();
  uint8_t* mask_class = al->mask_class.data();
  const bool mask_regs = caps.mask_regs;
  thread_local std::vector<int32_t> open;  // enclosing LoopBegin indices
  open.clear();
  for (size_t i = 0; i < n; ++i) {
    const Node& x = nd[i];
    const uint8_t traits = kIrTraits.t[static_cast<int>(x.op)];
    if (x.op == IrOp::LoopBegin) open.push_back(static_cast<int32_t>(i));
    const int32_t ops[3] = {x.a, x.b, x.c};
    for (int k = 0; k < (traits & 3); ++k) {
      const int32_t v = ops[k];
      if (v < 0 || nd[v].op == IrOp::Const) continue;
      int32_t e = static_cast<int32_t>(i);
      for (int32_t lb : open)
        if (lb > v) {
          e = std::max(e, nd[lb].a);
          break;  // the outermost such loop ends last
        }
      end[v] = std::max(end[v], e);
      ++nuses[v];
    }
    if (x.op == IrOp::LoopEnd) open.pop_back();
    if (traits & 4) {  // ir_defines_reg
      end[i] = std::max(end[i], static_cast<int32_t>(i));
      mask_class[i] = mask_regs && (traits & 8);  // ir_is_mask
    }
  }
  // Coalesce `t = op(...); acc <- t` when t has no other use: t is computed
  // straight into the accumulator's location.
  al->alias.assign(n, -1);
  int32_t* alias = al->alias.data();
  for (size_t i = 1; i < n; ++i) {
    const Node& x = nd[i];
    if (x.op != IrOp::Copy) continue;
    const size_t t = static_cast<size_t>(x.b);
    if (t == i - 1 && ir_defines_reg(nd[t].op) && !mask_class[t] && nuses[t] == 1 && nd[t].op != IrOp::Init)
      alias[t] = x.a;
  }
}

}  // namespace

void allocate(const IrBuilder& ir, const TargetCaps& caps, Allocation* out) {
  const std::vector<Node>& nodes = ir.nodes;
  Allocation& al = *out;
  al.nslots = 0;
  intervals(nodes, caps, &al);
  const size_t n = nodes.size();
  al.reg.assign(n, -1);
  al.slot.assign(n, -1);
  // Plain pointers: a byte store (reg) may alias anything, so through the
  // vectors every access would reload their data pointers.
  const Node* nd = nodes.data();
  const int32_t* end = al.end.data();
  const int32_t* alias = al.alias.data();
  const uint8_t* mask_class = al.mask_class.data();
  int8_t* reg = al.reg.data();
  // Values by the node their interval ends at (a list per node: head, next),
  // so each is expired once instead of the active list being scanned at
  // every node.
  thread_local std::vector<int32_t> ends_at_list, next_end_list;
  ends_at_list.assign(n, -1);
  next_end_list.resize(n);
  int32_t* ends_at = ends_at_list.data();
  int32_t* next_end = next_end_list.data();
  for (size_t v = n; v-- > 0;) {
    if (!ir_defines_reg(nd[v].op) || alias[v] >= 0) continue;
    next_end[v] = ends_at[end[v]];
    ends_at[end[v]] = static_cast<int32_t>(v);
  }
  // The active intervals of each class in the order a scan of the list the
  // allocator would keep sees them (the spill choice breaks ties by it):
  // built at the first spill (until then, every value given a register, in
  // order), kept from then on; expired ones are dropped when a spill reads it.
  thread_local std::vector<int32_t> active[2];  // kept per thread: no malloc per compile
  bool tracked = false;
  // Free registers of both classes in one word (class c: bits 32c..32c+31),
  // so the set stays in a register.
  uint64_t free_set = reg_range(caps.first_vector_reg, caps.vector_regs) |
                      uint64_t{reg_range(caps.first_mask_reg, caps.mask_reg_end)} << 32;
  auto expire = [&](int32_t v) {
    const int8_t r = reg[v];
    if (r >= 0) free_set |= uint64_t{1} << (r + (mask_class[v] ? 32 : 0));
  };
  size_t expired = 0;     // nodes whose ending intervals have been expired
  int32_t pending = -1;   // a value that ended where it was defined: expired at the next value
  for (size_t i = 0; i < n; ++i) {
    if (!ir_defines_reg(nd[i].op) || alias[i] >= 0) continue;
    const int c = mask_class[i] ? kMaskClass : kVecClass;
    const int32_t pos = static_cast<int32_t>(i);
    // Expire intervals that end at or before this node (a source's register
    // may become this node's destination: one instruction reads, then writes).
    if (pending >= 0) {
      expire(pending);
      pending = -1;
    }
    for (; expired <= i; ++expired)
      for (int32_t v = ends_at[expired]; v >= 0; v = next_end[v])
        if (v < pos) expire(v);
    int r = -1;
    const uint32_t free_c = static_cast<uint32_t>(free_set >> (32 * c));
    // Prefer the register of the first source (three-input ops that overwrite
    // it, tail selects that then need no move).
    const int32_t a = nd[i].a;
    if (nd[i].op != IrOp::Copy && a >= 0 && a < pos && reg[a] >= 0 &&
        (mask_class[a] ? kMaskClass : kVecClass) == c && (free_c >> reg[a] & 1u))
      r = reg[a];
    if (r < 0 && free_c) r = __builtin_ctz(free_c);
    if (r >= 0) {
      free_set &= ~(uint64_t{1} << (r + 32 * c));
      reg[i] = static_cast<int8_t>(r);
      if (tracked) active[c].push_back(pos);
      if (end[i] <= pos) pending = pos;
      continue;
    }
    if (!tracked) {
      active[0].clear();
      active[1].clear();
      for (int32_t v = 0; v < pos; ++v)
        if (ir_defines_reg(nd[v].op) && alias[v] < 0 && reg[v] >= 0) active[mask_class[v] ? 1 : 0].push_back(v);
      tracked = true;
    }
    // Spill the interval that ends last.
    auto& act = active[c];
    size_t k = 0;
    for (size_t j = 0; j < act.size(); ++j)
      if (end[act[j]] > pos) act[k++] = act[j];
    act.resize(k);
    size_t far = 0;
    for (size_t j = 1; j < act.size(); ++j)
      if (end[act[j]] > end[act[far]]) far = j;
    if (!act.empty() && end[act[far]] > end[i]) {
      const int32_t s = act[far];
      reg[i] = reg[s];
      reg[s] = -1;
      al.slot[static_cast<size_t>(s)] = al.nslots++;
      act[far] = pos;
      if (end[i] <= pos) pending = pos;
    } else {
      al.slot[i] = al.nslots++;
    }
  }
}

void hoisted_constants(const IrBuilder& ir, const Allocation& al, const TargetCaps& caps, HoistPlan* out) {
  const std::vector<Node>& nodes = ir.nodes;
  const size_t n = nodes.size();
  out->regs.clear();
  out->loops.clear();
  // The column loops in order (disjoint), and the registers values hold
  // while each runs: one sweep over the values, each marking the loops its
  // interval [v, end] meets.
  thread_local std::vector<std::pair<int32_t, int32_t>> loops;  // (LoopBegin, LoopEnd)
  thread_local std::vector<uint32_t> busy;
  loops.clear();
  for (size_t i = 0; i < n; ++i)
    if (nodes[i].op == IrOp::LoopBegin && nodes[i].imm == 0) loops.emplace_back(static_cast<int32_t>(i), nodes[i].a);
  busy.assign(loops.size(), reg_range(0, caps.first_vector_reg));  // the emitter's scratch
  // A value computed into its accumulator's location (alias) adds nothing:
  // the accumulator's own interval covers it.
  const Node* nd = nodes.data();
  const int8_t* reg = al.reg.data();
  const int32_t* end = al.end.data();
  const int32_t* alias = al.alias.data();
  const uint8_t* mask_class = al.mask_class.data();
  size_t lo = 0;  // the first loop that ends at or after v
  for (size_t v = 0; v < n && lo < loops.size(); ++v) {
    while (lo < loops.size() && loops[lo].second < static_cast<int32_t>(v)) ++lo;
    if (!ir_defines_reg(nd[v].op) || mask_class[v] || alias[v] >= 0 || reg[v] < 0) continue;
    for (size_t k = lo; k < loops.size() && loops[k].first <= end[v]; ++k) busy[k] |= 1u << reg[v];
  }
  thread_local std::vector<std::pair<int, int32_t>> count;  // (uses, const node), first read first
  thread_local std::vector<int32_t> at;                     // per node: its index in count, or -1
  if (at.size() < n) at.resize(n, -1);
  for (size_t l = 0; l < loops.size(); ++l) {
    const auto [b, e] = loops[l];
    out->loops.emplace_back(b, static_cast<uint32_t>(out->regs.size()));
    uint32_t avail = reg_range(0, caps.vector_regs) & ~busy[l];
    if (!avail) continue;
    count.clear();
    for (int32_t j = b; j < e; ++j) {
      const Node& x = nd[j];
      const int32_t ops[3] = {x.a, x.b, x.c};
      for (int o = 0; o < ir_operands(x.op); ++o) {
        const int32_t v = ops[o];
        if (v < 0 || nd[v].op != IrOp::Const) continue;
        int32_t& k = at[static_cast<size_t>(v)];
        if (k < 0) {
          k = static_cast<int32_t>(count.size());
          count.emplace_back(1, v);
        } else {
          ++count[static_cast<size_t>(k)].first;
        }
      }
    }
    for (const auto& c : count) at[static_cast<size_t>(c.second)] = -1;
    // Most reads first, ties in first-read order: a stable insertion sort (a
    // loop reads a few dozen constants at most).
    for (size_t a = 1; a < count.size(); ++a)
      for (size_t j = a; j > 0 && count[j].first > count[j - 1].first; --j) std::swap(count[j], count[j - 1]);
    for (const auto& c : count) {
      if (!avail) break;
      const int r = __builtin_ctz(avail);
      avail &= avail - 1;
      out->regs.emplace_back(c.second, r);
    }
  }
  out->loops.emplace_back(INT32_MAX, static_cast<uint32_t>(out->regs.size()));  // closes the last loop
}

}  // namespace dvm::backends::jit
