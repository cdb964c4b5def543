// The verifier: every kernel's bytecode is checked here before it is run or
// compiled. It also derives what executors need to know about each
// instruction (operand kinds, phase levels).
#pragma once

#include <string>
#include <vector>

#include "vm/bytecode.h"

namespace dvm::vm {

// What a register holds at one point of the program.
//   Vec: values that vary along C (one per element of the tile).
//   Row: one value per row (constant along C): CONST, PARAM, LDB, reductions over
//        C, and ops whose operands are all Row.
enum class Kind : uint8_t { Vec = 0, Row = 1 };

struct InstrInfo {
  Kind src_kind[3] = {Kind::Vec, Kind::Vec, Kind::Vec};
  Kind dst_kind = Kind::Vec;
  // RowReduce: how many reductions this value depends on in sequence (loads
  // and constants 0, a reduction's result one more than its input). Executors
  // that cannot hold a whole row run one pass over the row per level.
  // ColReduce: 0 before the reductions, 1 for the reductions and after.
  uint8_t level = 0;
  // Contraction: the space the value lives in, which says in which pass an
  // executor evaluates the instruction. kOutSpace values vary over [P, R, C]
  // (loads, the product, its epilogue); kOperandA over a's [P, R, K] and
  // kOperandB over b's [P, K, C] (the operand prologues: ldoa, ldob and
  // what they feed); kUniform values (constants, parameters and ops on them
  // only) are the same everywhere and are evaluated in every pass.
  uint8_t space = 0;
};
inline constexpr uint8_t kUniform = 0, kOutSpace = 1, kOperandA = 2, kOperandB = 3;

struct VerifiedProgram {
  Program program;
  std::vector<InstrInfo> info;  // one per instruction
  int max_level = 0;
  // Some register or argument holds int64 lanes (8 bytes an element): the
  // interpreter then sizes its registers for them.
  bool int64_lanes = false;
  int first_reduce = -1;  // index of the first reduction, -1 if none
  int last_reduce = -1;
};

// Checks magic and version, form, register, argument and scalar-parameter
// bounds, operand
// kinds, argument roles (loads read inputs, stores write outputs, every
// output written), reads of unwritten registers, unknown opcodes, truncation
// and trailing bytes, and the form's rules on reductions. On failure returns
// false and sets *error to a message naming the instruction.
bool verify(const Bytecode& bc, VerifiedProgram* out, std::string* error);

}  // namespace dvm::vm
