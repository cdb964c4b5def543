// Disassembler: verified bytes to text.
#include "vm/disasm.h"

#include <cstdio>

#include "vm/verifier.h"

namespace dvm::vm {

std::string disassemble(const Bytecode& bc) {
  VerifiedProgram vp;
  std::string error;
  if (!verify(bc, &vp, &error)) return "<invalid: " + error + ">\n";
  const Program& p = vp.program;
  std::string out = "kernel " + std::string(form_name(p.form)) + " regs=" + std::to_string(p.nregs) +
                    " args=" + std::to_string(p.roles.size()) + " (";
  for (size_t a = 0; a < p.roles.size(); ++a) {
    if (a) out += ", ";
    out += p.roles[a] == ArgRole::Input ? "in a" : "out a";
    out += std::to_string(a) + ":" + elem_name(p.types[a]);
    if (int_lanes(p, a)) out += p.types[a] == Dtype::I64 ? "/i64" : "/i32";  // moves integer lanes
  }
  out += ")";
  if (p.nscalars > 0) out += " scalars=" + std::to_string(p.nscalars);
  out += " instrs=" + std::to_string(p.code.size()) + "\n";
  char buf[96];
  for (size_t i = 0; i < p.code.size(); ++i) {
    const Instr& ins = p.code[i];
    std::snprintf(buf, sizeof buf, "%4zu: %-9s", i, op_name(ins.op));
    out += buf;
    int k = 0;
    for (const char* s = op_info(ins.op).signature; *s; ++s) {
      if (s != op_info(ins.op).signature) out += ", ";
      if (*s == 'F') {
        std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(ins.imm));
        out += buf;
      } else {
        out += *s == 'A' ? 'a' : *s == 'S' ? 's' : 'r';
        out += std::to_string(*s == 'S' ? ins.scalar : ins.r[k++]);
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace dvm::vm
