// Bytecode helpers: form and element type names, hashing, encoding.
#include "vm/bytecode.h"

#include <cstring>

namespace dvm::vm {

const char* form_name(Form f) {
  static constexpr const char* kNames[] = {
#define DVM_X(name, str) str,
      DVM_FORMS(DVM_X)
#undef DVM_X
  };
  const int i = static_cast<int>(f);
  return i < kNumForms ? kNames[i] : "?";
}

const char* elem_name(Dtype t) {
  switch (t) {
    case Dtype::F32: return "f32";
    case Dtype::F16: return "f16";
    case Dtype::BF16: return "bf16";
    case Dtype::I32: return "i32";
    case Dtype::Bool: return "bool";
    case Dtype::I64: return "i64";
    case Dtype::U8: return "u8";
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

Bytecode encode(const Program& p) {
  Bytecode bc;
  auto& b = bc.bytes;
  size_t bytes = kHeaderFixed + kArgBytes * p.roles.size() + 2;
  for (const Instr& ins : p.code) bytes += static_cast<size_t>(instr_bytes(ins.op));
  b.reserve(bytes);
  const uint8_t header[kHeaderFixed] = {'D', 'V', 'M', kBytecodeVersion, static_cast<uint8_t>(p.form),
                                        static_cast<uint8_t>(p.nregs), static_cast<uint8_t>(p.roles.size()),
                                        static_cast<uint8_t>(p.nscalars & 0xFF),
                                        static_cast<uint8_t>(p.nscalars >> 8)};
  for (uint8_t h : header) b.push_back(h);
  for (size_t a = 0; a < p.roles.size(); ++a) {
    b.push_back(static_cast<uint8_t>(p.roles[a]));
    b.push_back(static_cast<uint8_t>(static_cast<uint8_t>(p.types.at(a)) |
                                     (int_lanes(p, a) ? kIntLanes : 0)));  // one type per role
  }
  b.push_back(static_cast<uint8_t>(p.code.size() & 0xFF));
  b.push_back(static_cast<uint8_t>(p.code.size() >> 8));
  for (const Instr& ins : p.code) {
    b.push_back(static_cast<uint8_t>(ins.op));
    int k = 0;
    for (const char* s = op_info(ins.op).signature; *s; ++s) {
      if (*s == 'F') {
        uint32_t bits;
        std::memcpy(&bits, &ins.imm, 4);
        for (int j = 0; j < 4; ++j) b.push_back(static_cast<uint8_t>(bits >> (8 * j)));
      } else if (*s == 'S') {
        b.push_back(static_cast<uint8_t>(ins.scalar & 0xFF));
        b.push_back(static_cast<uint8_t>(ins.scalar >> 8));
      } else {
        b.push_back(ins.r[k++]);
      }
    }
  }
  return bc;
}

}  // namespace dvm::vm
