// asmjit behind the adapter: operand translation, the constant pool, and the
// JitRuntime that owns executable memory.
#include "backends/jit/x86/asmjit_adapter.h"

#include <asmjit/x86.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "backends/perf_map.h"
#include "vm/log.h"

namespace dvm::backends::jit::asmx {
namespace {

namespace ax = asmjit::x86;
using asmjit::InstId;

// ---------------------------------------------------------------------------
// Executable memory: one process-wide JitRuntime. Debian's asmjit (1.9, Dec
// 2022) maps plain JitAllocator blocks read+write+execute on Linux, so we ask
// for dual mapping: every block is mapped twice (an RX view that runs and an
// RW view that asmjit writes through), and no page is ever writable and
// executable at once.
// The runtime is never destroyed: at exit, a compile still running on the
// background thread, or a kernel freed by a static cache's destructor, would
// otherwise find it gone (static destruction order is construction order
// reversed, and the runtime is first built on the compile thread). The OS
// takes the mappings back with the process.
// ---------------------------------------------------------------------------
asmjit::JitRuntime& runtime() {
  static asmjit::JitAllocator::CreateParams params = [] {
    asmjit::JitAllocator::CreateParams p;
    p.options = asmjit::JitAllocatorOptions::kUseDualMapping;
    return p;
  }();
  static asmjit::JitRuntime* rt = new asmjit::JitRuntime(&params);
  return *rt;
}

// ---------------------------------------------------------------------------
// While the perf map is on (backends/perf_map.h), functions go to anonymous
// pages of their own instead: perf names code from /tmp/perf-<pid>.map only
// in anonymous mappings, and the dual-mapped blocks are memfd files to it.
// The pages are written read+write, then turned read+execute before the
// function is returned: still never both at once.
// ---------------------------------------------------------------------------
struct AnonymousCode {
  std::mutex mu;
  std::unordered_map<void*, size_t> mapped;  // function -> bytes mapped
};

AnonymousCode& anonymous_code() {
  static AnonymousCode* a = new AnonymousCode;  // never destroyed, as the runtime
  return *a;
}

void* place_anonymous(asmjit::CodeHolder& code, std::string* error) {
  if (code.flatten() != asmjit::kErrorOk || code.resolveUnresolvedLinks() != asmjit::kErrorOk) {
    *error = "asmjit: cannot lay out the function";
    return nullptr;
  }
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t bytes = (code.codeSize() + page - 1) / page * page;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    *error = "cannot map pages for the function";
    return nullptr;
  }
  if (code.relocateToBase(reinterpret_cast<uint64_t>(p)) != asmjit::kErrorOk ||
      code.copyFlattenedData(p, bytes, asmjit::CopySectionFlags::kPadTargetBuffer) != asmjit::kErrorOk ||
      ::mprotect(p, bytes, PROT_READ | PROT_EXEC) != 0) {
    ::munmap(p, bytes);
    *error = "asmjit: cannot place the function in its pages";
    return nullptr;
  }
  AnonymousCode& a = anonymous_code();
  std::lock_guard<std::mutex> lock(a.mu);
  a.mapped.emplace(p, bytes);
  return p;
}

// True when fn was placed by place_anonymous (and is now unmapped).
bool release_anonymous(void* fn) {
  AnonymousCode& a = anonymous_code();
  std::lock_guard<std::mutex> lock(a.mu);
  const auto it = a.mapped.find(fn);
  if (it == a.mapped.end()) return false;
  ::munmap(it->first, it->second);
  a.mapped.erase(it);
  return true;
}

constexpr InstId kInst[] = {
    ax::Inst::kIdVmovups,     ax::Inst::kIdVmovaps,      ax::Inst::kIdVbroadcastss,
    ax::Inst::kIdVmaskmovps,  ax::Inst::kIdVmovss,       ax::Inst::kIdVaddps,
    ax::Inst::kIdVsubps,      ax::Inst::kIdVmulps,       ax::Inst::kIdVdivps,
    ax::Inst::kIdVminps,      ax::Inst::kIdVmaxps,       ax::Inst::kIdVsqrtps,
    ax::Inst::kIdVandps,      ax::Inst::kIdVorps,        ax::Inst::kIdVxorps,
    ax::Inst::kIdVandnps,     ax::Inst::kIdVroundps,     ax::Inst::kIdVrndscaleps,
    ax::Inst::kIdVcmpps,      ax::Inst::kIdVblendvps,    ax::Inst::kIdVblendmps,
    ax::Inst::kIdVfmadd132ps, ax::Inst::kIdVfmadd213ps,  ax::Inst::kIdVfmadd231ps,
    ax::Inst::kIdVcvtps2dq,   ax::Inst::kIdVcvtdq2ps,    ax::Inst::kIdVpaddd,
    ax::Inst::kIdVpsubd,      ax::Inst::kIdVpand,        ax::Inst::kIdVpandd,
    ax::Inst::kIdVpslld,      ax::Inst::kIdVpsrld,       ax::Inst::kIdVpsrad,
    ax::Inst::kIdVpcmpeqd,    ax::Inst::kIdVpcmpgtd,     ax::Inst::kIdVextractf128,
    ax::Inst::kIdVextractf32x8, ax::Inst::kIdVmovhlps,   ax::Inst::kIdVmovshdup,
    ax::Inst::kIdKandw,       ax::Inst::kIdKorw,         ax::Inst::kIdKnotw,
    ax::Inst::kIdKmovw,       ax::Inst::kIdVscalefps,
    ax::Inst::kIdVfnmadd213ps, ax::Inst::kIdVfnmadd231ps, ax::Inst::kIdVpternlogd,
    ax::Inst::kIdVcvtph2ps,   ax::Inst::kIdVcvtps2ph,    ax::Inst::kIdVpmovzxwd,
    ax::Inst::kIdVpmovzxbd,   ax::Inst::kIdVpminud,      ax::Inst::kIdVcvttps2dq,
    ax::Inst::kIdVpmovdw,     ax::Inst::kIdVpmovdb,      ax::Inst::kIdVpmovm2b,
    ax::Inst::kIdVpabsb,      ax::Inst::kIdVpackusdw,    ax::Inst::kIdVpackuswb,
    ax::Inst::kIdVmovdqu8,    ax::Inst::kIdVmovdqu16,    ax::Inst::kIdVmovdqu32,
    ax::Inst::kIdVmovdqu64,   ax::Inst::kIdVpbroadcastb, ax::Inst::kIdVpbroadcastw,
    ax::Inst::kIdVpbroadcastd, ax::Inst::kIdVpbroadcastq, ax::Inst::kIdVpextrb,
    ax::Inst::kIdVpextrw,     ax::Inst::kIdVmovd,        ax::Inst::kIdVmovq,
    ax::Inst::kIdVcvtqq2ps,   ax::Inst::kIdVcvttps2qq,   ax::Inst::kIdVinsertf32x8,
    ax::Inst::kIdKshiftrw,    ax::Inst::kIdVpxor,
    ax::Inst::kIdVpmulld,     ax::Inst::kIdVptestmd,
    ax::Inst::kIdVcvtneps2bf16, ax::Inst::kIdVfpclassps, ax::Inst::kIdKortestw,
    ax::Inst::kIdVtestps,     ax::Inst::kIdVptestnmd,
    ax::Inst::kIdVcvtdq2pd,   ax::Inst::kIdVdivpd,       ax::Inst::kIdVroundpd,
    ax::Inst::kIdVrndscalepd, ax::Inst::kIdVcvttpd2dq,   ax::Inst::kIdVinserti128,
    ax::Inst::kIdVinserti64x4, ax::Inst::kIdVmovntps,  ax::Inst::kIdVmovntdq,
    ax::Inst::kIdVinsertps,   ax::Inst::kIdVinsertf128,  ax::Inst::kIdVinsertf32x4,
    ax::Inst::kIdVpinsrw,     ax::Inst::kIdVpinsrb,      ax::Inst::kIdVpunpcklqdq,
    ax::Inst::kIdVextractps,  ax::Inst::kIdVextractf32x4,
    ax::Inst::kIdVcvtsi2ss,   ax::Inst::kIdVcvttss2si,   ax::Inst::kIdVpmovsxdq,
};
static_assert(sizeof(kInst) / sizeof(kInst[0]) == static_cast<size_t>(VI::kCount), "an asmjit id per VI");

// ---------------------------------------------------------------------------
// The zmm forms kernels are made of, encoded here straight into asmjit's
// buffer: asmjit's generic encoder (operand checks, instruction tables)
// costs several times more per instruction. The bytes are those asmjit
// writes for the same instruction: EVEX, W0, 512-bit, disp8*N compression
// (N = 64 for a full vector, 4 for a {1to16} or scalar element), SIB only for
// an index or an rsp/r12 base, rip-relative pool operands (patched in
// finish()). Any other instruction or operand shape goes through asmjit.
// ---------------------------------------------------------------------------
enum EvexForm : uint8_t {
  kNoFast,
  kRvm,   // zmm reg, zmm vvvv, zmm/mem rm [, imm8]
  kKrvm,  // k reg, zmm vvvv, zmm/mem rm [, imm8]
  kRm,    // zmm reg, zmm/mem rm [, imm8] (vmovups: or mem rm, zmm reg)
  kVmi,   // zmm vvvv, zmm/mem rm, imm8 (ModRM.reg = digit)
};
struct EvexOp {
  EvexForm form = kNoFast;
  uint8_t map = 0;      // 1: 0F, 2: 0F38, 3: 0F3A
  uint8_t pp = 0;       // 0: none, 1: 66, 2: F3, 3: F2
  uint8_t op = 0;
  uint8_t digit = 0;    // kVmi
  uint8_t n_shift = 6;  // log2 of disp8's scale for an operand that is not a broadcast
  bool imm = false;     // takes an imm8
};
constexpr EvexOp evex(EvexForm f, int map, int pp, int op, bool imm = false, int digit = 0, int n_shift = 6) {
  EvexOp e;
  e.form = f;
  e.map = static_cast<uint8_t>(map);
  e.pp = static_cast<uint8_t>(pp);
  e.op = static_cast<uint8_t>(op);
  e.imm = imm;
  e.digit = static_cast<uint8_t>(digit);
  e.n_shift = static_cast<uint8_t>(n_shift);
  return e;
}
constexpr auto kEvex = [] {
  std::array<EvexOp, static_cast<size_t>(VI::kCount)> t{};
  auto set = [&](VI i, EvexOp e) { t[static_cast<size_t>(i)] = e; };
  set(VI::vmovups, evex(kRm, 1, 0, 0x10));
  set(VI::vmovaps, evex(kRm, 1, 0, 0x28));
  set(VI::vbroadcastss, evex(kRm, 2, 1, 0x18, false, 0, 2));
  set(VI::vsqrtps, evex(kRm, 1, 0, 0x51));
  set(VI::vcvtps2dq, evex(kRm, 1, 1, 0x5B));
  set(VI::vcvttps2dq, evex(kRm, 1, 2, 0x5B));
  set(VI::vcvtdq2ps, evex(kRm, 1, 0, 0x5B));
  set(VI::vrndscaleps, evex(kRm, 3, 1, 0x08, true));
  set(VI::vaddps, evex(kRvm, 1, 0, 0x58));
  set(VI::vmulps, evex(kRvm, 1, 0, 0x59));
  set(VI::vsubps, evex(kRvm, 1, 0, 0x5C));
  set(VI::vminps, evex(kRvm, 1, 0, 0x5D));
  set(VI::vdivps, evex(kRvm, 1, 0, 0x5E));
  set(VI::vmaxps, evex(kRvm, 1, 0, 0x5F));
  set(VI::vandps, evex(kRvm, 1, 0, 0x54));
  set(VI::vandnps, evex(kRvm, 1, 0, 0x55));
  set(VI::vorps, evex(kRvm, 1, 0, 0x56));
  set(VI::vxorps, evex(kRvm, 1, 0, 0x57));
  set(VI::vpaddd, evex(kRvm, 1, 1, 0xFE));
  set(VI::vpsubd, evex(kRvm, 1, 1, 0xFA));
  set(VI::vpandd, evex(kRvm, 1, 1, 0xDB));
  set(VI::vpmulld, evex(kRvm, 2, 1, 0x40));
  set(VI::vfmadd132ps, evex(kRvm, 2, 1, 0x98));
  set(VI::vfmadd213ps, evex(kRvm, 2, 1, 0xA8));
  set(VI::vfmadd231ps, evex(kRvm, 2, 1, 0xB8));
  set(VI::vfnmadd213ps, evex(kRvm, 2, 1, 0xAC));
  set(VI::vfnmadd231ps, evex(kRvm, 2, 1, 0xBC));
  set(VI::vscalefps, evex(kRvm, 2, 1, 0x2C));
  set(VI::vblendmps, evex(kRvm, 2, 1, 0x65));
  set(VI::vpternlogd, evex(kRvm, 3, 1, 0x25, true));
  set(VI::vcmpps, evex(kKrvm, 1, 0, 0xC2, true));
  set(VI::vpcmpeqd, evex(kKrvm, 1, 1, 0x76));
  set(VI::vpcmpgtd, evex(kKrvm, 1, 1, 0x66));
  set(VI::vpslld, evex(kVmi, 1, 1, 0x72, true, 6));
  set(VI::vpsrld, evex(kVmi, 1, 1, 0x72, true, 2));
  set(VI::vpsrad, evex(kVmi, 1, 1, 0x72, true, 4));
  return t;
}();

// Byte by byte: an operand was just written field by field, and one load of
// kind and w together (what the compiler would make of this) could not be
// forwarded from those two pending stores.
inline bool is_zmm(const Opnd& o) {
  return o.kind == Opnd::Vec && *static_cast<const volatile W*>(&o.w) == W::Z;
}
inline bool zmm_or_mem(const Opnd& o) { return is_zmm(o) || o.kind == Opnd::Mem; }

// Records the first asmjit error instead of letting it pass silently.
class FirstError : public asmjit::ErrorHandler {
 public:
  asmjit::Error err = asmjit::kErrorOk;
  std::string message;
  void handleError(asmjit::Error e, const char* msg, asmjit::BaseEmitter*) override {
    if (err == asmjit::kErrorOk) {
      err = e;
      message = msg ? msg : "asmjit error";
    }
  }
};

inline ax::Gp gp64(uint8_t g) { return ax::Gpq(g); }

std::atomic<bool> g_log_on{false};


}  // namespace

void set_log(bool on) { g_log_on.store(on, std::memory_order_relaxed); }

namespace {
// One memo entry: an instruction's key (never 0: GpKind starts at 1) and
// the bytes asmjit encoded for it.
struct GpMemo {
  uint64_t key = 0, key2 = 0;
  uint8_t bytes[16] = {};
  uint8_t len = 0;
};
constexpr int kGpMemoBits = 9;
thread_local GpMemo t_gp_memo[1 << kGpMemoBits];
}  // namespace

struct Assembler::Impl {
  asmjit::StringLogger logger;  // declared before code, which points at it
  asmjit::CodeHolder code;
  FirstError errors;
  ax::Assembler a;
  asmjit::Label pool;
  int pool_width;
  std::vector<uint32_t> entries;
  // Index of entries by pattern (open addressing: positions in entries, -1
  // empty; a power of two, at most half full).
  std::vector<int32_t> entry_index = std::vector<int32_t>(64, -1);

  // The pool entry of `bits`, added at the end if new.
  size_t entry(uint32_t bits) {
    if (entry_index.size() < 2 * (entries.size() + 1)) {
      entry_index.assign(entry_index.size() * 2, -1);
      for (size_t k = 0; k < entries.size(); ++k) entry_index[slot_of(entries[k])] = static_cast<int32_t>(k);
    }
    const size_t s = slot_of(bits);
    if (entry_index[s] >= 0) return static_cast<size_t>(entry_index[s]);
    entry_index[s] = static_cast<int32_t>(entries.size());
    entries.push_back(bits);
    return entries.size() - 1;
  }
  // The slot holding bits, or the empty one where it goes.
  size_t slot_of(uint32_t bits) const {
    const size_t mask = entry_index.size() - 1;
    size_t h = static_cast<size_t>((bits * 0x9E3779B97F4A7C15ull) >> 40) & mask;
    while (entry_index[h] >= 0 && entries[static_cast<size_t>(entry_index[h])] != bits) h = (h + 1) & mask;
    return h;
  }

  // The mask of the next vector instruction (masked()): k1..k7, 0 for none.
  uint8_t mask_k = 0;
  bool mask_z = false;
  // Encoded here (encode(), gp()) unless asmjit_only or the assembly is
  // logged (asmjit's logger sees only what asmjit encodes).
  bool fast = true;
  // Pool operands encoded here: where their disp32 is, where their
  // instruction ends, and the pool displacement they address.
  struct PoolRef {
    uint32_t at, end;
    int32_t disp;
  };
  std::vector<PoolRef> pool_refs;

  // GP instructions: asmjit's bytes for an instruction and its operands are
  // the same wherever it is placed (no label operand), so each is encoded by
  // asmjit once per thread and copied from the memo after that.
  template <class F>
  void gp(uint64_t key, uint64_t key2, F&& encode_with_asmjit, bool label = false) {
    if (!fast || label) {
      encode_with_asmjit(a);
      return;
    }
    GpMemo& m = t_gp_memo[((key ^ key2 * 0x9E3779B97F4A7C15ull) * 0xD6E8FEB86659FD93ull) >> (64 - kGpMemoBits)];
    if (m.key == key && m.key2 == key2 && a.remainingSpace() >= 16) {
      std::memcpy(a._bufferPtr, m.bytes, 16);
      a._bufferPtr += m.len;
      asmjit::CodeBuffer& buf = a._section->_buffer;
      buf._size = std::max(buf._size, static_cast<size_t>(a._bufferPtr - a._bufferData));
      return;
    }
    const size_t before = a.offset();
    encode_with_asmjit(a);
    const size_t len = a.offset() - before;
    if (errors.err != asmjit::kErrorOk || len == 0 || len > 15) return;
    m.key = key;
    m.key2 = key2;
    m.len = static_cast<uint8_t>(len);
    std::memcpy(m.bytes, a._bufferData + before, len);
  }

  Impl(int width, bool asmjit_only) : pool_width(width), fast(!asmjit_only) {
    code.init(runtime().environment());
    code.setErrorHandler(&errors);
    // The assembly, collected per function and handed to the message sink
    // (vm/log.h) whole, so concurrent compiles never interleave their lines.
    if (g_log_on.load(std::memory_order_relaxed)) {
      code.setLogger(&logger);
      fast = false;
    }
    code.attach(&a);
    pool = a.newLabel();
  }

  // Encodes inst (kEvex) into the buffer; false, with nothing written, for a
  // form or operand shape it does not cover.
  bool encode(VI inst, const Opnd& o0, const Opnd& o1, const Opnd& o2, const Opnd& o3) {
    const EvexOp& e = kEvex[static_cast<size_t>(inst)];
    int reg = 0, vvvv = 0;
    bool has_imm = false;
    uint8_t imm = 0;
    const Opnd* rm = nullptr;
    uint8_t op = e.op;
    switch (e.form) {
      case kNoFast: return false;
      case kRvm:
      case kKrvm:
        if ((e.form == kRvm ? !is_zmm(o0) : o0.kind != Opnd::K) || !is_zmm(o1) || !zmm_or_mem(o2)) return false;
        if (e.imm != (o3.kind == Opnd::Imm) || (!e.imm && o3.kind != Opnd::None)) return false;
        reg = o0.reg;
        vvvv = o1.reg;
        rm = &o2;
        has_imm = e.imm;
        imm = static_cast<uint8_t>(o3.imm);
        break;
      case kRm:
        if (o3.kind != Opnd::None || e.imm != (o2.kind == Opnd::Imm) || (!e.imm && o2.kind != Opnd::None))
          return false;
        if (inst == VI::vmovups && o0.kind == Opnd::Mem) {  // the store form
          if (!is_zmm(o1)) return false;
          op = 0x11;
          reg = o1.reg;
          rm = &o0;
        } else {
          const bool xmm_src = inst == VI::vbroadcastss && o1.kind == Opnd::Vec && o1.w == W::X;
          if (!is_zmm(o0) || !(zmm_or_mem(o1) || xmm_src)) return false;
          reg = o0.reg;
          rm = &o1;
        }
        has_imm = e.imm;
        imm = static_cast<uint8_t>(o2.imm);
        break;
      case kVmi:
        if (!is_zmm(o0) || !zmm_or_mem(o1) || o2.kind != Opnd::Imm || o3.kind != Opnd::None) return false;
        reg = e.digit;
        vvvv = o0.reg;
        rm = &o1;
        has_imm = true;
        imm = static_cast<uint8_t>(o2.imm);
        break;
    }
    const bool mem = rm->kind == Opnd::Mem;
    if (mem && rm->base != kPoolBase && (rm->base > 15 || (rm->index != kNoIndex && (rm->index > 15 || rm->index == 4))))
      return false;
    if (a.remainingSpace() < 16) return false;  // asmjit grows the buffer
    uint8_t* p = a._bufferPtr;
    // EVEX: R X B R' 0 0 m m | W vvvv 1 p p | z L'L b V' a a a (R, X, B, R', vvvv, V' inverted).
    uint8_t rxb;
    if (!mem) {
      rxb = static_cast<uint8_t>((rm->reg & 8 ? 0 : 0x20) | (rm->reg & 16 ? 0 : 0x40));
    } else {
      const bool rip = rm->base == kPoolBase;
      rxb = static_cast<uint8_t>((rip || !(rm->base & 8) ? 0x20 : 0) |
                                 (rm->index == kNoIndex || rip || !(rm->index & 8) ? 0x40 : 0));
    }
    p[0] = 0x62;
    p[1] = static_cast<uint8_t>((reg & 8 ? 0 : 0x80) | rxb | (reg & 16 ? 0 : 0x10) | e.map);
    p[2] = static_cast<uint8_t>(((~vvvv & 15) << 3) | 4 | e.pp);
    const bool bcst = mem && rm->bcst;
    p[3] = static_cast<uint8_t>((mask_z ? 0x80 : 0) | 0x40 | (bcst ? 0x10 : 0) | (vvvv & 16 ? 0 : 0x08) | mask_k);
    p[4] = op;
    p += 5;
    const uint8_t r3 = static_cast<uint8_t>((reg & 7) << 3);
    size_t disp_at = 0;
    if (!mem) {
      *p++ = static_cast<uint8_t>(0xC0 | r3 | (rm->reg & 7));
    } else if (rm->base == kPoolBase) {
      *p++ = static_cast<uint8_t>(0x05 | r3);
      disp_at = static_cast<size_t>(p - a._bufferData);
      std::memset(p, 0, 4);
      p += 4;
    } else {
      const int base = rm->base & 7;
      const bool sib = rm->index != kNoIndex || base == 4;
      const int32_t disp = rm->disp;
      const int n_shift = bcst ? 2 : e.n_shift;
      const int32_t scaled = disp >> n_shift;
      int mod;
      if (disp == 0 && base != 5) mod = 0;
      else if ((disp & ((1 << n_shift) - 1)) == 0 && scaled >= -128 && scaled <= 127) mod = 1;
      else mod = 2;
      *p++ = static_cast<uint8_t>((mod << 6) | r3 | (sib ? 4 : base));
      if (sib) {
        const int index = rm->index == kNoIndex ? 4 : (rm->index & 7);
        *p++ = static_cast<uint8_t>((rm->shift << 6) | (index << 3) | base);
      }
      if (mod == 1) {
        *p++ = static_cast<uint8_t>(static_cast<int8_t>(scaled));
      } else if (mod == 2) {
        std::memcpy(p, &disp, 4);
        p += 4;
      }
    }
    if (has_imm) *p++ = imm;
    if (disp_at) {
      pool_refs.push_back({static_cast<uint32_t>(disp_at), static_cast<uint32_t>(p - a._bufferData), rm->disp});
    }
    a._bufferPtr = p;
    asmjit::CodeBuffer& buf = a._section->_buffer;
    buf._size = std::max(buf._size, static_cast<size_t>(p - a._bufferData));
    return true;
  }

  ax::Mem memop(const Opnd& o) const {
    ax::Mem m;
    if (o.base == kPoolBase) {
      m = ax::ptr(pool, o.disp, o.size);
    } else if (o.index != kNoIndex) {
      m = ax::ptr(gp64(o.base), gp64(o.index), o.shift, o.disp, o.size);
    } else {
      m = ax::ptr(gp64(o.base), o.disp, o.size);
    }
    if (o.bcst) m = m._1to16();
    return m;
  }

  asmjit::Operand op(const Opnd& o) const {
    switch (o.kind) {
      case Opnd::Vec:
        return o.w == W::Z ? asmjit::Operand(ax::Zmm(o.reg))
                           : o.w == W::Y ? asmjit::Operand(ax::Ymm(o.reg))
                                         : asmjit::Operand(ax::Xmm(o.reg));
      case Opnd::K: return ax::KReg(o.reg);
      case Opnd::Gpr: return o.w == W::X ? asmjit::Operand(ax::Gpd(o.reg)) : asmjit::Operand(gp64(o.reg));
      case Opnd::Mem: return memop(o);
      case Opnd::Imm: return asmjit::Imm(o.imm);
      case Opnd::None: break;
    }
    return asmjit::Operand();
  }
};

Assembler::Assembler(int pool_width, bool asmjit_only) : impl_(std::make_unique<Impl>(pool_width, asmjit_only)) {}
Assembler::~Assembler() = default;

void Assembler::v(VI inst, const Opnd& o0, const Opnd& o1, const Opnd& o2, const Opnd& o3) {
  Impl& im = *impl_;
  if (im.fast && im.encode(inst, o0, o1, o2, o3)) {
    im.mask_k = 0;
    im.mask_z = false;
    return;
  }
  auto& a = im.a;
  if (im.mask_k) {
    a.k(ax::KReg(im.mask_k));
    if (im.mask_z) a.z();
    im.mask_k = 0;
    im.mask_z = false;
  }
  const InstId id = kInst[static_cast<int>(inst)];
  if (o2.kind == Opnd::None) a.emit(id, im.op(o0), im.op(o1));
  else if (o3.kind == Opnd::None) a.emit(id, im.op(o0), im.op(o1), im.op(o2));
  else a.emit(id, im.op(o0), im.op(o1), im.op(o2), im.op(o3));
}

void Assembler::masked(int k, bool zero) {
  impl_->mask_k = static_cast<uint8_t>(k);
  impl_->mask_z = zero;
}

// GP instructions by operand shape (GpMemo keys).
enum GpKind : uint8_t {
  kMovRR = 1, kMovRM, kMovMR, kMovImm, kLea, kAddRR, kAddRI, kAddMR, kSubRR, kSubRI, kImul, kShlI, kShlCl,
  kAndI, kCmpRR, kCmpRM, kCmpRI, kPush, kPop, kMov32Load, kMov32Store, kLoadN, kStoreN,
};
// Key of an instruction with registers d, s and (optionally) memory m: the
// second word is m's displacement or the immediate.
inline uint64_t gp_key(GpKind k, int d, int s, const Opnd* m = nullptr, int bytes = 0) {
  uint64_t key = k | uint64_t(d) << 8 | uint64_t(s) << 16 | uint64_t(bytes) << 56;
  if (m) key |= uint64_t(m->base) << 24 | uint64_t(m->index) << 32 | uint64_t(m->shift) << 40 | uint64_t(m->size) << 48;
  return key;
}

void Assembler::mov(Gp d, Gp s) {
  impl_->gp(gp_key(kMovRR, d, s), 0, [&](ax::Assembler& a) { a.mov(gp64(d), gp64(s)); });
}
void Assembler::mov(Gp d, const Opnd& m) {
  impl_->gp(gp_key(kMovRM, d, 0, &m), uint32_t(m.disp), [&](ax::Assembler& a) { a.mov(gp64(d), impl_->memop(m)); },
            m.base == kPoolBase);
}
void Assembler::mov(const Opnd& m, Gp s) {
  impl_->gp(gp_key(kMovMR, 0, s, &m), uint32_t(m.disp), [&](ax::Assembler& a) { a.mov(impl_->memop(m), gp64(s)); },
            m.base == kPoolBase);
}
void Assembler::mov_imm(Gp d, int64_t v) {
  impl_->gp(gp_key(kMovImm, d, 0), uint64_t(v), [&](ax::Assembler& a) { a.mov(gp64(d), asmjit::Imm(v)); });
}
void Assembler::lea(Gp d, const Opnd& m) {
  impl_->gp(gp_key(kLea, d, 0, &m), uint32_t(m.disp), [&](ax::Assembler& a) { a.lea(gp64(d), impl_->memop(m)); },
            m.base == kPoolBase);
}
void Assembler::add(Gp d, Gp s) {
  impl_->gp(gp_key(kAddRR, d, s), 0, [&](ax::Assembler& a) { a.add(gp64(d), gp64(s)); });
}
void Assembler::add(Gp d, int32_t v) {
  impl_->gp(gp_key(kAddRI, d, 0), uint32_t(v), [&](ax::Assembler& a) { a.add(gp64(d), asmjit::Imm(v)); });
}
void Assembler::add(const Opnd& m, Gp s) {
  impl_->gp(gp_key(kAddMR, 0, s, &m), uint32_t(m.disp), [&](ax::Assembler& a) { a.add(impl_->memop(m), gp64(s)); },
            m.base == kPoolBase);
}
void Assembler::sub(Gp d, Gp s) {
  impl_->gp(gp_key(kSubRR, d, s), 0, [&](ax::Assembler& a) { a.sub(gp64(d), gp64(s)); });
}
void Assembler::sub(Gp d, int32_t v) {
  impl_->gp(gp_key(kSubRI, d, 0), uint32_t(v), [&](ax::Assembler& a) { a.sub(gp64(d), asmjit::Imm(v)); });
}
void Assembler::imul(Gp d, Gp s) {
  impl_->gp(gp_key(kImul, d, s), 0, [&](ax::Assembler& a) { a.imul(gp64(d), gp64(s)); });
}
void Assembler::shl(Gp d, int v) {
  impl_->gp(gp_key(kShlI, d, 0), uint32_t(v), [&](ax::Assembler& a) { a.shl(gp64(d), asmjit::Imm(v)); });
}
void Assembler::shl_cl(Gp d) {
  impl_->gp(gp_key(kShlCl, d, 0), 0, [&](ax::Assembler& a) { a.shl(gp64(d), ax::cl); });
}
void Assembler::and_(Gp d, int32_t v) {
  impl_->gp(gp_key(kAndI, d, 0), uint32_t(v), [&](ax::Assembler& a) { a.and_(gp64(d), asmjit::Imm(v)); });
}
void Assembler::cmp(Gp a, Gp b) {
  impl_->gp(gp_key(kCmpRR, a, b), 0, [&](ax::Assembler& as) { as.cmp(gp64(a), gp64(b)); });
}
void Assembler::cmp(Gp a, const Opnd& m) {
  impl_->gp(gp_key(kCmpRM, a, 0, &m), uint32_t(m.disp), [&](ax::Assembler& as) { as.cmp(gp64(a), impl_->memop(m)); },
            m.base == kPoolBase);
}
void Assembler::cmp(Gp a, int32_t v) {
  impl_->gp(gp_key(kCmpRI, a, 0), uint32_t(v), [&](ax::Assembler& as) { as.cmp(gp64(a), asmjit::Imm(v)); });
}
void Assembler::push(Gp g) {
  impl_->gp(gp_key(kPush, g, 0), 0, [&](ax::Assembler& a) { a.push(gp64(g)); });
}
void Assembler::pop(Gp g) {
  impl_->gp(gp_key(kPop, g, 0), 0, [&](ax::Assembler& a) { a.pop(gp64(g)); });
}
void Assembler::mov32_load(Gp d, const Opnd& m) {
  Opnd mm = m;
  mm.size = 4;
  impl_->gp(gp_key(kMov32Load, d, 0, &mm), uint32_t(m.disp),
            [&](ax::Assembler& a) { a.mov(ax::Gpd(d), impl_->memop(mm)); }, m.base == kPoolBase);
}
void Assembler::mov32_store(const Opnd& m, Gp s) {
  Opnd mm = m;
  mm.size = 4;
  impl_->gp(gp_key(kMov32Store, 0, s, &mm), uint32_t(m.disp),
            [&](ax::Assembler& a) { a.mov(impl_->memop(mm), ax::Gpd(s)); }, m.base == kPoolBase);
}

void Assembler::load_n(Gp d, const Opnd& m, int bytes) {
  Opnd mm = m;
  mm.size = static_cast<uint8_t>(bytes);
  impl_->gp(gp_key(kLoadN, d, 0, &mm, bytes), uint32_t(m.disp), [&](ax::Assembler& a) {
    if (bytes == 8) a.mov(gp64(d), impl_->memop(mm));
    else if (bytes == 4) a.mov(ax::Gpd(d), impl_->memop(mm));
    else a.movzx(ax::Gpd(d), impl_->memop(mm));
  }, m.base == kPoolBase);
}
void Assembler::store_n(const Opnd& m, Gp s, int bytes) {
  Opnd mm = m;
  mm.size = static_cast<uint8_t>(bytes);
  impl_->gp(gp_key(kStoreN, 0, s, &mm, bytes), uint32_t(m.disp), [&](ax::Assembler& a) {
    if (bytes == 8) a.mov(impl_->memop(mm), gp64(s));
    else if (bytes == 4) a.mov(impl_->memop(mm), ax::Gpd(s));
    else if (bytes == 2) a.mov(impl_->memop(mm), ax::Gpw(s));
    else a.mov(impl_->memop(mm), ax::GpbLo(s));
  }, m.base == kPoolBase);
}

Label Assembler::new_label() { return Label{impl_->a.newLabel().id()}; }
void Assembler::bind(Label l) { impl_->a.bind(asmjit::Label(l.id)); }
void Assembler::jmp(Label l) { impl_->a.jmp(asmjit::Label(l.id)); }
void Assembler::j(Cond c, Label l) {
  auto& a = impl_->a;
  const asmjit::Label t(l.id);
  switch (c) {
    case Cond::L: a.jl(t); break;
    case Cond::LE: a.jle(t); break;
    case Cond::G: a.jg(t); break;
    case Cond::GE: a.jge(t); break;
    case Cond::E: a.je(t); break;
    case Cond::NE: a.jne(t); break;
  }
}
void Assembler::ret() { impl_->a.ret(); }
void Assembler::vzeroupper() { impl_->a.vzeroupper(); }
void Assembler::sfence() { impl_->a.sfence(); }

Opnd Assembler::constant(uint32_t bits, int size) {
  const size_t idx = impl_->entry(bits);
  Opnd o;
  o.kind = Opnd::Mem;
  o.base = kPoolBase;
  o.disp = static_cast<int32_t>(idx) * impl_->pool_width;
  o.size = static_cast<uint8_t>(size);
  return o;
}

void* Assembler::finish(size_t* code_bytes, std::string* error) {
  auto& a = impl_->a;
  if (!impl_->entries.empty()) {
    a.align(asmjit::AlignMode::kData, 64);
    const size_t pool_at = a.offset();
    a.bind(impl_->pool);
    const size_t reps = static_cast<size_t>(impl_->pool_width / 4);
    if (impl_->code.logger()) {  // an entry a line in the log
      for (uint32_t bits : impl_->entries)
        for (size_t r = 0; r < reps; ++r) a.embed(&bits, 4);
    } else {
      thread_local std::vector<uint32_t> pool;  // the entries, each repeated to its width: one embed
      pool.clear();
      for (uint32_t bits : impl_->entries) pool.insert(pool.end(), reps, bits);
      a.embed(pool.data(), pool.size() * 4);
    }
    // The pool operands encode() wrote: rip-relative to their instruction's end.
    uint8_t* text = impl_->code.textSection()->data();
    for (const Impl::PoolRef& r : impl_->pool_refs) {
      const int32_t rel = static_cast<int32_t>(pool_at) + r.disp - static_cast<int32_t>(r.end);
      std::memcpy(text + r.at, &rel, 4);
    }
  }
  if (impl_->errors.err != asmjit::kErrorOk) {
    *error = "asmjit: " + impl_->errors.message;
    return nullptr;
  }
  void* fn = nullptr;
  if (perf_map()) {
    fn = place_anonymous(impl_->code, error);
    if (!fn) return nullptr;
  } else {
    asmjit::Error err = runtime()._add(&fn, &impl_->code);
    if (err != asmjit::kErrorOk || !fn) {
      *error = std::string("asmjit: cannot place code: ") + asmjit::DebugUtils::errorAsString(err);
      return nullptr;
    }
  }
  *code_bytes = impl_->code.codeSize();
  if (impl_->code.logger()) {
    std::string_view text(impl_->logger.data(), impl_->logger.dataSize());
    while (!text.empty() && text.back() == '\n') text.remove_suffix(1);
    vm::log::write(LogLevel::Debug, text);
  }
  return fn;
}

void release(void* fn) {
  if (fn && !release_anonymous(fn)) runtime().release(fn);
}

}  // namespace dvm::backends::jit::asmx
