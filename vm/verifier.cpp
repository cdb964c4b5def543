// Verifier: decodes with bounds checks and checks every rule of the format.
#include "vm/verifier.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <sstream>

#include "vm/forms.h"

namespace dvm::vm {
namespace {

// What a register holds: f32 lanes, int32 lanes, int64 lanes, or a
// constant's bits (f32 or int32).
enum Lane : uint8_t { kF32 = 0, kInt = 1, kAny = 2, kLong = 3 };

// The lanes an op reads (every register operand but SELECT's and LSELECT's
// mask) and gives. Float ops read and give f32 lanes; the I* ops read int32
// lanes, the L* ops int64 lanes; comparisons give f32 0.0f / 1.0f; itof,
// ftoi, itol, ltoi and ltof convert. Keeping them apart keeps float
// results' bits (a NaN's payload is not the same in every tier) out of
// integer arithmetic, and integer bits out of float arithmetic.
struct LaneRule {
  Lane in, out;
};
LaneRule lane_rule(Op op) {
  switch (op) {
    case Op::ITOF: return {kInt, kF32};
    case Op::FTOI: return {kF32, kInt};
    case Op::IEQ: case Op::INE: case Op::ILT: case Op::ILE: case Op::IGT: case Op::IGE: return {kInt, kF32};
    case Op::INEG: case Op::IABS: case Op::INOT: case Op::IADD: case Op::ISUB: case Op::IMUL: case Op::IMAX:
    case Op::IMIN: case Op::IAND: case Op::IOR: case Op::IXOR: case Op::IFLOORDIV: case Op::IREM:
      return {kInt, kInt};
    case Op::ITOL: return {kInt, kLong};
    case Op::LTOI: return {kLong, kInt};
    case Op::LTOF: return {kLong, kF32};
    case Op::LEQ: case Op::LNE: case Op::LLT: case Op::LLE: case Op::LGT: case Op::LGE: return {kLong, kF32};
    default: return int64_op(op) ? LaneRule{kLong, kLong} : LaneRule{kF32, kF32};
  }
}
const char* lane_name(Lane l) {
  return l == kInt ? "int32 lanes" : l == kLong ? "int64 lanes" : l == kAny ? "a constant" : "f32 lanes";
}

struct Checker {
  const std::vector<uint8_t>& b;
  std::string* error;
  size_t pos = 0;

  bool fail(const std::string& msg) {
    if (error) *error = "bytecode rejected: " + msg;
    return false;
  }
  // Inline: called per operand; only the failure builds a message.
  bool need(size_t n, const char* what) { return pos + n <= b.size() || truncated(n, what); }
  [[gnu::noinline, gnu::cold]] bool truncated(size_t n, const char* what) {
    return fail(std::string("truncated: ") + what + " needs " + std::to_string(n) + " byte(s) at offset " +
                std::to_string(pos) + ", only " + std::to_string(b.size() - pos) + " left");
  }
};

}  // namespace

bool verify(const Bytecode& bc, VerifiedProgram* out, std::string* error) {
  Checker c{bc.bytes, error};
  const auto& b = bc.bytes;
  if (!c.need(kHeaderFixed, "header")) return false;
  if (b[0] != 'D' || b[1] != 'V' || b[2] != 'M') return c.fail("bad magic (expected 'DVM')");
  if (b[3] != kBytecodeVersion)
    return c.fail("version " + std::to_string(b[3]) + ", this vm reads version " +
                  std::to_string(kBytecodeVersion));
  if (b[4] >= kNumForms) return c.fail("unknown kernel form " + std::to_string(b[4]));
  Program& p = out->program;
  p.form = static_cast<Form>(b[4]);
  const FormRow& rules = form_row(p.form);
  const bool outer = rules.reduces == ReduceAxis::Outer;
  p.nregs = b[5];
  int nargs = b[6];
  p.nscalars = b[7] | (b[8] << 8);
  if (p.nregs > kMaxRegs)
    return c.fail(std::to_string(p.nregs) + " registers, at most " + std::to_string(kMaxRegs));
  if (nargs > kMaxArgs)
    return c.fail(std::to_string(nargs) + " arguments, at most " + std::to_string(kMaxArgs));
  c.pos = kHeaderFixed;
  if (!c.need(static_cast<size_t>(kArgBytes * nargs), "argument roles and types")) return false;
  p.roles.clear();
  p.types.clear();
  p.int_lanes.clear();
  out->int64_lanes = false;
  p.roles.reserve(static_cast<size_t>(nargs));
  p.types.reserve(static_cast<size_t>(nargs));
  for (int i = 0; i < nargs; ++i) {
    uint8_t r = b[c.pos++];
    if (r > 1) return c.fail("argument " + std::to_string(i) + " has unknown role " + std::to_string(r));
    p.roles.push_back(static_cast<ArgRole>(r));
    uint8_t t = b[c.pos++];
    const bool ints = (t & kIntLanes) != 0;
    t = static_cast<uint8_t>(t & ~kIntLanes);
    if (t >= kNumElemTypes)
      return c.fail("argument " + std::to_string(i) + " has unknown element type " + std::to_string(t));
    p.types.push_back(static_cast<Dtype>(t));
    if (ints) {
      const Dtype dt = static_cast<Dtype>(t);
      if (is_floating(dt) && r == static_cast<uint8_t>(ArgRole::Input))
        return c.fail("argument " + std::to_string(i) + " (input of element type " + elem_name(dt) +
                      ") cannot move integer lanes");
      out->int64_lanes |= dt == Dtype::I64;
      p.int_lanes.resize(static_cast<size_t>(nargs), 0);
      p.int_lanes[static_cast<size_t>(i)] = 1;
    }
  }
  if (!c.need(2, "instruction count")) return false;
  int count = b[c.pos] | (b[c.pos + 1] << 8);
  c.pos += 2;

  // Register state as the program runs: written?, kind, level (on the
  // stack: a verify allocates only what it returns). Only the first nregs
  // (nargs) entries are ever read: register operands are checked against
  // nregs, argument operands against nargs.
  const size_t nr = static_cast<size_t>(p.nregs), na = static_cast<size_t>(nargs);
  std::array<int8_t, kMaxRegs> written;
  std::fill_n(written.begin(), nr, 0);
  std::array<Kind, kMaxRegs> kind;
  std::fill_n(kind.begin(), nr, Kind::Vec);
  std::array<uint8_t, kMaxRegs> level;
  std::fill_n(level.begin(), nr, 0);
  std::array<int8_t, kMaxArgs> stored;
  std::fill_n(stored.begin(), na, 0);
  std::array<Lane, kMaxRegs> lane;
  std::fill_n(lane.begin(), nr, kF32);
  std::array<uint8_t, kMaxRegs> space;  // InstrInfo::space of each register's value
  std::fill_n(space.begin(), nr, 0);
  // Outer reductions: 0 constant, 1 written in the prologue, 2 reduction or epilogue.
  std::array<int8_t, kMaxRegs> phase;
  std::fill_n(phase.begin(), nr, 0);
  p.code.clear();
  out->info.clear();
  // Every instruction takes at least its opcode byte: the bytes left bound
  // what a hostile count can make us reserve.
  const size_t room = std::min(static_cast<size_t>(count), b.size() - c.pos);
  p.code.reserve(room);
  out->info.reserve(room);
  out->max_level = 0;
  out->first_reduce = out->last_reduce = -1;
  bool after_reduce_block = false;  // outer reductions: past the reductions
  int mmas = 0;

  for (int i = 0; i < count; ++i) {
    if (!c.need(1, "opcode")) return false;
    uint8_t opb = b[c.pos++];
    if (opb >= kNumOps)
      return c.fail("instruction " + std::to_string(i) + ": unknown opcode " + std::to_string(opb));
    // Built in place: a copy into the list would reload what was just stored.
    Instr& ins = p.code.emplace_back();
    ins.op = static_cast<Op>(opb);
    // Where a failure is: built only when one is reported.
    auto at = [&] { return "instruction " + std::to_string(i) + " (" + op_name(ins.op) + ")"; };
    const OpInfo& oi = op_info(ins.op);
    for (const char* s = oi.signature; *s; ++s) {
      if (*s == 'F') {
        if (!c.need(4, "float immediate")) return false;
        uint32_t bits = 0;
        for (int k = 0; k < 4; ++k) bits |= static_cast<uint32_t>(b[c.pos + k]) << (8 * k);
        std::memcpy(&ins.imm, &bits, 4);
        c.pos += 4;
      } else if (*s == 'S') {
        if (!c.need(2, "scalar index")) return false;
        ins.scalar = static_cast<uint16_t>(b[c.pos] | (b[c.pos + 1] << 8));
        c.pos += 2;
        if (ins.scalar >= p.nscalars)
          return c.fail(at() + ": scalar parameter s" + std::to_string(ins.scalar) + " out of range (kernel has " +
                        std::to_string(p.nscalars) + ")");
      } else {
        if (!c.need(1, "operand")) return false;
        ins.r[ins.nr++] = b[c.pos++];
      }
    }

    InstrInfo& info = out->info.emplace_back();
    // Check operands and gather source kinds and levels.
    int nsrc = 0;
    uint8_t lvl = 0;
    bool any_vec = false;
    int arg = -1;
    int dst = -1;
    for (int k = 0; k < ins.nr; ++k) {
      char letter = oi.signature[k];
      int v = ins.r[k];
      if (letter == 'A') {
        if (v >= nargs)
          return c.fail(at() + ": argument " + std::to_string(v) + " out of range (kernel has " +
                        std::to_string(nargs) + ")");
        arg = v;
      } else if (letter == 'D') {
        if (v >= p.nregs)
          return c.fail(at() + ": destination register r" + std::to_string(v) + " out of range (" +
                        std::to_string(p.nregs) + " registers)");
        dst = v;
      } else {  // 'R'
        if (v >= p.nregs)
          return c.fail(at() + ": source register r" + std::to_string(v) + " out of range (" +
                        std::to_string(p.nregs) + " registers)");
        if (!written[static_cast<size_t>(v)])
          return c.fail(at() + ": reads register r" + std::to_string(v) + " before it is written");
        info.src_kind[nsrc++] = kind[static_cast<size_t>(v)];
        any_vec |= kind[static_cast<size_t>(v)] == Kind::Vec;
        lvl = std::max(lvl, level[static_cast<size_t>(v)]);
      }
    }

    // Lanes: each register operand must hold what the op reads.
    Lane dst_lane = kF32;
    {
      const LaneRule rule = lane_rule(ins.op);
      Lane want[4] = {rule.in, rule.in, rule.in, rule.in};
      const OpClass lc = oi.cls;
      // The lanes an argument moves: int64 ones for an int64 argument with
      // kIntLanes, int32 ones for any other with it, else f32.
      auto arg_lane = [&](int a) {
        if (a >= nargs || !int_lanes(p, static_cast<size_t>(a))) return kF32;
        return p.types[static_cast<size_t>(a)] == Dtype::I64 ? kLong : kInt;
      };
      if (ins.op == Op::SELECT) {  // the mask f32; a and b alike, f32 or int32 lanes
        const Lane a = lane[ins.r[2]], b2 = lane[ins.r[3]];
        const Lane ab = a != kAny ? a : b2;
        want[1] = want[2] = ab == kLong ? kF32 : ab;
        dst_lane = want[1];
        want[0] = kF32;
      } else if (ins.op == Op::LSELECT) {  // the mask f32; a and b int64 lanes (the rule)
        want[0] = kF32;
        dst_lane = kLong;
      } else if (lc == OpClass::Load) {
        dst_lane = arg_lane(ins.r[1]);
      } else if (lc == OpClass::Const) {
        dst_lane = kAny;
      } else if (lc == OpClass::Store) {
        want[0] = arg_lane(ins.r[0]);
      } else {
        dst_lane = rule.out;
      }
      int k = 0;
      for (const char* s = oi.signature; *s; ++s) {
        if (*s == 'F' || *s == 'S') continue;
        const int slot = static_cast<int>(s - oi.signature);
        const int v = ins.r[slot];
        if (*s == 'R') {  // (in range and written: checked above)
          const Lane have = lane[static_cast<size_t>(v)];
          const Lane need_lane = want[k];  // the k-th register operand
          // A constant's 4 bytes are f32 or int32 lanes, never int64 ones.
          const bool fits = have == need_lane || (have == kAny && need_lane != kLong) || need_lane == kAny;
          if (!fits)
            return c.fail("instruction " + std::to_string(i) + " (" + op_name(ins.op) + "): r" + std::to_string(v) +
                          " holds " + lane_name(have) + ", the op reads " + lane_name(need_lane));
        }
        if (*s == 'R') ++k;
      }
    }

    // Spaces: an operand prologue's values are computed while the cube packs
    // that operand, so they may meet constants but never values of another
    // space, and only the product carries them into the epilogue.
    {
      uint8_t sp = kUniform;
      if (ins.op == Op::LDOA || ins.op == Op::LDOB) {
        if (!rules.contracts)
          return c.fail(at() + ": operand loads are allowed only in contraction kernels, not in " +
                        form_name(p.form) + " kernels");
        sp = ins.op == Op::LDOA ? kOperandA : kOperandB;
      } else if (oi.cls == OpClass::Load || ins.op == Op::MMA) {
        sp = kOutSpace;
      } else if (ins.op == Op::MMAR) {
        for (int k = 1; k <= 2; ++k) {
          const uint8_t want = k == 1 ? kOperandA : kOperandB;
          if (space[ins.r[k]] != want && space[ins.r[k]] != kUniform)
            return c.fail(at() + ": operand " + (k == 1 ? "a" : "b") + " is r" + std::to_string(ins.r[k]) +
                          ", which neither an ldo" + (k == 1 ? "a" : "b") + " prologue nor constants computed");
        }
        sp = kOutSpace;
      } else {
        for (int k = 0; k < ins.nr; ++k) {
          if (oi.signature[k] != 'R') continue;
          const uint8_t s = space[ins.r[k]];
          if (s == kUniform || s == sp) continue;
          const char* what = s == kOperandA ? "operand a's prologue"
                             : s == kOperandB ? "operand b's prologue"
                                              : "the [P, R, C] space";
          if (oi.cls == OpClass::Store && s != kOutSpace)
            return c.fail(at() + ": stores r" + std::to_string(ins.r[k]) + ", a value of " + what +
                          "; only values over [P, R, C] are stored");
          if (sp != kUniform)
            return c.fail(at() + ": reads r" + std::to_string(ins.r[k]) + ", a value of " + what +
                          ", with a value of another space");
          sp = s;
        }
        // A store writes the [P, R, C] output whatever it stores (a
        // constant's is uniform): it runs in the epilogue, never in a
        // prologue, which covers operand a's [P, R, K] or b's [P, K, C].
        if (oi.cls == OpClass::Store) sp = kOutSpace;
      }
      info.space = sp;
    }

    OpClass cls = oi.cls;
    if (outer) {
      // Layout: prologue, then one block of reductions, then the epilogue.
      if (cls == OpClass::Reduce) {
        if (after_reduce_block)
          return c.fail(at() + ": " + form_name(p.form) + " kernels keep their reductions in one block");
        if (lvl != 0) return c.fail(at() + ": " + form_name(p.form) + " cannot reduce a reduced value");
      } else if (out->last_reduce >= 0) {
        after_reduce_block = true;
      }
      if (after_reduce_block) {
        // The epilogue runs once per (p, c): it may read constants, epilogue
        // loads and reductions, never a per-r value from the prologue.
        for (int k = 0; k < ins.nr; ++k)
          if (oi.signature[k] == 'R' && phase[ins.r[k]] == 1)
            return c.fail(at() + ": the " + form_name(p.form) + " epilogue reads r" + std::to_string(ins.r[k]) +
                          ", a per-row value from before the reductions");
      }
    }

    switch (cls) {
      case OpClass::Load:
        if (p.roles[static_cast<size_t>(arg)] != ArgRole::Input)
          return c.fail(at() + ": loads from argument " + std::to_string(arg) + ", which is an output");
        info.dst_kind = ins.op == Op::LDB ? Kind::Row : Kind::Vec;
        lvl = (outer && after_reduce_block) ? 1 : 0;
        break;
      case OpClass::Const:
        info.dst_kind = Kind::Row;
        lvl = (outer && after_reduce_block) ? 1 : 0;
        break;
      case OpClass::Store:
        if (p.roles[static_cast<size_t>(arg)] != ArgRole::Output)
          return c.fail(at() + ": stores to argument " + std::to_string(arg) + ", which is an input");
        if (ins.op == Op::STB) {
          if (!rules.row_stores)
            return c.fail(at() + ": stb (one value per row) is not allowed in " + form_name(p.form) + " kernels");
          if (info.src_kind[0] != Kind::Row)
            return c.fail(at() + ": stb stores a vec register; it needs a row value");
        }
        if (ins.op == Op::STS && p.form != Form::Elementwise)
          return c.fail(at() + ": sts (strided along C) is allowed only in elementwise kernels, not in " +
                        form_name(p.form) + " kernels");
        // One store per output: a second would make the result depend on
        // which store an executor performs last (the interpreter writes some
        // values straight into the output before their store).
        if (stored[static_cast<size_t>(arg)])
          return c.fail(at() + ": stores output argument " + std::to_string(arg) + " a second time");
        stored[static_cast<size_t>(arg)] = 1;
        break;
      case OpClass::Unary:
      case OpClass::Binary:
      case OpClass::Ternary:
        info.dst_kind = any_vec ? Kind::Vec : Kind::Row;
        break;
      case OpClass::Contract:
        if (!rules.contracts) return c.fail(at() + ": mma is not allowed in " + form_name(p.form) + " kernels");
        if (++mmas > 1) return c.fail(at() + ": a " + form_name(p.form) + " kernel has one mma");
        for (int k = 1; k <= 2 && ins.op == Op::MMA; ++k)
          if (p.roles[ins.r[k]] != ArgRole::Input)
            return c.fail(at() + ": multiplies argument " + std::to_string(ins.r[k]) + ", which is an output");
          else if (int_lanes(p, ins.r[k]))
            return c.fail(at() + ": multiplies argument " + std::to_string(ins.r[k]) +
                          ", which moves integer lanes; the cube unit's operands are floats");
          else if (!is_floating(p.types[ins.r[k]]))  // the cube widens 16-bit floats as it reads them
            return c.fail(at() + ": multiplies argument " + std::to_string(ins.r[k]) + " of element type " +
                          elem_name(p.types[ins.r[k]]) + "; the cube unit's operands are f32, f16 or bf16");
        info.dst_kind = Kind::Vec;
        break;
      case OpClass::Reduce:
        if (rules.reduces == ReduceAxis::None)
          return c.fail(at() + ": reductions are not allowed in " + form_name(p.form) + " kernels");
        if (out->first_reduce < 0) out->first_reduce = i;
        out->last_reduce = i;
        // Folding C leaves one value per row; folding R keeps the C variation.
        info.dst_kind = rules.reduces == ReduceAxis::Inner ? Kind::Row : info.src_kind[0];
        lvl = static_cast<uint8_t>(lvl + 1);
        if (lvl == 0) return c.fail(at() + ": more than 255 reductions in sequence");
        break;
    }
    info.level = lvl;
    out->max_level = std::max<int>(out->max_level, lvl);
    if (dst >= 0) {
      lane[static_cast<size_t>(dst)] = dst_lane;
      out->int64_lanes |= dst_lane == kLong;
      written[static_cast<size_t>(dst)] = 1;
      phase[static_cast<size_t>(dst)] =
          cls == OpClass::Const ? 0 : (after_reduce_block || cls == OpClass::Reduce ? 2 : 1);
      kind[static_cast<size_t>(dst)] = info.dst_kind;
      space[static_cast<size_t>(dst)] = info.space;
      level[static_cast<size_t>(dst)] = lvl;
    }
  }
  if (c.pos != b.size())
    return c.fail(std::to_string(b.size() - c.pos) + " trailing byte(s) after " +
                  std::to_string(count) + " instructions");
  if (rules.contracts && mmas == 0)
    return c.fail(std::string(form_name(p.form)) + " kernel has no mma");
  if (rules.reduces != ReduceAxis::None && out->first_reduce < 0)
    return c.fail(std::string(form_name(p.form)) + " kernel has no reduction");
  for (int a = 0; a < nargs; ++a)
    if (p.roles[static_cast<size_t>(a)] == ArgRole::Output && !stored[static_cast<size_t>(a)])
      return c.fail("output argument " + std::to_string(a) + " is never stored");
  return true;
}

}  // namespace dvm::vm
