// Tile interpreter: the three kernel forms' drivers around one instruction
// executor.
#include "vm/interpreter.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <vector>

#include "backends/convert.h"
#include "backends/cube/gemm.h"
#include "backends/microkernels.h"
#include "dvm/error.h"
#include "vm/parallel.h"

namespace dvm::vm {
namespace {

// ---------------------------------------------------------------------------
// Per-thread register file, grown to the largest kernel seen.
// ---------------------------------------------------------------------------
struct Frame {
  // nregs registers of `stride` floats, then temporaries. A program with
  // int64 lanes gets registers of two floats an element, so that any
  // register can hold tile int64s.
  float* scratch = nullptr;
  size_t capacity = 0;
  std::vector<const float*> ptr;  // current data of each vec register (int64s too)
  std::vector<float> sval;        // value of each row register of 4-byte lanes
  std::vector<int64_t> lval;      // value of each row register of int64 lanes
  std::vector<float> acc;         // row reductions: mk.reduce_lanes floats per instruction
  std::vector<float> result;      // row reductions finished in an earlier pass
  std::vector<int64_t> lacc, lresult;  // the same for int64 reductions, one per instruction
  // Per instruction: the output argument it may write straight into (its
  // value is stored by the next instruction), or -1.
  std::vector<int> direct;
  int64_t tile = 0;
  int64_t stride = 0;  // floats per register
  // Contraction: the current tile's row of the MMA's product (its register's data).
  const float* mma = nullptr;
  const Dtype* types = nullptr;  // the program's argument types
  const Program* program = nullptr;
  bool ints(int arg) const { return int_lanes(*program, static_cast<size_t>(arg)); }

  ~Frame() { std::free(scratch); }

  // col_accs: one accumulator tile per instruction (outer reductions).
  void prepare(const VerifiedProgram& vp, int64_t tile_len, int lanes, bool col_accs = false) {
    const Program& p = vp.program;
    tile = (tile_len + 15) / 16 * 16;
    stride = vp.int64_lanes ? 2 * tile : tile;
    // registers, kTemps temporaries, the column accumulators
    const size_t accs = col_accs ? p.code.size() : 0;
    size_t need = static_cast<size_t>(stride) * (static_cast<size_t>(p.nregs) + kTemps + accs);
    if (need > capacity) {
      std::free(scratch);
      size_t bytes = (need * sizeof(float) + 63) / 64 * 64;
      scratch = static_cast<float*>(std::aligned_alloc(64, bytes));
      if (!scratch) throw std::bad_alloc();
      capacity = need;
    }
    ptr.assign(static_cast<size_t>(p.nregs), nullptr);
    sval.assign(static_cast<size_t>(p.nregs), 0.0f);
    if (vp.int64_lanes) {
      lval.assign(static_cast<size_t>(p.nregs), 0);
      lacc.assign(p.code.size(), 0);
      lresult.assign(p.code.size(), 0);
    }
    acc.assign(p.code.size() * static_cast<size_t>(lanes), 0.0f);
    result.assign(p.code.size(), 0.0f);
    direct.assign(p.code.size(), -1);
    types = p.types.data();
    program = &p;
    for (size_t i = 0; i + 1 < p.code.size(); ++i) {
      const Instr& a = p.code[i];
      const Instr& b = p.code[i + 1];
      const OpClass c = op_class(a.op);
      if ((c == OpClass::Unary || c == OpClass::Binary || c == OpClass::Ternary) &&
          b.op == Op::ST && b.r[1] == a.r[0] && p.types[b.r[0]] == Dtype::F32 && !int_lanes(p, b.r[0]))
        direct[i] = b.r[0];
    }
  }
  // Broadcasts of up to three row operands, and an int64-lane op's result
  // while its destination register still holds a source of other lanes.
  static constexpr int kTemps = 4;
  float* reg(int r) { return scratch + static_cast<size_t>(r) * static_cast<size_t>(stride); }
  float* temp(int k, int nregs) { return reg(nregs + k); }
  float* colacc(size_t instr, int nregs) { return reg(nregs + kTemps + static_cast<int>(instr)); }
};

thread_local Frame t_frame;

struct Tile {
  int64_t p, r, c0, n;
};

inline int64_t base_offset(const ArgBinding& a, int64_t p, int64_t r) { return p * a.stride[kP] + r * a.stride[kR]; }

// Where an argument's untyped address becomes typed: loads, stores and the
// store a computing instruction writes straight into. f32 arguments are read
// in place and written as is; other types convert through a register's
// scratch (backends/convert.h).
inline const float* f32_in(const ArgBinding& a, int64_t off) { return static_cast<const float*>(a.in) + off; }
inline float* f32_out(const ArgBinding& a, int64_t off) { return static_cast<float*>(a.out) + off; }
inline const void* typed_in(const ArgBinding& a, int64_t off, Dtype t) { return advance(a.in, off, t); }
inline void* typed_out(const ArgBinding& a, int64_t off, Dtype t) { return advance(a.out, off, t); }

// Offset of one index within one part (P, R or C) of an LDG argument.
inline int64_t part_offset(const ArgBinding& a, int part, int64_t idx) {
  int64_t off = 0;
  for (int d = a.ndims[part] - 1; d >= 0; --d) {
    int64_t s = a.dim_size[part][d];
    off += (idx % s) * a.dim_stride[part][d];
    idx /= s;
  }
  return off;
}

// Whether elements [c0, c0 + n) of an LDG argument's C part are
// contiguous: element c at offset c (one dim of stride 1 that does not wrap
// there, or a single element).
inline bool contiguous_c(const ArgBinding& a, int64_t c0, int64_t n) {
  if (a.ndims[kC] == 0) return c0 + n <= 1;
  return a.ndims[kC] == 1 && a.dim_stride[kC][0] == 1 && a.dim_size[kC][0] >= c0 + n;
}

// Gathers n elements of an LDG argument along C from index c0: the C part's
// mixed-radix digits advance one element at a time, which wraps as
// part_offset's modulo does, without a division per element.
template <class T, class Read>
void gather_c(T* dst, Read base, const ArgBinding& a, int64_t c0, int64_t n) {
  if (n <= 0) return;  // nothing to read: base may be null (an empty tensor's)
  const int nd = a.ndims[kC];
  if (nd == 0) {
    std::fill(dst, dst + n, base[0]);
    return;
  }
  int64_t digit[kMaxRank];
  int64_t off = 0;
  for (int d = nd - 1; d >= 0; --d) {
    const int64_t s = a.dim_size[kC][d];
    digit[d] = c0 % s;
    off += digit[d] * a.dim_stride[kC][d];
    c0 /= s;
  }
  const int inner = nd - 1;
  const int64_t inner_size = a.dim_size[kC][inner], inner_stride = a.dim_stride[kC][inner];
  for (int64_t i = 0; i < n; ++i) {
    dst[i] = base[off];
    off += inner_stride;
    if (++digit[inner] < inner_size) continue;
    // Carry into the outer digits.
    int d = inner;
    for (;;) {
      off -= digit[d] * a.dim_stride[kC][d];
      digit[d] = 0;
      if (--d < 0) break;
      off += a.dim_stride[kC][d];
      if (++digit[d] < a.dim_size[kC][d]) break;
    }
  }
}

// An outer-reduction epilogue may read constants (CONST, PARAM) set in the prologue; the
// prologue runs per row (not at all when R = 0) and a split launch's
// epilogue may run on another thread's frame, so they are set again before
// the reductions' results are (in program order: a register a later
// constant or a result reuses holds the later value).
void set_prologue_constants(const Program& p, const Launch& l, size_t first_reduce, Frame& f) {
  for (size_t i = 0; i < first_reduce; ++i) {
    const Instr& ins = p.code[i];
    if (ins.op == Op::CONST) f.sval[ins.r[0]] = ins.imm;
    else if (ins.op == Op::PARAM) f.sval[ins.r[0]] = l.scalars[ins.scalar];
  }
}

Op combine_op(Op reduce) {
  return reduce == Op::RSUM ? Op::ADD : reduce == Op::RMAX ? Op::MAX : Op::MIN;
}

// Element i of a typed argument as f32 (or as an int32 lane), for gather_c.
struct ConvertingRead {
  const void* base;
  Dtype type;
  bool ints;
  float operator[](int64_t i) const {
    return ints ? backends::load_int_elem(type, base, i) : backends::load_elem(type, base, i);
  }
};

// A load of int64 lanes: the argument's int64s as they are, read in place
// when contiguous along C.
void load_long(const Instr& ins, const ArgBinding& a, Frame& f, const Tile& t) {
  const size_t d = ins.r[0];
  const int64_t* base = static_cast<const int64_t*>(a.in);
  auto* dst = reinterpret_cast<int64_t*>(f.reg(ins.r[0]));
  switch (ins.op) {
    case Op::LDB:
      f.lval[d] = base[base_offset(a, t.p, t.r)];
      return;
    case Op::LD:
      f.ptr[d] = reinterpret_cast<const float*>(base + base_offset(a, t.p, t.r) + t.c0);
      return;
    case Op::LDS:
    case Op::LDOA:
    case Op::LDOB: {
      const int64_t* src = base + base_offset(a, t.p, t.r) + t.c0 * a.stride[kC];
      for (int64_t i = 0; i < t.n; ++i) dst[i] = src[i * a.stride[kC]];
      break;
    }
    default:  // LDG
      gather_c(dst, base + part_offset(a, 0, t.p) + part_offset(a, 1, t.r), a, t.c0, t.n);
      break;
  }
  f.ptr[d] = reinterpret_cast<const float*>(dst);
}

// A store of int64 lanes, as they are.
void store_long(const Instr& ins, const InstrInfo& info, const ArgBinding& a, Frame& f, const Tile& t) {
  const size_t s = ins.r[1];
  int64_t* out = static_cast<int64_t*>(a.out) + base_offset(a, t.p, t.r);
  if (ins.op == Op::STB) {
    *out = f.lval[s];
  } else if (info.src_kind[0] == Kind::Row) {
    std::fill(out + t.c0, out + t.c0 + t.n, f.lval[s]);
  } else if (t.n > 0) {
    std::memcpy(out + t.c0, f.ptr[s], static_cast<size_t>(t.n) * sizeof(int64_t));
  }
}

// A load from an argument that is not f32: converted into the register's
// scratch (or, for LDB, into its row value).
void load_converted(const Instr& ins, const ArgBinding& a, Dtype type, Frame& f, const Tile& t,
                    const backends::MicroKernels& mk) {
  const int d = ins.r[0];
  const int64_t n = t.n;
  float* dst = f.reg(d);
  const bool ints = f.ints(ins.r[1]);
  if (ints && type == Dtype::I64) {
    load_long(ins, a, f, t);
    return;
  }
  switch (ins.op) {
    case Op::LD:
      (ints ? mk.load_int : mk.load_cvt)[static_cast<int>(type)](
          dst, typed_in(a, base_offset(a, t.p, t.r) + t.c0, type), n);
      break;
    case Op::LDB:
      f.sval[static_cast<size_t>(d)] =
          ConvertingRead{typed_in(a, base_offset(a, t.p, t.r), type), type, ints}[0];
      return;
    case Op::LDS:
    case Op::LDOA:
    case Op::LDOB: {
      if (a.stride[kC] == 1 && ins.op != Op::LDS) {
        (ints ? mk.load_int : mk.load_cvt)[static_cast<int>(type)](
            dst, typed_in(a, base_offset(a, t.p, t.r) + t.c0, type), n);
        break;
      }
      const ConvertingRead base{typed_in(a, base_offset(a, t.p, t.r) + t.c0 * a.stride[kC], type), type, ints};
      for (int64_t i = 0; i < n; ++i) dst[i] = base[i * a.stride[kC]];
      break;
    }
    default:  // LDG
      gather_c(dst,
               ConvertingRead{typed_in(a, part_offset(a, 0, t.p) + part_offset(a, 1, t.r), type), type, ints},
               a, t.c0, n);
      break;
  }
  f.ptr[static_cast<size_t>(d)] = dst;
}

// A store to an argument that is not f32: one rounding, at the store.
void store_converted(const Instr& ins, const InstrInfo& info, const ArgBinding& a, Dtype type, Frame& f,
                     const Tile& t, const backends::MicroKernels& mk) {
  const int s = ins.r[1];
  const bool ints = f.ints(ins.r[0]);
  if (ints && type == Dtype::I64) {
    store_long(ins, info, a, f, t);
    return;
  }
  if (ins.op == Op::STB) {
    void* out = typed_out(a, base_offset(a, t.p, t.r), type);
    if (ints) backends::store_int_elem(type, out, 0, f.sval[static_cast<size_t>(s)]);
    else backends::store_elem(type, out, 0, f.sval[static_cast<size_t>(s)]);
    return;
  }
  const float* src = f.ptr[static_cast<size_t>(s)];
  if (info.src_kind[0] == Kind::Row) {
    float* tmp = f.temp(0, static_cast<int>(f.ptr.size()));
    mk.fill(tmp, f.sval[static_cast<size_t>(s)], t.n);
    src = tmp;
  }
  (ints ? mk.store_int : mk.store_cvt)[static_cast<int>(type)](
      typed_out(a, base_offset(a, t.p, t.r) + t.c0, type), src, t.n);
}

// A store strided along C (STS): element c of the tile to c * stride[kC],
// each converted as the contiguous stores convert it (backends/convert.h
// gives the SIMD conversions' bits), int64 lanes as they are.
void store_strided(const Instr& ins, const InstrInfo& info, const ArgBinding& a, Dtype type, Frame& f,
                   const Tile& t) {
  const size_t s = ins.r[1];
  const bool ints = f.ints(ins.r[0]), row = info.src_kind[0] == Kind::Row;
  const int64_t cs = a.stride[kC], off = base_offset(a, t.p, t.r) + t.c0 * cs;
  if (ints && type == Dtype::I64) {
    int64_t* out = static_cast<int64_t*>(a.out) + off;
    const int64_t* src = reinterpret_cast<const int64_t*>(f.ptr[s]);
    for (int64_t i = 0; i < t.n; ++i) out[i * cs] = row ? f.lval[s] : src[i];
    return;
  }
  void* out = typed_out(a, off, type);
  const float* src = f.ptr[s];
  for (int64_t i = 0; i < t.n; ++i) {
    const float v = row ? f.sval[s] : src[i];
    if (ints) backends::store_int_elem(type, out, i * cs, v);
    else backends::store_elem(type, out, i * cs, v);
  }
}

// An int64-lane op (vm::int64_op) on one tile: row operands are broadcast
// into temporaries (int64 ones from lval, 4-byte ones from sval), an op of
// rows alone computes one value into lval or sval.
void exec_long(const Instr& ins, const InstrInfo& info, Frame& f, int nregs, const Tile& t,
               const backends::MicroKernels& mk) {
  const backends::LongFn fn = mk.wide[static_cast<int>(ins.op)];
  const int nsrc = ins.nr - 1;
  const void* src[3] = {nullptr, nullptr, nullptr};
  auto row = [&](int k) -> void* {
    const size_t r = ins.r[k];
    return vm::int64_operand(ins.op, k) ? static_cast<void*>(&f.lval[r]) : static_cast<void*>(&f.sval[r]);
  };
  if (info.dst_kind == Kind::Row) {
    for (int k = 0; k < nsrc; ++k) src[k] = row(k + 1);
    fn(row(0), src[0], src[1], src[2], 1);
    return;
  }
  const bool wide_dst = vm::int64_operand(ins.op, 0);
  float* out = f.reg(ins.r[0]);
  bool moved = false;  // out holds a source of other lanes: compute into a temporary
  for (int k = 0; k < nsrc; ++k) {
    const size_t r = ins.r[k + 1];
    const bool wide = vm::int64_operand(ins.op, k + 1);
    if (info.src_kind[k] == Kind::Vec) {
      src[k] = f.ptr[r];
      moved |= src[k] == out && wide != wide_dst;
      continue;
    }
    float* tmp = f.temp(k, nregs);
    if (wide) std::fill_n(reinterpret_cast<int64_t*>(tmp), t.n, f.lval[r]);
    else std::fill_n(tmp, t.n, f.sval[r]);
    src[k] = tmp;
  }
  float* into = moved ? f.temp(3, nregs) : out;
  fn(into, src[0], src[1], src[2], t.n);
  if (moved) std::memcpy(out, into, static_cast<size_t>(t.n) * (wide_dst ? 8 : 4));
  f.ptr[ins.r[0]] = out;
}

// ---------------------------------------------------------------------------
// One instruction on one tile. Reductions are handled by the drivers.
// ---------------------------------------------------------------------------
inline void exec(const Instr& ins, const InstrInfo& info, Frame& f, int nregs, const Launch& l,
                 const Tile& t, const backends::MicroKernels& mk, int direct = -1) {
  const int64_t n = t.n;
  // Where a vec result goes: its register's scratch, or straight into the
  // output the next instruction stores it to.
  auto dest = [&](int d) {
    if (direct >= 0) {
      const ArgBinding& a = l.args[static_cast<size_t>(direct)];
      return f32_out(a, base_offset(a, t.p, t.r) + t.c0);
    }
    return f.reg(d);
  };
  switch (op_class(ins.op)) {
    case OpClass::Load: {
      const ArgBinding& a = l.args[ins.r[1]];
      const int d = ins.r[0];
      const Dtype type = f.types[ins.r[1]];
      if (type != Dtype::F32 || f.ints(ins.r[1])) [[unlikely]] {
        load_converted(ins, a, type, f, t, mk);
        return;
      }
      switch (ins.op) {
        case Op::LD:
          f.ptr[static_cast<size_t>(d)] = f32_in(a, base_offset(a, t.p, t.r) + t.c0);
          break;
        case Op::LDB:
          f.sval[static_cast<size_t>(d)] = *f32_in(a, base_offset(a, t.p, t.r));
          break;
        case Op::LDOA:
        case Op::LDOB:  // an operand prologue's load: its pass's launch puts the operand's axes on R and C
          if (a.stride[kC] == 1) {
            f.ptr[static_cast<size_t>(d)] = f32_in(a, base_offset(a, t.p, t.r) + t.c0);
            break;
          }
          [[fallthrough]];
        case Op::LDS:
          mk.gather_strided(f.reg(d), f32_in(a, base_offset(a, t.p, t.r) + t.c0 * a.stride[kC]), a.stride[kC], n);
          f.ptr[static_cast<size_t>(d)] = f.reg(d);
          break;
        default: {  // LDG
          const float* row = f32_in(a, part_offset(a, 0, t.p) + part_offset(a, 1, t.r));
          if (contiguous_c(a, t.c0, n)) {  // rows gathered, C in place (a permute whose inner axis stays inner)
            f.ptr[static_cast<size_t>(d)] = row + t.c0;
            break;
          }
          float* dst = f.reg(d);
          gather_c(dst, row, a, t.c0, n);
          f.ptr[static_cast<size_t>(d)] = dst;
          break;
        }
      }
      return;
    }
    case OpClass::Store: {
      const ArgBinding& a = l.args[ins.r[0]];
      const int s = ins.r[1];
      const Dtype type = f.types[ins.r[0]];
      if (ins.op == Op::STS) {
        store_strided(ins, info, a, type, f, t);
        return;
      }
      if (type != Dtype::F32 || f.ints(ins.r[0])) [[unlikely]] {
        store_converted(ins, info, a, type, f, t, mk);
        return;
      }
      if (ins.op == Op::STB) {
        *f32_out(a, base_offset(a, t.p, t.r)) = f.sval[static_cast<size_t>(s)];
      } else {
        float* dst = f32_out(a, base_offset(a, t.p, t.r) + t.c0);
        if (info.src_kind[0] == Kind::Row) mk.fill(dst, f.sval[static_cast<size_t>(s)], n);
        else if (f.ptr[static_cast<size_t>(s)] != dst)
          std::memcpy(dst, f.ptr[static_cast<size_t>(s)], static_cast<size_t>(n) * sizeof(float));
      }
      return;
    }
    case OpClass::Contract:  // the driver computed the product; its row for this tile
      f.ptr[ins.r[0]] = f.mma;
      return;
    case OpClass::Const:  // an immediate, or a scalar parameter the launch binds
      f.sval[ins.r[0]] = ins.op == Op::PARAM ? l.scalars[ins.scalar] : ins.imm;
      return;
    case OpClass::Unary: {
      if (vm::int64_op(ins.op)) [[unlikely]] {
        exec_long(ins, info, f, nregs, t, mk);
        return;
      }
      const int d = ins.r[0], a = ins.r[1];
      auto fn = mk.unary[static_cast<int>(ins.op)];
      if (info.src_kind[0] == Kind::Row) {
        float x = f.sval[static_cast<size_t>(a)], y;
        fn(&y, &x, 1);
        f.sval[static_cast<size_t>(d)] = y;
      } else {
        float* out = dest(d);
        fn(out, f.ptr[static_cast<size_t>(a)], n);
        f.ptr[static_cast<size_t>(d)] = out;
      }
      return;
    }
    case OpClass::Binary: {
      if (vm::int64_op(ins.op)) [[unlikely]] {
        exec_long(ins, info, f, nregs, t, mk);
        return;
      }
      const int d = ins.r[0], a = ins.r[1], b = ins.r[2];
      const int op = static_cast<int>(ins.op);
      const bool va = info.src_kind[0] == Kind::Vec, vb = info.src_kind[1] == Kind::Vec;
      float* out = (va || vb) ? dest(d) : nullptr;
      if (va && vb) {
        mk.binary[op](out, f.ptr[static_cast<size_t>(a)], f.ptr[static_cast<size_t>(b)], n);
      } else if (va) {
        mk.binary_vs[op](out, f.ptr[static_cast<size_t>(a)], f.sval[static_cast<size_t>(b)], n);
      } else if (vb) {
        mk.binary_sv[op](out, f.sval[static_cast<size_t>(a)], f.ptr[static_cast<size_t>(b)], n);
      } else {
        float x = f.sval[static_cast<size_t>(a)], y = f.sval[static_cast<size_t>(b)], z;
        mk.binary[op](&z, &x, &y, 1);
        f.sval[static_cast<size_t>(d)] = z;
        return;
      }
      f.ptr[static_cast<size_t>(d)] = out;
      return;
    }
    case OpClass::Ternary: {
      if (ins.op == Op::LSELECT) [[unlikely]] {
        exec_long(ins, info, f, nregs, t, mk);
        return;
      }
      const int d = ins.r[0];
      auto fn = mk.ternary[static_cast<int>(ins.op)];
      if (info.dst_kind == Kind::Row) {
        float x[3], z;
        for (int k = 0; k < 3; ++k) x[k] = f.sval[ins.r[k + 1]];
        fn(&z, &x[0], &x[1], &x[2], 1);
        f.sval[static_cast<size_t>(d)] = z;
        return;
      }
      const float* src[3];
      for (int k = 0; k < 3; ++k) {
        int r = ins.r[k + 1];
        if (info.src_kind[k] == Kind::Vec) {
          src[k] = f.ptr[static_cast<size_t>(r)];
        } else {  // broadcast a row value over the tile
          float* tmp = f.temp(k, nregs);
          mk.fill(tmp, f.sval[static_cast<size_t>(r)], n);
          src[k] = tmp;
        }
      }
      float* out = dest(d);
      fn(out, src[0], src[1], src[2], n);
      f.ptr[static_cast<size_t>(d)] = out;
      return;
    }
    case OpClass::Reduce:
      return;  // drivers
  }
}

// Source run of a reduction's operand on this tile (row values broadcast).
inline const float* reduce_source(const Instr& ins, const InstrInfo& info, Frame& f, int nregs,
                                  int64_t n, const backends::MicroKernels& mk) {
  if (info.src_kind[0] == Kind::Vec) return f.ptr[ins.r[1]];
  float* tmp = f.temp(0, nregs);
  mk.fill(tmp, f.sval[ins.r[1]], n);
  return tmp;
}

// An int64 reduction folds its operand's tile into acc (a row value counts
// once per element: it is broadcast first).
bool long_reduce(Op op) { return vm::int64_op(op) && op_class(op) == OpClass::Reduce; }
int64_t fold_long(const Instr& ins, const InstrInfo& info, Frame& f, int nregs, int64_t n, int64_t acc,
                  const backends::MicroKernels& mk) {
  const int64_t* src = reinterpret_cast<const int64_t*>(f.ptr[ins.r[1]]);
  if (info.src_kind[0] == Kind::Row) {
    int64_t* tmp = reinterpret_cast<int64_t*>(f.temp(0, nregs));
    std::fill_n(tmp, n, f.lval[ins.r[1]]);
    src = tmp;
  }
  return mk.long_reduce[static_cast<int>(ins.op)](acc, src, n);
}

// ---------------------------------------------------------------------------
// Drivers.
// ---------------------------------------------------------------------------
void run_elementwise(const Kernel& k, const Launch& l, int64_t begin, int64_t end,
                     const backends::MicroKernels& mk) {
  const Program& p = k.program();
  const auto& info = k.verified().info;
  Frame& f = t_frame;
  f.prepare(k.verified(), kTile, mk.lanes);
  const int64_t chunks = elementwise_chunks(l);
  const size_t ni = p.code.size();
  for (int64_t item = begin; item < end; ++item) {
    const ItemStart at = elementwise_item(l, chunks, item);
    Tile t{at.p, at.r, 0, 0};
    const int64_t c_end = at.c0 + at.n;
    for (t.c0 = at.c0; t.c0 < c_end; t.c0 += kTile) {
      t.n = std::min(kTile, c_end - t.c0);
      for (size_t i = 0; i < ni; ++i) exec(p.code[i], info[i], f, p.nregs, l, t, mk, f.direct[i]);
    }
  }
}

// What the last pass of a row stores: everything (ST over the range, STB
// where the range starts the row), only the ST values, or only the STBs.
enum class LastPassStores { All, Vec, Row };

// One pass of a multi-pass row over elements [c_begin, c_end) of row t (a
// multiple of kTile from the row's start): everything of level <= pass is
// computed, reductions of level pass + 1 fold into acc_of(i) (set to the
// identity first), earlier ones read result_of(i); the last pass stores.
template <class AccOf, class ResultOf>
void run_pass(const Kernel& k, const Launch& l, Tile t, int64_t c_begin, int64_t c_end, int pass,
              const backends::MicroKernels& mk, Frame& f, AccOf acc_of, ResultOf result_of,
              LastPassStores stores = LastPassStores::All) {
  const Program& p = k.program();
  const auto& info = k.verified().info;
  const size_t ni = p.code.size();
  const bool last = pass == k.verified().max_level;
  for (size_t i = 0; i < ni; ++i)
    if (op_class(p.code[i].op) == OpClass::Reduce && info[i].level == pass + 1) {
      if (long_reduce(p.code[i].op)) {  // (run_row_reduce only: int64 kernels do not split)
        f.lacc[i] = mk.long_identity[static_cast<int>(p.code[i].op)];
        continue;
      }
      float* acc = acc_of(i);
      for (int j = 0; j < mk.reduce_lanes; ++j) acc[j] = mk.reduce_identity[static_cast<int>(p.code[i].op)];
    }
  for (t.c0 = c_begin; t.c0 < c_end; t.c0 += kTile) {
    t.n = std::min(kTile, c_end - t.c0);
    for (size_t i = 0; i < ni; ++i) {
      const Instr& ins = p.code[i];
      const int lvl = info[i].level;
      const OpClass cls = op_class(ins.op);
      if (cls == OpClass::Reduce && long_reduce(ins.op)) {
        if (lvl <= pass) f.lval[ins.r[0]] = f.lresult[i];
        else if (lvl == pass + 1) f.lacc[i] = fold_long(ins, info[i], f, p.nregs, t.n, f.lacc[i], mk);
        continue;
      }
      if (cls == OpClass::Reduce) {
        if (lvl <= pass)
          f.sval[ins.r[0]] = result_of(i);
        else if (lvl == pass + 1)
          mk.reduce_acc[static_cast<int>(ins.op)](acc_of(i), reduce_source(ins, info[i], f, p.nregs, t.n, mk),
                                                  t.n);
        continue;
      }
      if (lvl > pass) continue;
      if (cls == OpClass::Store) {
        if (!last) continue;
        if (ins.op == Op::STB ? stores == LastPassStores::Vec || t.c0 != 0 : stores == LastPassStores::Row)
          continue;
      }
      exec(ins, info[i], f, p.nregs, l, t, mk, last ? f.direct[i] : -1);
    }
  }
}

void run_row_reduce(const Kernel& k, const Launch& l, int64_t begin, int64_t end,
                    const backends::MicroKernels& mk) {
  const Program& p = k.program();
  const VerifiedProgram& vp = k.verified();
  const auto& info = vp.info;
  const size_t ni = p.code.size();
  // Accumulator floats per row reduction. The multi-pass path feeds kTile
  // floats at a time, which must be a multiple of reduce_lanes (16-lane ISAs).
  static_assert(kTile % (backends::kReduceAccs * 16) == 0, "tiles must keep the reduction order");
  const int lanes = mk.reduce_lanes;
  const bool whole_row = l.C() <= kRowTileMax;
  Frame& f = t_frame;
  f.prepare(vp, whole_row ? std::max<int64_t>(l.C(), 1) : kTile, lanes);
  for (int64_t item = begin; item < end; ++item) {
    Tile t{item / l.R(), item % l.R(), 0, l.C()};
    if (whole_row) {
      // One pass: each reduction folds the whole row where it stands.
      for (size_t i = 0; i < ni; ++i) {
        const Instr& ins = p.code[i];
        if (op_class(ins.op) != OpClass::Reduce) {
          exec(ins, info[i], f, p.nregs, l, t, mk, f.direct[i]);
          continue;
        }
        const int op = static_cast<int>(ins.op);
        if (long_reduce(ins.op)) {
          f.lval[ins.r[0]] = fold_long(ins, info[i], f, p.nregs, t.n, mk.long_identity[op], mk);
          continue;
        }
        float* acc = &f.acc[i * static_cast<size_t>(lanes)];
        for (int j = 0; j < lanes; ++j) acc[j] = mk.reduce_identity[op];
        mk.reduce_acc[op](acc, reduce_source(ins, info[i], f, p.nregs, t.n, mk), t.n);
        f.sval[ins.r[0]] = mk.reduce_finish[op](acc);
      }
      continue;
    }
    // Rows longer than the buffer: pass L computes everything of level <= L
    // and folds the reductions of level L + 1; the last pass stores. Every
    // pass runs the program in order, so register reuse stays valid.
    for (int pass = 0; pass <= vp.max_level; ++pass) {
      run_pass(k, l, t, 0, l.C(), pass, mk, f,
               [&](size_t i) { return &f.acc[i * static_cast<size_t>(lanes)]; },
               [&](size_t i) { return f.result[i]; });
      for (size_t i = 0; i < ni; ++i)
        if (op_class(p.code[i].op) == OpClass::Reduce && info[i].level == pass + 1) {
          if (long_reduce(p.code[i].op)) f.lresult[i] = f.lacc[i];
          else f.result[i] = mk.reduce_finish[static_cast<int>(p.code[i].op)](&f.acc[i * static_cast<size_t>(lanes)]);
        }
    }
  }
}

void run_col_reduce(const Kernel& k, const Launch& l, int64_t begin, int64_t end,
                    const backends::MicroKernels& mk) {
  const Program& p = k.program();
  const VerifiedProgram& vp = k.verified();
  const auto& info = vp.info;
  const size_t ni = p.code.size();
  const size_t r0 = static_cast<size_t>(vp.first_reduce), r1 = static_cast<size_t>(vp.last_reduce);
  Frame& f = t_frame;
  f.prepare(vp, kTile, mk.lanes, true);
  const int64_t ctiles = col_tiles(l);
  for (int64_t item = begin; item < end; ++item) {
    const ItemStart at = col_item(l, ctiles, item);
    Tile t{at.p, 0, at.c0, at.n};
    for (size_t i = r0; i <= r1; ++i) {
      const int op = static_cast<int>(p.code[i].op);
      if (long_reduce(p.code[i].op)) {
        if (info[i].dst_kind == Kind::Vec)
          std::fill_n(reinterpret_cast<int64_t*>(f.colacc(i, p.nregs)), t.n, mk.long_identity[op]);
        else f.lresult[i] = mk.long_identity[op];
      } else if (info[i].dst_kind == Kind::Vec) {
        mk.fill(f.colacc(i, p.nregs), mk.reduce_identity[op], t.n);
      } else {
        f.result[i] = mk.reduce_identity[op];
      }
    }
    for (t.r = 0; t.r < l.R(); ++t.r) {
      for (size_t i = 0; i < r0; ++i) exec(p.code[i], info[i], f, p.nregs, l, t, mk);
      for (size_t i = r0; i <= r1; ++i) {
        const Instr& ins = p.code[i];
        if (long_reduce(ins.op)) {  // each column folds its rows in order
          if (info[i].dst_kind == Kind::Row) {
            f.lresult[i] = mk.long_reduce[static_cast<int>(ins.op)](f.lresult[i], &f.lval[ins.r[1]], 1);
          } else {
            const Op comb = ins.op == Op::LRSUM ? Op::LADD : ins.op == Op::LRMAX ? Op::LMAX : Op::LMIN;
            float* acc = f.colacc(i, p.nregs);
            mk.wide[static_cast<int>(comb)](acc, acc, f.ptr[ins.r[1]], nullptr, t.n);
          }
          continue;
        }
        const int comb = static_cast<int>(combine_op(ins.op));
        if (info[i].dst_kind == Kind::Vec) {
          float* acc = f.colacc(i, p.nregs);
          mk.binary[comb](acc, acc, f.ptr[ins.r[1]], t.n);
        } else {
          float x = f.result[i], y = f.sval[ins.r[1]];
          mk.binary[comb](&f.result[i], &x, &y, 1);
        }
      }
    }
    set_prologue_constants(p, l, r0, f);  // before the results: a result may reuse a constant's register
    for (size_t i = r0; i <= r1; ++i) {
      const Instr& ins = p.code[i];
      if (info[i].dst_kind == Kind::Vec) f.ptr[ins.r[0]] = f.colacc(i, p.nregs);
      else if (long_reduce(ins.op)) f.lval[ins.r[0]] = f.lresult[i];
      else f.sval[ins.r[0]] = f.result[i];
    }
    t.r = 0;  // epilogue arguments have no R extent
    for (size_t i = r1 + 1; i < ni; ++i) exec(p.code[i], info[i], f, p.nregs, l, t, mk, f.direct[i]);
  }
}

}  // namespace

namespace {

// A ColReduce launch of few column tiles over many rows: R splits into
// chunks of ColSplit::rows; per (tile, chunk) the prologue folds its rows
// from the identity into the split layout, then finish_split_cols combines.
void interpret_split_cols(const Kernel& k, const Launch& l, const backends::MicroKernels& mk) {
  if (k.verified().int64_lanes) throw Error("internal: a kernel with int64 lanes was split (vm/schedule.cpp)");
  const Program& p = k.program();
  const VerifiedProgram& vp = k.verified();
  const auto& info = vp.info;
  const size_t r0 = static_cast<size_t>(vp.first_reduce), r1 = static_cast<size_t>(vp.last_reduce);
  const ColSplit sp = col_split(k, l);
  if (sp.items == 0) return;
  std::vector<float> partial(sp.floats());
  parallel_items(sp.items * sp.chunks, sp.rows * std::min(l.C(), kTile), [&](int64_t b, int64_t e) {
    Frame& f = t_frame;
    f.prepare(vp, kTile, mk.lanes);
    for (int64_t idx = b; idx < e; ++idx) {
      const int64_t item = idx / sp.chunks, chunk = idx % sp.chunks;
      const ItemStart at = col_item(l, sp.ctiles, item);
      Tile t{at.p, 0, at.c0, at.n};
      for (size_t i = r0; i <= r1; ++i)
        mk.fill(sp.at(partial.data(), chunk, i - r0, t.p, t.c0),
                mk.reduce_identity[static_cast<int>(p.code[i].op)], info[i].dst_kind == Kind::Vec ? t.n : 1);
      for (t.r = chunk * sp.rows; t.r < std::min(l.R(), (chunk + 1) * sp.rows); ++t.r) {
        for (size_t i = 0; i < r0; ++i) exec(p.code[i], info[i], f, p.nregs, l, t, mk);
        for (size_t i = r0; i <= r1; ++i) {
          const Instr& ins = p.code[i];
          const int comb = static_cast<int>(combine_op(ins.op));
          float* acc = sp.at(partial.data(), chunk, i - r0, t.p, t.c0);
          if (info[i].dst_kind == Kind::Vec) mk.binary[comb](acc, acc, f.ptr[ins.r[1]], t.n);
          else mk.binary[comb](acc, acc, &f.sval[ins.r[1]], 1);
        }
      }
    }
  });
  finish_split_cols(k, l, sp, mk, partial.data());
}

}  // namespace

void finish_split_cols(const Kernel& k, const Launch& l, const ColSplit& sp, const backends::MicroKernels& mk,
                       float* partial) {
  const Program& p = k.program();
  const VerifiedProgram& vp = k.verified();
  const auto& info = vp.info;
  const size_t ni = p.code.size();
  const size_t r0 = static_cast<size_t>(vp.first_reduce), r1 = static_cast<size_t>(vp.last_reduce);
  // Chunks combine pairwise (into chunk 0's place): the sum's error grows
  // with log2(chunks), not with chunks. Then each tile's epilogue.
  parallel_items(sp.items, l.C() < kTile ? l.C() : kTile, [&](int64_t b, int64_t e) {
    Frame& f = t_frame;
    f.prepare(vp, kTile, mk.lanes);
    for (int64_t item = b; item < e; ++item) {
      const ItemStart at = col_item(l, sp.ctiles, item);
      Tile t{at.p, 0, at.c0, at.n};
      set_prologue_constants(p, l, r0, f);  // before the results: a result may reuse a constant's register
      for (size_t i = r0; i <= r1; ++i) {
        const int comb = static_cast<int>(combine_op(p.code[i].op));
        const int64_t n = info[i].dst_kind == Kind::Vec ? t.n : 1;
        float* acc = sp.at(partial, 0, i - r0, t.p, t.c0);
        for (int64_t step = 1; step < sp.chunks; step *= 2)
          for (int64_t c = 0; c + step < sp.chunks; c += 2 * step)
            mk.binary[comb](sp.at(partial, c, i - r0, t.p, t.c0), sp.at(partial, c, i - r0, t.p, t.c0),
                            sp.at(partial, c + step, i - r0, t.p, t.c0), n);
        if (info[i].dst_kind == Kind::Vec) f.ptr[p.code[i].r[0]] = acc;
        else f.sval[p.code[i].r[0]] = acc[0];
      }
      for (size_t i = r1 + 1; i < ni; ++i) exec(p.code[i], info[i], f, p.nregs, l, t, mk, f.direct[i]);
    }
  });
}

// Bytes of a widened B panel (run_contraction): within L2 beside the cube's
// own packed panels.
constexpr int64_t kWidenBytes = 256 * 1024;

// The cube's operand for one item: f32 arguments are read in place; a
// 16-bit float operand's rows x cols region (element (i, j) at base + i *
// rs + j * cs, in elements) is widened (exactly) into `buf` first, laid out
// along whichever axis the source is contiguous in, so the GEMM packs it as
// it would the f32 original.
backends::cube::Matrix cube_operand(const ArgBinding& a, Dtype t, int64_t off, int64_t rows, int64_t cols,
                                    int64_t rs, int64_t cs, std::vector<float>& buf,
                                    const backends::MicroKernels& mk) {
  if (t == Dtype::F32) return {f32_in(a, off), rs, cs};
  buf.resize(static_cast<size_t>(rows * cols));
  const void* base = typed_in(a, off, t);
  float* d = buf.data();
  const backends::LoadCvtFn cvt = mk.load_cvt[static_cast<int>(t)];
  if (cs == 1 || cols == 1) {  // rows contiguous: row-major copy
    for (int64_t i = 0; i < rows; ++i) cvt(d + i * cols, advance(base, i * rs, t), cols);
    return {d, cols, 1};
  }
  if (rs == 1 || rows == 1) {  // columns contiguous: column-major copy
    for (int64_t j = 0; j < cols; ++j) cvt(d + j * rows, advance(base, j * cs, t), rows);
    return {d, 1, rows};
  }
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) d[i * cols + j] = backends::load_elem(t, base, i * rs + j * cs);
  return {d, cols, 1};
}

// An operand of a Contraction's product: an argument the cube reads (as
// `mma` does, or as a prologue that is one ldoa or ldob), or the register
// its prologue computes.
struct CubeOperand {
  int arg = -1;
  int reg = -1;
  bool row = false;  // reg holds one value (constants only): Kind::Row
};

CubeOperand cube_operand_of(const Program& p, const std::vector<InstrInfo>& info, const Instr& mma, int k) {
  if (mma.op == Op::MMA) return {mma.r[k], -1};
  const uint8_t space = k == 1 ? kOperandA : kOperandB;
  const Instr* only = nullptr;
  int count = 0;
  for (size_t i = 0; i < p.code.size(); ++i)
    if (info[i].space == space) {
      only = &p.code[i];
      ++count;
    }
  if (count == 1 && only->r[0] == mma.r[k]) return {only->r[1], -1};
  // The register's kind where the product reads it: its last writer's.
  bool row = false;
  for (const Instr* i = p.code.data(); i != &mma; ++i)
    if (op_info(i->op).signature[0] == 'D' && i->r[0] == mma.r[k]) row = info[static_cast<size_t>(i - p.code.data())].dst_kind == Kind::Row;
  return {-1, mma.r[k], row};
}

// The launch an operand prologue runs on: operand a's [P, R, K] (or b's
// [P, K, C]) as the [P, R, C] its loads read, K taking C's place (or R's).
void prologue_launch(const Launch& l, uint8_t space, Launch* out) {
  *out = l;
  for (ArgBinding& a : out->args) {
    if (space == kOperandA) a.stride[kC] = a.stride[kK];
    else a.stride[kR] = a.stride[kK];
  }
}

// Evaluates operand a's prologue for rows [r0, r0 + rows) and k in [k0, k0 +
// kn) into buf (row-major, kn per row), or operand b's for k in [k0, k0 +
// kn) and columns [c0, c0 + n) (row-major, n per row): the instructions of
// its space and the uniform ones before the product (`end`; a later one
// may reuse the operand's register), in program order, over tiles of its rows.
void run_prologue(const Program& p, const std::vector<InstrInfo>& info, size_t end, uint8_t space,
                  const CubeOperand& o, const Launch& pl,
                  int64_t pidx, int64_t row0, int64_t rows, int64_t col0, int64_t cols, float* buf,
                  const backends::MicroKernels& mk) {
  Frame& f = t_frame;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; c += kTile) {
      const Tile t{pidx, row0 + r, col0 + c, std::min(kTile, cols - c)};
      for (size_t i = 0; i < end; ++i)
        if (info[i].space == space || info[i].space == kUniform) exec(p.code[i], info[i], f, p.nregs, pl, t, mk);
      float* dst = buf + r * cols + c;
      if (o.row) mk.fill(dst, f.sval[static_cast<size_t>(o.reg)], t.n);
      else std::memcpy(dst, f.ptr[static_cast<size_t>(o.reg)], static_cast<size_t>(t.n) * sizeof(float));
    }
}

// Contraction items are output blocks (vm/schedule.h): the MMA's product
// for the block is made into the thread's block buffer, then the program
// runs over the block's rows as tiles, its MMA register reading the buffer.
// An operand with a prologue is computed into a panel first, one K panel at
// a time, and the cube reads the panel.
void run_contraction(const Kernel& k, const Launch& l, int64_t begin, int64_t end, const backends::MicroKernels& mk,
                     backends::cube::Kernels kernels) {
  const Program& p = k.program();
  const auto& info = k.verified().info;
  Frame& f = t_frame;
  f.prepare(k.verified(), kTile, mk.lanes);
  const Instr* mma = nullptr;
  for (const Instr& ins : p.code)
    if (op_class(ins.op) == OpClass::Contract) mma = &ins;
  const CubeOperand oa = cube_operand_of(p, info, *mma, 1), ob = cube_operand_of(p, info, *mma, 2);
  const size_t mma_at = static_cast<size_t>(mma - p.code.data());
  // A product stored as it is (matmul, bmm: `mma; st`) is written by the
  // cube straight into its output, without the block buffer and the
  // per-row epilogue (the same sums, so the same bits).
  const Instr* store = nullptr;
  int epilogue = 0;
  for (size_t i = 0; i < p.code.size(); ++i)
    if (info[i].space == kOutSpace && &p.code[i] != mma) {
      ++epilogue;
      store = &p.code[i];
    }
  const bool direct = epilogue == 1 && store->op == Op::ST && store->r[1] == mma->r[0] &&
                      p.types[store->r[0]] == Dtype::F32 && !int_lanes(p, store->r[0]) &&
                      (l.C() <= 1 || l.args[store->r[0]].stride[kC] == 1);
  const Dtype ta = oa.arg >= 0 ? p.types[oa.arg] : Dtype::F32, tb = ob.arg >= 0 ? p.types[ob.arg] : Dtype::F32;
  const bool panels = ta != Dtype::F32 || tb != Dtype::F32 || oa.arg < 0 || ob.arg < 0;
  thread_local Launch la, lb;
  if (oa.arg < 0) prologue_launch(l, kOperandA, &la);
  if (ob.arg < 0) prologue_launch(l, kOperandB, &lb);
  const ArgBinding none;
  const ArgBinding& A = oa.arg >= 0 ? l.args[oa.arg] : none;
  const ArgBinding& B = ob.arg >= 0 ? l.args[ob.arg] : none;
  const MmaBlocks blocks = mma_blocks(l);
  thread_local std::vector<float> product;
  product.resize(static_cast<size_t>(blocks.rows * blocks.cols));
  const size_t ni = p.code.size();
  // Items that are whole tiny products (bmm of small matrices) run as one
  // batch: the same sums, without per-product packing and set-up.
  if (direct && !panels && blocks.rblocks == 1 && blocks.cblocks == 1 && begin < end) {
    const ArgBinding& out = l.args[store->r[0]];
    backends::cube::Gemm g{l.R(), l.C(), l.K(), {}, {}, nullptr, l.R() > 1 ? out.stride[kR] : l.C()};
    g.a = {f32_in(A, begin * A.stride[kP]), A.stride[kR], A.stride[kK]};
    g.b = {f32_in(B, begin * B.stride[kP]), B.stride[kK], B.stride[kC]};
    g.c = f32_out(out, begin * out.stride[kP]);
    if (backends::cube::tiny(g)) {
      backends::cube::tiny_batch(g, mk.isa, end - begin, A.stride[kP], B.stride[kP], out.stride[kP]);
      return;
    }
  }
  for (int64_t item = begin; item < end; ++item) {
    int64_t rows = 0;
    const ItemStart at = mma_item(l, blocks, item, &rows);
    // The cube unit (backends/cube/gemm.h): each sum in ascending k from
    // +0, the order every tier keeps.
    const int64_t a0 = at.p * A.stride[kP] + at.r * A.stride[kR], b0 = at.p * B.stride[kP] + at.c0 * B.stride[kC];
    backends::cube::Gemm g{rows, at.n, l.K(), {}, {}, product.data(), at.n};
    // An item is one block of the launch's schedule already: a tall one runs
    // as one GEMM block (A and B packed once), a short one faster in the
    // cube's narrower blocks.
    g.split_for_threads = rows <= kMmaSplitRows;
    g.kernels = kernels;
    if (direct) {
      const ArgBinding& out = l.args[store->r[0]];
      g.c = f32_out(out, at.p * out.stride[kP] + at.r * out.stride[kR] + at.c0);
      g.ldc = rows > 1 ? out.stride[kR] : at.n;  // one row: no row stride is read
    }
    if (!panels) {
      g.a = {f32_in(A, a0), A.stride[kR], A.stride[kK]};
      g.b = {f32_in(B, b0), B.stride[kK], B.stride[kC]};
      backends::cube::gemm(g, mk.isa);
    } else {
      // 16-bit operands are widened, and prologues computed, a K panel at a
      // time (kWidenBytes of B per panel, so it is still in cache when the
      // cube reads it), each panel continuing the sums of the last: the same
      // steps as one call. With B read in place, A is made whole: the cube
      // then blocks K as it does for a stored A.
      // One row times a 16-bit B whose rows are contiguous, or its columns
      // where the cube reads them in place: the cube widens B as it reads
      // it (Gemm::b16), so B's bytes are read once.
      thread_local std::vector<float> a16, b16;
      const bool b_wide16 = rows == 1 && ob.arg >= 0 && (tb == Dtype::BF16 || tb == Dtype::F16) &&
                            (B.stride[kC] == 1 || at.n == 1 ||
                             (B.stride[kK] == 1 && backends::cube::one_row_reads_columns(mk.isa)));
      const bool b_in_place = ob.arg >= 0 && (tb == Dtype::F32 || b_wide16);
      const int64_t K = l.K();
      const int64_t kc = b_in_place ? std::max<int64_t>(K, 1)
                                    : std::max<int64_t>(16, kWidenBytes / (4 * std::max<int64_t>(at.n, 1)));
      for (int64_t k0 = 0; k0 < K || k0 == 0; k0 += kc) {
        const int64_t kn = std::min(kc, K - k0);
        g.K = kn;
        g.accumulate = k0 > 0;
        if (oa.arg >= 0) {
          g.a = cube_operand(A, ta, a0 + k0 * A.stride[kK], rows, kn, A.stride[kR], A.stride[kK], a16, mk);
        } else {
          a16.resize(static_cast<size_t>(rows * kn));
          run_prologue(p, info, mma_at, kOperandA, oa, la, at.p, at.r, rows, k0, kn, a16.data(), mk);
          g.a = {a16.data(), kn, 1};
        }
        if (b_wide16) {
          g.b = {nullptr, B.stride[kK], at.n == 1 ? 1 : B.stride[kC]};
          g.b16 = static_cast<const uint16_t*>(typed_in(B, b0 + k0 * B.stride[kK], tb));
          g.b16_type = tb;
        } else if (ob.arg >= 0) {
          g.b = cube_operand(B, tb, b0 + k0 * B.stride[kK], kn, at.n, B.stride[kK], B.stride[kC], b16, mk);
        } else {
          b16.resize(static_cast<size_t>(kn * at.n));
          run_prologue(p, info, mma_at, kOperandB, ob, lb, at.p, k0, kn, at.c0, at.n, b16.data(), mk);
          g.b = {b16.data(), at.n, 1};
        }
        backends::cube::gemm(g, mk.isa);
      }
    }
    if (direct) continue;
    for (int64_t r = 0; r < rows; ++r) {
      const Tile t{at.p, at.r + r, at.c0, at.n};
      f.mma = product.data() + r * at.n;
      for (size_t i = 0; i < ni; ++i)
        if (info[i].space <= kOutSpace) exec(p.code[i], info[i], f, p.nregs, l, t, mk, f.direct[i]);
    }
  }
}

namespace {

void run_contraction_interpreted(const Kernel& k, const Launch& l, int64_t begin, int64_t end,
                                 const backends::MicroKernels& mk) {
  run_contraction(k, l, begin, end, mk, backends::cube::Kernels::Precompiled);
}

void split_rows_interpreted(const Kernel& k, const Launch& l, const backends::MicroKernels& mk) {
  split_row_reduce(k, l, mk, nullptr);
}

// The interpreter's entry per form of the form table (vm/forms.h): its
// driver for work items and, for forms that split, its split launch.
struct Driver {
  Form form;
  void (*run)(const Kernel&, const Launch&, int64_t, int64_t, const backends::MicroKernels&);
  void (*split)(const Kernel&, const Launch&, const backends::MicroKernels&);
};
constexpr Driver kDrivers[] = {
    {Form::Elementwise, run_elementwise, nullptr},
    {Form::RowReduce, run_row_reduce, split_rows_interpreted},
    {Form::ColReduce, run_col_reduce, interpret_split_cols},
    {Form::Contraction, run_contraction_interpreted, nullptr},
};
static_assert(std::size(kDrivers) == kNumForms, "an interpreter driver per form");
constexpr bool drivers_in_form_order() {
  for (int i = 0; i < kNumForms; ++i)
    if (static_cast<int>(kDrivers[i].form) != i || !kDrivers[i].run) return false;
  return true;
}
static_assert(drivers_in_form_order(), "driver i runs form i");

}  // namespace

void interpret_split_rows(const Kernel& k, const Launch& l, const backends::MicroKernels& mk) {
  const Driver& d = kDrivers[static_cast<int>(k.form())];
  if (d.split) d.split(k, l, mk);
  else d.run(k, l, 0, work_items(k, l), mk);
}

void split_row_reduce(const Kernel& k, const Launch& l, const backends::MicroKernels& mk,
                      const RowChunkPass* machine) {
  if (k.verified().int64_lanes) throw Error("internal: a kernel with int64 lanes was split (vm/schedule.cpp)");
  const Program& p = k.program();
  const VerifiedProgram& vp = k.verified();
  const size_t ni = p.code.size();
  const size_t lanes = static_cast<size_t>(mk.reduce_lanes);
  const int64_t rows = l.P() * l.R();
  const int64_t chunks = (l.C() + kRowChunk - 1) / kRowChunk;
  if (rows == 0) return;
  bool vec_stores = false, row_stores = false;
  for (const Instr& ins : p.code) {
    vec_stores |= ins.op == Op::ST;
    row_stores |= ins.op == Op::STB;
  }
  std::vector<float> results(static_cast<size_t>(rows) * ni, 0.0f);  // finished reductions per row
  std::vector<size_t> slot(ni);  // a folding reduction's place among this pass's
  std::vector<size_t> folding;   // the reductions this pass folds, in program order
  std::vector<float> partial;    // per (row, chunk, folding reduction): lanes floats
  for (int pass = 0; pass <= vp.max_level; ++pass) {
    const bool last = pass == vp.max_level;
    folding.clear();
    for (size_t i = 0; i < ni; ++i)
      if (op_class(p.code[i].op) == OpClass::Reduce && vp.info[i].level == pass + 1) {
        slot[i] = folding.size();
        folding.push_back(i);
      }
    const size_t folds = folding.size();
    partial.assign(static_cast<size_t>(rows * chunks) * folds * lanes, 0.0f);
    // The last pass streams the row only for ST; STBs are per row, below.
    if (!last || vec_stores)
      parallel_items(rows * chunks, kRowChunk, [&](int64_t b, int64_t e) {
        Frame& f = t_frame;
        f.prepare(vp, kTile, mk.reduce_lanes);
        std::vector<float> rest(folds * lanes);  // the interpreter's share of a chunk
        for (int64_t item = b; item < e; ++item) {
          const int64_t row = item / chunks, chunk = item % chunks;
          const int64_t c0 = chunk * kRowChunk, c1 = std::min(l.C(), c0 + kRowChunk);
          float* mine = partial.data() + static_cast<size_t>(item) * folds * lanes;
          const float* done = results.data() + static_cast<size_t>(row) * ni;
          // Machine code takes a prefix of whole accumulator rounds; the
          // interpreter folds the rest from the identity, into `rest` when
          // the prefix ran: accumulator j then gets op(acc_j, op(id, x)),
          // which is op(acc_j, x) bit for bit.
          const int64_t ran = machine ? (*machine)(pass, row, c0, c1, mine, done) : 0;
          if (ran >= c1 - c0) continue;
          float* into = ran > 0 && !last ? rest.data() : mine;
          run_pass(k, l, Tile{row / l.R(), row % l.R(), 0, 0}, c0 + ran, c1, pass, mk, f,
                   [&](size_t i) { return into + slot[i] * lanes; }, [&](size_t i) { return done[i]; },
                   LastPassStores::Vec);
          if (into == mine) continue;
          for (size_t i : folding)
            mk.binary[static_cast<int>(combine_op(p.code[i].op))](mine + slot[i] * lanes, mine + slot[i] * lanes,
                                                                   into + slot[i] * lanes, mk.reduce_lanes);
        }
      });
    if (last) {
      if (row_stores)
        parallel_items(rows, 1, [&](int64_t b, int64_t e) {
          Frame& f = t_frame;
          f.prepare(vp, kTile, mk.reduce_lanes);
          for (int64_t row = b; row < e; ++row) {
            const float* done = results.data() + static_cast<size_t>(row) * ni;
            run_pass(k, l, Tile{row / l.R(), row % l.R(), 0, 0}, 0, std::min<int64_t>(l.C(), 1), pass, mk, f,
                     [&](size_t) { return static_cast<float*>(nullptr); }, [&](size_t i) { return done[i]; },
                     LastPassStores::Row);
          }
        });
      break;
    }
    // Chunk accumulators combine lane by lane in chunk order, then the usual
    // tree: the same bits whatever ran which chunk.
    for (int64_t row = 0; row < rows; ++row)
      for (size_t i : folding) {
        const int op = static_cast<int>(p.code[i].op);
        const int comb = static_cast<int>(combine_op(p.code[i].op));
        float* first = partial.data() + (static_cast<size_t>(row * chunks) * folds + slot[i]) * lanes;
        for (int64_t c = 1; c < chunks; ++c)
          mk.binary[comb](first, first, first + static_cast<size_t>(c) * folds * lanes, mk.reduce_lanes);
        results[static_cast<size_t>(row) * ni + i] = mk.reduce_finish[op](first);
      }
  }
}

void interpret(const Kernel& k, const Launch& l, int64_t begin, int64_t end,
               const backends::MicroKernels& mk) {
  if (begin >= end) return;
  kDrivers[static_cast<int>(k.form())].run(k, l, begin, end, mk);
}

}  // namespace dvm::vm
