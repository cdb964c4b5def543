// x86 instruction selection and emission (AVX2, AVX-512) of allocated IR
// through the asmjit adapter, and the x86 target's capabilities (target.h).
// Each column-loop body is emitted twice with the same allocation: full
// vectors, then the one masked tail.
#include <algorithm>
#include <atomic>
#include <cstddef>

#include "backends/jit/jit.h"
#include "backends/jit/lower.h"
#include "backends/jit/regalloc.h"
#include "backends/jit/target.h"
#include "backends/jit/x86/asmjit_adapter.h"

namespace dvm::backends::jit {
namespace {

using asmx::Cond;
using asmx::Gp;
using asmx::Opnd;
using asmx::VI;
using asmx::W;

constexpr int32_t kOffBase = offsetof(JitArgs, base);
constexpr int32_t kOffCs = offsetof(JitArgs, cs);
constexpr int32_t kOffRs = offsetof(JitArgs, rs);
constexpr int32_t kOffN = offsetof(JitArgs, n);
constexpr int32_t kOffRows = offsetof(JitArgs, rows);
constexpr int32_t kOffScalars = offsetof(JitArgs, scalars);

// Registers with a fixed job.
//   rdi: JitArgs*   rsi: i (element index)   rdx: n   r8: row counter
//   rax, rcx, r11: scratch   the rest: argument pointers
//   vector 0..2: scratch (operand reloads, the horizontal tree)
//   k1: the tail mask   k6, k7: mask reloads
constexpr Gp kPtrRegs[] = {asmx::r9, asmx::r10, asmx::rbx, asmx::rbp,
                           asmx::r12, asmx::r13, asmx::r14, asmx::r15};
constexpr int kNumPtrRegs = 8;
constexpr int kFirstVec = 3;
constexpr int kFirstK = 2, kLastK = 5;

// Frame layout (rsp 64-byte aligned; its first 64 bytes are unused).
constexpr int32_t kMaskSlot = 64;   // AVX2 tail mask, 32 bytes
constexpr int32_t kRemSlot = 128;
constexpr int32_t kSavedRsp = 136;
constexpr int32_t kRowPtrs = 192;   // one pointer per argument
constexpr int32_t kScratchPtrs = kRowPtrs + vm::kMaxArgs * 8;  // one per scratch row
// A masked ColReduce block (LoopBegin.b = 3): per copy its tail mask (AVX2:
// 32 bytes; AVX-512: the k-mask bits in the first 4) and its element count.
constexpr int32_t kBlockMasks = kScratchPtrs + kMaxScratchRows * 8;
constexpr int32_t kBlockRems = kBlockMasks + kMaxColBlock * 32;
// Typed loads and stores: raw elements of a gather, or of an AVX2 tail,
// pass through here (up to 16 int64).
constexpr int32_t kTypedBuf = kBlockRems + kMaxColBlock * 8;
constexpr int32_t kSpills = kTypedBuf + 128;
constexpr int32_t kOffScratch = offsetof(JitArgs, scratch);

// vcmpps immediate of each neutral predicate: the ordered, quiet forms
// (false on NaN) except NEQ_UQ (true on NaN) and UNORD_Q.
constexpr uint8_t kVcmpps[] = {
    0,   // Eq: EQ_OQ
    4,   // Ne: NEQ_UQ
    17,  // Lt: LT_OQ
    18,  // Le: LE_OQ
    30,  // Gt: GT_OQ
    29,  // Ge: GE_OQ
    3,   // Unord: UNORD_Q
};
static_assert(sizeof(kVcmpps) == kNumCmpPreds, "a vcmpps predicate per CmpPred");
constexpr uint8_t vcmpps_imm(CmpPred p) { return kVcmpps[static_cast<int>(p)]; }

struct Gen {
  const IrBuilder& ir;
  const std::vector<Node>& nodes;
  const TargetCaps& caps;
  const bool avx512;
  const int lanes;
  const W w;
  const int vbytes;
  asmx::Assembler as;

  const Allocation& al;
  const std::vector<int8_t>& reg;    // register, or -1 when spilled
  const std::vector<int32_t>& slot;  // spill slot index, or -1
  const std::vector<int32_t>& alias; // value whose location this one writes, or -1
  std::vector<int8_t> hoisted; // constant held in a register in this loop, or -1
  std::vector<uint8_t> folded;  // per node: a Load its reader takes as a memory operand (plan_folds)
  const HoistPlan& hoist;       // per column loop: the constants it holds in registers
  int32_t hoisted_from = -1;    // the loop whose constants `hoisted` holds, or -1
  asmx::Label region_end;       // where the open SkipIfNone region jumps to
  const int nslots;
  bool block_masks = false;  // emitting a masked block: per-copy masks (masked_block)
  int block_full = 0;        // ... whose copies below this are full
  // Inside a row loop whose tails the call computed once (row_tails): the
  // copies of its folding passes (0: none), and whether one-vector tails are.
  int row_tail_copies = 0;
  bool row_tail_single = false;

  int8_t home[vm::kMaxArgs][3];  // pointer register per (argument, phase), or -1
  std::vector<int> row_args;     // arguments accessed through row pointers
  std::vector<Gp> saved;         // callee-saved registers pushed
  int scratch_rows = 0;

  Gen(const IrBuilder& ir_, const Allocation& allocation, const HoistPlan& plan, const TargetCaps& target,
      bool is512)
      : ir(ir_), nodes(ir_.nodes), caps(target), avx512(is512), lanes(target.lanes), w(is512 ? W::Z : W::Y),
        vbytes(is512 ? 64 : 32), as(is512 ? 4 : 32), al(allocation), reg(allocation.reg), slot(allocation.slot),
        alias(allocation.alias), hoisted(ir_.nodes.size(), -1), hoist(plan), nslots(allocation.nslots) {}

  // ---------------------------------------------------------------------------
  // Operand access.
  // ---------------------------------------------------------------------------
  size_t loc(int32_t v) const { return al.loc(v); }
  bool is_const(int32_t v) const { return nodes[static_cast<size_t>(v)].op == IrOp::Const; }
  Opnd vr(int r) const { return asmx::vreg(r, w); }
  Opnd slot_mem(int32_t v, int size) const {
    return asmx::mem(asmx::rsp, kSpills + slot[loc(v)] * 64, size);
  }
  Opnd const_reg(uint32_t bits, int s) {
    as.v(VI::vbroadcastss, vr(s), as.constant(bits, 4));
    return vr(s);
  }
  // v in a register (reloaded into scratch s when spilled or constant).
  int hoisted_reg(int32_t v) const { return hoisted[static_cast<size_t>(v)]; }
  Opnd src_reg(int32_t v, int s) {
    if (is_const(v)) {
      if (hoisted_reg(v) >= 0) return vr(hoisted_reg(v));
      return const_reg(nodes[static_cast<size_t>(v)].u, s);
    }
    const int r = reg[loc(v)];
    if (r >= 0) return vr(r);
    as.v(VI::vmovups, vr(s), slot_mem(v, vbytes));
    return vr(s);
  }
  // v as a register or memory operand (the last source of an instruction).
  Opnd src_any(int32_t v) {
    if (is_const(v)) {
      if (hoisted_reg(v) >= 0) return vr(hoisted_reg(v));
      if (!avx512) return as.constant(nodes[static_cast<size_t>(v)].u, 32);
      Opnd m = as.constant(nodes[static_cast<size_t>(v)].u, 4);
      m.bcst = true;
      return m;
    }
    const int r = reg[loc(v)];
    return r >= 0 ? vr(r) : slot_mem(v, vbytes);
  }
  Opnd dst(int32_t v) const {
    const int r = reg[loc(v)];
    return vr(r >= 0 ? r : 0);
  }
  void commit(int32_t v) {
    if (reg[loc(v)] < 0) as.v(VI::vmovups, slot_mem(v, vbytes), vr(0));
  }
  Opnd ksrc(int32_t v, int k) {
    const int r = reg[loc(v)];
    if (r >= 0) return asmx::kreg(r);
    as.v(VI::kmovw, asmx::kreg(k), slot_mem(v, 2));
    return asmx::kreg(k);
  }
  Opnd kdst(int32_t v) const {
    const int r = reg[loc(v)];
    return asmx::kreg(r >= 0 ? r : 6);
  }
  void kcommit(int32_t v) {
    if (reg[loc(v)] < 0) as.v(VI::kmovw, slot_mem(v, 2), asmx::kreg(6));
  }

  // Address register of an argument (loaded into `scratch` when not cached).
  Gp arg_ptr(const Node& n, Gp scratch) {
    const int8_t g = home[n.arg][n.phase];
    if (g >= 0) return static_cast<Gp>(g);
    if (n.phase == kPhaseRow) as.mov(scratch, asmx::mem(asmx::rsp, kRowPtrs + 8 * n.arg));
    else if (n.phase == kPhaseScratch) as.mov(scratch, asmx::mem(asmx::rsp, kScratchPtrs + 8 * n.arg));
    else as.mov(scratch, asmx::mem(asmx::rdi, kOffBase + 8 * n.arg));
    return scratch;
  }
  // Element i + copy * lanes of the argument at p.
  Opnd elem(Gp p, int copy = 0) const { return asmx::mem(p, asmx::rsi, 2, copy * vbytes, vbytes); }
  Opnd avx2_tail_mask(int s, int copy = 0) {
    const int32_t at = block_masks ? kBlockMasks + 32 * copy : kMaskSlot;
    as.v(VI::vmovups, vr(s), asmx::mem(asmx::rsp, at, 32));
    return vr(s);
  }
  // Inside a masked block only the copies past the full ones are masked, each
  // with its own mask (loaded into k1 here on AVX-512; r11 is free between
  // nodes); elsewhere `masked` holds for the whole range with k1 as set.
  bool masked_copy(bool masked, int copy) const { return masked && (!block_masks || copy >= block_full); }
  void use_copy_mask(int copy) {
    if (!block_masks || !avx512) return;
    as.mov32_load(asmx::r11, asmx::mem(asmx::rsp, kBlockMasks + 32 * copy, 4));
    Opnd r11d = asmx::gpr(asmx::r11);
    r11d.w = W::X;
    as.v(VI::kmovw, asmx::kreg(1), r11d);
  }
  int32_t rem_slot(int copy) const { return block_masks ? kBlockRems + 8 * copy : kRemSlot; }

  // ---------------------------------------------------------------------------
  // Emission.
  // ---------------------------------------------------------------------------
  void plan_pointers() {
    for (auto& h : home) h[0] = h[1] = h[2] = -1;
    int next = 0;
    bool seen_row[vm::kMaxArgs] = {};
    for (const Node& n : nodes) {
      if (n.op != IrOp::Load && n.op != IrOp::LoadB && n.op != IrOp::LoadS && n.op != IrOp::Store &&
          n.op != IrOp::StoreB && n.op != IrOp::StoreS)
        continue;
      if (n.phase == kPhaseRow && !seen_row[n.arg]) {
        seen_row[n.arg] = true;
        row_args.push_back(n.arg);
      }
      if (home[n.arg][n.phase] < 0 && next < kNumPtrRegs) home[n.arg][n.phase] = kPtrRegs[next++];
    }
    for (int k = 0; k < next; ++k)
      if (kPtrRegs[k] != asmx::r9 && kPtrRegs[k] != asmx::r10) saved.push_back(kPtrRegs[k]);
  }

  void function() {
    if (!avx512) {  // the tail-mask table: 8 x -1 then 8 x 0, at pool offset 0
      as.constant(0xffffffffu, 32);
      as.constant(0u, 32);
    }
    for (Gp g : saved) as.push(g);
    const int32_t frame = kSpills + nslots * 64 + 64;
    as.mov(asmx::rax, asmx::rsp);
    as.sub(asmx::rsp, frame);
    as.and_(asmx::rsp, -64);
    as.mov(asmx::mem(asmx::rsp, kSavedRsp), asmx::rax);
    as.mov(asmx::rdx, asmx::mem(asmx::rdi, kOffN));
    for (int a = 0; a < vm::kMaxArgs; ++a)
      if (home[a][kPhaseBase] >= 0)
        as.mov(static_cast<Gp>(home[a][kPhaseBase]), asmx::mem(asmx::rdi, kOffBase + 8 * a));
    if (scratch_rows > 0) {  // row s of the scratch at scratch + s * (n rounded up to whole vectors)
      as.mov(asmx::rax, asmx::mem(asmx::rdi, kOffScratch));
      as.lea(asmx::rcx, asmx::mem(asmx::rdx, lanes - 1));
      as.and_(asmx::rcx, -lanes);
      for (int s = 0; s < scratch_rows; ++s) {
        as.mov(asmx::mem(asmx::rsp, kScratchPtrs + 8 * s), asmx::rax);
        if (home[s][kPhaseScratch] >= 0) as.mov(static_cast<Gp>(home[s][kPhaseScratch]), asmx::rax);
        as.lea(asmx::rax, asmx::mem(asmx::rax, asmx::rcx, 2, 0));
      }
    }
    range(0, static_cast<int32_t>(nodes.size()), false);
    as.mov(asmx::rsp, asmx::mem(asmx::rsp, kSavedRsp));
    for (size_t k = saved.size(); k-- > 0;) as.pop(saved[k]);
    if (ir.stream_stores) as.sfence();
    as.vzeroupper();
    as.ret();
  }

  void range(int32_t from, int32_t to, bool masked) {
    for (int32_t i = from; i < to; ++i) {
      const Node& n = nodes[static_cast<size_t>(i)];
      if (n.op == IrOp::LoopBegin) {
        if (n.imm == 0) col_loop(i, n.a);
        else row_loop(i, n.a, masked);
        i = n.a;
        continue;
      }
      node(i, masked);
    }
  }

  // Constants the column loop at b reads most go to registers no value
  // holds during it (regalloc's plan), loaded once before it; the rest stay
  // memory operands.
  void hoist_constants(int32_t b) {
    const auto [first, last] = hoist.of(b);
    for (size_t k = first; k < last; ++k) {
      const auto [v, r] = hoist.regs[k];
      hoisted[static_cast<size_t>(v)] = static_cast<int8_t>(r);
      as.v(VI::vbroadcastss, vr(r), as.constant(nodes[static_cast<size_t>(v)].u, 4));
    }
    hoisted_from = b;
  }
  // Ends the hoisting of the loop that began at hoisted_from.
  void unhoist() {
    if (hoisted_from < 0) return;
    const auto [first, last] = hoist.of(hoisted_from);
    for (size_t k = first; k < last; ++k) hoisted[static_cast<size_t>(hoist.regs[k].first)] = -1;
    hoisted_from = -1;
  }

  // True when nodes (b, e) emit nothing (a pass with no vector work).
  bool empty_body(int32_t b, int32_t e) const {
    for (int32_t i = b + 1; i < e; ++i)
      if (nodes[static_cast<size_t>(i)].op != IrOp::Const &&
          nodes[static_cast<size_t>(i)].op != IrOp::CopyBegin)
        return false;
    return true;
  }

  // Nodes (b, e) unmasked while `step` more elements fit (bottom-tested,
  // entered only if one step fits; else jumps to `skip`), i advancing by step.
  void full_steps(int32_t b, int32_t e, int32_t step, asmx::Label body, asmx::Label skip) {
    as.lea(asmx::rax, asmx::mem(asmx::rsi, step));
    as.cmp(asmx::rax, asmx::rdx);
    as.j(Cond::G, skip);
    as.bind(body);
    range(b + 1, e, false);
    as.add(asmx::rsi, step);
    as.lea(asmx::rax, asmx::mem(asmx::rsi, step));
    as.cmp(asmx::rax, asmx::rdx);
    as.j(Cond::LE, body);
  }

  void col_loop(int32_t b, int32_t e) {
    const Node& lb = nodes[static_cast<size_t>(b)];
    if (lb.b == 2) {
      copies_loop(b, e);
      return;
    }
    if (lb.b == 3) {
      masked_block(b, e);
      return;
    }
    const int copies = std::max<int>(1, static_cast<int>(lb.u));
    const bool cont = lb.b == 1;
    if (empty_body(b, e)) {
      if (!cont) as.sub(asmx::rsi, asmx::rsi);
      return;
    }
    const int32_t step = copies * lanes;
    asmx::Label body = as.new_label(), tail = as.new_label(), done = as.new_label();
    hoist_constants(b);
    if (!cont) as.sub(asmx::rsi, asmx::rsi);
    full_steps(b, e, step, body, copies > 1 ? done : tail);
    if (copies > 1) {
      as.bind(tail);
      as.bind(done);
      unhoist();
      return;
    }
    as.bind(tail);
    if (row_tail_single) {
      row_tail(kRowTailSlotSingle, done);
    } else {
      as.cmp(asmx::rsi, asmx::rdx);
      as.j(Cond::GE, done);
      as.mov(asmx::rcx, asmx::rdx);
      as.sub(asmx::rcx, asmx::rsi);
      tail_mask();
    }
    range(b + 1, e, true);
    as.bind(done);
    unhoist();
  }

  // A ColReduce masked block (LoopBegin.b = 3, U copies): runs once when the
  // r = n - i columns left need more than U/2 vectors (U = 1: any), copies
  // below U/2 full and each later copy k masked to clip(r - k * lanes, 0,
  // lanes); then i = n. One pass over the rows covers every column the full
  // blocks left, where halving blocks took one pass each.
  void masked_block(int32_t b, int32_t e) {
    const int copies = static_cast<int>(nodes[static_cast<size_t>(b)].u);
    const int full = copies / 2;
    if (empty_body(b, e)) return;
    asmx::Label skip = as.new_label();
    hoist_constants(b);
    as.mov(asmx::rcx, asmx::rdx);
    as.sub(asmx::rcx, asmx::rsi);
    as.cmp(asmx::rcx, full * lanes);
    as.j(Cond::LE, skip);
    for (int k = full; k < copies; ++k) {
      as.mov(asmx::rcx, asmx::rdx);
      as.sub(asmx::rcx, asmx::rsi);
      if (k > 0) as.sub(asmx::rcx, k * lanes);
      clip_rcx_to_lanes();
      as.mov(asmx::mem(asmx::rsp, kBlockRems + 8 * k), asmx::rcx);
      if (avx512) {
        as.mov_imm(asmx::rax, 1);
        as.shl_cl(asmx::rax);
        as.sub(asmx::rax, 1);
        as.mov32_store(asmx::mem(asmx::rsp, kBlockMasks + 32 * k, 4), asmx::rax);
      } else {
        avx2_mask_to(kBlockMasks + 32 * k);
      }
    }
    block_masks = true;
    block_full = full;
    range(b + 1, e, true);
    block_masks = false;
    as.mov(asmx::rsi, asmx::rdx);
    as.bind(skip);
    unhoist();
  }

  // The tail mask of rcx = rem (1..lanes) elements: k1 / the AVX2 mask slot,
  // and rem in its slot (masked gathers count to it).
  void tail_mask() {
    as.mov(asmx::mem(asmx::rsp, kRemSlot), asmx::rcx);
    if (avx512) {
      as.mov_imm(asmx::rax, 1);
      as.shl_cl(asmx::rax);
      as.sub(asmx::rax, 1);
      Opnd eax = asmx::gpr(asmx::rax);
      eax.w = W::X;  // 32-bit view
      as.v(VI::kmovw, asmx::kreg(1), eax);
    } else {
      avx2_mask_to(kMaskSlot);
    }
  }

  // AVX2: the mask of rcx = rem (0..lanes) elements into the frame at `slot`.
  // Lanes < rem read -1: the 32 bytes at pool + 32 - 4 * rem.
  void avx2_mask_to(int32_t slot) {
    as.mov_imm(asmx::rax, 0);
    as.sub(asmx::rax, asmx::rcx);
    Opnd zeros = as.constant(0u, 32);
    as.lea(asmx::r11, zeros);
    as.lea(asmx::r11, asmx::mem(asmx::r11, asmx::rax, 2, 0));
    as.v(VI::vmovups, vr(0), asmx::mem(asmx::r11, 0, 32));
    as.v(VI::vmovups, asmx::mem(asmx::rsp, slot, 32), vr(0));
  }

  // A RowReduce pass loop (LoopBegin.b = 2): U copies of the body per
  // iteration (copy k at elements i + k * lanes, folding into its own
  // accumulators), then the fewer than U vectors left: copy k once more,
  // masked to [i + k * lanes, n) clipped to one vector, while that is not
  // empty. Vector v of the row thus always runs copy v mod U.
  void copies_loop(int32_t b, int32_t e) {
    const int copies = static_cast<int>(nodes[static_cast<size_t>(b)].u);
    const int32_t step = copies * lanes;
    std::vector<int32_t> starts;  // CopyBegin of each copy, then e
    for (int32_t i = b + 1; i < e; ++i)
      if (nodes[static_cast<size_t>(i)].op == IrOp::CopyBegin) starts.push_back(i);
    starts.push_back(e);
    asmx::Label body = as.new_label(), rest = as.new_label(), done = as.new_label();
    hoist_constants(b);
    as.sub(asmx::rsi, asmx::rsi);
    full_steps(b, e, step, body, rest);
    as.bind(rest);
    if (row_tail_copies == copies) {
      for (size_t k = 0; k + 1 < starts.size(); ++k) {
        row_tail(kRowTailSlot0 + static_cast<int>(k), done);
        range(starts[k] + 1, starts[k + 1], true);
      }
      as.bind(done);
      unhoist();
      return;
    }
    for (size_t k = 0; k + 1 < starts.size(); ++k) {
      asmx::Label clipped = as.new_label();
      as.mov(asmx::rcx, asmx::rdx);
      as.sub(asmx::rcx, asmx::rsi);
      if (k > 0) as.sub(asmx::rcx, static_cast<int32_t>(k) * lanes);
      as.cmp(asmx::rcx, 0);
      as.j(Cond::LE, done);
      as.cmp(asmx::rcx, lanes);
      as.j(Cond::LE, clipped);
      as.mov_imm(asmx::rcx, lanes);
      as.bind(clipped);
      tail_mask();
      range(starts[k] + 1, starts[k + 1], true);
    }
    as.bind(done);
    unhoist();
  }

  // AVX-512 row loops: every row leaves the same tails (n is the call's), so
  // their counts and k-masks are computed once before the loop into the
  // masked-block slots (a row loop over column loops never runs inside a
  // masked block): slot k for copy k of the folding passes, which all run
  // `copies` copies from 0 and leave n mod (copies * lanes) elements; slot
  // kRowTailSlotSingle for one-vector tails, which leave n mod lanes.
  static constexpr int kRowTailSlot0 = 0, kRowTailSlotSingle = kMaxColBlock - 1;
  void row_tails(int32_t b, int32_t e) {
    if (!avx512 || block_masks) return;
    int copies = 0;
    bool single = false, mixed = false;
    for (int32_t i = b + 1; i < e; ++i) {
      const Node& n = nodes[static_cast<size_t>(i)];
      if (n.op != IrOp::LoopBegin || n.imm != 0) continue;
      if (n.b == 2) {
        mixed |= copies != 0 && copies != static_cast<int>(n.u);
        copies = static_cast<int>(n.u);
      } else if (n.b != 3 && n.u <= 1) {
        single = true;
      }
    }
    if (mixed || copies >= kRowTailSlotSingle || (copies & (copies - 1)) != 0) copies = 0;
    for (int k = 0; k < copies; ++k) row_tail_slot(kRowTailSlot0 + k, copies * lanes, k * lanes);
    if (single) row_tail_slot(kRowTailSlotSingle, lanes, 0);
    row_tail_copies = copies;
    row_tail_single = single;
  }
  // rcx = clip(rcx, 0, lanes): a tail's element count.
  void clip_rcx_to_lanes() {
    const asmx::Label nonneg = as.new_label(), clipped = as.new_label();
    as.cmp(asmx::rcx, 0);
    as.j(Cond::GE, nonneg);
    as.mov_imm(asmx::rcx, 0);
    as.bind(nonneg);
    as.cmp(asmx::rcx, lanes);
    as.j(Cond::LE, clipped);
    as.mov_imm(asmx::rcx, lanes);
    as.bind(clipped);
  }

  // Slot s: clip(n mod step - skip, 0, lanes) and its k-mask (step a power of two).
  void row_tail_slot(int s, int32_t step, int32_t skip) {
    as.mov(asmx::rcx, asmx::rdx);
    as.and_(asmx::rcx, step - 1);
    if (skip > 0) as.sub(asmx::rcx, skip);
    clip_rcx_to_lanes();
    as.mov(asmx::mem(asmx::rsp, kBlockRems + 8 * s), asmx::rcx);
    as.mov_imm(asmx::rax, 1);
    as.shl_cl(asmx::rax);
    as.sub(asmx::rax, 1);
    as.mov32_store(asmx::mem(asmx::rsp, kBlockMasks + 32 * s, 4), asmx::rax);
  }
  // A tail from slot s: to `none` when it is empty, else rem in its slot
  // (masked gathers count to it) and k1.
  void row_tail(int s, asmx::Label none) {
    as.mov(asmx::rcx, asmx::mem(asmx::rsp, kBlockRems + 8 * s));
    as.cmp(asmx::rcx, 0);
    as.j(Cond::LE, none);
    as.mov(asmx::mem(asmx::rsp, kRemSlot), asmx::rcx);
    as.mov32_load(asmx::rax, asmx::mem(asmx::rsp, kBlockMasks + 32 * s, 4));
    Opnd eax = asmx::gpr(asmx::rax);
    eax.w = W::X;  // 32-bit view
    as.v(VI::kmovw, asmx::kreg(1), eax);
  }

  void row_loop(int32_t b, int32_t e, bool masked) {
    const int outer_copies = row_tail_copies;
    const bool outer_single = row_tail_single;
    row_tails(b, e);
    for (int a : row_args) {
      const int8_t g = home[a][kPhaseRow];
      if (g >= 0) {
        as.mov(static_cast<Gp>(g), asmx::mem(asmx::rdi, kOffBase + 8 * a));
      } else {
        as.mov(asmx::rax, asmx::mem(asmx::rdi, kOffBase + 8 * a));
        as.mov(asmx::mem(asmx::rsp, kRowPtrs + 8 * a), asmx::rax);
      }
    }
    asmx::Label top = as.new_label(), done = as.new_label();
    as.sub(asmx::r8, asmx::r8);
    as.bind(top);
    as.cmp(asmx::r8, asmx::mem(asmx::rdi, kOffRows));
    as.j(Cond::GE, done);
    range(b + 1, e, masked);
    for (int a : row_args) {
      as.mov(asmx::rax, asmx::mem(asmx::rdi, kOffRs + 8 * a));
      as.shl(asmx::rax, elem_shift(arg_type(a)));
      const int8_t g = home[a][kPhaseRow];
      if (g >= 0) as.add(static_cast<Gp>(g), asmx::rax);
      else as.add(asmx::mem(asmx::rsp, kRowPtrs + 8 * a), asmx::rax);
    }
    as.add(asmx::r8, 1);
    as.jmp(top);
    as.bind(done);
    row_tail_copies = outer_copies;
    row_tail_single = outer_single;
  }

  void binary(VI inst, int32_t i, const Node& n, bool masked) {
    Opnd a = src_reg(n.a, 0);
    Opnd b = folded_mem(n.b, masked);
    if (b.kind == Opnd::None) b = src_any(n.b);
    as.v(inst, dst(i), a, b);
    commit(i);
  }

  // Loads whose one reader is the next node, a binary op taking the loaded
  // vector as its last source, directly or through the TailSel of a
  // reduction's pass: that op reads the argument's memory itself, one
  // instruction instead of two or three (a loop bound by memory then keeps
  // more loads in flight; docs/JIT.md). Masked copies (tails) still load on
  // their own. folded: 1 a load read directly, 2 a load read through a
  // TailSel, and that TailSel; 3 below.
  void plan_folds() {
    folded.assign(nodes.size(), 0);
    thread_local std::vector<int32_t> uses;
    uses.assign(nodes.size(), 0);
    for (const Node& n : nodes) {
      int32_t ops[3];
      operands_of(n, ops);
      for (int32_t v : ops)
        if (v >= 0) ++uses[static_cast<size_t>(v)];
    }
    auto reads_last = [&](size_t c, size_t v) {
      const Node& n = nodes[c];
      const bool binary = n.op == IrOp::Add || n.op == IrOp::Sub || n.op == IrOp::Mul || n.op == IrOp::Div ||
                          n.op == IrOp::Min || n.op == IrOp::Max;
      return binary && n.b == static_cast<int32_t>(v) && n.a != static_cast<int32_t>(v);
    };
    // AVX-512: an IAnd read only by an IEq with zero right after it
    // (constants between emit nothing) is one vptestnmd: folded 3.
    for (size_t j = 1; avx512 && j < nodes.size(); ++j) {
      const Node& e = nodes[j];
      if (e.op != IrOp::IEq || !is_const(e.b) || nodes[static_cast<size_t>(e.b)].u != 0) continue;
      size_t a = j - 1;
      while (a > 0 && nodes[a].op == IrOp::Const) --a;
      if (static_cast<int32_t>(a) == e.a && nodes[a].op == IrOp::IAnd && uses[a] == 1) folded[a] = 3;
    }
    for (size_t i = 0; i + 1 < nodes.size(); ++i) {
      const Node& l = nodes[i];
      if (l.op != IrOp::Load || typed(l) || uses[i] != 1) continue;
      if (reads_last(i + 1, i)) {
        folded[i] = 1;
      } else if (nodes[i + 1].op == IrOp::TailSel && nodes[i + 1].a == static_cast<int32_t>(i) &&
                 uses[i + 1] == 1 && i + 2 < nodes.size() && reads_last(i + 2, i + 1)) {
        folded[i] = folded[i + 1] = 2;
      }
    }
  }
  // The memory operand that stands for value v where plan_folds folded it
  // and this copy is not masked; kind None otherwise.
  Opnd folded_mem(int32_t v, bool masked) {
    if (v < 0 || !folded[static_cast<size_t>(v)]) return {};
    const Node* l = &nodes[static_cast<size_t>(v)];
    if (l->op == IrOp::TailSel) {
      if (masked) return {};
      l = &nodes[static_cast<size_t>(l->a)];
    } else if (masked_copy(masked, l->imm)) {
      return {};
    }
    return elem(arg_ptr(*l, asmx::rax), l->imm);
  }
  // Whether node i (folded) emits nothing in this copy: its reader takes
  // the memory operand.
  bool skipped(int32_t i, bool masked) const {
    const uint8_t f = folded[static_cast<size_t>(i)];
    return f == 2 ? !masked : f == 1 && !masked_copy(masked, nodes[static_cast<size_t>(i)].imm);
  }

  // The vector d from `lanes` 4-byte elements at r11, r11 + rax, ...,
  // built in registers: four lanes per xmm (vmovss, then vinsertps from
  // memory), the xmms then inserted into d. Scalar stores to a buffer read
  // back as one vector would wait for store forwarding. With copy >= 0 (a
  // masked tail) only the copy's first rem lanes are read and the others
  // are 0, as a masked load leaves them: a compare per lane, which predicts
  // (rows of a launch share their tail). Uses rcx, rdx (N again after) and
  // scratch 1; advances r11.
  void gather_dwords(const Opnd& d, int copy = -1) {
    const bool masked = copy >= 0;
    const asmx::Label done = as.new_label();
    if (masked) {
      const asmx::Label some = as.new_label();
      as.mov(asmx::rdx, asmx::mem(asmx::rsp, rem_slot(copy)));
      as.cmp(asmx::rdx, 0);
      as.j(Cond::G, some);
      as.v(VI::vpxor, asmx::vreg(1, W::X), asmx::vreg(1, W::X), asmx::vreg(1, W::X));
      as.v(VI::vmovaps, d, vr(1));
      as.jmp(done);
      as.bind(some);
    }
    as.lea(asmx::rcx, asmx::mem(asmx::rax, asmx::rax, 1, 0));  // three strides
    for (int g = 0; g < lanes / 4; ++g) {
      const Opnd x = asmx::vreg(g == 0 ? d.reg : 1, W::X);
      const asmx::Label insert = g > 0 ? as.new_label() : done;
      for (int k = 0; k < 4; ++k) {
        if (masked && 4 * g + k > 0) {
          as.cmp(asmx::rdx, 4 * g + k);
          as.j(Cond::LE, k == 0 ? done : insert);
        }
        const Opnd m = k == 0   ? asmx::mem(asmx::r11, 0, 4)
                       : k == 3 ? asmx::mem(asmx::r11, asmx::rcx, 0, 0, 4)
                                : asmx::mem(asmx::r11, asmx::rax, k - 1, 0, 4);
        if (k == 0) as.v(VI::vmovss, x, m);
        else as.v(VI::vinsertps, x, x, m, asmx::imm(k << 4));
      }
      if (g > 0) {
        as.bind(insert);
        as.v(avx512 ? VI::vinsertf32x4 : VI::vinsertf128, d, d, x, asmx::imm(g));
      }
      if (g + 1 < lanes / 4) as.lea(asmx::r11, asmx::mem(asmx::r11, asmx::rax, 2, 0));
    }
    as.bind(done);
    if (masked) as.mov(asmx::rdx, asmx::mem(asmx::rdi, kOffN));
  }
  // The same for 1- and 2-byte elements (vpinsrb, vpinsrw): their raw
  // vector, in scratch 1. Lanes 8..15 go to scratch 2 first: two
  // independent chains of inserts, each started by a zeroing idiom so that
  // it does not wait for the register's last value. copy as for
  // gather_dwords.
  Opnd gather_narrow(Dtype t, int b, int copy = -1) {
    const bool masked = copy >= 0;
    const VI ins = b == 1 ? VI::vpinsrb : VI::vpinsrw;
    const Opnd x1 = asmx::vreg(1, W::X), x2 = asmx::vreg(2, W::X);
    const asmx::Label done = as.new_label();
    if (masked) as.mov(asmx::rdx, asmx::mem(asmx::rsp, rem_slot(copy)));
    as.lea(asmx::rcx, asmx::mem(asmx::rax, asmx::rax, 1, 0));  // three strides
    for (int j = 0; j < lanes; j += 4) {
      const Opnd x = j < 8 ? x1 : x2;
      const int at = j % 8;
      if (at == 0) as.v(VI::vpxor, x, x, x);
    }
    for (int j = 0; j < lanes; j += 4) {
      const Opnd x = j < 8 ? x1 : x2;
      const int at = j % 8;
      for (int k = 0; k < 4; ++k) {
        if (masked) {
          as.cmp(asmx::rdx, j + k);
          as.j(Cond::LE, done);
        }
        const Opnd m = k == 0   ? asmx::mem(asmx::r11, 0, b)
                       : k == 3 ? asmx::mem(asmx::r11, asmx::rcx, 0, 0, b)
                                : asmx::mem(asmx::r11, asmx::rax, k - 1, 0, b);
        as.v(ins, x, x, m, asmx::imm(at + k));
      }
      if (j + 4 < lanes) as.lea(asmx::r11, asmx::mem(asmx::r11, asmx::rax, 2, 0));
    }
    as.bind(done);
    if (masked) as.mov(asmx::rdx, asmx::mem(asmx::rdi, kOffN));
    if (lanes > 8) {
      if (b == 1) as.v(VI::vpunpcklqdq, x1, x1, x2);
      else as.v(VI::vinserti128, asmx::vreg(1, W::Y), asmx::vreg(1, W::Y), x2, asmx::imm(1));
    }
    return raw_reg(1, t);
  }

  // Strided gather: element j of the vector from base + (i + j) * cs.
  void gather(int32_t i, const Node& n, bool masked) {
    as.mov(asmx::r11, asmx::mem(asmx::rdi, kOffCs + 8 * n.arg));
    if (n.imm) {  // copy k: element i + k * lanes
      as.lea(asmx::rcx, asmx::mem(asmx::rsi, n.imm * lanes));
      as.imul(asmx::r11, asmx::rcx);
    } else {
      as.imul(asmx::r11, asmx::rsi);
    }
    Gp p = arg_ptr(n, asmx::rax);
    as.lea(asmx::r11, asmx::mem(p, asmx::r11, 2, 0));
    as.mov(asmx::rax, asmx::mem(asmx::rdi, kOffCs + 8 * n.arg));
    as.shl(asmx::rax, 2);
    gather_dwords(dst(i), masked ? n.imm : -1);
    commit(i);
  }

  void masked_load(Opnd d, Opnd m, int copy = 0) {
    if (avx512) {
      as.masked(1, true);
      as.v(VI::vmovups, d, m);
    } else {
      Opnd k = avx2_tail_mask(1, copy);
      as.v(VI::vmaskmovps, d, k, m);
    }
  }

  // One horizontal step into lo (xmm/ymm scratch 0) from hi (scratch 1).
  void hstep(uint8_t kind, W sw) {
    Opnd lo = asmx::vreg(0, sw), hi = asmx::vreg(1, sw), t = asmx::vreg(2, sw);
    if (kind == 0) {
      as.v(VI::vaddps, lo, lo, hi);
      return;
    }
    as.v(kind == 1 ? VI::vmaxps : VI::vminps, hi, lo, hi);  // r = op(lo, hi)
    as.v(VI::vcmpps, t, lo, lo, asmx::imm(vcmpps_imm(CmpPred::Unord)));
    as.v(VI::vblendvps, lo, hi, lo, t);  // unord(lo, lo) ? lo : r
  }

  // The lanes of a row's folded accumulators past n hold the identity, and
  // op(x, identity) is x bit for bit for every lane value a fold yields (a sum
  // never yields -0 from +0; the max/min step keeps x; MXCSR default,
  // docs/MATH.md). So a step whose upper half lies past n changes nothing and
  // short rows skip it: the same bits, a shorter chain per row.
  void hreduce(int32_t i, const Node& n) {
    Opnd s = src_reg(n.a, 0);
    asmx::Label quarter = as.new_label();
    if (avx512) {
      asmx::Label full = as.new_label(), half = as.new_label(), eight = as.new_label();
      as.cmp(asmx::rdx, 8);
      as.j(Cond::G, full);
      as.cmp(asmx::rdx, 4);
      as.j(Cond::G, half);
      if (s.reg != 0) as.v(VI::vmovaps, asmx::vreg(0, W::X), asmx::vreg(s.reg, W::X));
      as.jmp(quarter);
      as.bind(half);
      if (s.reg != 0) as.v(VI::vmovaps, asmx::vreg(0, W::Y), asmx::vreg(s.reg, W::Y));
      as.jmp(eight);
      as.bind(full);
      as.v(VI::vextractf32x8, asmx::vreg(1, W::Y), s, asmx::imm(1));
      if (s.reg != 0) as.v(VI::vmovaps, asmx::vreg(0, W::Y), asmx::vreg(s.reg, W::Y));
      hstep(n.imm, W::Y);
      as.bind(eight);
      as.v(VI::vextractf128, asmx::vreg(1, W::X), asmx::vreg(0, W::Y), asmx::imm(1));
    } else {
      asmx::Label full = as.new_label();
      as.cmp(asmx::rdx, 4);
      as.j(Cond::G, full);
      if (s.reg != 0) as.v(VI::vmovaps, asmx::vreg(0, W::X), asmx::vreg(s.reg, W::X));
      as.jmp(quarter);
      as.bind(full);
      as.v(VI::vextractf128, asmx::vreg(1, W::X), s, asmx::imm(1));
      if (s.reg != 0) as.v(VI::vmovaps, asmx::vreg(0, W::X), asmx::vreg(s.reg, W::X));
    }
    hstep(n.imm, W::X);
    as.bind(quarter);
    as.v(VI::vmovhlps, asmx::vreg(1, W::X), asmx::vreg(0, W::X), asmx::vreg(0, W::X));
    hstep(n.imm, W::X);
    as.v(VI::vmovshdup, asmx::vreg(1, W::X), asmx::vreg(0, W::X));
    hstep(n.imm, W::X);
    as.v(VI::vbroadcastss, dst(i), asmx::vreg(0, W::X));
    commit(i);
  }

  // Which input (0 a, 1 b, 2 c) already sits in the result's register, or
  // -1: three-input instructions overwrite one of their inputs, so the form
  // follows from it.
  int input_in_dst(int32_t i, const Node& n) const {
    const int r = reg[loc(i)];
    if (r < 0) return -1;
    const int32_t in[3] = {n.a, n.b, n.c};
    for (int k = 0; k < 3; ++k)
      if (!is_const(in[k]) && reg[loc(in[k])] == r) return k;
    return -1;
  }

  // Fma (a*b + c) and Fnma (c - a*b): the 213 / 231 forms of either.
  // IFloorDiv: a and b pass through the typed buffer (free between nodes);
  // each half is converted to double, divided, floored and truncated back:
  // the instructions of VecAvx2 / VecAvx512::ifloordiv, so the same bits.
  void floordiv(int32_t i, const Node& n) {
    const int half = vbytes / 2;
    const W hw = avx512 ? W::Y : W::X;  // a half's int32 lanes
    as.v(VI::vmovups, asmx::mem(asmx::rsp, kTypedBuf, vbytes), src_reg(n.a, 0));
    as.v(VI::vmovups, asmx::mem(asmx::rsp, kTypedBuf + 64, vbytes), src_reg(n.b, 1));
    for (int h = 0; h < 2; ++h) {
      as.v(VI::vcvtdq2pd, vr(h), asmx::mem(asmx::rsp, kTypedBuf + h * half, half));
      as.v(VI::vcvtdq2pd, vr(2), asmx::mem(asmx::rsp, kTypedBuf + 64 + h * half, half));
      as.v(VI::vdivpd, vr(h), vr(h), vr(2));
      as.v(avx512 ? VI::vrndscalepd : VI::vroundpd, vr(h), vr(h), asmx::imm(9));  // toward -inf
      as.v(VI::vcvttpd2dq, asmx::vreg(h, hw), vr(h));
    }
    as.v(avx512 ? VI::vinserti64x4 : VI::vinserti128, vr(0), vr(0), asmx::vreg(1, hw), asmx::imm(1));
    if (dst(i).reg != 0) as.v(VI::vmovaps, dst(i), vr(0));
    commit(i);
  }

  void fma(int32_t i, const Node& n) {
    const bool neg = n.op == IrOp::Fnma;
    const VI f213 = neg ? VI::vfnmadd213ps : VI::vfmadd213ps;
    const VI f231 = neg ? VI::vfnmadd231ps : VI::vfmadd231ps;
    const Opnd d = dst(i);
    switch (input_in_dst(i, n)) {
      case 0: as.v(f213, d, src_reg(n.b, 1), src_any(n.c)); break;
      case 1: as.v(f213, d, src_reg(n.a, 1), src_any(n.c)); break;
      case 2: as.v(f231, d, src_reg(n.a, 1), src_any(n.b)); break;
      default: {
        // d differs from every source register: copy a into d first.
        Opnd b = src_reg(n.b, 1);
        Opnd c = src_any(n.c);
        if (is_const(n.a) && hoisted_reg(n.a) >= 0) {
          as.v(VI::vmovaps, d, vr(hoisted_reg(n.a)));
        } else if (is_const(n.a)) {
          as.v(VI::vbroadcastss, d, as.constant(nodes[static_cast<size_t>(n.a)].u, 4));
        } else if (reg[loc(n.a)] >= 0) {
          as.v(VI::vmovaps, d, vr(reg[loc(n.a)]));
        } else {
          as.v(VI::vmovups, d, slot_mem(n.a, vbytes));
        }
        // b reloaded into scratch 1 and d possibly scratch 0: still distinct.
        as.v(f213, d, b, c);
      }
    }
    commit(i);
  }

  // a | (b & c) in one vpternlogd: truth table 0xF8 with a in the
  // destination, 0xEC with b or c there (b and c play symmetric parts).
  void or_and(int32_t i, const Node& n) {
    const Opnd d = dst(i);
    switch (input_in_dst(i, n)) {
      case 0: as.v(VI::vpternlogd, d, src_reg(n.b, 1), src_any(n.c), asmx::imm(0xF8)); break;
      case 1: as.v(VI::vpternlogd, d, src_reg(n.a, 1), src_any(n.c), asmx::imm(0xEC)); break;
      case 2: as.v(VI::vpternlogd, d, src_reg(n.a, 1), src_any(n.b), asmx::imm(0xEC)); break;
      default:
        as.v(VI::vmovaps, d, src_reg(n.a, 1));
        as.v(VI::vpternlogd, d, src_reg(n.b, 1), src_any(n.c), asmx::imm(0xF8));
    }
    commit(i);
  }

  // ---------------------------------------------------------------------------
  // Typed loads and stores: the f32 registers' conversions from and to an
  // argument's element type, bit for bit as backends/convert.h defines them
  // (and the interpreter's load_cvt / store_cvt compute them). Scratch
  // vectors 1 and 2 and k7 hold the raw elements; every sequence reads its
  // source before writing its destination.
  // ---------------------------------------------------------------------------
  Dtype arg_type(int a) const {
    return static_cast<size_t>(a) < ir.arg_types.size() ? ir.arg_types[static_cast<size_t>(a)] : Dtype::F32;
  }
  Dtype type_of(const Node& n) const { return n.phase == kPhaseScratch ? Dtype::F32 : arg_type(n.arg); }
  // Whether n's argument moves int32 lanes (IrBuilder::arg_int).
  bool ints_of(const Node& n) const {
    return n.phase != kPhaseScratch && static_cast<size_t>(n.arg) < ir.arg_int.size() &&
           ir.arg_int[static_cast<size_t>(n.arg)] != 0;
  }
  // Loads and stores that go through the typed paths below.
  bool typed(const Node& n) const { return type_of(n) != Dtype::F32 || ints_of(n); }
  static int elem_shift(Dtype t) {
    const size_t b = dtype_size(t);
    return b == 1 ? 0 : b == 2 ? 1 : b == 4 ? 2 : 3;
  }
  // Bytes of one vector's worth of elements of type t, and the view of a
  // register that holds them.
  int raw_bytes(Dtype t) const { return lanes * static_cast<int>(dtype_size(t)); }
  static W raw_width(int bytes) { return bytes <= 16 ? W::X : bytes == 32 ? W::Y : W::Z; }
  Opnd raw_reg(int r, Dtype t) const { return asmx::vreg(r, raw_width(raw_bytes(t))); }
  // Elements i + copy * lanes .. of type t at p (an int64 vector: its half h
  // of 8 elements).
  Opnd telem(Gp p, Dtype t, int copy) const {
    return asmx::mem(p, asmx::rsi, elem_shift(t), copy * raw_bytes(t), raw_bytes(t));
  }
  Opnd telem_half(Gp p, int copy, int h) const {
    return asmx::mem(p, asmx::rsi, 3, copy * 128 + 64 * h, 64);
  }
  // A constant as the last source of a full-width instruction.
  Opnd kconst(uint32_t bits) {
    if (!avx512) return as.constant(bits, 32);
    Opnd m = as.constant(bits, 4);
    m.bcst = true;
    return m;
  }
  static VI movdqu_for(Dtype t) {
    const size_t b = dtype_size(t);
    return b == 1 ? VI::vmovdqu8 : b == 2 ? VI::vmovdqu16 : b == 4 ? VI::vmovdqu32 : VI::vmovdqu64;
  }
  // Stores the raw register r (`bytes` of it) to m.
  void store_raw(const Opnd& m, Opnd r, int bytes) {
    if (bytes == 8) {
      r.w = W::X;
      as.v(VI::vmovq, m, r);
      return;
    }
    r.w = raw_width(bytes);
    as.v(VI::vmovups, m, r);
  }

  // d (full width) = f32 of the raw elements of type t in src (a register of
  // the raw width or memory), or with `ints` their int32 values (the
  // argument moves int32 lanes). Not int64.
  void cvt_in(Dtype t, Opnd d, const Opnd& src, bool ints = false) {
    if (ints) {
      switch (t) {
        case Dtype::U8: as.v(VI::vpmovzxbd, d, src); return;
        case Dtype::Bool:  // any nonzero byte is 1
          as.v(VI::vpmovzxbd, d, src);
          as.v(VI::vpminud, d, d, kconst(1));
          return;
        default: as.v(VI::vmovups, d, src); return;  // int32 bits as they are
      }
    }
    switch (t) {
      case Dtype::F16: as.v(VI::vcvtph2ps, d, src); return;
      case Dtype::BF16:
        as.v(VI::vpmovzxwd, d, src);
        as.v(VI::vpslld, d, d, asmx::imm(16));
        return;
      case Dtype::I32: as.v(VI::vcvtdq2ps, d, src); return;
      case Dtype::U8:
        as.v(VI::vpmovzxbd, d, src);
        as.v(VI::vcvtdq2ps, d, d);
        return;
      case Dtype::Bool:  // any nonzero byte is 1
        as.v(VI::vpmovzxbd, d, src);
        as.v(VI::vpminud, d, d, kconst(1));
        as.v(VI::vcvtdq2ps, d, d);
        return;
      case Dtype::F32:
      case Dtype::I64: break;
    }
  }
  // AVX-512: d = f32 of 16 int64, elements 0..7 in lo, 8..15 in hi (zmm
  // registers or 64-byte memory); rounded to nearest even like
  // static_cast<float>(int64_t).
  void cvt_in_i64(Opnd d, const Opnd& lo, const Opnd& hi) {
    as.v(VI::vcvtqq2ps, asmx::vreg(d.reg, W::Y), lo);
    as.v(VI::vcvtqq2ps, asmx::vreg(1, W::Y), hi);
    as.v(VI::vinsertf32x8, d, d, asmx::vreg(1, W::Y), asmx::imm(1));
  }
  // AVX2: d = f32 of 8 int64, element j at at(j) (a memory operand), one
  // vcvtsi2ss each (nearest even, as vcvtqq2ps), joined with vinsertps.
  // vcvtsi2ss keeps its destination's other lanes: zeroing the register
  // first (vxorps, which waits on nothing) keeps the conversions from
  // waiting on each other.
  template <class At>
  void cvt_in_i64_avx2(Opnd d, At at) {
    const Opnd x1 = asmx::vreg(1, W::X), x2 = asmx::vreg(2, W::X);
    for (int h = 0; h < 2; ++h) {
      const Opnd r = h == 0 ? asmx::vreg(d.reg, W::X) : x2;
      as.v(VI::vxorps, r, r, r);
      as.v(VI::vcvtsi2ss, r, r, at(4 * h));
      for (int k = 1; k < 4; ++k) {
        as.v(VI::vxorps, x1, x1, x1);
        as.v(VI::vcvtsi2ss, x1, x1, at(4 * h + k));
        as.v(VI::vinsertps, r, r, x1, asmx::imm(k << 4));
      }
    }
    as.v(VI::vinsertf128, asmx::vreg(d.reg, W::Y), asmx::vreg(d.reg, W::Y), x2, asmx::imm(1));
  }
  // Element j of the 8 int64 the AVX2 forms convert from or to: of the
  // argument at p (copy `copy`), or of the typed buffer.
  Opnd i64_elem(Gp p, int copy, int j) const { return asmx::mem(p, asmx::rsi, 3, copy * 64 + 8 * j, 8); }
  static Opnd i64_buf(int j) { return asmx::mem(asmx::rsp, kTypedBuf + 8 * j, 8); }
  // AVX2: the 8 floats of s truncated to int64 (NaN and out of range
  // INT64_MIN, as vcvttps2qq), element j stored to at(j): s goes through
  // the typed buffer's upper half, one vcvttss2si each. Uses rcx.
  template <class At>
  void cvt_out_i64_avx2(const Opnd& s, At at) {
    as.v(VI::vmovups, asmx::mem(asmx::rsp, kTypedBuf + 64, 32), asmx::vreg(s.reg, W::Y));
    for (int j = 0; j < 8; ++j) {
      as.v(VI::vcvttss2si, asmx::gpr(asmx::rcx), asmx::mem(asmx::rsp, kTypedBuf + 64 + 4 * j, 4));
      as.mov(at(j), asmx::rcx);
    }
  }

  // Raw elements of type t of the f32 register s, into scratch 1 (its raw
  // view, returned); with `ints`, s holds int32 values (the argument moves
  // int32 lanes: int32 as its bits, uint8 its low byte, bool != 0, a float
  // type the value converted to nearest). Not int64.
  Opnd cvt_out(Dtype t, Opnd s, bool ints = false) {
    const Opnd v1 = vr(1), v2 = vr(2);
    const Opnd x1 = asmx::vreg(1, W::X), x2 = asmx::vreg(2, W::X);
    // AVX2: 8 dwords of v1, each < 65536, to 8 words in x1.
    auto avx2_words = [&] {
      as.v(VI::vextractf128, x2, v1, asmx::imm(1));
      as.v(VI::vpackusdw, x1, x1, x2);
    };
    if (ints) {
      switch (t) {
        case Dtype::I32: as.v(VI::vmovups, v1, s); return raw_reg(1, t);
        case Dtype::U8:
        case Dtype::Bool:
          if (t == Dtype::Bool) as.v(VI::vpminud, v1, s, kconst(1));  // unsigned: nonzero gives 1
          else if (!avx512) as.v(VI::vpand, v1, s, kconst(0xff));
          else as.v(VI::vmovups, v1, s);
          if (avx512) {
            as.v(VI::vpmovdb, x1, v1);  // truncates: the low byte
          } else {
            avx2_words();
            as.v(VI::vpackuswb, x1, x1, x1);
          }
          return raw_reg(1, t);
        default:  // a float type: the int32 values converted, then stored as floats
          as.v(VI::vcvtdq2ps, v2, s);
          if (t == Dtype::F32) {
            as.v(VI::vmovups, v1, v2);
            return raw_reg(1, t);
          }
          return cvt_out(t, v2);
      }
    }
    switch (t) {
      case Dtype::F16:  // round to nearest even (imm 8: that, exceptions suppressed)
        as.v(VI::vcvtps2ph, raw_reg(1, t), s, asmx::imm(8));
        break;
      case Dtype::BF16: {  // (u + 0x7fff + ((u >> 16) & 1)) >> 16; NaN: 0x7fc0
        asmx::Label done;
        if (caps.bf16_convert) {
          // One instruction rounds alike except on NaNs (it keeps their
          // payload) and denormals (it flushes them): vectors with such a
          // lane take the formula below instead.
          done = as.new_label();
          as.v(VI::vfpclassps, asmx::kreg(7), s, asmx::imm(0x01 | 0x20 | 0x80));  // QNaN, denormal, SNaN
          as.v(VI::vcvtneps2bf16, raw_reg(1, t), s);
          as.v(VI::kortestw, asmx::kreg(7), asmx::kreg(7));
          as.j(asmx::Cond::E, done);
        }
        as.v(VI::vpsrld, v1, s, asmx::imm(16));
        as.v(avx512 ? VI::vpandd : VI::vpand, v1, v1, kconst(1));
        as.v(VI::vpaddd, v1, v1, s);
        as.v(VI::vpaddd, v1, v1, kconst(0x7fff));
        as.v(VI::vpsrld, v1, v1, asmx::imm(16));
        if (avx512) {
          as.v(VI::vcmpps, asmx::kreg(7), s, s, asmx::imm(vcmpps_imm(CmpPred::Unord)));
          as.masked(7, false);
          as.v(VI::vblendmps, v1, v1, kconst(0x7fc0));
          as.v(VI::vpmovdw, raw_reg(1, t), v1);
        } else {
          as.v(VI::vcmpps, v2, s, s, asmx::imm(vcmpps_imm(CmpPred::Unord)));
          as.v(VI::vblendvps, v1, v1, kconst(0x7fc0), v2);
          avx2_words();
        }
        if (caps.bf16_convert) as.bind(done);
        break;
      }
      case Dtype::I32:  // truncation; NaN and out of range: INT32_MIN
        as.v(VI::vcvttps2dq, v1, s);
        break;
      case Dtype::U8:  // the low 8 bits of the int32 conversion
        as.v(VI::vcvttps2dq, v1, s);
        if (avx512) {
          as.v(VI::vpmovdb, x1, v1);
        } else {
          as.v(VI::vpand, v1, v1, kconst(0xff));
          avx2_words();
          as.v(VI::vpackuswb, x1, x1, x1);
        }
        break;
      case Dtype::Bool:  // nonzero (NaN too): 1
        if (avx512) {
          as.v(VI::vcmpps, asmx::kreg(7), s, kconst(0), asmx::imm(vcmpps_imm(CmpPred::Ne)));
          as.v(VI::vpmovm2b, x1, asmx::kreg(7));
          as.v(VI::vpabsb, x1, x1);
        } else {
          as.v(VI::vcmpps, v1, s, kconst(0), asmx::imm(vcmpps_imm(CmpPred::Ne)));
          as.v(VI::vpsrld, v1, v1, asmx::imm(31));
          avx2_words();
          as.v(VI::vpackuswb, x1, x1, x1);
        }
        break;
      case Dtype::F32:
      case Dtype::I64: break;
    }
    return raw_reg(1, t);
  }

  // Zeroes `bytes` (32, 64 or 128) of the typed buffer.
  void zero_typed_buf(int bytes) {
    const Opnd x1 = asmx::vreg(1, W::X);
    as.v(VI::vpxor, x1, x1, x1);
    const W zw = bytes >= 64 && avx512 ? W::Z : W::Y;
    const int step = zw == W::Z ? 64 : 32;
    for (int off = 0; off < bytes; off += step)
      as.v(VI::vmovups, asmx::mem(asmx::rsp, kTypedBuf + off, step), asmx::vreg(1, zw));
  }

  // AVX2 tails: copies the first rem (the copy's count) elements of type t
  // between the argument at r11 and the typed buffer, byte by byte (AVX2 has
  // no byte or word masked moves). rdx is restored to n.
  void copy_bytes(Dtype t, int copy, bool in) {
    asmx::Label top = as.new_label(), done = as.new_label();
    as.mov(asmx::rax, asmx::mem(asmx::rsp, rem_slot(copy)));
    if (elem_shift(t)) as.shl(asmx::rax, elem_shift(t));
    as.sub(asmx::rcx, asmx::rcx);
    as.bind(top);
    as.cmp(asmx::rcx, asmx::rax);
    as.j(Cond::GE, done);
    const Opnd arg = asmx::mem(asmx::r11, asmx::rcx, 0, 0), buf = asmx::mem(asmx::rsp, asmx::rcx, 0, kTypedBuf);
    as.load_n(asmx::rdx, in ? arg : buf, 1);
    as.store_n(in ? buf : arg, asmx::rdx, 1);
    as.add(asmx::rcx, 1);
    as.jmp(top);
    as.bind(done);
    as.mov(asmx::rdx, asmx::mem(asmx::rdi, kOffN));
  }

  void typed_load(int32_t i, const Node& n, bool masked) {
    const Dtype t = type_of(n);
    const bool m = masked_copy(masked, n.imm);
    if (m) use_copy_mask(n.imm);
    Gp p = arg_ptr(n, asmx::rax);
    const Opnd d = dst(i);
    if (t == Dtype::I64 && !avx512) {
      if (m) {  // rem elements through the zeroed buffer
        as.lea(asmx::r11, telem(p, t, n.imm));
        zero_typed_buf(64);
        copy_bytes(t, n.imm, true);
        cvt_in_i64_avx2(d, i64_buf);
      } else {
        cvt_in_i64_avx2(d, [&](int j) { return i64_elem(p, n.imm, j); });
      }
    } else if (t == Dtype::I64) {
      Opnd lo = telem_half(p, n.imm, 0), hi = telem_half(p, n.imm, 1);
      if (m) {
        as.masked(1, true);
        as.v(VI::vmovdqu64, asmx::vreg(1, W::Z), lo);
        as.v(VI::kshiftrw, asmx::kreg(7), asmx::kreg(1), asmx::imm(8));
        as.masked(7, true);
        as.v(VI::vmovdqu64, asmx::vreg(2, W::Z), hi);
        lo = asmx::vreg(1, W::Z);
        hi = asmx::vreg(2, W::Z);
      }
      cvt_in_i64(d, lo, hi);
    } else if (!m) {
      cvt_in(t, d, telem(p, t, n.imm), ints_of(n));
    } else if (avx512) {  // masked lanes read 0
      as.masked(1, true);
      as.v(movdqu_for(t), raw_reg(1, t), telem(p, t, n.imm));
      cvt_in(t, d, raw_reg(1, t), ints_of(n));
    } else {  // rem elements through the zeroed buffer
      as.lea(asmx::r11, telem(p, t, n.imm));
      zero_typed_buf(32);
      copy_bytes(t, n.imm, true);
      cvt_in(t, d, asmx::mem(asmx::rsp, kTypedBuf, raw_bytes(t)), ints_of(n));
    }
    commit(i);
  }

  // One element broadcast, then converted.
  void typed_load_b(int32_t i, const Node& n) {
    const Dtype t = type_of(n);
    Gp p = arg_ptr(n, asmx::rax);
    const Opnd d = dst(i);
    const size_t b = dtype_size(t);
    if (t == Dtype::I64 && !avx512) {
      const Opnd x1 = asmx::vreg(1, W::X);
      as.v(VI::vxorps, x1, x1, x1);
      as.v(VI::vcvtsi2ss, x1, x1, asmx::mem(p, 0, 8));
      as.v(VI::vbroadcastss, d, x1);
    } else if (t == Dtype::I64) {
      as.v(VI::vpbroadcastq, asmx::vreg(1, W::Z), asmx::mem(p, 0, 8));
      cvt_in_i64(d, asmx::vreg(1, W::Z), asmx::vreg(1, W::Z));
    } else {
      const VI bc = b == 1 ? VI::vpbroadcastb : b == 2 ? VI::vpbroadcastw : VI::vpbroadcastd;
      as.v(bc, raw_reg(1, t), asmx::mem(p, 0, static_cast<int>(b)));
      cvt_in(t, d, raw_reg(1, t), ints_of(n));
    }
    commit(i);
  }

  // For a strided load or store of copy n.imm (elements of 1 << sh bytes):
  // r11 = the address of element i, base + i * cs, and rax = cs in bytes.
  void strided_address(const Node& n, int sh) {
    as.mov(asmx::r11, asmx::mem(asmx::rdi, kOffCs + 8 * n.arg));
    if (n.imm) {
      as.lea(asmx::rcx, asmx::mem(asmx::rsi, n.imm * lanes));
      as.imul(asmx::r11, asmx::rcx);
    } else {
      as.imul(asmx::r11, asmx::rsi);
    }
    Gp p = arg_ptr(n, asmx::rax);
    as.lea(asmx::r11, asmx::mem(p, asmx::r11, sh, 0));
    as.mov(asmx::rax, asmx::mem(asmx::rdi, kOffCs + 8 * n.arg));
    if (sh) as.shl(asmx::rax, sh);
  }

  // Strided gather of raw elements into the typed buffer (element j at
  // base + (i + j) * cs), then converted from there.
  void typed_gather(int32_t i, const Node& n, bool masked) {
    const Dtype t = type_of(n);
    const int sh = elem_shift(t), b = static_cast<int>(dtype_size(t));
    strided_address(n, sh);
    if (t != Dtype::I64) {  // built in registers (gather_dwords)
      const Opnd d = dst(i);
      const int copy = masked ? n.imm : -1;
      if (b == 4) {
        gather_dwords(d, copy);
        cvt_in(t, d, d, ints_of(n));
      } else {
        cvt_in(t, d, gather_narrow(t, b, copy), ints_of(n));
      }
      commit(i);
      return;
    }
    if (!masked) {
      for (int j = 0; j < lanes; ++j) {
        as.load_n(asmx::rcx, asmx::mem(asmx::r11, 0), b);
        as.store_n(asmx::mem(asmx::rsp, kTypedBuf + b * j), asmx::rcx, b);
        if (j + 1 < lanes) as.add(asmx::r11, asmx::rax);
      }
    } else {
      zero_typed_buf(std::max(32, raw_bytes(t)));
      asmx::Label top = as.new_label(), done = as.new_label();
      as.sub(asmx::rcx, asmx::rcx);
      as.bind(top);
      as.cmp(asmx::rcx, asmx::mem(asmx::rsp, rem_slot(n.imm)));
      as.j(Cond::GE, done);
      as.load_n(asmx::rdx, asmx::mem(asmx::r11, 0), b);
      as.store_n(asmx::mem(asmx::rsp, asmx::rcx, sh, kTypedBuf), asmx::rdx, b);
      as.add(asmx::r11, asmx::rax);
      as.add(asmx::rcx, 1);
      as.jmp(top);
      as.bind(done);
      as.mov(asmx::rdx, asmx::mem(asmx::rdi, kOffN));
    }
    const Opnd d = dst(i);
    if (t == Dtype::I64 && !avx512) cvt_in_i64_avx2(d, i64_buf);
    else if (t == Dtype::I64) cvt_in_i64(d, asmx::mem(asmx::rsp, kTypedBuf, 64), asmx::mem(asmx::rsp, kTypedBuf + 64, 64));
    else cvt_in(t, d, asmx::mem(asmx::rsp, kTypedBuf, raw_bytes(t)), ints_of(n));
    commit(i);
  }

  // Whether the full-vector store n of type t bypasses the caches: in the
  // streaming variant, to an argument, a vector of at least 16 bytes
  // (stream_bytes_per_vector in jit.h; the launch checked its alignment).
  bool streams(const Node& n, Dtype t) const {
    return ir.stream_stores && n.phase != kPhaseScratch && stream_bytes_per_vector(t, avx512) > 0;
  }

  void typed_store(const Node& n, bool masked) {
    const Dtype t = type_of(n);
    const bool m = masked_copy(masked, n.imm);
    if (m) use_copy_mask(n.imm);
    const Opnd s = src_reg(n.a, 0);
    if (t == Dtype::I64 && !avx512) {
      if (m) {  // rem elements from the buffer
        cvt_out_i64_avx2(s, i64_buf);
        Gp p = arg_ptr(n, asmx::rax);
        as.lea(asmx::r11, telem(p, t, n.imm));
        copy_bytes(t, n.imm, false);
      } else {
        // Every lane below 2^31 in magnitude (not NaN): vcvttps2dq and a
        // sign extension give vcvttss2si's int64s. Else element by element.
        Gp p = arg_ptr(n, asmx::rax);
        const Opnd y1 = asmx::vreg(1, W::Y), y2 = asmx::vreg(2, W::Y), x1 = asmx::vreg(1, W::X);
        const asmx::Label slow = as.new_label(), done = as.new_label();
        as.v(VI::vandps, y1, asmx::vreg(s.reg, W::Y), kconst(0x7fffffffu));
        as.v(VI::vcmpps, y1, y1, kconst(0x4f000000u), asmx::imm(5));  // NLT_UQ: >= 2^31 or NaN
        as.v(VI::vtestps, y1, y1);
        as.j(Cond::NE, slow);
        as.v(VI::vcvttps2dq, y1, asmx::vreg(s.reg, W::Y));
        as.v(VI::vpmovsxdq, y2, x1);
        as.v(VI::vmovups, asmx::mem(p, asmx::rsi, 3, n.imm * 64, 32), y2);
        as.v(VI::vextractf128, x1, y1, asmx::imm(1));
        as.v(VI::vpmovsxdq, y2, x1);
        as.v(VI::vmovups, asmx::mem(p, asmx::rsi, 3, n.imm * 64 + 32, 32), y2);
        as.jmp(done);
        as.bind(slow);
        cvt_out_i64_avx2(s, [&](int j) { return i64_elem(p, n.imm, j); });
        as.bind(done);
      }
      return;
    }
    if (t == Dtype::I64) {  // AVX-512: truncation, NaN and out of range INT64_MIN
      const Opnd z1 = asmx::vreg(1, W::Z), z2 = asmx::vreg(2, W::Z);
      as.v(VI::vcvttps2qq, z1, asmx::vreg(s.reg, W::Y));
      as.v(VI::vextractf32x8, asmx::vreg(2, W::Y), s, asmx::imm(1));
      as.v(VI::vcvttps2qq, z2, asmx::vreg(2, W::Y));
      Gp p = arg_ptr(n, asmx::rax);
      if (m) {
        as.v(VI::kshiftrw, asmx::kreg(7), asmx::kreg(1), asmx::imm(8));
        as.masked(1, false);
        as.v(VI::vmovdqu64, telem_half(p, n.imm, 0), z1);
        as.masked(7, false);
        as.v(VI::vmovdqu64, telem_half(p, n.imm, 1), z2);
      } else {
        const VI mov = streams(n, t) ? VI::vmovntps : VI::vmovups;
        as.v(mov, telem_half(p, n.imm, 0), z1);
        as.v(mov, telem_half(p, n.imm, 1), z2);
      }
      return;
    }
    const Opnd r = cvt_out(t, s, ints_of(n));
    Gp p = arg_ptr(n, asmx::rax);
    if (!m && streams(n, t)) {
      as.v(VI::vmovntdq, telem(p, t, n.imm), r);  // r is the raw view, 16 bytes or more
    } else if (!m) {
      store_raw(telem(p, t, n.imm), r, raw_bytes(t));
    } else if (avx512) {
      as.masked(1, false);
      as.v(movdqu_for(t), telem(p, t, n.imm), r);
    } else {  // rem elements from the buffer
      store_raw(asmx::mem(asmx::rsp, kTypedBuf, raw_bytes(t)), r, raw_bytes(t));
      as.lea(asmx::r11, telem(p, t, n.imm));
      copy_bytes(t, n.imm, false);
    }
  }

  // Strided scatter (STS): the vector converted as a contiguous store
  // converts it, then each raw element stored from its register to
  // base + (i + j) * cs (vextractps, vpextrw, vpextrb per 16-byte chunk); a
  // masked tail stores its first rem. int64 elements go through the typed
  // buffer, one general-purpose move each. The mirror of the strided loads.
  void scatter(const Node& n, bool masked) {
    const Dtype t = type_of(n);
    const int sh = elem_shift(t), b = static_cast<int>(dtype_size(t));
    const Opnd s = src_reg(n.a, 0);
    Opnd raw = s;  // float32 lanes as they are
    if (t == Dtype::I64 && !avx512) {
      cvt_out_i64_avx2(s, i64_buf);
    } else if (t == Dtype::I64) {  // as typed_store
      const Opnd z1 = asmx::vreg(1, W::Z), z2 = asmx::vreg(2, W::Z);
      as.v(VI::vcvttps2qq, z1, asmx::vreg(s.reg, W::Y));
      as.v(VI::vextractf32x8, asmx::vreg(2, W::Y), s, asmx::imm(1));
      as.v(VI::vcvttps2qq, z2, asmx::vreg(2, W::Y));
      as.v(VI::vmovups, asmx::mem(asmx::rsp, kTypedBuf, 64), z1);
      as.v(VI::vmovups, asmx::mem(asmx::rsp, kTypedBuf + 64, 64), z2);
    } else if (typed(n)) {
      raw = cvt_out(t, s, ints_of(n));
    }
    strided_address(n, sh);
    const asmx::Label done = as.new_label();
    if (masked) as.mov(asmx::rdx, asmx::mem(asmx::rsp, rem_slot(n.imm)));
    if (t == Dtype::I64) {
      for (int j = 0; j < lanes; ++j) {
        if (masked) {
          as.cmp(asmx::rdx, j);
          as.j(Cond::LE, done);
        }
        as.load_n(asmx::rcx, asmx::mem(asmx::rsp, kTypedBuf + 8 * j), 8);
        as.store_n(asmx::mem(asmx::r11, 0), asmx::rcx, 8);
        if (j + 1 < lanes) as.add(asmx::r11, asmx::rax);
      }
    } else {
      const VI ext = b == 4 ? VI::vextractps : b == 2 ? VI::vpextrw : VI::vpextrb;
      const int per = 16 / b, bytes = lanes * b;
      for (int g = 0; g * 16 < bytes; ++g) {
        Opnd x = asmx::vreg(raw.reg, W::X);
        if (g > 0) {  // chunk g into scratch 2 (cvt_out's raw view is scratch 1)
          x = asmx::vreg(2, W::X);
          if (bytes == 64) as.v(VI::vextractf32x4, x, asmx::vreg(raw.reg, W::Z), asmx::imm(g));
          else as.v(VI::vextractf128, x, asmx::vreg(raw.reg, W::Y), asmx::imm(g));
        }
        for (int k = 0; k < per && g * per + k < lanes; ++k) {
          const int j = g * per + k;
          if (masked) {
            as.cmp(asmx::rdx, j);
            as.j(Cond::LE, done);
          }
          as.v(ext, asmx::mem(asmx::r11, 0, b), x, asmx::imm(k));
          if (j + 1 < lanes) as.add(asmx::r11, asmx::rax);
        }
      }
    }
    as.bind(done);
    if (masked) as.mov(asmx::rdx, asmx::mem(asmx::rdi, kOffN));
  }

  // Lane 0 of the row value, converted, as one element.
  void typed_store_b(const Node& n) {
    const Dtype t = type_of(n);
    const Opnd s = src_reg(n.a, 0);
    const Opnd x1 = asmx::vreg(1, W::X);
    if (t == Dtype::I64) {  // truncation, NaN and out of range INT64_MIN
      Gp p = arg_ptr(n, asmx::rax);
      if (avx512) {
        as.v(VI::vcvttps2qq, x1, asmx::vreg(s.reg, W::X));
        as.v(VI::vmovq, asmx::mem(p, 0, 8), x1);
      } else {
        as.v(VI::vcvttss2si, asmx::gpr(asmx::rcx), asmx::vreg(s.reg, W::X));
        as.mov(asmx::mem(p, 0, 8), asmx::rcx);
      }
      return;
    }
    cvt_out(t, s, ints_of(n));
    Gp p = arg_ptr(n, asmx::rax);
    switch (dtype_size(t)) {
      case 1: as.v(VI::vpextrb, asmx::mem(p, 0, 1), x1, asmx::imm(0)); break;
      case 2: as.v(VI::vpextrw, asmx::mem(p, 0, 2), x1, asmx::imm(0)); break;
      default: as.v(VI::vmovd, asmx::mem(p, 0, 4), x1); break;
    }
  }

  void node(int32_t i, bool masked) {
    const Node& n = nodes[static_cast<size_t>(i)];
    switch (n.op) {
      case IrOp::Const:
      case IrOp::LoopBegin:
      case IrOp::LoopEnd:
      case IrOp::CopyBegin: return;
      case IrOp::SkipIfNone: {
        if (avx512) {
          const Opnd k = ksrc(n.a, 6);
          as.v(VI::kortestw, k, k);
        } else {
          const Opnd m = src_reg(n.a, 2);
          as.v(VI::vtestps, m, m);  // ZF: no sign bit set
        }
        region_end = as.new_label();
        as.j(asmx::Cond::E, region_end);
        return;
      }
      case IrOp::RegionEnd: as.bind(region_end); return;
      case IrOp::Init:
        as.v(VI::vbroadcastss, dst(i), as.constant(n.u, 4));
        commit(i);
        return;
      case IrOp::Load: {
        if (typed(n)) {
          typed_load(i, n, masked);
          return;
        }
        // Scratch rows are whole vectors: their tails load and store whole,
        // since a masked store does not forward to a later load of it (a stall
        // per row on short rows); the lanes past n are never folded or stored.
        const bool m = masked_copy(masked, n.imm) && n.phase != kPhaseScratch;
        if (skipped(i, masked)) return;  // the next node reads the memory
        if (m) use_copy_mask(n.imm);
        Gp p = arg_ptr(n, asmx::rax);
        if (m) masked_load(dst(i), elem(p, n.imm), n.imm);
        else as.v(VI::vmovups, dst(i), elem(p, n.imm));
        commit(i);
        return;
      }
      case IrOp::Param:  // rax is free between nodes
        as.mov(asmx::rax, asmx::mem(asmx::rdi, kOffScalars));
        as.v(VI::vbroadcastss, dst(i), asmx::mem(asmx::rax, static_cast<int32_t>(4 * n.u), 4));
        commit(i);
        return;
      case IrOp::LoadB: {
        if (typed(n)) {
          typed_load_b(i, n);
          return;
        }
        Gp p = arg_ptr(n, asmx::rax);
        as.v(VI::vbroadcastss, dst(i), asmx::mem(p, 0, 4));
        commit(i);
        return;
      }
      case IrOp::LoadS:
        if (typed(n)) typed_gather(i, n, masked_copy(masked, n.imm));
        else gather(i, n, masked_copy(masked, n.imm));
        return;
      case IrOp::Store: {
        if (typed(n)) {
          typed_store(n, masked);
          return;
        }
        const bool m = masked_copy(masked, n.imm) && n.phase != kPhaseScratch;  // whole, as Load
        if (m) use_copy_mask(n.imm);
        Opnd s = src_reg(n.a, 0);
        Gp p = arg_ptr(n, asmx::rax);
        if (!m) {
          as.v(ir.stream_stores && n.phase != kPhaseScratch ? VI::vmovntps : VI::vmovups, elem(p, n.imm), s);
        } else if (avx512) {
          as.masked(1, false);
          as.v(VI::vmovups, elem(p, n.imm), s);
        } else {
          Opnd k = avx2_tail_mask(1, n.imm);
          as.v(VI::vmaskmovps, elem(p, n.imm), k, s);
        }
        return;
      }
      case IrOp::StoreS: scatter(n, masked_copy(masked, n.imm)); return;
      case IrOp::StoreB: {
        if (typed(n)) {
          typed_store_b(n);
          return;
        }
        Opnd s = src_reg(n.a, 0);
        Gp p = arg_ptr(n, asmx::rax);
        as.v(VI::vmovss, asmx::mem(p, 0, 4), asmx::vreg(s.reg, W::X));
        return;
      }
      case IrOp::Add: binary(VI::vaddps, i, n, masked); return;
      case IrOp::Sub: binary(VI::vsubps, i, n, masked); return;
      case IrOp::Mul: binary(VI::vmulps, i, n, masked); return;
      case IrOp::Div: binary(VI::vdivps, i, n, masked); return;
      case IrOp::Scalef: binary(VI::vscalefps, i, n, masked); return;  // AVX-512 only (generate)
      case IrOp::Min: binary(VI::vminps, i, n, masked); return;
      case IrOp::Max: binary(VI::vmaxps, i, n, masked); return;
      case IrOp::And: binary(VI::vandps, i, n, masked); return;
      case IrOp::Or: binary(VI::vorps, i, n, masked); return;
      case IrOp::Xor: binary(VI::vxorps, i, n, masked); return;
      case IrOp::AndN: binary(VI::vandnps, i, n, masked); return;
      case IrOp::IAdd: binary(VI::vpaddd, i, n, masked); return;
      case IrOp::ISub: binary(VI::vpsubd, i, n, masked); return;
      case IrOp::IAnd:
        if (folded[static_cast<size_t>(i)] == 3) return;  // its IEq emits vptestnmd
        binary(avx512 ? VI::vpandd : VI::vpand, i, n, masked);
        return;
      case IrOp::IMul: binary(VI::vpmulld, i, n, masked); return;
      case IrOp::IFloorDiv: floordiv(i, n); return;
      case IrOp::Sqrt:
      case IrOp::CvtRound:
      case IrOp::CvtTrunc:
      case IrOp::CvtFloat: {
        Opnd a = src_any(n.a);
        as.v(n.op == IrOp::Sqrt       ? VI::vsqrtps
             : n.op == IrOp::CvtRound ? VI::vcvtps2dq
             : n.op == IrOp::CvtTrunc ? VI::vcvttps2dq
                                      : VI::vcvtdq2ps,
             dst(i), a);
        commit(i);
        return;
      }
      case IrOp::Round: {
        Opnd a = src_any(n.a);
        as.v(avx512 ? VI::vrndscaleps : VI::vroundps, dst(i), a, asmx::imm(n.imm | 8));
        commit(i);
        return;
      }
      case IrOp::Shl:
      case IrOp::Shr:
      case IrOp::Sra: {
        Opnd a = src_reg(n.a, 0);
        as.v(n.op == IrOp::Shl ? VI::vpslld : n.op == IrOp::Shr ? VI::vpsrld : VI::vpsrad, dst(i), a,
             asmx::imm(n.imm));
        commit(i);
        return;
      }
      case IrOp::Fma:
      case IrOp::Fnma: fma(i, n); return;
      case IrOp::OrAnd: or_and(i, n); return;
      case IrOp::Cmp:
      case IrOp::IEq:
      case IrOp::IGt: {
        if (n.op == IrOp::IEq && folded[static_cast<size_t>(n.a)] == 3) {  // (x & c) == 0
          const Node& t = nodes[static_cast<size_t>(n.a)];
          as.v(VI::vptestnmd, kdst(i), src_reg(t.a, 0), src_any(t.b));
          kcommit(i);
          return;
        }
        Opnd a = src_reg(n.a, 0);
        Opnd b = src_any(n.b);
        const bool fcmp = n.op == IrOp::Cmp;
        const VI inst = fcmp ? VI::vcmpps : n.op == IrOp::IEq ? VI::vpcmpeqd : VI::vpcmpgtd;
        const Opnd d = avx512 ? kdst(i) : dst(i);
        if (fcmp) as.v(inst, d, a, b, asmx::imm(vcmpps_imm(static_cast<CmpPred>(n.imm))));
        else as.v(inst, d, a, b);
        if (avx512) kcommit(i);
        else commit(i);
        return;
      }
      case IrOp::MAnd:
      case IrOp::MOr:
        if (avx512) {
          Opnd a = ksrc(n.a, 6), b = ksrc(n.b, 7);
          as.v(n.op == IrOp::MAnd ? VI::kandw : VI::korw, kdst(i), a, b);
          kcommit(i);
        } else {
          binary(n.op == IrOp::MAnd ? VI::vandps : VI::vorps, i, n, masked);
        }
        return;
      case IrOp::MNot:
        if (avx512) {
          Opnd a = ksrc(n.a, 6);
          as.v(VI::knotw, kdst(i), a);
          kcommit(i);
        } else {
          Opnd a = src_reg(n.a, 0);
          as.v(VI::vxorps, dst(i), a, as.constant(0xffffffffu, 32));
          commit(i);
        }
        return;
      case IrOp::Select: {  // a ? b : c
        Opnd c = src_reg(n.c, 0);
        Opnd b = src_any(n.b);
        if (avx512) {
          Opnd k = ksrc(n.a, 6);
          as.masked(k.reg, false);
          as.v(VI::vblendmps, dst(i), c, b);
        } else {
          Opnd m = src_reg(n.a, 2);
          as.v(VI::vblendvps, dst(i), c, b, m);
        }
        commit(i);
        return;
      }
      case IrOp::TailSel: {
        if (skipped(i, masked)) return;  // the next node reads the load's memory
        if (!masked) {
          Opnd a = src_reg(n.a, 0);
          if (a.reg != dst(i).reg) as.v(VI::vmovaps, dst(i), a);
        } else {
          Opnd id = const_reg(n.u, 1);
          Opnd a = src_any(n.a);
          if (avx512) {
            as.masked(1, false);
            as.v(VI::vblendmps, dst(i), id, a);
          } else {
            Opnd k = avx2_tail_mask(2);
            as.v(VI::vblendvps, dst(i), id, a, k);
          }
        }
        commit(i);
        return;
      }
      case IrOp::HReduce: hreduce(i, n); return;
      case IrOp::Copy: {
        if (alias[static_cast<size_t>(n.b)] == n.a) return;
        Opnd s = src_reg(n.b, 0);
        const int r = reg[loc(n.a)];
        if (r >= 0) {
          if (r != s.reg) as.v(VI::vmovaps, vr(r), s);
        } else {
          as.v(VI::vmovups, slot_mem(n.a, vbytes), s);
        }
        return;
      }
    }
  }
};

}  // namespace

namespace {
std::atomic<bool> g_bf16_allowed{true};
}  // namespace

void set_target_bf16(bool on) { g_bf16_allowed.store(on, std::memory_order_relaxed); }

bool target_caps(Isa isa, TargetCaps* caps, std::string* reason) {
  if (isa != Isa::Avx2 && isa != Isa::Avx512) {
    *reason = "the JIT emits AVX2 or AVX-512 only";
    return false;
  }
  const bool is512 = isa == Isa::Avx512;
  caps->lanes = is512 ? 16 : 8;
  caps->fused_or_and = is512;  // vpternlogd
  caps->scale_exp = is512;     // vscalefps
  caps->mask_regs = is512;     // k2..k5 (k1: the tail mask; k6, k7: reloads)
  caps->bf16_convert = is512 && cpu_has_avx512_bf16() && g_bf16_allowed.load(std::memory_order_relaxed);
  caps->vector_regs = is512 ? 32 : 16;
  caps->first_vector_reg = kFirstVec;
  caps->first_mask_reg = is512 ? kFirstK : 0;
  caps->mask_reg_end = is512 ? kLastK + 1 : 0;
  return true;
}

void* emit(const IrBuilder& ir, const Allocation& al, const TargetCaps& caps, Isa isa, size_t* code_bytes,
           std::string* reason) {
  thread_local HoistPlan plan;  // reused: its lists keep their capacity
  hoisted_constants(ir, al, caps, &plan);
  Gen g(ir, al, plan, caps, isa == Isa::Avx512);
  g.scratch_rows = ir.scratch_rows;
  g.plan_pointers();
  g.plan_folds();
  g.function();
  return g.as.finish(code_bytes, reason);
}

void release_code(void* fn) { asmx::release(fn); }

void set_target_log(bool on) { asmx::set_log(on); }

}  // namespace dvm::backends::jit
