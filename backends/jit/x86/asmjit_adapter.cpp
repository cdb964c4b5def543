// asmjit behind the adapter: operand translation, the constant pool, and the
// JitRuntime that owns executable memory.
#include "backends/jit/x86/asmjit_adapter.h"

#include <asmjit/x86.h>
#include <sys/mman.h>
#include <unistd.h>

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
    ax::Inst::kIdVcvtdq2pd,   ax::Inst::kIdVdivpd,       ax::Inst::kIdVroundpd,
    ax::Inst::kIdVrndscalepd, ax::Inst::kIdVcvttpd2dq,   ax::Inst::kIdVinserti128,
    ax::Inst::kIdVinserti64x4,
};
static_assert(sizeof(kInst) / sizeof(kInst[0]) == static_cast<size_t>(VI::kCount), "an asmjit id per VI");

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

struct Assembler::Impl {
  asmjit::StringLogger logger;  // declared before code, which points at it
  asmjit::CodeHolder code;
  FirstError errors;
  ax::Assembler a;
  asmjit::Label pool;
  int pool_width;
  std::vector<uint32_t> entries;

  explicit Impl(int width) : pool_width(width) {
    code.init(runtime().environment());
    code.setErrorHandler(&errors);
    // The assembly, collected per function and handed to the message sink
    // (vm/log.h) whole, so concurrent compiles never interleave their lines.
    if (g_log_on.load(std::memory_order_relaxed)) code.setLogger(&logger);
    code.attach(&a);
    pool = a.newLabel();
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

Assembler::Assembler(int pool_width) : impl_(std::make_unique<Impl>(pool_width)) {}
Assembler::~Assembler() = default;

void Assembler::v(VI inst, const Opnd& o0, const Opnd& o1, const Opnd& o2, const Opnd& o3) {
  auto& a = impl_->a;
  const InstId id = kInst[static_cast<int>(inst)];
  if (o2.kind == Opnd::None) a.emit(id, impl_->op(o0), impl_->op(o1));
  else if (o3.kind == Opnd::None) a.emit(id, impl_->op(o0), impl_->op(o1), impl_->op(o2));
  else a.emit(id, impl_->op(o0), impl_->op(o1), impl_->op(o2), impl_->op(o3));
}

void Assembler::masked(int k, bool zero) {
  impl_->a.k(ax::KReg(static_cast<uint32_t>(k)));
  if (zero) impl_->a.z();
}

void Assembler::mov(Gp d, Gp s) { impl_->a.mov(gp64(d), gp64(s)); }
void Assembler::mov(Gp d, const Opnd& m) { impl_->a.mov(gp64(d), impl_->memop(m)); }
void Assembler::mov(const Opnd& m, Gp s) { impl_->a.mov(impl_->memop(m), gp64(s)); }
void Assembler::mov_imm(Gp d, int64_t v) { impl_->a.mov(gp64(d), asmjit::Imm(v)); }
void Assembler::lea(Gp d, const Opnd& m) { impl_->a.lea(gp64(d), impl_->memop(m)); }
void Assembler::add(Gp d, Gp s) { impl_->a.add(gp64(d), gp64(s)); }
void Assembler::add(Gp d, int32_t v) { impl_->a.add(gp64(d), asmjit::Imm(v)); }
void Assembler::add(const Opnd& m, Gp s) { impl_->a.add(impl_->memop(m), gp64(s)); }
void Assembler::sub(Gp d, Gp s) { impl_->a.sub(gp64(d), gp64(s)); }
void Assembler::sub(Gp d, int32_t v) { impl_->a.sub(gp64(d), asmjit::Imm(v)); }
void Assembler::imul(Gp d, Gp s) { impl_->a.imul(gp64(d), gp64(s)); }
void Assembler::shl(Gp d, int v) { impl_->a.shl(gp64(d), asmjit::Imm(v)); }
void Assembler::shl_cl(Gp d) { impl_->a.shl(gp64(d), ax::cl); }
void Assembler::and_(Gp d, int32_t v) { impl_->a.and_(gp64(d), asmjit::Imm(v)); }
void Assembler::cmp(Gp a, Gp b) { impl_->a.cmp(gp64(a), gp64(b)); }
void Assembler::cmp(Gp a, const Opnd& m) { impl_->a.cmp(gp64(a), impl_->memop(m)); }
void Assembler::cmp(Gp a, int32_t v) { impl_->a.cmp(gp64(a), asmjit::Imm(v)); }
void Assembler::push(Gp g) { impl_->a.push(gp64(g)); }
void Assembler::pop(Gp g) { impl_->a.pop(gp64(g)); }
void Assembler::mov32_load(Gp d, const Opnd& m) {
  Opnd mm = m;
  mm.size = 4;
  impl_->a.mov(ax::Gpd(d), impl_->memop(mm));
}
void Assembler::mov32_store(const Opnd& m, Gp s) {
  Opnd mm = m;
  mm.size = 4;
  impl_->a.mov(impl_->memop(mm), ax::Gpd(s));
}

void Assembler::load_n(Gp d, const Opnd& m, int bytes) {
  Opnd mm = m;
  mm.size = static_cast<uint8_t>(bytes);
  auto& a = impl_->a;
  if (bytes == 8) a.mov(gp64(d), impl_->memop(mm));
  else if (bytes == 4) a.mov(ax::Gpd(d), impl_->memop(mm));
  else a.movzx(ax::Gpd(d), impl_->memop(mm));
}
void Assembler::store_n(const Opnd& m, Gp s, int bytes) {
  Opnd mm = m;
  mm.size = static_cast<uint8_t>(bytes);
  auto& a = impl_->a;
  if (bytes == 8) a.mov(impl_->memop(mm), gp64(s));
  else if (bytes == 4) a.mov(impl_->memop(mm), ax::Gpd(s));
  else if (bytes == 2) a.mov(impl_->memop(mm), ax::Gpw(s));
  else a.mov(impl_->memop(mm), ax::GpbLo(s));
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

Opnd Assembler::constant(uint32_t bits, int size) {
  auto& e = impl_->entries;
  size_t idx = 0;
  while (idx < e.size() && e[idx] != bits) ++idx;
  if (idx == e.size()) e.push_back(bits);
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
    a.bind(impl_->pool);
    const int reps = impl_->pool_width / 4;
    for (uint32_t bits : impl_->entries)
      for (int r = 0; r < reps; ++r) a.embed(&bits, 4);
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
