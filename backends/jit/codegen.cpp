// generate(): checks the IR against the target's capabilities, allocates
// registers, and hands both to the target's emitter (codegen.h).
#include "backends/jit/codegen.h"

#include "backends/jit/regalloc.h"
#include "backends/jit/target.h"

namespace dvm::backends::jit {
namespace {

bool has(const TargetCaps& caps, IrNeed need) {
  switch (need) {
    case IrNeed::None: return true;
    case IrNeed::FusedOrAnd: return caps.fused_or_and;
    case IrNeed::ScaleExp: return caps.scale_exp;
  }
  return false;
}

}  // namespace

void* generate(const IrBuilder& ir, Isa isa, size_t* code_bytes, std::string* reason, bool no_spills,
               bool* spilled) {
  TargetCaps caps;
  if (!target_caps(isa, &caps, reason)) return nullptr;
  for (const Node& n : ir.nodes)
    if (!has(caps, ir_info(n.op).need)) {
      *reason = std::string("IR uses ") + ir_name(n.op) + ", which the target " + isa_name(isa) +
                " lacks (lowered for another ISA)";
      return nullptr;
    }
  thread_local Allocation al;  // reused: its lists keep their capacity
  allocate(ir, caps, &al);
  if (no_spills && al.nslots > 0) {
    if (spilled) *spilled = true;
    *reason = "spills";
    return nullptr;
  }
  return emit(ir, al, caps, isa, code_bytes, reason);
}

}  // namespace dvm::backends::jit
