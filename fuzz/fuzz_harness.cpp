// The bytecode fuzzer's harness: verify, launch on guarded buffers on every
// backend, compare (see fuzz_harness.h).
#include "fuzz/fuzz_harness.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <list>
#include <memory>
#include <sstream>
#include <utility>

#include "backends/convert.h"
#include "backends/isa.h"
#include "backends/microkernels.h"
#include "dvm/runtime.h"
#include "dvm/error.h"
#include "vm/backend.h"
#include "vm/bytecode.h"
#include "vm/disasm.h"
#include "vm/forms.h"
#include "vm/kernel.h"
#include "vm/launch.h"
#include "vm/launcher.h"
#include "vm/interpreter.h"
#include "vm/schedule.h"
#include "vm/split_launch.h"
#include "vm/tiering.h"
#include "vm/verifier.h"

namespace dvm::fuzz {
namespace {

using backends::Isa;
using vm::ArgRole;
using vm::Op;

constexpr Isa kIsas[] = {Isa::Portable, Isa::Avx2, Isa::Avx512};

// Guard and untouched-output pattern: signalling NaNs (quiet bit clear) with
// a payload that varies by position, so a shifted copy of the pattern shows.
// Arithmetic never produces a signalling NaN and the inputs hold none.
uint32_t canary(size_t i) { return 0x7FA00000u | static_cast<uint32_t>((i * 2654435761u) >> 12 & 0xFFFFFu); }
bool is_signalling(uint32_t bits) {
  return (bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0 && (bits & 0x00400000u) == 0;
}
bool is_nan(uint32_t bits) { return (bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0; }

// Byte j of a buffer filled with canary words.
uint8_t canary_byte(size_t j) { return static_cast<uint8_t>(canary(j / 4) >> (8 * (j % 4))); }

// One argument's memory, in elements of its type (es bytes each): `guard`
// elements of canary bytes, the elements the launch may touch (offsets
// lo..hi from the argument's base), `guard` elements of canary bytes.
struct Buffer {
  std::vector<uint32_t> words;  // the bytes, in words (aligned as an allocation is)
  int64_t origin = 0;           // element index of offset 0
  int64_t guard = 0;
  int64_t span = 0;
  size_t es = 4;
  uint8_t* bytes() { return reinterpret_cast<uint8_t*>(words.data()); }
  const uint8_t* bytes() const { return reinterpret_cast<const uint8_t*>(words.data()); }
  size_t nbytes() const { return static_cast<size_t>(span + 2 * guard) * es; }
  void* base() { return bytes() + static_cast<size_t>(origin) * es; }
};

struct Range {
  int64_t lo = 0, hi = 0;
  void add(int64_t n, int64_t stride) {
    if (n <= 0) return;
    const int64_t o = (n - 1) * stride;
    if (o < 0) lo += o;
    else hi += o;
  }
};

// A small fast generator (xorshift64*): the harness draws one per element.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull) {}
  uint32_t operator()() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return static_cast<uint32_t>((s * 0x2545F4914F6CDD1Dull) >> 32);
  }
};

float input_value(Rng& rng, int mode) {
  static constexpr float kSpecials[] = {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                                        -std::numeric_limits<float>::infinity(),
                                        std::numeric_limits<float>::quiet_NaN(),
                                        -std::numeric_limits<float>::quiet_NaN(), 1e-40f, -1e-40f,
                                        std::numeric_limits<float>::min(), std::numeric_limits<float>::max(),
                                        -std::numeric_limits<float>::max(), 1.0f, -1.0f, 0.5f, 88.8f,
                                        -88.8f, 1e30f, -1e30f, 3.0e38f, 2.5f, -0.5f};
  const uint32_t u = rng();
  const uint32_t pick = u % 16;
  if (mode == 0 || pick < 10) return (static_cast<float>(u >> 8 & 0x3FFF) - 8192.0f) * 3.7e-4f;
  if (pick < 12) return (static_cast<float>(u >> 8 & 0x3FFF) - 8192.0f) * 0.5f;
  return kSpecials[(u >> 8) % std::size(kSpecials)];
}

// Input data: windows of two fixed pools (moderate values; with specials
// mixed in), so filling a buffer is a copy.
constexpr size_t kPool = 1 << 16;
std::vector<uint32_t> make_pool(int mode) {
  Rng rng(static_cast<uint64_t>(mode) + 7);
  std::vector<uint32_t> v(2 * kPool);
  for (uint32_t& w : v) {
    const float f = input_value(rng, mode);
    std::memcpy(&w, &f, 4);
  }
  return v;
}
const std::vector<uint32_t>& pool(int mode) {
  static const std::vector<uint32_t> pools[2] = {make_pool(0), make_pool(1)};
  return pools[mode];
}

// A verified kernel and what each machine-code backend made of it, kept for
// the next inputs: mutations often change only the launch parameters.
struct Compiled {
  std::shared_ptr<vm::Kernel> kernel;
  std::unique_ptr<vm::CompiledKernel> code[std::size(kIsas)];
  std::string declined[std::size(kIsas)];
  bool tried[std::size(kIsas)] = {};
};

Compiled* kernel_for(const uint8_t* bytes, size_t n, bool* accepted) {
  static std::list<std::pair<std::vector<uint8_t>, std::unique_ptr<Compiled>>> cache;  // most recent first
  std::vector<uint8_t> key(bytes, bytes + n);
  for (auto it = cache.begin(); it != cache.end(); ++it)
    if (it->first == key) {
      cache.splice(cache.begin(), cache, it);
      *accepted = true;
      return cache.front().second.get();
    }
  vm::Bytecode bc;
  bc.bytes = key;
  vm::VerifiedProgram vp;
  std::string error;
  *accepted = vm::verify(bc, &vp, &error);
  if (!*accepted) return nullptr;
  auto c = std::make_unique<Compiled>();
  c->kernel = std::make_shared<vm::Kernel>(std::move(bc), std::move(vp));
  cache.emplace_front(std::move(key), std::move(c));
  if (cache.size() > 32) cache.pop_back();
  return cache.front().second.get();
}

struct Failure {
  std::ostringstream msg;
};

std::string hex(const uint8_t* b, size_t n) {
  std::string s = "0x";
  char d[3];
  for (size_t i = n; i-- > 0;) {  // little-endian: the most significant byte first
    std::snprintf(d, sizeof d, "%02x", b[i]);
    s += d;
  }
  return s;
}

}  // namespace

bool run_one(const uint8_t* data, size_t size, Outcome* outcome, std::string* failure) {
  Outcome local;
  if (!outcome) outcome = &local;
  *outcome = Outcome{};
  if (size < kParamBytes) return true;
  const uint8_t* prm = data;
  const uint8_t* code = data + kParamBytes;
  const size_t code_size = size - kParamBytes;

  // The disassembler takes any bytes (it prints the verifier's message);
  // every other input, as it verifies again.
  if (prm[0] & 0x80) {
    vm::Bytecode bc;
    bc.bytes.assign(code, code + code_size);
    (void)vm::disassemble(bc);
  }
  bool accepted = false;
  Compiled* comp = kernel_for(code, code_size, &accepted);
  outcome->accepted = accepted;
  if (!accepted) return true;
  const vm::Kernel& k = *comp->kernel;
  const vm::Program& p = k.program();
  auto fail = [&](const std::string& what) {
    if (failure) *failure = what + "\n" + vm::disassemble(k.bytecode());
    return false;
  };

  // The bytes the verifier accepted are exactly encode() of what it decoded.
  if (!(vm::encode(p) == k.bytecode())) return fail("encode(verify(bytes)) != bytes");

  // Kernels derived for split launches must build from any verified kernel.
  try {
    (void)k.fold_kernel();
    for (int pass = 0; pass <= k.verified().max_level; ++pass) (void)k.split_pass(pass);
  } catch (const Error& e) {
    return fail(std::string("deriving split kernels threw: ") + e.what());
  }

  // Extents: small, with the tile and chunk edges within reach.
  Rng rng(static_cast<uint32_t>(prm[4] | prm[5] << 8 | prm[6] << 16 | prm[7] << 24));
  const int parts = vm::form_row(p.form).parts;
  static constexpr int64_t kLongC[] = {511, 512, 513, 1000, 4096, 4097, 4100, 8193};
  vm::Launch l;
  l.extent[vm::kP] = prm[0] % 4;
  l.extent[vm::kR] = prm[1] % 10;
  // DVM_FUZZ_SMALL: C of at most 1000 and no split launches, for runs that
  // want many executions more than the long and split launch shapes.
  static const bool small = std::getenv("DVM_FUZZ_SMALL") != nullptr;
  l.extent[vm::kC] = prm[2] < 248 ? prm[2] % 70 : kLongC[prm[2] % (small ? 4 : std::size(kLongC))];
  if (l.C() > 1000) l.extent[vm::kR] = std::min<int64_t>(l.R(), 2);
  // 1 input in 256: a launch that splits its reduced axis into chunks
  // (vm/schedule.h), a few chunks long.
  const bool split = !small && prm[2] == 255 && vm::form_row(p.form).reduces != vm::ReduceAxis::None;
  if (split && vm::form_row(p.form).reduces == vm::ReduceAxis::Outer) {
    // Narrow columns split once R passes two chunks, wide ones from
    // kSplitRowMin floats per column tile (vm/schedule.h).
    const int sel = prm[1] % 4;
    l.extent[vm::kC] = sel < 2 ? 1 + prm[1] % 9 : sel == 2 ? vm::kSplitColsMin + prm[1] % 7 : vm::kTile;
    l.extent[vm::kP] = 1 + (sel < 2 && (prm[0] & 1));
    l.extent[vm::kR] = 1;
    l.extent[vm::kR] = 2 * vm::col_split(k, l).rows + 1 + prm[1] % 5;
    if (l.C() >= vm::kSplitColsMin)
      l.extent[vm::kR] = std::max(l.R(), vm::kSplitRowMin / std::min(l.C(), vm::kTile) + 1 + prm[1] % 5);
  } else if (split) {
    l.extent[vm::kC] = vm::kSplitRowMin + 1 + prm[1] % 300;
    l.extent[vm::kR] = 1 + prm[1] % 2;
    l.extent[vm::kP] = 1;
  }
  if ((prm[3] & 3) == 0) l.extent[vm::kP] = std::min<int64_t>(l.P(), 1);
  for (int part = parts; part < vm::kMaxParts; ++part) l.extent[part] = 1;
  if (parts > vm::kK) l.extent[vm::kK] = prm[1] % 7;  // Contraction: the summed axis
  const int64_t P = l.P(), R = l.R(), C = l.C(), K = l.extent[vm::kK];
  const int data_mode = (prm[3] >> 2) & 1;
  // The scalar parameters PARAM reads: values from the same pools as the
  // inputs (specials included in data mode 1).
  l.scalars.resize(static_cast<size_t>(p.nscalars));
  for (float& v : l.scalars) {
    const uint32_t bits = pool(data_mode)[rng() % kPool];
    std::memcpy(&v, &bits, sizeof v);
  }
  const int64_t guard = 1 + ((prm[3] >> 3) & 15);

  // Which instructions touch each argument.
  const size_t nargs = p.roles.size();
  std::vector<uint8_t> uses(nargs, 0);  // bit per op kind below
  enum : uint8_t { kLd = 1, kLdb = 2, kLds = 4, kLdg = 8, kSt = 16, kStb = 32, kSts = 64 };
  for (const vm::Kernel::ArgUse& u : k.arg_uses()) {
    switch (u.op) {
      case Op::LD: uses[u.arg] |= kLd; break;
      case Op::LDB: uses[u.arg] |= kLdb; break;
      case Op::LDS: uses[u.arg] |= kLds; break;
      case Op::LDG: uses[u.arg] |= kLdg; break;
      case Op::ST: uses[u.arg] |= kSt; break;
      case Op::STB: uses[u.arg] |= kStb; break;
      case Op::STS: uses[u.arg] |= kSts; break;
      default: break;
    }
  }

  // Layouts. Outputs never overlap themselves (each (p, r, c) its own
  // element); inputs may broadcast (stride 0), run backwards or step by more
  // than one along C where their loads allow it.
  l.args.resize(nargs);
  std::vector<Buffer> inputs(nargs);
  std::vector<Range> ranges(nargs);
  auto pick = [&](std::initializer_list<int64_t> v) { return *(v.begin() + rng() % v.size()); };
  for (size_t a = 0; a < nargs; ++a) {
    vm::ArgBinding& b = l.args[a];
    const bool out = p.roles[a] == ArgRole::Output;
    int64_t cs;
    if (out) {
      // ST needs a unit stride; STS writes every element of a row, each its own.
      cs = (uses[a] & kSt) || C <= 1 ? 1 : (uses[a] & kSts) ? pick({1, 2, 7}) : pick({0, 1, 7});
      const int64_t row = (uses[a] & kSt) ? std::max<int64_t>(C, 1)
                          : (uses[a] & kSts) ? std::max<int64_t>(C, 1) * cs : 1;
      const int64_t pad = pick({0, 0, 1, 3});
      if (rng() % 2) {  // p outer
        b.stride[vm::kR] = row + pad;
        b.stride[vm::kP] = std::max<int64_t>(R, 1) * (row + pad) + pick({0, 0, 5});
      } else {  // r outer
        b.stride[vm::kP] = row + pad;
        b.stride[vm::kR] = std::max<int64_t>(P, 1) * (row + pad) + pick({0, 0, 5});
      }
    } else {
      if ((uses[a] & kLd) && C > 1) cs = 1;
      else if (uses[a] & kLds) cs = pick({-3, -1, 0, 1, 2, 5});
      else cs = pick({0, 1, 2});
      const int64_t row = std::max<int64_t>(C, 1) * std::max<int64_t>(std::abs(cs), 1);
      const int64_t rs = pick({0, 1, -1, 1, 1}) * (row + pick({0, 0, 2}));
      const int64_t rows = std::max<int64_t>(R, 1) * std::max<int64_t>(std::abs(rs), row);
      const int64_t ps = pick({0, 1, 1, -1}) * (rows + pick({0, 0, 4}));
      b.stride[vm::kR] = rs;
      b.stride[vm::kP] = ps;
      if (K > 1) b.stride[vm::kK] = pick({0, 1, -1, 3}) * (std::max<int64_t>(P, 1) * std::max<int64_t>(std::abs(ps), rows) + 1);
      if (uses[a] & kLdg) {
        const int64_t ext[3] = {P, R, C};
        for (int part = 0; part < 3; ++part) {
          b.ndims[part] = static_cast<uint8_t>(rng() % 3);
          for (int d = 0; d < b.ndims[part]; ++d) {
            b.dim_size[part][d] = d + 1 == b.ndims[part] ? std::max<int64_t>(ext[part], 1) : 1 + rng() % 4;
            b.dim_stride[part][d] = pick({0, 1, 2, -1, 3, 17});
          }
        }
      }
    }
    b.stride[vm::kC] = cs;
    Range& rg = ranges[a];
    rg.add(P, b.stride[vm::kP]);
    rg.add(R, b.stride[vm::kR]);
    rg.add(C, cs);
    rg.add(K, b.stride[vm::kK]);
    for (int part = 0; part < 3; ++part)
      for (int d = 0; d < b.ndims[part]; ++d) rg.add(b.dim_size[part][d], b.dim_stride[part][d]);
  }
  auto make_buffer = [&](size_t a) {
    Buffer buf;
    buf.guard = guard;
    buf.span = ranges[a].hi - ranges[a].lo + 1;
    buf.origin = guard - ranges[a].lo;
    buf.es = dtype_size(p.types[a]);
    buf.words.resize((buf.nbytes() + 3) / 4);
    for (size_t i = 0; i < buf.words.size(); ++i) buf.words[i] = canary(i);
    return buf;
  };
  for (size_t a = 0; a < nargs; ++a) {
    if (p.roles[a] != ArgRole::Input) continue;
    inputs[a] = make_buffer(a);
    // The pool's f32 bytes, whatever the type: other types read them as
    // their own patterns (bf16 the high halves' values, bool any byte).
    const uint8_t* values = reinterpret_cast<const uint8_t*>(pool(data_mode).data());
    const size_t es = inputs[a].es;
    const size_t span_bytes = static_cast<size_t>(inputs[a].span) * es;
    for (size_t i = 0; i < span_bytes;) {
      const size_t from = (rng() % kPool) * 4;
      const size_t n = std::min(span_bytes - i, kPool * 4);
      std::memcpy(inputs[a].bytes() + static_cast<size_t>(guard) * es + i, values + from, n);
      i += n;
    }
    l.args[a].in = inputs[a].base();
  }
  const std::vector<Buffer> inputs_before = inputs;

  auto bind_outputs = [&](vm::Launch& launch, std::vector<Buffer>& outs) {
    outs.assign(nargs, Buffer{});
    for (size_t a = 0; a < nargs; ++a)
      if (p.roles[a] == ArgRole::Output) {
        outs[a] = make_buffer(a);
        launch.args[a].out = outs[a].base();
      }
  };
  const int64_t items = vm::work_items(k, l);
  // Runs work items in up to three ranges, as threads would take them.
  const int64_t cut1 = items ? static_cast<int64_t>(rng() % static_cast<uint32_t>(items + 1)) : 0;
  const int64_t cut2 = cut1 + (items > cut1 ? static_cast<int64_t>(rng() % static_cast<uint32_t>(items - cut1 + 1)) : 0);
  auto run = [&](const vm::Backend& be, const vm::CompiledKernel* cc, const vm::Launch& launch) {
    be.run_items(cc, k, launch, 0, cut1);
    be.run_items(cc, k, launch, cut1, cut2);
    be.run_items(cc, k, launch, cut2, items);
  };
  auto where = [&](const std::string& backend) {
    std::ostringstream s;
    s << backend << " P=" << P << " R=" << R << " C=" << C << " K=" << K << " items=" << items << " cuts=" << cut1 << ","
      << cut2;
    return s.str();
  };
  // Guards of every buffer intact, inputs as they were.
  auto check_buffers = [&](const std::vector<Buffer>& outs, const std::string& backend, std::string* msg) {
    for (size_t a = 0; a < nargs; ++a) {
      if (p.roles[a] == ArgRole::Input) {
        if (inputs[a].words != inputs_before[a].words) {
          *msg = where(backend) + ": input argument " + std::to_string(a) + " was written";
          return false;
        }
        continue;
      }
      const Buffer& o = outs[a];
      const size_t gb = static_cast<size_t>(o.guard) * o.es, nb = o.nbytes();
      for (size_t j = 0; j < gb; ++j) {
        if (o.bytes()[j] != canary_byte(j) || o.bytes()[nb - 1 - j] != canary_byte(nb - 1 - j)) {
          *msg = where(backend) + ": guard of output argument " + std::to_string(a) + " overwritten";
          return false;
        }
      }
    }
    return true;
  };

  // The ISA whose interpreter always runs and whose JIT (if any) runs:
  // AVX-512 or AVX2 where the CPU has them, else the portable one.
  const Isa jit_isa = (prm[3] & 0x80) && vm::interpreter_for(Isa::Avx512) ? Isa::Avx512
                      : vm::interpreter_for(Isa::Avx2)                    ? Isa::Avx2
                                                                          : Isa::Portable;
  // Outputs of a reference run (x) and a machine-code run (y) bit for bit.
  auto same_bits = [&](const std::vector<Buffer>& out_x, const std::vector<Buffer>& out_y, const std::string& who,
                       std::string* msg) {
    for (size_t a = 0; a < nargs; ++a) {
      if (p.roles[a] != ArgRole::Output) continue;
      const Dtype type = p.types[a];
      const size_t es = out_x[a].es;
      const uint8_t* xb = out_x[a].bytes();
      const uint8_t* yb = out_y[a].bytes();
      for (size_t e = 0; e * es < out_x[a].nbytes(); ++e) {
        if (std::memcmp(xb + e * es, yb + e * es, es) == 0) continue;
        // Which NaN comes out where two NaNs meet (x86 returns the first
        // source's, and the C++ compiler orders the interpreter's operands
        // of commutative ops freely) may differ, as the JIT tests allow; a
        // NaN against a number, or a canary, never may. A 16-bit float
        // keeps the top of the f32 NaN's payload.
        bool both_nan = false;
        if (type == Dtype::F32) {
          uint32_t xw, yw;
          std::memcpy(&xw, xb + e * es, 4);
          std::memcpy(&yw, yb + e * es, 4);
          both_nan = is_nan(xw) && is_nan(yw) && !is_signalling(xw) && !is_signalling(yw);
        } else if (type == Dtype::F16 || type == Dtype::BF16) {
          both_nan = std::isnan(backends::load_elem(type, xb + e * es, 0)) &&
                     std::isnan(backends::load_elem(type, yb + e * es, 0));
        }
        if (both_nan) {
          ++outcome->nan_payload_differences;
          if (std::getenv("DVM_FUZZ_NANS"))
            std::fprintf(stderr, "nan difference: %s interpreter %s machine code %s\n%s", where(who).c_str(),
                         hex(xb + e * es, es).c_str(), hex(yb + e * es, es).c_str(),
                         vm::disassemble(k.bytecode()).c_str());
          continue;
        }
        *msg = where(who) + ": output argument " + std::to_string(a) + " element offset " +
               std::to_string(static_cast<int64_t>(e) - out_x[a].origin) + " (" + vm::elem_name(type) +
               "): interpreter " + hex(xb + e * es, es) + ", machine code " + hex(yb + e * es, es);
        return false;
      }
    }
    return true;
  };
  std::string msg;
  if (split) {
    // A split launch (vm/split_launch.h) on machine code where it can,
    // against the interpreter's split order: the same bits either way.
    static const bool eager = (vm::set_tier_mode(TierMode::Eager), true);
    (void)eager;
    const backends::MicroKernels* mk = backends::microkernels_for(jit_isa);
    if (!mk || !vm::splits_rows(k, l)) return true;
    vm::Launch li = l, lm = l;
    std::vector<Buffer> out_i, out_m;
    bind_outputs(li, out_i);
    bind_outputs(lm, out_m);
    vm::interpret_split_rows(k, li, *mk);
    if (!check_buffers(out_i, "split interpreter", &msg)) return fail(msg);
    vm::run_split(k, lm, *mk);
    if (!check_buffers(out_m, "split machine code", &msg)) return fail(msg);
    outcome->runs += 2;
    outcome->split_runs += 2;
    if (!same_bits(out_i, out_m, std::string("split on ") + backends::isa_name(jit_isa), &msg)) return fail(msg);
    return true;
  }
  for (size_t i = 0; i < std::size(kIsas); ++i) {
    const Isa isa = kIsas[i];
    const vm::BackendRef interp = vm::interpreter_for(isa);
    // The JIT's ISA always; the others on half of the inputs (the portable
    // interpreter is the slowest part of a run).
    if (!interp || (isa != jit_isa && !(prm[0] & 0x40))) continue;
    vm::Launch li = l;
    std::vector<Buffer> out_i;
    bind_outputs(li, out_i);
    try {
      vm::check_launch(k, li);
    } catch (const Error& e) {
      return fail(where("check_launch") + ": the harness built a launch the launcher rejects: " + e.what());
    }
    run(*interp.backend, nullptr, li);
    ++outcome->runs;
    if (!check_buffers(out_i, interp.backend->name, &msg)) return fail(msg);

    // One machine-code ISA per input (compiles dominate the fuzzer's time).
    const vm::BackendRef mc = vm::machine_code_for(isa);
    if (!mc || isa != jit_isa) continue;
    if (!comp->tried[i]) {
      comp->tried[i] = true;
      comp->code[i] = mc.backend->compile(k, &comp->declined[i]);
      if (!comp->code[i] && std::getenv("DVM_FUZZ_DECLINES"))
        std::fprintf(stderr, "jit declined: %s\n", comp->declined[i].c_str());
    }
    if (!comp->code[i]) {
      ++outcome->jit_declined;
      continue;
    }
    vm::Launch lj = l;
    std::vector<Buffer> out_j;
    bind_outputs(lj, out_j);
    run(*mc.backend, comp->code[i].get(), lj);
    ++outcome->runs;
    if (!check_buffers(out_j, mc.backend->name, &msg)) return fail(msg);
    if (!same_bits(out_i, out_j, std::string(interp.backend->name) + " vs " + mc.backend->name, &msg))
      return fail(msg);
  }
  return true;
}

size_t repair(uint8_t* data, size_t size, size_t max_size, uint32_t seed) {
  // The header as vm/bytecode.h lays it out; a format change only makes the
  // repair less useful, never unsafe (the verifier still sees every byte).
  if (size < kParamBytes + vm::kHeaderFixed) return size;
  uint8_t* b = data + kParamBytes;
  size_t n = size - kParamBytes;
  Rng rng(seed);
  // Each rule is skipped now and then, so near-valid programs reach the
  // verifier's rejections too.
  auto often = [&] { return rng() % 16 != 0; };
  b[0] = 'D';
  b[1] = 'V';
  b[2] = 'M';
  b[3] = vm::kBytecodeVersion;
  b[4] %= vm::kNumForms;
  if (b[5] == 0 || b[5] > 40) b[5] = static_cast<uint8_t>(1 + b[5] % 40);
  if (b[6] > 12) b[6] = b[6] % 13;
  b[7] %= 6;  // scalar parameters: a few, so PARAM indices land in range often
  b[8] = 0;
  const int nregs = b[5], nargs = b[6], nscalars = b[7];
  size_t pos = vm::kHeaderFixed;
  if (pos + static_cast<size_t>(vm::kArgBytes * nargs) + 2 > n) return size;
  const size_t roles_at = pos;
  std::vector<int> ins, outs;
  for (int a = 0; a < nargs; ++a) {
    b[pos] &= 1;
    (b[pos] ? outs : ins).push_back(a);
    // Mostly f32; one argument in four of another element type, half of
    // those moving integer lanes (int64 ones for int64).
    const uint8_t tb = b[pos + 1];
    b[pos + 1] = tb < 192 ? static_cast<uint8_t>(Dtype::F32) : static_cast<uint8_t>(tb % kNumDtypes);
    const Dtype dt = static_cast<Dtype>(b[pos + 1]);
    if (tb >= 192 && (tb & 8) && (b[pos] || !is_floating(dt))) b[pos + 1] |= vm::kIntLanes;
    pos += vm::kArgBytes;
  }
  const size_t count_at = pos;
  pos += 2;
  int count = 0;
  std::vector<uint8_t> written;  // registers written so far
  std::vector<uint8_t> stored(static_cast<size_t>(nargs), 0);
  bool reduces = false, contracts = false;
  while (pos < n) {
    b[pos] %= vm::kNumOps;
    const vm::Op op = static_cast<vm::Op>(b[pos]);
    const vm::OpClass cls = vm::op_class(op);
    const int len = vm::instr_bytes(op);
    if (pos + static_cast<size_t>(len) > n) break;
    reduces |= cls == vm::OpClass::Reduce;
    contracts |= cls == vm::OpClass::Contract;
    size_t q = pos + 1;
    int dst = -1;
    for (const char* s = vm::op_info(op).signature; *s; ++s, ++q) {
      uint8_t& v = b[q];
      switch (*s) {
        case 'F': q += 3; break;
        case 'S':  // a scalar index, two bytes
          if (often() && nscalars > 0) {
            v = static_cast<uint8_t>(v % nscalars);
            b[q + 1] = 0;
          }
          ++q;
          break;
        case 'D':
          if (often()) v %= static_cast<uint8_t>(nregs);
          dst = v;
          break;
        case 'R':  // a register already written
          if (often() && !written.empty()) v = written[v % written.size()];
          break;
        case 'A': {  // loads read inputs, stores write outputs
          const std::vector<int>& pool = cls == vm::OpClass::Store ? outs : ins;
          if (often() && !pool.empty()) v = static_cast<uint8_t>(pool[v % pool.size()]);
          if (cls == vm::OpClass::Store && v < nargs) stored[v] = 1;
          break;
        }
      }
    }
    if (dst >= 0 && std::find(written.begin(), written.end(), dst) == written.end())
      written.push_back(static_cast<uint8_t>(dst));
    pos += static_cast<size_t>(len);
    ++count;
  }
  // An output nobody stores becomes an input; the form follows the
  // reductions (Elementwise has none, the others need one).
  if (often())
    for (int a = 0; a < nargs; ++a)
      if (b[roles_at + static_cast<size_t>(vm::kArgBytes * a)] == 1 && !stored[static_cast<size_t>(a)])
        b[roles_at + static_cast<size_t>(vm::kArgBytes * a)] = 0;
  if (often()) {
    // A product makes a Contraction kernel; reductions a reducing form
    // (vm/forms.h: the rows' rules).
    const vm::FormRow& row = vm::form_row(static_cast<vm::Form>(b[4]));
    if (contracts) {
      b[4] = static_cast<uint8_t>(vm::Form::Contraction);
    } else if (reduces && row.reduces == vm::ReduceAxis::None) {
      b[4] = static_cast<uint8_t>(rng() % 2 ? vm::Form::RowReduce : vm::Form::ColReduce);
    } else if (!reduces && (row.reduces != vm::ReduceAxis::None || row.contracts)) {
      b[4] = static_cast<uint8_t>(vm::Form::Elementwise);
    }
  }
  b[count_at] = static_cast<uint8_t>(count & 0xFF);
  b[count_at + 1] = static_cast<uint8_t>(count >> 8);
  (void)max_size;
  return kParamBytes + pos;
}

}  // namespace dvm::fuzz
