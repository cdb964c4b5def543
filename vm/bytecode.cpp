// Bytecode helpers: hashing and decoding of verified bytes.
#include "vm/bytecode.h"

#include <cstring>

namespace dvm::vm {

const char* form_name(Form f) {
  switch (f) {
    case Form::Elementwise: return "elementwise";
    case Form::RowReduce: return "row_reduce";
    case Form::ColReduce: return "col_reduce";
  }
  return "?";
}

uint64_t Bytecode::hash() const {
  uint64_t h = 1469598103934665603ull;
  for (uint8_t c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

Program decode(const Bytecode& bc) {
  const auto& b = bc.bytes;
  Program p;
  p.form = static_cast<Form>(b[4]);
  p.nregs = b[5];
  int nargs = b[6];
  size_t pos = kHeaderFixed;
  for (int i = 0; i < nargs; ++i) p.roles.push_back(static_cast<ArgRole>(b[pos++]));
  int count = b[pos] | (b[pos + 1] << 8);
  pos += 2;
  p.code.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    Instr ins;
    ins.op = static_cast<Op>(b[pos++]);
    for (const char* s = op_info(ins.op).signature; *s; ++s) {
      if (*s == 'F') {
        uint32_t bits = 0;
        for (int k = 0; k < 4; ++k) bits |= static_cast<uint32_t>(b[pos + k]) << (8 * k);
        std::memcpy(&ins.imm, &bits, 4);
        pos += 4;
      } else {
        ins.r[ins.nr++] = b[pos++];
      }
    }
    p.code.push_back(ins);
  }
  return p;
}

}  // namespace dvm::vm
