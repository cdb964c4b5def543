// The JIT's one window onto asmjit: an x86-64 assembler with plain register
// numbers and a small operand struct, plus executable-memory management, so
// the lowering never names an asmjit type (Debian ships the 1.9-era API; its
// quirks stay in asmjit_adapter.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace dvm::backends::jit::asmx {

// General-purpose registers, by their x86 encoding number.
enum Gp : uint8_t { rax, rcx, rdx, rbx, rsp, rbp, rsi, rdi, r8, r9, r10, r11, r12, r13, r14, r15 };

// Which view of a vector register an operand names.
enum class W : uint8_t { X, Y, Z };

// Marker for a memory operand whose base is the constant pool (rip-relative).
inline constexpr uint8_t kPoolBase = 0xfe;
inline constexpr uint8_t kNoIndex = 0xff;

// One instruction operand.
struct Opnd {
  enum Kind : uint8_t { None, Vec, K, Gpr, Mem, Imm };
  Kind kind = None;
  W w = W::Z;
  uint8_t reg = 0;              // Vec, K, Gpr
  uint8_t base = 0;             // Mem: a Gp or kPoolBase
  uint8_t index = kNoIndex;     // Mem: a Gp or kNoIndex
  uint8_t shift = 0;            // Mem: index scale 1 << shift
  uint8_t size = 0;             // Mem: bytes (0: inferred)
  bool bcst = false;            // Mem: AVX-512 {1toN} broadcast of a dword
  int32_t disp = 0;             // Mem
  int64_t imm = 0;              // Imm
};

inline Opnd vreg(int r, W w) {
  Opnd o;
  o.kind = Opnd::Vec;
  o.reg = static_cast<uint8_t>(r);
  o.w = w;
  return o;
}
inline Opnd kreg(int k) {
  Opnd o;
  o.kind = Opnd::K;
  o.reg = static_cast<uint8_t>(k);
  return o;
}
inline Opnd gpr(Gp g) {
  Opnd o;
  o.kind = Opnd::Gpr;
  o.reg = g;
  return o;
}
inline Opnd mem(Gp base, int32_t disp, int size = 0) {
  Opnd o;
  o.kind = Opnd::Mem;
  o.base = base;
  o.disp = disp;
  o.size = static_cast<uint8_t>(size);
  return o;
}
inline Opnd mem(Gp base, Gp index, int shift, int32_t disp, int size = 0) {
  Opnd o = mem(base, disp, size);
  o.index = index;
  o.shift = static_cast<uint8_t>(shift);
  return o;
}
inline Opnd imm(int64_t v) {
  Opnd o;
  o.kind = Opnd::Imm;
  o.imm = v;
  return o;
}

// The vector and mask instructions the lowering emits.
enum class VI : uint8_t {
  vmovups, vmovaps, vbroadcastss, vmaskmovps, vmovss,
  vaddps, vsubps, vmulps, vdivps, vminps, vmaxps, vsqrtps,
  vandps, vorps, vxorps, vandnps,
  vroundps, vrndscaleps, vcmpps, vblendvps, vblendmps,
  vfmadd132ps, vfmadd213ps, vfmadd231ps,
  vcvtps2dq, vcvtdq2ps, vpaddd, vpsubd, vpand, vpandd,
  vpslld, vpsrld, vpsrad, vpcmpeqd, vpcmpgtd,
  vextractf128, vextractf32x8, vmovhlps, vmovshdup,
  kandw, korw, knotw, kmovw, vscalefps,
  vfnmadd213ps, vfnmadd231ps, vpternlogd,
  // Element-type conversions at loads and stores (backends/convert.h).
  vcvtph2ps, vcvtps2ph, vpmovzxwd, vpmovzxbd, vpminud, vcvttps2dq,
  vpmovdw, vpmovdb, vpmovm2b, vpabsb, vpackusdw, vpackuswb,
  vmovdqu8, vmovdqu16, vmovdqu32, vmovdqu64,
  vpbroadcastb, vpbroadcastw, vpbroadcastd, vpbroadcastq,
  vpextrb, vpextrw, vmovd, vmovq, vcvtqq2ps, vcvttps2qq, vinsertf32x8,
  kshiftrw, vpxor,
  vpmulld, vptestmd,
  // float32 to bfloat16 in one instruction (AVX512_BF16), and the lanes it
  // would not round as the portable formula does.
  vcvtneps2bf16, vfpclassps, kortestw,
  // Whether an AVX2 mask has a lane set (IrOp::SkipIfNone); (a & b) == 0 per lane.
  vtestps, vptestnmd,
  // int32 floor division through double (IrOp::IFloorDiv).
  vcvtdq2pd, vdivpd, vroundpd, vrndscalepd, vcvttpd2dq, vinserti128, vinserti64x4,
  // Stores that bypass the caches (aligned vectors: floats, converted
  // elements; see sfence()).
  vmovntps, vmovntdq,
  // Strided loads built in registers (four lanes per xmm, then the xmms).
  vinsertps, vinsertf128, vinsertf32x4, vpinsrw, vpinsrb, vpunpcklqdq,
  // Strided stores, lane by lane from registers (with vpextrw, vpextrb).
  vextractps, vextractf32x4,
  // int64 <-> f32 one element at a time (AVX2 has no vector form):
  // vcvtsi2ss xmm, xmm, qword [m]; vcvttss2si r64, dword [m] or xmm.
  vcvtsi2ss, vcvttss2si,
  // int32 lanes sign-extended to int64 (AVX2's int64 stores of small values).
  vpmovsxdq,
  kCount
};

enum class Cond : uint8_t { L, LE, G, GE, E, NE };

struct Label {
  uint32_t id = 0;
};

// Assembles one function. Each constant-pool entry holds `pool_width` bytes
// (the value repeated), placed after the code and 64-byte aligned.
// The zmm instructions kernels are made of are encoded by the adapter itself
// and GP instructions copied from a memo of asmjit's bytes, both writing
// exactly what asmjit would; `asmjit_only` sends every instruction through
// asmjit's encoder (tests compare the two).
class Assembler {
 public:
  explicit Assembler(int pool_width, bool asmjit_only = false);
  ~Assembler();
  Assembler(const Assembler&) = delete;
  Assembler& operator=(const Assembler&) = delete;

  // Vector / mask instruction with up to four operands.
  void v(VI inst, const Opnd& o0, const Opnd& o1, const Opnd& o2 = {}, const Opnd& o3 = {});
  // The next vector instruction is masked by k (zeroing masked lanes if zero).
  void masked(int k, bool zero);

  // General-purpose instructions (64-bit unless noted).
  void mov(Gp d, Gp s);
  void mov(Gp d, const Opnd& m);        // load
  void mov(const Opnd& m, Gp s);        // store
  void mov_imm(Gp d, int64_t v);
  void lea(Gp d, const Opnd& m);
  void add(Gp d, Gp s);
  void add(Gp d, int32_t v);
  void add(const Opnd& m, Gp s);
  void sub(Gp d, Gp s);
  void sub(Gp d, int32_t v);
  void imul(Gp d, Gp s);
  void shl(Gp d, int v);
  void shl_cl(Gp d);
  void and_(Gp d, int32_t v);
  void cmp(Gp a, Gp b);
  void cmp(Gp a, const Opnd& m);
  void cmp(Gp a, int32_t v);
  void push(Gp g);
  void pop(Gp g);
  void mov32_load(Gp d, const Opnd& m);   // mov r32, dword [m]
  void mov32_store(const Opnd& m, Gp s);  // mov dword [m], r32
  // Loads `bytes` (1, 2, 4 or 8) from m into d, zero-extended; stores the
  // low `bytes` of s to m.
  void load_n(Gp d, const Opnd& m, int bytes);
  void store_n(const Opnd& m, Gp s, int bytes);

  Label new_label();
  void bind(Label l);
  void jmp(Label l);
  void j(Cond c, Label l);
  void ret();
  void vzeroupper();
  // Orders the function's vmovntps stores before every later store, so a
  // thread that learns the kernel finished reads their values.
  void sfence();

  // A pool entry for the 32-bit pattern `bits`: a memory operand of `size`
  // bytes (4: the scalar; pool_width: the full vector).
  Opnd constant(uint32_t bits, int size);

  // Appends the pool and copies the function into executable memory. Returns
  // null and sets *error on failure (any asmjit error raised while emitting).
  void* finish(size_t* code_bytes, std::string* error);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Frees a function returned by Assembler::finish().
void release(void* fn);

// While on, every assembled function's assembly is logged (vm/log.h).
void set_log(bool on);

}  // namespace dvm::backends::jit::asmx
