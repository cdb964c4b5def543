// What a JIT target offers the target-neutral stages: the optional fused
// operations lowering may record and the registers the allocator hands out.
// Each target fills it (target.h: target_caps).
#pragma once

namespace dvm::backends::jit {

struct TargetCaps {
  int lanes = 0;              // float lanes per vector register
  bool fused_or_and = false;  // IrOp::OrAnd: a | (b & c) in one op
  bool scale_exp = false;     // IrOp::Scalef: a * 2^b in one op
  // Masks live in a register file of their own; otherwise a mask is a vector
  // whose lanes are all ones or all zeros, in the vector registers.
  bool mask_regs = false;
  // vcvtneps2bf16 (AVX512_BF16): a bfloat16 store in one instruction.
  bool bf16_convert = false;
  // Registers are numbered by the target. The allocator hands out vector
  // registers [first_vector_reg, vector_regs) and, with mask_regs, mask
  // registers [first_mask_reg, mask_reg_end); the ones below are the
  // emitter's scratch.
  int vector_regs = 0;
  int first_vector_reg = 0;
  int first_mask_reg = 0;
  int mask_reg_end = 0;
};

}  // namespace dvm::backends::jit
