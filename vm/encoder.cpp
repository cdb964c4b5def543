// Encoder: virtual values -> registers (linear scan) -> bytes.
#include "vm/encoder.h"

#include <cstring>
#include <string>
#include <utility>

#include "dvm/error.h"

namespace dvm::vm {

Encoder::Encoder(Form form) : form_(form) {
  // Typical kernels fit without growing (one allocation each).
  roles_.reserve(8);
  types_.reserve(8);
  ops_.reserve(32);
}

int Encoder::add_arg(ArgRole role, Dtype type, bool int_lanes) {
  roles_.push_back(role);
  types_.push_back(type);
  if (int_lanes) {
    int_lanes_.resize(roles_.size(), 0);
    int_lanes_.back() = 1;
  }
  return static_cast<int>(roles_.size()) - 1;
}

Encoder::Value Encoder::emit(Op op, std::initializer_list<Value> srcs, int arg, float imm,
                             bool has_dst) {
  // Filled in place: a copy of a just-built op would reload its fields
  // before their stores complete.
  PendingOp& p = ops_.emplace_back();
  p.op = op;
  p.dst = has_dst ? next_++ : -1;
  p.src[0] = p.src[1] = p.src[2] = -1;
  p.nsrc = 0;
  p.arg = arg;
  p.imm = imm;
  for (Value v : srcs) p.src[p.nsrc++] = v;
  return p.dst;
}

Encoder::Value Encoder::load(Op op, int arg) { return emit(op, {}, arg, 0.0f, true); }
Encoder::Value Encoder::constant(float v) { return emit(Op::CONST, {}, -1, v, true); }
Encoder::Value Encoder::param() { return emit(Op::PARAM, {}, nscalars_++, 0.0f, true); }
Encoder::Value Encoder::unary(Op op, Value a) { return emit(op, {a}, -1, 0.0f, true); }
Encoder::Value Encoder::binary(Op op, Value a, Value b) { return emit(op, {a, b}, -1, 0.0f, true); }
Encoder::Value Encoder::ternary(Op op, Value a, Value b, Value c) {
  return emit(op, {a, b, c}, -1, 0.0f, true);
}
Encoder::Value Encoder::reduce(Op op, Value a) { return emit(op, {a}, -1, 0.0f, true); }
void Encoder::store(Op op, int arg, Value v) { emit(op, {v}, arg, 0.0f, false); }
Encoder::Value Encoder::mma(int a, int b) {
  const Value v = emit(Op::MMA, {}, a, 0.0f, true);
  ops_.back().arg2 = b;
  return v;
}

Encoder::Value Encoder::mma_values(Value a, Value b) { return emit(Op::MMAR, {a, b}, -1, 0.0f, true); }

Bytecode Encoder::finish() const {
  Bytecode b;
  std::string why;
  if (!build(&b, &why)) throw Error(why);
  return b;
}

bool Encoder::try_finish(Bytecode* out) const { return build(out, nullptr); }

bool Encoder::build(Bytecode* out, std::string* why) const {
  if (roles_.size() > static_cast<size_t>(kMaxArgs)) {
    if (why)
      *why = "encoder: kernel needs " + std::to_string(roles_.size()) + " arguments, more than the " +
             std::to_string(kMaxArgs) + " a kernel may have";
    return false;
  }
  if (nscalars_ > kMaxScalars) {
    if (why)
      *why = "encoder: kernel needs " + std::to_string(nscalars_) + " scalar parameters, more than the " +
             std::to_string(kMaxScalars) + " a kernel may have";
    return false;
  }
  if (ops_.size() > 0xFFFF) {
    if (why) *why = "encoder: kernel has more than 65535 instructions";
    return false;
  }
  // Last use of every value, so its register can be reused after that.
  // (Per thread, so that their capacity stays from kernel to kernel.)
  thread_local std::vector<int> last_use, reg_of;
  last_use.assign(static_cast<size_t>(next_), -1);
  for (size_t i = 0; i < ops_.size(); ++i)
    for (int s = 0; s < ops_[i].nsrc; ++s) last_use[static_cast<size_t>(ops_[i].src[s])] = static_cast<int>(i);

  reg_of.assign(static_cast<size_t>(next_), -1);
  // Registers free for reuse, a stack: most recently freed first. Each
  // holds a register allocated before, so it never holds more than kMaxRegs.
  struct FreeRegs {
    uint8_t r[kMaxRegs];
    int n = 0;
    bool empty() const { return n == 0; }
    void push_back(uint8_t x) { r[n++] = x; }
    uint8_t back() const { return r[n - 1]; }
    void pop_back() { --n; }
  } free_regs;
  int nregs = 0;
  // The bytes as vm::encode() lays a Program out, written as the registers
  // are assigned (byte 5, the register count, once they are all known).
  Bytecode bc;
  std::vector<uint8_t>& b = bc.bytes;
  size_t size = kHeaderFixed + kArgBytes * roles_.size() + 2;
  for (const PendingOp& p : ops_) size += static_cast<size_t>(instr_bytes(p.op));
  b.resize(size);
  uint8_t* w = b.data();
  const uint8_t header[kHeaderFixed] = {'D', 'V', 'M', kBytecodeVersion, static_cast<uint8_t>(form_), 0,
                                        static_cast<uint8_t>(roles_.size()), static_cast<uint8_t>(nscalars_ & 0xFF),
                                        static_cast<uint8_t>(nscalars_ >> 8)};
  for (uint8_t h : header) *w++ = h;
  for (size_t a = 0; a < roles_.size(); ++a) {
    *w++ = static_cast<uint8_t>(roles_[a]);
    const bool ints = a < int_lanes_.size() && int_lanes_[a] != 0;
    *w++ = static_cast<uint8_t>(static_cast<uint8_t>(types_[a]) | (ints ? kIntLanes : 0));
  }
  *w++ = static_cast<uint8_t>(ops_.size() & 0xFF);
  *w++ = static_cast<uint8_t>(ops_.size() >> 8);
  for (size_t i = 0; i < ops_.size(); ++i) {
    const PendingOp& p = ops_[i];
    uint8_t src_regs[3];
    for (int s = 0; s < p.nsrc; ++s) src_regs[s] = static_cast<uint8_t>(reg_of[static_cast<size_t>(p.src[s])]);
    // Free sources dying here before picking the destination, so d may reuse one.
    // Reduce keeps its source separate: the interpreter accumulates into d.
    if (op_class(p.op) != OpClass::Reduce) {
      for (int s = 0; s < p.nsrc; ++s) {
        Value v = p.src[s];
        if (last_use[static_cast<size_t>(v)] == static_cast<int>(i) && reg_of[static_cast<size_t>(v)] >= 0) {
          free_regs.push_back(static_cast<uint8_t>(reg_of[static_cast<size_t>(v)]));
          reg_of[static_cast<size_t>(v)] = -1;
        }
      }
    }
    uint8_t dst = 0;
    if (p.dst >= 0) {
      if (!free_regs.empty()) {
        dst = free_regs.back();
        free_regs.pop_back();
      } else {
        if (nregs >= kMaxRegs) {
          if (why) *why = "encoder: kernel needs more than " + std::to_string(kMaxRegs) + " live values";
          return false;
        }
        dst = static_cast<uint8_t>(nregs++);
      }
      reg_of[static_cast<size_t>(p.dst)] = dst;
      // A value nobody reads frees its register at once.
      if (last_use[static_cast<size_t>(p.dst)] < 0) {
        free_regs.push_back(dst);
        reg_of[static_cast<size_t>(p.dst)] = -1;
      }
    }
    if (op_class(p.op) == OpClass::Reduce) {
      for (int s = 0; s < p.nsrc; ++s) {
        Value v = p.src[s];
        if (last_use[static_cast<size_t>(v)] == static_cast<int>(i) && reg_of[static_cast<size_t>(v)] >= 0) {
          free_regs.push_back(static_cast<uint8_t>(reg_of[static_cast<size_t>(v)]));
          reg_of[static_cast<size_t>(v)] = -1;
        }
      }
    }
    // Opcode, then operands in signature order.
    *w++ = static_cast<uint8_t>(p.op);
    int next_src = 0, next_arg = 0;
    for (const char* sig = op_info(p.op).signature; *sig; ++sig) {
      switch (*sig) {
        case 'D': *w++ = dst; break;
        case 'R': *w++ = src_regs[next_src++]; break;
        case 'A': *w++ = static_cast<uint8_t>(next_arg++ == 0 ? p.arg : p.arg2); break;
        case 'S': {  // PendingOp::arg holds the scalar index
          const uint16_t scalar = static_cast<uint16_t>(p.arg);
          *w++ = static_cast<uint8_t>(scalar & 0xFF);
          *w++ = static_cast<uint8_t>(scalar >> 8);
          break;
        }
        case 'F': {
          uint32_t bits;
          std::memcpy(&bits, &p.imm, 4);
          for (int j = 0; j < 4; ++j) *w++ = static_cast<uint8_t>(bits >> (8 * j));
          break;
        }
      }
    }
  }
  b[5] = static_cast<uint8_t>(nregs);
  *out = std::move(bc);
  return true;
}

}  // namespace dvm::vm
