// Lowering: verified bytecode -> vector IR, one loop body per pass. Every op
// body comes from the templates the interpreter's micro-kernels instantiate
// (backends/microkernels_impl.h over backends/math/vmath.h), instantiated here
// with JitVec.
#include <algorithm>
#include <array>
#include <cstring>

#include "backends/jit/lower.h"
#include "backends/microkernels.h"
#include "backends/microkernels_impl.h"

namespace dvm::backends::jit {
namespace {

using vm::Kind;
using vm::Op;
using vm::OpClass;

// Loads the machine code reads contiguously along C from the call's base
// (an LDG's row base comes from its gather dims: run_items).
bool reads_in_place(Op op) { return op == Op::LD || op == Op::LDG; }

// ---------------------------------------------------------------------------
// One table from opcode to its JitVec body (sources in operand order; for
// reductions s[0] is the accumulator and s[1] the new value).
// ---------------------------------------------------------------------------
using ApplyFn = JitVec (*)(const JitVec* s);

template <Op kOp, OpClass kCls>
JitVec apply_op(const JitVec* s) {
  if constexpr (vm::int64_op(kOp)) return s[0];  // never lowered: kernels with int64 lanes stay interpreted
  else if constexpr (kCls == OpClass::Unary) return detail::unary_op<JitVec, kOp>(s[0]);
  else if constexpr (kCls == OpClass::Binary) return detail::binary_op<JitVec, kOp>(s[0], s[1]);
  else if constexpr (kCls == OpClass::Ternary)
    return detail::ternary_op<JitVec, kOp>(s[0], s[1], s[2]);
  else if constexpr (kCls == OpClass::Reduce) return detail::reduce_op<JitVec, kOp>(s[0], s[1]);
  else return s[0];
}

constexpr ApplyFn kApply[vm::kNumOps] = {
#define DVM_X(name, mn, cls, sig) &apply_op<Op::name, OpClass::cls>,
    DVM_OPCODES(DVM_X)
#undef DVM_X
};

template <Op kOp>
constexpr uint32_t identity_bits() {
  return std::bit_cast<uint32_t>(detail::reduce_identity<JitVec, kOp>());
}
uint32_t reduce_identity_bits(Op op) {
  switch (op) {
    case Op::RSUM: return identity_bits<Op::RSUM>();
    case Op::RMAX: return identity_bits<Op::RMAX>();
    default: return identity_bits<Op::RMIN>();
  }
}
uint8_t hreduce_kind(Op op) { return op == Op::RSUM ? 0 : op == Op::RMAX ? 1 : 2; }
Op combine_op(Op reduce) {
  return reduce == Op::RSUM ? Op::ADD : reduce == Op::RMAX ? Op::MAX : Op::MIN;
}

// Scalar parameters one kernel's machine code holds (each in a register or a
// spill slot for the whole call); a kernel with more stays on the interpreter.
constexpr int kMaxJitParams = 256;

// RowReduce: a folding pass whose body (one copy) has more IR nodes than this
// is split (Lowering::split_slots) instead of copied four times.
constexpr int kSplitBodyNodes = 24;
// RowReduce: a vec value several passes need is kept in a scratch row when
// recomputing it costs at least this many vector ops (recompute_cost).
constexpr int kKeepMinCost = 3;

enum : uint8_t { kNoReader = 0, kBf16Stores = 1, kOtherReaders = 2 };

// The lists a lowering works in, kept per thread: each compile reuses the
// last one's capacity instead of allocating them again.
struct LowerLists {
  std::vector<std::array<int32_t, 3>> src;
  std::vector<uint8_t> live;
  std::vector<int32_t> row_val, vec_val, acc, reg_def, params;
  std::vector<int> cached, slot, cost, rows;
  std::vector<uint8_t> stb_after, only_folds, readers;
  std::vector<std::vector<uint8_t>> need_at;
  std::vector<std::vector<int32_t>> per_copy[2];  // per copy of a body: values, accumulators
};

// lists[0 .. n) of ni entries each, all -1 (their capacity kept).
void reset_lists(std::vector<std::vector<int32_t>>& lists, size_t n, size_t ni) {
  if (lists.size() < n) lists.resize(n);
  for (size_t k = 0; k < n; ++k) lists[k].assign(ni, -1);
}

struct Lowering {
  const vm::VerifiedProgram& vp;
  const vm::Program& p;
  IrBuilder& ir;
  size_t ni;
  LowerLists& lists;
  std::vector<std::array<int32_t, 3>>& src = lists.src;  // defining instruction of each source
  std::vector<uint8_t>& live = lists.live;
  std::vector<int32_t>& row_val = lists.row_val;  // IR value of row values and reduction results
  std::vector<int32_t>& vec_val = lists.vec_val;  // IR value of vec values in the current body
  std::vector<int32_t>& acc = lists.acc;          // accumulator per reduction
  uint8_t copy = 0;                               // which copy of an unrolled body is being recorded
  std::vector<int>& cached_ = lists.cached;       // RowReduce: pass that keeps the value in a scratch row, or -1
  std::vector<int>& slot_ = lists.slot;           // ... and that row
  // Per instruction, what reads its value: kNoReader, kBf16Stores (only
  // stores to bfloat16 arguments), or kOtherReaders.
  std::vector<uint8_t>& readers_ = lists.readers;
  bool bf16_tanh_ = false;  // recording an Elementwise body: tanh_for_bf16 applies
  // RowReduce for rows of at most one vector: folding passes keep one
  // accumulator (lower(), one_vector_rows).
  bool one_vector_rows_ = false;

  Lowering(const vm::VerifiedProgram& v, IrBuilder& b, LowerLists& l)
      : vp(v), p(v.program), ir(b), ni(v.program.code.size()), lists(l) {}

  OpClass cls(size_t i) const { return vm::op_class(p.code[i].op); }
  Kind kind(size_t i) const { return vp.info[i].dst_kind; }
  int level(size_t i) const { return vp.info[i].level; }
  bool is_store(size_t i) const { return cls(i) == OpClass::Store; }

  void analyse() {
    src.assign(ni, {-1, -1, -1});
    std::vector<int32_t>& reg_def = lists.reg_def;
    reg_def.assign(static_cast<size_t>(p.nregs), -1);
    for (size_t i = 0; i < ni; ++i) {
      const vm::Instr& ins = p.code[i];
      const char* sig = vm::op_info(ins.op).signature;
      int k = 0;
      for (int j = 0; sig[j]; ++j)
        if (sig[j] == 'R') src[i][static_cast<size_t>(k++)] = reg_def[ins.r[j]];
      for (int j = 0; sig[j]; ++j)
        if (sig[j] == 'D') reg_def[ins.r[j]] = static_cast<int32_t>(i);
    }
    readers_.assign(ni, kNoReader);
    for (size_t i = 0; i < ni; ++i) {
      const vm::Instr& ins = p.code[i];
      const size_t arg = ins.r[0];
      const bool bf16_store = ins.op == Op::ST && p.types[arg] == Dtype::BF16 && !ir.arg_int[arg];
      for (int32_t d : src[i])
        if (d >= 0) {
          uint8_t& r = readers_[static_cast<size_t>(d)];
          r = bf16_store && r != kOtherReaders ? kBf16Stores : kOtherReaders;
        }
    }
    live.assign(ni, 0);
    for (size_t i = ni; i-- > 0;) {
      if (is_store(i)) live[i] = 1;
      if (!live[i]) continue;
      for (int32_t d : src[i])
        if (d >= 0) live[static_cast<size_t>(d)] = 1;
    }
    row_val.assign(ni, -1);
    vec_val.assign(ni, -1);
    acc.assign(ni, -1);
  }

  // What recomputing each vec value in a later pass costs, in rough vector
  // ops over its cone (loads and row values are free: a scratch reload is a
  // load too). Shared operands count once per use; saturates.
  const std::vector<int>& recompute_costs() const {
    std::vector<int>& cost = lists.cost;
    cost.assign(ni, 0);
    for (size_t i = 0; i < ni; ++i) {
      if (kind(i) != Kind::Vec || cls(i) == OpClass::Load || cls(i) == OpClass::Const) continue;
      int c = 1;
      switch (p.code[i].op) {
        case Op::EXP: case Op::LOG: case Op::TANH: case Op::SIGMOID: case Op::GELU_TANH:
        case Op::GELU_ERF: case Op::ERF: case Op::SIN: case Op::COS: case Op::POW:
        case Op::DIV: case Op::SQRT: case Op::RSQRT: case Op::RECIP: case Op::FLOORDIV: case Op::REM:
        case Op::IFLOORDIV: case Op::IREM: c = 8; break;
        default: break;
      }
      for (int32_t d : src[i])
        if (d >= 0) c += cost[static_cast<size_t>(d)];
      cost[i] = std::min(c, 1 << 20);
    }
    return cost;
  }

  // tanh of a value that is only stored as bfloat16: the one-divide
  // candidate, and tanh itself where some lane's rounding is not decided by
  // it (math::tanh_bf16_unsure). The bfloat16 stored is tanh's either way.
  int32_t tanh_for_bf16(int32_t x) {
    const JitVec y = math::tanh_bf16_candidate(JitVec{x});
    ir.op(IrOp::SkipIfNone, math::tanh_bf16_unsure(y).id);
    const JitVec exact = math::tanh(JitVec{x});
    ir.op(IrOp::Copy, y.id, exact.id);
    ir.op(IrOp::RegionEnd, -1);
    return y.id;
  }

  int32_t val(int32_t def) const {
    const size_t d = static_cast<size_t>(def);
    return kind(d) == Kind::Row ? row_val[d] : vec_val[d];
  }

  // Records instruction i (not a reduction); returns its value or -1.
  int32_t compute(size_t i, uint8_t phase) {
    const vm::Instr& ins = p.code[i];
    switch (cls(i)) {
      case OpClass::Load: {
        Node n{reads_in_place(ins.op) ? IrOp::Load : ins.op == Op::LDB ? IrOp::LoadB : IrOp::LoadS};
        n.arg = ins.r[1];
        n.phase = phase;
        if (n.op != IrOp::LoadB) n.imm = copy;
        return ir.add(n);
      }
      case OpClass::Store: {
        Node n{ins.op == Op::ST ? IrOp::Store : ins.op == Op::STS ? IrOp::StoreS : IrOp::StoreB};
        n.arg = ins.r[0];
        n.phase = phase;
        if (n.op != IrOp::StoreB) n.imm = copy;
        n.a = val(src[i][0]);
        ir.add(n);
        return -1;
      }
      case OpClass::Const:
        if (ins.op == Op::CONST) return ir.konst(std::bit_cast<uint32_t>(ins.imm));
        return params[ins.scalar];  // loaded once per call (load_params)
      case OpClass::Unary:
      case OpClass::Binary:
      case OpClass::Ternary: {
        if (ins.op == Op::TANH && bf16_tanh_ && readers_[i] == kBf16Stores) return tanh_for_bf16(val(src[i][0]));
        JitVec s[3] = {{-1}, {-1}, {-1}};
        for (size_t k = 0; k < 3; ++k)
          if (src[i][k] >= 0) s[k].id = val(src[i][k]);
        return kApply[static_cast<int>(ins.op)](s).id;
      }
      case OpClass::Reduce:
      case OpClass::Contract: break;  // Contraction kernels are declined before lowering
    }
    return -1;
  }

  // Scalar parameters broadcast into registers once per call, before every
  // loop: a value read after a loop that may run no time (a ColReduce
  // epilogue when R = 0) is then still set.
  std::vector<int32_t>& params = lists.params;
  void load_params() {
    params.assign(static_cast<size_t>(p.nscalars), -1);
    for (const vm::Instr& ins : p.code)
      if (ins.op == Op::PARAM && params[ins.scalar] < 0) {
        Node n{IrOp::Param};
        n.u = ins.scalar;
        params[ins.scalar] = ir.add(n);
      }
  }

  void set(size_t i, int32_t v) { (kind(i) == Kind::Row ? row_val : vec_val)[i] = v; }

  int32_t loop_begin(uint8_t kind_) {
    Node n{IrOp::LoopBegin};
    n.imm = kind_;
    return ir.add(n);
  }
  void loop_end(int32_t begin) {
    Node n{IrOp::LoopEnd};
    n.a = begin;
    int32_t e = ir.add(n);
    ir.nodes[static_cast<size_t>(begin)].a = e;
  }

  void fold(size_t i, Op combine, bool tail_identity) {
    const Op op = p.code[i].op;
    JitVec s[2] = {{acc[i]}, {val(src[i][0])}};
    if (tail_identity) {
      Node t{IrOp::TailSel};
      t.a = s[1].id;
      t.u = reduce_identity_bits(op);
      s[1].id = ir.add(t);
    }
    int32_t r = kApply[static_cast<int>(combine)](s).id;
    ir.op(IrOp::Copy, acc[i], r);
  }

  // The Elementwise loop body (vec values and stores) `copies` times: copy k
  // reads and writes elements i + k * lanes. Interleaved: instruction by
  // instruction across the copies (independent registers where they fit);
  // otherwise one whole copy after another.
  void ew_body(int copies, bool interleave) {
    std::vector<std::vector<int32_t>>& vals = lists.per_copy[0];
    reset_lists(vals, static_cast<size_t>(copies), ni);
    auto one = [&](size_t i, int k) {
      if (!live[i] || (!is_store(i) && kind(i) != Kind::Vec)) return;
      copy = static_cast<uint8_t>(k);
      vec_val.swap(vals[static_cast<size_t>(k)]);
      if (is_store(i)) compute(i, kPhaseRow);
      else set(i, compute(i, kPhaseRow));
      vec_val.swap(vals[static_cast<size_t>(k)]);
    };
    if (interleave) {
      for (size_t i = 0; i < ni; ++i)
        for (int k = 0; k < copies; ++k) one(i, k);
    } else {
      for (int k = 0; k < copies; ++k)
        for (size_t i = 0; i < ni; ++i) one(i, k);
    }
    copy = 0;
  }

  // A column loop of `copies` vectors per iteration (see IrOp::LoopBegin).
  int32_t col_loop_begin(int copies, bool cont) {
    int32_t lb = loop_begin(0);
    ir.nodes[static_cast<size_t>(lb)].u = static_cast<uint32_t>(copies);
    ir.nodes[static_cast<size_t>(lb)].b = cont ? 1 : -1;
    return lb;
  }

  // One call runs JitArgs::rows rows (each row's pointers advanced by its
  // rs): a launch of many short rows pays one call and prologue per run of
  // rows instead of per row. Row values (LDB and what follows from it) are
  // computed at the top of each row. Constants are still broadcast at the
  // top of each column loop, so once per row: hoisting them above the row
  // loop was measured (W3-W6, AVX-512 and AVX2) and gained nothing.
  void elementwise(int unroll, bool interleave) {
    bf16_tanh_ = true;
    const int32_t rows = loop_begin(1);
    for (size_t i = 0; i < ni; ++i)
      if (live[i] && !is_store(i) && kind(i) == Kind::Row) set(i, compute(i, kPhaseRow));
    if (unroll > 1) {
      int32_t lb = col_loop_begin(unroll, false);
      ew_body(unroll, interleave);
      loop_end(lb);
    }
    int32_t lb = col_loop_begin(1, unroll > 1);
    ew_body(1, false);
    loop_end(lb);
    loop_end(rows);
  }

  bool folds_here(size_t i, int pass) const {
    return cls(i) == OpClass::Reduce && live[i] && level(i) == pass + 1;
  }
  bool any_fold(int pass) const {
    for (size_t i = 0; i < ni; ++i)
      if (folds_here(i, pass)) return true;
    return false;
  }

  // For a split pass: per instruction, the scratch row its value is kept in
  // for the folding loop (-1: none; the folding loop reloads an LD from its
  // argument and uses a row value as it is). False when the rows would
  // exceed kMaxScratchRows. The rows come after those already taken.
  bool split_slots(int pass, std::vector<int>* rows) {
    rows->assign(ni, -1);
    int next = ir.scratch_rows;
    for (size_t i = 0; i < ni; ++i) {
      if (!folds_here(i, pass)) continue;
      const size_t s = static_cast<size_t>(src[i][0]);
      if (kind(s) != Kind::Vec || reads_in_place(p.code[s].op) || (*rows)[s] >= 0) continue;
      if (cached_[s] >= 0 && cached_[s] <= pass) {
        (*rows)[s] = slot_[s];  // already kept (this pass or before)
        continue;
      }
      if (next >= kMaxScratchRows) return false;
      (*rows)[s] = next++;
    }
    ir.scratch_rows = next;
    return true;
  }

  // One column loop of a RowReduce pass; returns the IR nodes of copy 0's
  // body. copies > 1 (kReduceAccs): the body copy by copy (CopyBegin k),
  // copy k folding into accumulator k, LoopBegin.b = 2 (the remaining
  // vectors run copy by copy, each masked to its own part of the row), then
  // the finish t = op(op(a0, a1), op(a2, a3)) and the horizontal tree.
  // `need`: the vec values computed. `rows` (a split pass, see split_slots):
  // with copies == 1 the loop computes the values and keeps the folded ones
  // in their scratch rows instead of folding; with copies > 1 it only
  // reloads them and folds.
  // `probe`: stop after copy 0 when its body has more than kSplitBodyNodes
  // nodes (the caller then splits the pass and drops what was recorded).
  int pass_loop(int pass, const std::vector<uint8_t>& need, int copies, const std::vector<int>& rows,
                bool probe = false) {
    const bool split = !rows.empty();
    // One copy folds too in the one-vector-rows variant: its one accumulator
    // is copy 0's (the other three would hold the identity).
    const bool folding = copies > 1 || (one_vector_rows_ && !split && any_fold(pass));
    std::vector<std::vector<int32_t>>& accs = lists.per_copy[1];
    reset_lists(accs, static_cast<size_t>(copies), ni);
    if (folding)
      for (int k = 0; k < copies; ++k)
        for (size_t i = 0; i < ni; ++i)
          if (folds_here(i, pass)) {
            Node n{IrOp::Init};
            n.u = reduce_identity_bits(p.code[i].op);
            accs[static_cast<size_t>(k)][i] = ir.add(n);
          }
    const int32_t lb = loop_begin(0);
    if (folding) {
      ir.nodes[static_cast<size_t>(lb)].u = static_cast<uint32_t>(copies);
      ir.nodes[static_cast<size_t>(lb)].b = 2;
    }
    int body = 0;
    for (int k = 0; k < copies; ++k) {
      const size_t first = ir.nodes.size();
      if (folding) {
        Node cb{IrOp::CopyBegin};
        cb.imm = static_cast<uint8_t>(k);
        ir.add(cb);
        std::fill(vec_val.begin(), vec_val.end(), -1);  // copy k's own values
      }
      copy = static_cast<uint8_t>(k);
      acc.swap(accs[static_cast<size_t>(k)]);
      auto scratch = [&](IrOp o, size_t i, int row) {
        Node n{o};
        n.arg = static_cast<uint8_t>(row);
        n.phase = kPhaseScratch;
        n.imm = copy;
        if (o == IrOp::Store) n.a = vec_val[i];
        return ir.add(n);
      };
      for (size_t i = 0; i < ni; ++i) {
        if (need[i] && cached_[i] >= 0 && cached_[i] < pass) {
          set(i, scratch(IrOp::Load, i, slot_[i]));
        } else if (need[i]) {
          set(i, compute(i, kPhaseRow));
          if (cached_[i] == pass) scratch(IrOp::Store, i, slot_[i]);
          else if (split && rows[i] >= 0) scratch(IrOp::Store, i, rows[i]);
        } else if (folds_here(i, pass) && folding) {
          const size_t s = static_cast<size_t>(src[i][0]);
          if (split && kind(s) == Kind::Vec && vec_val[s] < 0)
            set(s, rows[s] >= 0 ? scratch(IrOp::Load, s, rows[s]) : compute(s, kPhaseRow));
          fold(i, p.code[i].op, true);
        } else if (p.code[i].op == Op::ST && level(i) == pass && !(split && folding)) {
          compute(i, kPhaseRow);
        }
      }
      acc.swap(accs[static_cast<size_t>(k)]);
      if (k == 0) body = static_cast<int>(ir.nodes.size() - first);
      if (probe && body > kSplitBodyNodes) {
        copy = 0;
        return body;
      }
    }
    copy = 0;
    loop_end(lb);
    if (folding)
      for (size_t i = 0; i < ni; ++i)
        if (folds_here(i, pass)) {
          const ApplyFn f = kApply[static_cast<int>(p.code[i].op)];
          JitVec a[kReduceAccs];  // folding passes run kReduceAccs copies
          for (int k = 0; k < copies; ++k) a[k].id = accs[static_cast<size_t>(k)][i];
          for (size_t w = static_cast<size_t>(copies); w > 1; w /= 2)  // (a0, a1), (a2, a3); then (t0, t1)
            for (size_t j = 0; j < w / 2; ++j) {
              JitVec s2[2] = {a[2 * j], a[2 * j + 1]};
              a[j] = f(s2);
            }
          row_val[i] = ir.op(IrOp::HReduce, a[0].id, -1, -1, hreduce_kind(p.code[i].op));
        }
    return body;
  }

  // One call runs JitArgs::rows rows (a row loop around every pass, each
  // row's pointers advanced by its rs; loads and stores in the row phase):
  // one call and prologue per run of rows, not per row.
  void row_reduce() {
    const int32_t row_loop = loop_begin(1);
    // An STB that follows an ST to the same argument runs after the last loop.
    std::vector<uint8_t>& stb_after = lists.stb_after;
    stb_after.assign(ni, 0);
    for (size_t i = 0; i < ni; ++i)
      if (p.code[i].op == Op::STB)
        for (size_t j = 0; j < i; ++j)
          if (p.code[j].op == Op::ST && p.code[j].r[0] == p.code[i].r[0]) stb_after[i] = 1;
    // Vec values pass P computes: sources of the level P+1 reductions and of
    // the stores of level P. A store runs in the first pass that has its
    // value (a value no reduction feeds is stored while the first pass folds),
    // so no later pass reads or recomputes it for that; outputs never alias
    // the kernel's inputs (writes into a buffer are kernels of their own).
    // A value (not a plain load) that several passes need is computed once,
    // kept in a scratch row, and reloaded.
    cached_.assign(ni, -1);
    slot_.assign(ni, -1);
    std::vector<int>& cached = cached_;
    std::vector<int>& slot = slot_;
    auto needs = [&](int pass, std::vector<uint8_t>& need) {
      need.assign(ni, 0);
      for (size_t i = ni; i-- > 0;) {
        bool roots = (cls(i) == OpClass::Reduce && live[i] && level(i) == pass + 1) ||
                     (p.code[i].op == Op::ST && level(i) == pass);
        if (!roots && !need[i]) continue;
        if (need[i] && cached[i] >= 0 && cached[i] < pass) continue;  // reloaded
        for (int32_t d : src[i])
          if (d >= 0 && kind(static_cast<size_t>(d)) == Kind::Vec) need[static_cast<size_t>(d)] = 1;
      }
    };
    // Latest values first: once softmax's exp(x - m) is kept, x - m is no
    // longer needed by the last pass and is not kept too. A value cheaper to
    // recompute than a store and a reload (layer_norm's x - mean) is not kept.
    std::vector<std::vector<uint8_t>>& need_at = lists.need_at;
    if (need_at.size() < static_cast<size_t>(vp.max_level) + 1) need_at.resize(static_cast<size_t>(vp.max_level) + 1);
    for (int pass = 0; pass <= vp.max_level; ++pass) needs(pass, need_at[static_cast<size_t>(pass)]);
    const std::vector<int>& cost = recompute_costs();
    for (size_t i = ni; i-- > 0 && ir.scratch_rows < kMaxScratchRows;) {
      if (reads_in_place(p.code[i].op) || kind(i) != Kind::Vec) continue;
      int first = -1, count = 0;
      for (int pass = 0; pass <= vp.max_level; ++pass)
        if (need_at[static_cast<size_t>(pass)][i]) {
          if (first < 0) first = pass;
          ++count;
        }
      if (count >= 2 && cost[i] >= kKeepMinCost) {
        cached[i] = first;
        slot[i] = ir.scratch_rows++;
        // Only passes after `first` reload it: the others need the same values.
        for (int pass = first + 1; pass <= vp.max_level; ++pass) needs(pass, need_at[static_cast<size_t>(pass)]);
      }
    }
    for (int pass = 0; pass <= vp.max_level; ++pass) {
      const bool last = pass == vp.max_level;
      const std::vector<uint8_t>& need = need_at[static_cast<size_t>(pass)];  // final: `cached` is
      for (size_t i = 0; i < ni; ++i)
        if (live[i] && !is_store(i) && cls(i) != OpClass::Reduce && kind(i) == Kind::Row &&
            level(i) == pass)
          set(i, compute(i, kPhaseRow));
      if (last)
        for (size_t i = 0; i < ni; ++i)
          if (p.code[i].op == Op::STB && !stb_after[i]) compute(i, kPhaseRow);
      if (!any_fold(pass) || one_vector_rows_) {
        pass_loop(pass, need, 1, {});  // (one_vector_rows_: folding, one accumulator)
      } else {
        // A pass that folds reductions runs kReduceAccs copies of its body per
        // iteration (copy k folds into accumulator k: vector v of the row goes
        // to accumulator v mod 4, the canonical order of microkernels.h). A
        // large body (an exp) is not copied: a one-vector loop computes it and
        // keeps each folded value in a scratch row, then a loop of four small
        // copies reloads and folds (see split_slots).
        // Copy 0 is recorded first (probe): a body over kSplitBodyNodes stops
        // there and is dropped, then recorded split (or, with no scratch row
        // to spare, as kReduceAccs copies after all).
        const size_t mark_nodes = ir.nodes.size(), mark_consts = ir.consts.size();
        const int body = pass_loop(pass, need, kReduceAccs, {}, true);
        if (body > kSplitBodyNodes) {
          ir.truncate(mark_nodes, mark_consts);
          std::fill(vec_val.begin(), vec_val.end(), -1);
          std::vector<int>& rows = lists.rows;
          if (split_slots(pass, &rows)) {
            pass_loop(pass, need, 1, rows);
            std::vector<uint8_t>& only_folds = lists.only_folds;
            only_folds.assign(ni, 0);
            pass_loop(pass, only_folds, kReduceAccs, rows);
          } else {
            pass_loop(pass, need, kReduceAccs, {});
          }
        }
      }
      if (last)
        for (size_t i = 0; i < ni; ++i)
          if (p.code[i].op == Op::STB && stb_after[i]) compute(i, kPhaseRow);
    }
    loop_end(row_loop);
  }

  // One ColReduce column loop body for `copies` column vectors (copy k at
  // columns i + k * lanes): accumulators, the row loop (prologue and combines),
  // the epilogue and stores (instruction by instruction across the copies).
  // Row values (one per row or per call) are computed by copy 0 and shared.
  void col_body(int copies) {
    const size_t r0 = static_cast<size_t>(vp.first_reduce), r1 = static_cast<size_t>(vp.last_reduce);
    const size_t nc = static_cast<size_t>(copies);
    std::vector<std::vector<int32_t>>& vals = lists.per_copy[0];
    std::vector<std::vector<int32_t>>& accs = lists.per_copy[1];
    reset_lists(vals, nc, ni);
    reset_lists(accs, nc, ni);
    auto shared_row = [&](size_t i, int k) { return k > 0 && !is_store(i) && kind(i) == Kind::Row; };
    auto with = [&](int k, auto&& f) {
      copy = static_cast<uint8_t>(k);
      vec_val.swap(vals[static_cast<size_t>(k)]);
      acc.swap(accs[static_cast<size_t>(k)]);
      f();
      acc.swap(accs[static_cast<size_t>(k)]);
      vec_val.swap(vals[static_cast<size_t>(k)]);
      copy = 0;
    };
    for (int k = 0; k < copies; ++k)
      with(k, [&] {
        for (size_t i = r0; i <= r1; ++i)
          if (live[i] && !shared_row(i, k)) {
            Node n{IrOp::Init};
            n.u = reduce_identity_bits(p.code[i].op);
            acc[i] = ir.add(n);
          }
      });
    // In the row loop one copy after another: a copy's loads die at its
    // combines, so 16 copies need little more than their 16 accumulators.
    int32_t rows = loop_begin(1);
    for (int k = 0; k < copies; ++k)
      with(k, [&] {
        for (size_t i = 0; i < r0; ++i)
          if (live[i] && !shared_row(i, k)) {
            if (is_store(i)) compute(i, kPhaseRow);
            else set(i, compute(i, kPhaseRow));
          }
        for (size_t i = r0; i <= r1; ++i)
          if (live[i] && !shared_row(i, k)) fold(i, combine_op(p.code[i].op), false);
      });
    loop_end(rows);
    for (int k = 0; k < copies; ++k)
      with(k, [&] {
        for (size_t i = r0; i <= r1; ++i)
          if (live[i] && !shared_row(i, k)) set(i, acc[i]);
      });
    for (size_t i = r1 + 1; i < ni; ++i)
      for (int k = 0; k < copies; ++k)
        if (live[i] && !shared_row(i, k))
          with(k, [&] {
            if (is_store(i)) compute(i, kPhaseBase);
            else set(i, compute(i, kPhaseBase));
          });
  }

  // Blocks of `block` column vectors, then one masked block for what is
  // left: the smallest of block, block/2, ..., 1 vectors that covers it
  // (LoopBegin.b = 3, chosen at run time). Every loop level is one
  // pass over the rows, so any tile takes one pass beyond its full blocks: a
  // 100-column tile one 8-block pass (it took a 4-block, a 2-block and a
  // masked one-vector pass, each rereading the rows). Block 1 (the spill
  // fallback) runs one vector at a time and its masked tail.
  void col_reduce(int block) {
    int32_t cols = col_loop_begin(block, false);
    col_body(block);
    loop_end(cols);
    if (block == 1) return;
    for (int b = block; b >= 1; b /= 2) {
      int32_t lb = col_loop_begin(b, true);
      ir.nodes[static_cast<size_t>(lb)].b = 3;
      col_body(b);
      loop_end(lb);
    }
  }
};

}  // namespace

bool arg_patterns(const vm::Program& p, std::vector<uint8_t>* out, std::string* reason) {
  out->assign(p.roles.size(), kArgUnused);
  for (const vm::Instr& ins : p.code) {
    uint8_t pat;
    int arg;
    switch (ins.op) {
      case Op::LD: pat = kArgContiguous; arg = ins.r[1]; break;
      case Op::LDS: pat = kArgStrided; arg = ins.r[1]; break;
      case Op::LDB: pat = kArgPerRow; arg = ins.r[1]; break;
      case Op::ST: pat = kArgContiguous; arg = ins.r[0]; break;
      case Op::STB: pat = kArgPerRow; arg = ins.r[0]; break;
      case Op::STS: pat = kArgStrided; arg = ins.r[0]; break;
      case Op::LDG: pat = kArgGathered; arg = ins.r[1]; break;
      default: continue;
    }
    uint8_t& cur = (*out)[static_cast<size_t>(arg)];
    if (cur != kArgUnused && cur != pat) {
      *reason = "argument " + std::to_string(arg) + " is accessed with two patterns";
      return false;
    }
    cur = pat;
  }
  return true;
}

Tuning& tuning() {
  static Tuning t;
  return t;
}

bool lower(const vm::VerifiedProgram& vp, IrBuilder* ir, std::string* reason, int unroll,
           bool interleave, int col_block, bool one_vector_rows) {
  if (vp.program.form == vm::Form::Contraction) {
    *reason = "contraction kernels are interpreter-only";
    return false;
  }
  // Each parameter holds a register or a 64-byte spill slot for the whole
  // call: bound the stack frame.
  if (vp.program.nscalars > kMaxJitParams) {
    *reason = std::to_string(vp.program.nscalars) + " scalar parameters, more than the " +
              std::to_string(kMaxJitParams) + " the JIT keeps";
    return false;
  }
  ir->clear();
  ir->arg_types = vp.program.types;
  ir->arg_int.assign(vp.program.types.size(), 0);
  for (size_t a = 0; a < vp.program.types.size(); ++a) ir->arg_int[a] = vm::int_lanes(vp.program, a) ? 1 : 0;
  IrBuilder* saved = t_ir;
  t_ir = ir;
  thread_local LowerLists lists;
  Lowering lw(vp, *ir, lists);
  lw.one_vector_rows_ = one_vector_rows && vp.program.form == vm::Form::RowReduce;
  lw.analyse();
  lw.load_params();
  switch (vp.program.form) {
    case vm::Form::Elementwise: lw.elementwise(std::max(unroll, 1), interleave); break;
    case vm::Form::RowReduce: lw.row_reduce(); break;
    case vm::Form::ColReduce: lw.col_reduce(std::max(col_block, 1)); break;
    case vm::Form::Contraction: break;  // declined above
  }
  t_ir = saved;
  return true;
}

}  // namespace dvm::backends::jit
