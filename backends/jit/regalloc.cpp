// Live intervals and the linear-scan register allocator over the neutral IR
// (regalloc.h).
#include "backends/jit/regalloc.h"

#include <algorithm>

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
  thread_local std::vector<int32_t> open;  // enclosing LoopBegin indices
  open.clear();
  for (size_t i = 0; i < n; ++i) {
    const Node& nd = nodes[i];
    if (nd.op == IrOp::LoopBegin) open.push_back(static_cast<int32_t>(i));
    int32_t u[3];
    operands_of(nd, u);
    for (int32_t v : u) {
      if (v < 0 || nodes[static_cast<size_t>(v)].op == IrOp::Const) continue;
      int32_t e = static_cast<int32_t>(i);
      for (int32_t lb : open)
        if (lb > v) {
          e = std::max(e, nodes[static_cast<size_t>(lb)].a);
          break;  // the outermost such loop ends last
        }
      al->end[static_cast<size_t>(v)] = std::max(al->end[static_cast<size_t>(v)], e);
      ++al->nuses[static_cast<size_t>(v)];
    }
    if (nd.op == IrOp::LoopEnd) open.pop_back();
    if (ir_defines_reg(nd.op)) {
      al->end[i] = std::max(al->end[i], static_cast<int32_t>(i));
      al->mask_class[i] = caps.mask_regs && ir_is_mask(nd.op);
    }
  }
  // Coalesce `t = op(...); acc <- t` when t has no other use: t is computed
  // straight into the accumulator's location.
  al->alias.assign(n, -1);
  for (size_t i = 1; i < n; ++i) {
    const Node& nd = nodes[i];
    if (nd.op != IrOp::Copy) continue;
    const size_t t = static_cast<size_t>(nd.b);
    if (t == i - 1 && ir_defines_reg(nodes[t].op) && !al->mask_class[t] && al->nuses[t] == 1 &&
        nodes[t].op != IrOp::Init)
      al->alias[t] = nd.a;
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
  thread_local std::vector<int32_t> active[2];  // kept per thread: no malloc per compile
  active[0].clear();
  active[1].clear();
  uint32_t free_mask[2];
  free_mask[kVecClass] = reg_range(caps.first_vector_reg, caps.vector_regs);
  free_mask[kMaskClass] = reg_range(caps.first_mask_reg, caps.mask_reg_end);
  for (size_t i = 0; i < n; ++i) {
    if (!ir_defines_reg(nodes[i].op) || al.alias[i] >= 0) continue;
    const int c = al.mask_class[i] ? kMaskClass : kVecClass;
    const int32_t pos = static_cast<int32_t>(i);
    // Expire intervals that end at or before this node (a source's register
    // may become this node's destination: one instruction reads, then writes).
    for (int cc = 0; cc < 2; ++cc) {
      auto& act = active[cc];
      size_t k = 0;
      for (size_t j = 0; j < act.size(); ++j) {
        const int32_t v = act[j];
        if (al.end[static_cast<size_t>(v)] <= pos) free_mask[cc] |= 1u << al.reg[static_cast<size_t>(v)];
        else act[k++] = v;
      }
      act.resize(k);
    }
    int r = -1;
    // Prefer the register of the first source (three-input ops that overwrite
    // it, tail selects that then need no move).
    const int32_t a = nodes[i].a;
    if (nodes[i].op != IrOp::Copy && a >= 0 && a < pos && al.reg[static_cast<size_t>(a)] >= 0 &&
        (al.mask_class[static_cast<size_t>(a)] ? kMaskClass : kVecClass) == c &&
        (free_mask[c] >> al.reg[static_cast<size_t>(a)] & 1u))
      r = al.reg[static_cast<size_t>(a)];
    if (r < 0 && free_mask[c]) r = __builtin_ctz(free_mask[c]);
    auto& act = active[c];
    if (r >= 0) {
      free_mask[c] &= ~(1u << r);
      al.reg[i] = static_cast<int8_t>(r);
      act.push_back(pos);
      continue;
    }
    // Spill the interval that ends last.
    size_t far = 0;
    for (size_t j = 1; j < act.size(); ++j)
      if (al.end[static_cast<size_t>(act[j])] > al.end[static_cast<size_t>(act[far])]) far = j;
    const size_t s = static_cast<size_t>(act[far]);
    if (!act.empty() && al.end[s] > al.end[i]) {
      al.reg[i] = al.reg[s];
      al.reg[s] = -1;
      al.slot[s] = al.nslots++;
      act[far] = pos;
    } else {
      al.slot[i] = al.nslots++;
    }
  }
}

void hoisted_constants(const IrBuilder& ir, const Allocation& al, const TargetCaps& caps, int32_t b, int32_t e,
                       std::vector<std::pair<int32_t, int>>* out) {
  const std::vector<Node>& nodes = ir.nodes;
  out->clear();
  uint32_t busy = reg_range(0, caps.first_vector_reg);  // the emitter's scratch
  for (size_t v = 0; v < nodes.size(); ++v)
    if (ir_defines_reg(nodes[v].op) && !al.mask_class[v] && al.reg[al.loc(static_cast<int32_t>(v))] >= 0 &&
        static_cast<int32_t>(v) <= e && al.end[v] >= b)
      busy |= 1u << al.reg[al.loc(static_cast<int32_t>(v))];
  uint32_t avail = reg_range(0, caps.vector_regs) & ~busy;
  if (!avail) return;
  thread_local std::vector<std::pair<int, int32_t>> count;  // (uses, const node), first read first
  count.clear();
  for (int32_t i = b; i < e; ++i) {
    int32_t u[3];
    operands_of(nodes[static_cast<size_t>(i)], u);
    for (int32_t v : u) {
      if (v < 0 || nodes[static_cast<size_t>(v)].op != IrOp::Const) continue;
      auto it = std::find_if(count.begin(), count.end(), [&](auto& c) { return c.second == v; });
      if (it == count.end()) count.emplace_back(1, v);
      else ++it->first;
    }
  }
  // Most reads first, ties in first-read order: a stable insertion sort (a
  // loop reads a few dozen constants at most).
  for (size_t i = 1; i < count.size(); ++i)
    for (size_t j = i; j > 0 && count[j].first > count[j - 1].first; --j) std::swap(count[j], count[j - 1]);
  for (auto& [uses, v] : count) {
    (void)uses;
    if (!avail) break;
    const int r = __builtin_ctz(avail);
    avail &= avail - 1;
    out->emplace_back(v, r);
  }
}

}  // namespace dvm::backends::jit
