// The bytecode format: a small header then instructions laid out by the
// opcode table. Nothing in it depends on concrete sizes; those come with the
// launch (vm/launch.h).
//
//   bytes 0-3   'D' 'V' 'M' kBytecodeVersion
//   byte  4     form (Form)
//   byte  5     number of registers
//   byte  6     number of arguments
//   bytes 7-8   number of scalar parameters, u16 little-endian (PARAM
//               reads them by index; their values come with the launch,
//               Launch::scalars)
//   then        per argument: its role byte (ArgRole), then its element
//               type byte (Dtype, with kIntLanes set for int32 lanes)
//   then        instruction count, u16 little-endian
//   then        instructions: opcode byte, then operands per the signature
//               (registers and argument indices one byte, scalar indices
//               two bytes and floats four bytes, little-endian)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dvm/dtype.h"
#include "vm/opcodes.h"

namespace dvm::vm {

inline constexpr uint8_t kBytecodeVersion = 3;
inline constexpr int kMaxRegs = 250;
inline constexpr int kMaxArgs = 64;
inline constexpr int kMaxScalars = 65535;
inline constexpr int kHeaderFixed = 9;  // magic, version, form, nregs, nargs, nscalars (2)
inline constexpr int kArgBytes = 2;     // per argument: role, element type
// Set in an argument's type byte: its loads and stores move int32 lanes, not
// f32 ones (the I* opcodes compute on them). Loads give an i32 element's
// bits, a u8 zero-extended, a bool as 0 or 1; stores write an int32 lane as
// its bits (i32), its low byte (u8), nonzero (bool), or converted to f32 to
// nearest even, then stored as an f32 is (f32, f16, bf16). Only outputs may
// be floating. On an int64 argument the flag moves int64 lanes instead (the
// L* opcodes), loaded and stored as they are.
inline constexpr uint8_t kIntLanes = 0x80;

// The kernel forms, in encoding order; vm/forms.h holds each one's row (its
// verify rules, schedule and cost). The iteration space is [P, R, C], C
// innermost.
//   Elementwise: every instruction runs over all of [P, R, C].
//   RowReduce:   reductions fold C; their results are one value per (p, r),
//                and may be reduced again (multi-phase: softmax, layer_norm).
//   ColReduce:   reductions fold R; instructions after the reductions run
//                over [P, C] only (the epilogue).
//   Contraction: the cube unit's mix kernel over [P, R, C, K]: one MMA makes
//                the [R, C] product of two inputs summed over K (per P), and
//                the rest of the program (the epilogue) runs elementwise
//                over [P, R, C] on it while its tile is in cache.
//
//   X(Name,        name in logs and stats)
#define DVM_FORMS(X)              \
  X(Elementwise, "elementwise")   \
  X(RowReduce,   "row_reduce")    \
  X(ColReduce,   "col_reduce")   \
  X(Contraction, "contraction")

enum class Form : uint8_t {
#define DVM_X(name, str) name,
  DVM_FORMS(DVM_X)
#undef DVM_X
};
inline constexpr int kNumForms = 0
#define DVM_X(name, str) +1
    DVM_FORMS(DVM_X)
#undef DVM_X
    ;
const char* form_name(Form f);

enum class ArgRole : uint8_t { Input = 0, Output = 1 };

// Element types an argument may have in the bytecode (dvm::Dtype's values),
// their size in memory and their short name in disassembly. Loads and stores
// are the only places that convert between an argument's type and the
// vector unit's f32 registers (backends/convert.h has the rules).
inline constexpr int kNumElemTypes = kNumDtypes;
constexpr size_t elem_bytes(Dtype t) { return dtype_size(t); }
const char* elem_name(Dtype t);

struct Bytecode {
  std::vector<uint8_t> bytes;

  uint64_t hash() const;  // FNV-1a over the bytes
  std::string_view view() const {
    return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
  }
  friend bool operator==(const Bytecode& a, const Bytecode& b) { return a.bytes == b.bytes; }
};

// One decoded instruction. Operands are stored in signature order
// (registers and argument indices in r[], the float immediate in imm, the
// scalar index in scalar).
struct Instr {
  Op op;
  uint8_t r[4] = {0, 0, 0, 0};
  uint8_t nr = 0;
  float imm = 0.0f;
  uint16_t scalar = 0;
};

// The decoded header and instruction list: verify() in vm/verifier.h is the
// one decoder, and it checks every byte.
struct Program {
  Form form = Form::Elementwise;
  int nregs = 0;
  std::vector<ArgRole> roles;
  std::vector<Dtype> types;  // one per argument, beside its role
  // Per argument: 1 where it moves integer lanes (kIntLanes); shorter than
  // roles (empty) means 0 for the rest.
  std::vector<uint8_t> int_lanes;
  int nscalars = 0;          // scalar parameters the launch binds (PARAM)
  std::vector<Instr> code;
};
// Whether argument a of p moves integer lanes (kIntLanes): int64 ones for an
// int64 argument, int32 ones for the others.
inline bool int_lanes(const Program& p, size_t a) { return a < p.int_lanes.size() && p.int_lanes[a] != 0; }
// The bytes of a program (verify()'s inverse); verify() them before use.
Bytecode encode(const Program& p);

}  // namespace dvm::vm
