// The encoder: builds a kernel's bytecode from a straight-line list of
// operations on values, assigning vector registers by a linear scan so that
// registers are reused once their value is dead.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vm/bytecode.h"

namespace dvm::vm {

class Encoder {
 public:
  using Value = int32_t;  // a virtual register

  explicit Encoder(Form form);

  // int_lanes: the argument moves int32 lanes (kIntLanes).
  int add_arg(ArgRole role, Dtype type = Dtype::F32, bool int_lanes = false);
  Value load(Op load_op, int arg);          // LD, LDB, LDS, LDG, LDOA, LDOB
  // An immediate: a constant of an op's definition, part of the kernel.
  Value constant(float v);
  // A new scalar parameter (the next index) and its value in a register:
  // a user's scalar, bound with each launch (Launch::scalars[index]).
  Value param();
  Value unary(Op op, Value a);
  Value binary(Op op, Value a, Value b);
  Value ternary(Op op, Value a, Value b, Value c);
  Value reduce(Op op, Value a);             // RSUM, RMAX, RMIN
  // The cube unit's product of inputs a [P, R, K] and b [P, K, C] (Contraction).
  Value mma(int a, int b);
  // The same product of values the operand prologues computed: a from
  // LDOA loads, b from LDOB loads (MMAR).
  Value mma_values(Value a, Value b);
  void store(Op store_op, int arg, Value v);  // ST, STB

  // Assigns registers and writes the bytes. Throws dvm::Error when the kernel
  // needs more than kMaxRegs live values, kMaxArgs arguments or kMaxScalars
  // scalar parameters.
  Bytecode finish() const;
  // The same, or false (and *out untouched) when the kernel is over a limit.
  bool try_finish(Bytecode* out) const;
  size_t size() const { return ops_.size(); }
  int scalars() const { return nscalars_; }

 private:
  struct PendingOp {
    Op op;
    Value dst;  // -1 for stores
    Value src[3];
    int nsrc;
    int arg;  // argument index (loads, stores) or scalar index (PARAM)
    float imm;
    int arg2 = -1;  // MMA's second argument
  };
  Value emit(Op op, std::initializer_list<Value> srcs, int arg, float imm, bool has_dst);
  bool build(Bytecode* out, std::string* why) const;

  Form form_;
  std::vector<ArgRole> roles_;
  std::vector<Dtype> types_;
  std::vector<uint8_t> int_lanes_;
  std::vector<PendingOp> ops_;
  Value next_ = 0;
  int nscalars_ = 0;
};

}  // namespace dvm::vm
