// Register allocation for the JIT IR, target-neutral: live intervals over the
// IR's linear order (values used in a loop they were defined outside of stay
// live to its end) and a linear scan over the registers TargetCaps names that
// spills whole intervals to stack slots. Emitters read the result.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <utility>
#include <vector>

#include "backends/jit/caps.h"
#include "backends/jit/ir.h"

namespace dvm::backends::jit {

// Where each value lives, indexed by node id.
struct Allocation {
  std::vector<int32_t> end;         // last use (node id) of each value, -1 if none
  std::vector<int32_t> nuses;       // reads of each value
  std::vector<int8_t> reg;          // register, or -1 (spilled or no value)
  std::vector<int32_t> slot;        // spill slot, or -1
  std::vector<int32_t> alias;       // accumulator whose location this value writes, or -1
  std::vector<uint8_t> mask_class;  // 1: held in a mask register (TargetCaps::mask_regs)
  int nslots = 0;                   // spill slots used

  // The node whose location holds v (its accumulator where v is aliased).
  size_t loc(int32_t v) const {
    const int32_t a = alias[static_cast<size_t>(v)];
    return static_cast<size_t>(a >= 0 ? a : v);
  }
};

// Allocates the registers of ir's values.
//
// A value computed just before the Copy that is its only use (`t = op(...);
// acc <- t`) is aliased to the accumulator: it is computed straight into the
// accumulator's location. A new value prefers the register of its first
// source when that source dies there (one instruction reads, then writes),
// else the lowest free register; when none is free, the interval that ends
// last is spilled.
// *out's lists keep their capacity from call to call.
void allocate(const IrBuilder& ir, const TargetCaps& caps, Allocation* out);

// Constants kept in registers over each column loop (LoopBegin imm 0; these
// never nest): registers no value holds while the loop runs go to the
// constants the loop reads most, in that order (ties: first read first); the
// other constants stay in the pool.
struct HoistPlan {
  std::vector<std::pair<int32_t, int>> regs;  // (constant node, register), loop after loop
  // Per column loop in order: its LoopBegin node and its first pair in regs;
  // the loop's pairs end where the next loop's begin (a last entry closes).
  std::vector<std::pair<int32_t, uint32_t>> loops;

  // The pairs of the column loop that begins at node b: [first, last).
  std::pair<size_t, size_t> of(int32_t b) const {
    const auto it = std::lower_bound(loops.begin(), loops.end(), std::pair<int32_t, uint32_t>(b, 0));
    if (it == loops.end() || it->first != b) return {0, 0};
    return {it->second, std::next(it)->second};
  }
};
void hoisted_constants(const IrBuilder& ir, const Allocation& al, const TargetCaps& caps, HoistPlan* out);

}  // namespace dvm::backends::jit
