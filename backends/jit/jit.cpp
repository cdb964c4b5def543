// The JIT backend's entry points: compile() (lower, then generate), the
// per-work-item driver run_items(), and executable-memory accounting.
#include "backends/jit/jit.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "backends/jit/codegen.h"
#include "dvm/error.h"
#include "backends/jit/lower.h"
#include "backends/jit/target.h"
#include "vm/schedule.h"

namespace dvm::backends::jit {
namespace {

// The longest chain of dependent vector instructions in a program (loads
// and constants start one): a long chain is bound by its latency, which
// interleaved copies of the body hide.
int chain_depth(const vm::Program& p) {
  int depth[256] = {};
  int longest = 0;
  for (const vm::Instr& ins : p.code) {
    const vm::OpClass cls = vm::op_class(ins.op);
    int k = 0, in = 0, dst = -1;
    for (const char* s = vm::op_info(ins.op).signature; *s; ++s) {
      if (*s == 'F' || *s == 'S') continue;
      if (*s == 'R') in = std::max(in, depth[ins.r[k]]);
      if (*s == 'D') dst = ins.r[k];
      ++k;
    }
    if (dst < 0) continue;
    depth[dst] = cls == vm::OpClass::Load || cls == vm::OpClass::Const ? 0 : in + 1;
    longest = std::max(longest, depth[dst]);
  }
  return longest;
}
// Elementwise bodies with a chain at least this long run four interleaved
// copies per iteration (W7's 100-op chain: 1.3x; W1-W6 have short chains).
constexpr int kLatencyBoundChain = 16;

std::atomic<size_t> g_code_bytes[3];  // per Isa

// ColReduce: column vectors per pass over the rows, an accumulator each: half
// the target's vector registers (AVX-512: 16 zmm, 1 KiB of every row per
// pass; AVX2: 8 ymm), leaving the rest for the prologue's values.
int col_block(const TargetCaps& caps) { return std::min(caps.vector_regs / 2, kMaxColBlock); }

class JitCodeImpl final : public JitCode {
 public:
  std::vector<uint8_t> patterns;  // kArg* per argument
  vm::Form form = vm::Form::Elementwise;
  // The same kernel with streaming stores (IrBuilder::stream_stores), made
  // by the first launch that would use it; null until then, or if that
  // compile failed.
  mutable std::once_flag streaming_once;
  mutable std::unique_ptr<JitCodeImpl> streaming;
  // RowReduce: the variant for rows of at most `lanes` elements (lower(),
  // one_vector_rows), made by the first launch with such rows; null until
  // then, or if that compile failed.
  int lanes = 0;
  mutable std::once_flag one_vector_once;
  mutable std::unique_ptr<JitCodeImpl> one_vector;

  ~JitCodeImpl() override {
    if (entry) {
      release_code(reinterpret_cast<void*>(entry));
      g_code_bytes[static_cast<int>(isa)].fetch_sub(code_bytes, std::memory_order_relaxed);
    }
  }
};

// Offset of index idx of one part of an LDG argument (its dims, innermost
// last), as the interpreter finds it.
inline int64_t gather_offset(const vm::ArgBinding& a, int part, int64_t idx) {
  int64_t off = 0;
  for (int d = a.ndims[part] - 1; d >= 0; --d) {
    const int64_t s = a.dim_size[part][d];
    off += (idx % s) * a.dim_stride[part][d];
    idx /= s;
  }
  return off;
}

// Offset of element (p, r, c0) of an argument as the interpreter addresses it
// for this argument's access pattern.
inline int64_t item_offset(const vm::ArgBinding& a, uint8_t pattern, int64_t p, int64_t r,
                           int64_t c0) {
  if (pattern == kArgGathered) return gather_offset(a, vm::kP, p) + gather_offset(a, vm::kR, r) + c0;
  int64_t off = p * a.stride[vm::kP] + r * a.stride[vm::kR];
  if (pattern == kArgContiguous) off += c0;
  else if (pattern == kArgStrided) off += c0 * a.stride[vm::kC];
  return off;
}

inline const void* arg_base(const vm::ArgBinding& a) { return a.in ? a.in : a.out; }

// One run_items call: the argument block, aimed at one item after another.
struct ItemRunner {
  const JitCodeImpl& code;
  const vm::Launch& l;
  const std::vector<Dtype>& types;
  size_t nargs;
  JitArgs& args;

  // Argument a's element type (float32 past the program's list).
  Dtype type(size_t a) const { return a < types.size() ? types[a] : Dtype::F32; }

  // Points every argument at element (p, r, c0) and runs n elements of
  // `rows` rows from there.
  void call(int64_t p, int64_t r, int64_t c0, int64_t n, int64_t rows) {
    for (size_t a = 0; a < nargs; ++a)
      args.base[a] = vm::advance(arg_base(l.args[a]), item_offset(l.args[a], code.patterns[a], p, r, c0), type(a));
    args.n = n;
    args.rows = rows;
    code.entry(&args);
  }
};

// Items that are whole rows: one call per run of rows of one p (the entry
// point loops over JitArgs::rows rows).
void run_row_runs(ItemRunner& run, int64_t begin, int64_t end) {
  const vm::Launch& l = run.l;
  for (int64_t item = begin; item < end;) {
    const int64_t p = item / l.R(), r = item % l.R();
    const int64_t rows = std::min(end - item, l.R() - r);
    run.call(p, r, 0, l.C(), rows);
    item += rows;
  }
}

// Blocks of rows when an argument is read across rows (a transpose: LDS
// whose elements lie a cache line or more apart): each call covers
// kCrossRows rows of kCrossCols columns, so the lines a block reads stay in
// L1 while its rows use them, where a whole row at a time reads a new line
// per element. Small blocks also keep a power-of-two stride's lines from
// filling one cache set. Elementwise values do not depend on the order they
// are computed in, so this is a choice of speed alone.
constexpr int64_t kCrossRows = 32, kCrossCols = 32;

bool reads_across_rows(const ItemRunner& run) {
  if (run.code.scratch_rows > 0 || run.l.R() < 2) return false;
  for (size_t a = 0; a < run.nargs; ++a) {
    if (run.code.patterns[a] == kArgStrided &&
        std::abs(run.l.args[a].stride[vm::kC]) * static_cast<int64_t>(dtype_size(run.type(a))) >= 64)
      return true;
  }
  return false;
}

std::atomic<int64_t> g_row_block_launches{0};

// Items that are whole rows, in blocks (above).
void run_row_blocks(ItemRunner& run, int64_t begin, int64_t end) {
  g_row_block_launches.fetch_add(1, std::memory_order_relaxed);
  const vm::Launch& l = run.l;
  for (int64_t item = begin; item < end;) {
    const int64_t p = item / l.R(), r = item % l.R();
    const int64_t rows = std::min({end - item, l.R() - r, kCrossRows});
    for (int64_t c0 = 0; c0 < l.C(); c0 += kCrossCols) run.call(p, r, c0, std::min(kCrossCols, l.C() - c0), rows);
    item += rows;
  }
}

// Rows narrower than a few vectors whose arguments each continue the row
// before (rs == C) or repeat one row ([C] broadcast over the rows, rs ==
// 0): G rows at a time run as one row of L = lcm(C, 16) elements, the
// repeated row read from G copies of it, so a vector spans rows instead of
// each row paying a masked tail and its own loop turn (x [N, 3] - [3]).
// Every element reads the values it read before; only the calls change.
constexpr int64_t kPeriodLanes = 16, kPeriodMaxC = 64;

bool periodic_rows(const ItemRunner& run) {
  const vm::Launch& l = run.l;
  const int64_t C = l.C();
  if (run.code.scratch_rows > 0 || C < 1 || C >= kPeriodMaxC || C % kPeriodLanes == 0) return false;
  if (l.R() < 2 * (std::lcm(C, kPeriodLanes) / C)) return false;
  bool repeats = false;
  for (size_t a = 0; a < run.nargs; ++a) {
    if (run.code.patterns[a] == kArgUnused) continue;
    if (run.code.patterns[a] != kArgContiguous) return false;
    const int64_t rs = l.args[a].stride[vm::kR];
    if (rs == 0 && l.args[a].in) repeats = true;
    else if (rs != C) return false;
  }
  return repeats;
}

std::atomic<int64_t> g_periodic_row_launches{0};

// Row runs of one p, G rows to a call (above); the rows past the last
// whole G as row runs.
void run_periodic_rows(ItemRunner& run, int64_t begin, int64_t end) {
  g_periodic_row_launches.fetch_add(1, std::memory_order_relaxed);
  const vm::Launch& l = run.l;
  const int64_t C = l.C(), L = std::lcm(C, kPeriodLanes), G = L / C;
  thread_local std::vector<unsigned char> copies;
  for (int64_t item = begin; item < end;) {
    const int64_t p = item / l.R(), r = item % l.R();
    const int64_t rows = std::min(end - item, l.R() - r), whole = rows / G;
    if (whole > 0) {
      // G copies of each repeated row, 64-byte aligned, in one buffer sized
      // before any pointer into it is taken.
      auto copy_bytes = [&](size_t a) { return (static_cast<size_t>(L) * dtype_size(run.type(a)) + 63) / 64 * 64; };
      size_t need = 0;
      for (size_t a = 0; a < run.nargs; ++a)
        if (run.code.patterns[a] != kArgUnused && l.args[a].stride[vm::kR] == 0) need += copy_bytes(a);
      if (copies.size() < need) copies.resize(need);
      size_t used = 0;
      for (size_t a = 0; a < run.nargs; ++a) {
        if (run.code.patterns[a] == kArgUnused) continue;
        const vm::ArgBinding& b = l.args[a];
        const Dtype t = run.type(a);
        const void* at = vm::advance(arg_base(b), item_offset(b, kArgContiguous, p, r, 0), t);
        if (b.stride[vm::kR] != 0) {
          run.args.base[a] = at;
          run.args.rs[a] = L;
          continue;
        }
        const size_t row_bytes = static_cast<size_t>(C) * dtype_size(t);
        for (int64_t g = 0; g < G; ++g)
          std::memcpy(copies.data() + used + static_cast<size_t>(g) * row_bytes, at, row_bytes);
        run.args.base[a] = copies.data() + used;
        used += copy_bytes(a);
      }
      run.args.n = L;
      run.args.rows = whole;
      run.code.entry(&run.args);
      for (size_t a = 0; a < run.nargs; ++a) run.args.rs[a] = l.args[a].stride[vm::kR];
    }
    if (rows > whole * G) run.call(p, r + whole * G, 0, C, rows - whole * G);
    item += rows;
  }
}

// Elementwise: (row, chunk) items; rows of one chunk run as row runs, and
// consecutive chunks of one row as one call (the function loops over any
// n), so a long row pays the call's exit, entry and address set-up once.
void run_elementwise(ItemRunner& run, int64_t begin, int64_t end) {
  const int64_t chunks = vm::elementwise_chunks(run.l);
  if (chunks == 1) {
    if (reads_across_rows(run)) return run_row_blocks(run, begin, end);
    return periodic_rows(run) ? run_periodic_rows(run, begin, end) : run_row_runs(run, begin, end);
  }
  for (int64_t item = begin; item < end;) {
    const vm::ItemStart at = vm::elementwise_item(run.l, chunks, item);
    const int64_t row_end = (item / chunks + 1) * chunks;  // the first item of the next row
    const int64_t last = std::min(end, row_end);
    run.call(at.p, at.r, at.c0, std::min(run.l.C() - at.c0, (last - item) * vm::kChunk), 1);
    item = last;
  }
}

// ColReduce: (p, column tile) items, each folding every row.
void run_col_tiles(ItemRunner& run, int64_t begin, int64_t end) {
  const int64_t ctiles = vm::col_tiles(run.l);
  for (int64_t item = begin; item < end; ++item) {
    const vm::ItemStart at = vm::col_item(run.l, ctiles, item);
    run.call(at.p, 0, at.c0, at.n, run.l.R());
  }
}

// Contraction kernels are declined by compile(): never run here.
[[noreturn]] void run_declined(ItemRunner&, int64_t, int64_t) {
  throw Error("internal: the JIT ran a kernel form it declines to compile");
}

// The JIT's entry per form of the form table (vm/forms.h).
struct FormDriver {
  vm::Form form;
  void (*run)(ItemRunner& run, int64_t begin, int64_t end);
};
constexpr FormDriver kFormDrivers[] = {
    {vm::Form::Elementwise, run_elementwise},
    {vm::Form::RowReduce, run_row_runs},
    {vm::Form::ColReduce, run_col_tiles},
    {vm::Form::Contraction, run_declined},
};
static_assert(std::size(kFormDrivers) == vm::kNumForms, "a JIT driver per form");

std::unique_ptr<JitCodeImpl> compile_variant(const vm::VerifiedProgram& vp, Isa isa, std::string* reason,
                                             bool stream_stores, bool one_vector_rows = false) {
  std::string local;
  if (!reason) reason = &local;
  if (vp.program.form == vm::Form::Contraction) {
    *reason = "contraction kernels run on the interpreter's cube unit (no machine-code cube unit yet)";
    return nullptr;
  }
  if (vp.int64_lanes) {
    *reason = "the kernel computes in int64 lanes, which machine code has no registers for yet";
    return nullptr;
  }
  auto code = std::make_unique<JitCodeImpl>();
  if (!arg_patterns(vp.program, &code->patterns, reason)) return nullptr;
  thread_local IrBuilder ir;
  if (!target_caps(isa, &ir.caps, reason)) return nullptr;
  ir.stream_stores = stream_stores;
  const Tuning& tune = tuning();
  const vm::Form form = vp.program.form;
  // Elementwise: one copy of the body per main-loop iteration unless tuning
  // asks for more (docs/JIT.md: W1 with 4 interleaved copies was 1.3x slower
  // at 16M and no faster at 4K or 1M) or a long chain of dependent
  // instructions would leave the core waiting on each result. ColReduce: col_block(caps) column
  // vectors per row pass; a default block that would spill falls back to 4,
  // then 1.
  int copies = 1;
  // A long chain gains from the copies even where they spill loop
  // invariants (W7's 50 scalar parameters spill with one copy too).
  bool latency_bound = false;
  const bool interleave = tune.interleave != 0;
  if (form == vm::Form::Elementwise) {
    if (tune.unroll > 0) {
      copies = tune.unroll;
    } else if (chain_depth(vp.program) >= kLatencyBoundChain) {
      latency_bound = true;
      copies = 4;
    }
  } else if (form == vm::Form::ColReduce) {
    copies = tune.col_block > 0 ? std::min(tune.col_block, kMaxColBlock)
                                : col_block(ir.caps);
  }
  const bool forced = form == vm::Form::Elementwise ? tune.unroll > 0 : tune.col_block > 0;
  size_t bytes = 0;
  void* fn = nullptr;
  for (;;) {
    if (!lower(vp, &ir, reason, form == vm::Form::Elementwise ? copies : 1, interleave,
               form == vm::Form::ColReduce ? copies : 1, one_vector_rows))
      return nullptr;
    bool spilled = false;
    fn = generate(ir, isa, &bytes, reason, copies > 1 && !forced && !latency_bound, &spilled);
    if (fn || !spilled) break;
    copies = copies > 4 ? 4 : 1;
    reason->clear();
  }
  if (!fn) return nullptr;
  code->entry = reinterpret_cast<EntryFn>(fn);
  code->isa = isa;
  code->code_bytes = bytes;
  code->form = vp.program.form;
  code->scratch_rows = ir.scratch_rows;
  code->lanes = ir.caps.lanes;
  g_code_bytes[static_cast<int>(isa)].fetch_add(bytes, std::memory_order_relaxed);
  return code;
}

// Launches whose float32 outputs total at least this many bytes run the
// kernel's streaming variant: outputs that large do not stay in the caches
// anyway, and a streaming store skips the read of each line it writes, so a
// kernel reading k streams moves k + 1 instead of k + 2. Half the last-level
// cache (the kernel's inputs share it); -1 until first read.
std::atomic<int64_t> g_stream_min_bytes{-1};
std::atomic<int64_t> g_streaming_compiles{0};
std::atomic<int64_t> g_one_vector_compiles{0};
// run_items calls that left a launch's gather to the interpreter (can_run).
std::atomic<int64_t> g_gathers_declined{0};

// The largest cache level of cpu 0 as Linux describes it (sysfs), or 0.
// sysconf's figure is not used: under virtual machines it can be the
// whole host's L3 (384 MiB seen on a Zen 5 guest whose L3 is 32 MiB).
int64_t last_level_cache_bytes() {
  int best_level = 0;
  int64_t bytes = 0;
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::FILE* fl = std::fopen((dir + "level").c_str(), "r");
    if (!fl) break;
    int level = 0;
    const bool got_level = std::fscanf(fl, "%d", &level) == 1;
    std::fclose(fl);
    std::FILE* fs = std::fopen((dir + "size").c_str(), "r");
    if (!fs) continue;
    long long size = 0;
    char unit = 0;
    const int got = std::fscanf(fs, "%lld%c", &size, &unit);
    std::fclose(fs);
    if (!got_level || got < 1 || level < best_level) continue;
    best_level = level;
    bytes = size << (unit == 'K' ? 10 : unit == 'M' ? 20 : unit == 'G' ? 30 : 0);
  }
  return bytes;
}

int64_t stream_min_bytes() {
  int64_t v = g_stream_min_bytes.load(std::memory_order_relaxed);
  if (v >= 0) return v;
  const int64_t llc = last_level_cache_bytes();
  v = std::max<int64_t>(llc > 0 ? llc / 2 : int64_t{16} << 20, int64_t{1} << 20);
  g_stream_min_bytes.store(v, std::memory_order_relaxed);
  return v;
}

// Whether launch l runs the streaming variant: an Elementwise or RowReduce
// kernel whose contiguous outputs that can stream (stream_bytes_per_vector)
// total at least stream_min_bytes(), each aligned to its vector at every row
// (the variant's full-vector stores need it; chunks and row splits start at
// multiples of kTile elements).
bool wants_streaming(const JitCodeImpl& code, const vm::VerifiedProgram& vp, const vm::Launch& l) {
  if (code.form != vm::Form::Elementwise && code.form != vm::Form::RowReduce) return false;
  const int64_t elems = l.P() * l.R() * l.C(), min_bytes = stream_min_bytes();
  if (elems * 8 < min_bytes) return false;  // 8: the widest element
  const bool avx512 = code.isa == Isa::Avx512;
  const std::vector<Dtype>& types = vp.program.types;
  int64_t bytes = 0;
  for (size_t a = 0; a < std::min(l.args.size(), code.patterns.size()); ++a) {
    const vm::ArgBinding& b = l.args[a];
    if (!b.out || code.patterns[a] != kArgContiguous || a >= types.size()) continue;
    const int64_t align = stream_bytes_per_vector(types[a], avx512);
    if (align == 0) continue;
    const int64_t size = static_cast<int64_t>(dtype_size(types[a]));
    if (reinterpret_cast<uintptr_t>(b.out) % static_cast<uintptr_t>(align) != 0 ||
        (l.R() > 1 && b.stride[vm::kR] * size % align != 0) || (l.P() > 1 && b.stride[vm::kP] * size % align != 0))
      return false;
    bytes += elems * size;
  }
  return bytes > 0 && bytes >= min_bytes;
}

// The code launch l runs: code, its streaming variant, or (RowReduce rows of
// at most one vector) its one-vector-rows variant; each compiled on first use.
const JitCodeImpl& variant_for(const JitCodeImpl& code, const vm::VerifiedProgram& vp, const vm::Launch& l) {
  if (wants_streaming(code, vp, l)) {
    std::call_once(code.streaming_once, [&] {
      std::string reason;
      code.streaming = compile_variant(vp, code.isa, &reason, true);
      if (code.streaming) g_streaming_compiles.fetch_add(1, std::memory_order_relaxed);
    });
    return code.streaming ? *code.streaming : code;
  }
  if (code.form != vm::Form::RowReduce || l.C() > code.lanes) return code;
  std::call_once(code.one_vector_once, [&] {
    std::string reason;
    code.one_vector = compile_variant(vp, code.isa, &reason, false, true);
    if (code.one_vector) g_one_vector_compiles.fetch_add(1, std::memory_order_relaxed);
  });
  return code.one_vector ? *code.one_vector : code;
}

}  // namespace

std::unique_ptr<JitCode> compile(const vm::VerifiedProgram& vp, Isa isa, std::string* reason) {
  return compile_variant(vp, isa, reason, false);
}

std::unique_ptr<JitCode> compile_one_vector_rows(const vm::VerifiedProgram& vp, Isa isa, std::string* reason) {
  return compile_variant(vp, isa, reason, false, true);
}

// The element stride of an LDG argument's gather over `part` when its
// indices below `extent` walk memory linearly (one dim that does not wrap,
// or none: every index at offset 0); false otherwise.
bool gather_linear(const vm::ArgBinding& b, int part, int64_t extent, int64_t* stride) {
  if (b.ndims[part] == 0) {
    *stride = 0;
    return true;
  }
  if (b.ndims[part] > 1 || b.dim_size[part][0] < extent) return false;
  *stride = b.dim_stride[part][0];
  return true;
}

bool can_run(const JitCode& jc, const vm::Launch& l) {
  const JitCodeImpl& code = static_cast<const JitCodeImpl&>(jc);
  for (size_t a = 0; a < std::min(l.args.size(), code.patterns.size()); ++a) {
    if (code.patterns[a] != kArgGathered) continue;
    // Contiguous along C, and rows one stride apart (calls run runs of rows).
    int64_t cs = 0, rs = 0;
    if (!gather_linear(l.args[a], vm::kC, l.C(), &cs) || (cs != 1 && l.C() > 1) ||
        !gather_linear(l.args[a], vm::kR, l.R(), &rs))
      return false;
  }
  return true;
}

bool run_items(const JitCode& jc, const vm::VerifiedProgram& vp, const vm::Launch& l,
               int64_t begin, int64_t end) {
  if (!can_run(jc, l)) {
    g_gathers_declined.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  const JitCodeImpl& code = variant_for(static_cast<const JitCodeImpl&>(jc), vp, l);
  const size_t nargs = std::min(l.args.size(), code.patterns.size());
  JitArgs args;
  args.n = 0;
  for (size_t a = 0; a < nargs; ++a) {
    args.cs[a] = l.args[a].stride[vm::kC];
    args.rs[a] = l.args[a].stride[vm::kR];
    if (code.patterns[a] == kArgGathered) gather_linear(l.args[a], vm::kR, l.R(), &args.rs[a]);  // can_run: linear
  }
  args.rows = 1;
  args.scratch = nullptr;
  args.scalars = l.scalars.data();
  thread_local std::vector<float> scratch;
  if (code.scratch_rows > 0) {
    // Rows of C rounded up to whole vectors of the widest ISA (the code's tails load and store them whole).
    const size_t need = static_cast<size_t>(code.scratch_rows) * static_cast<size_t>((std::max<int64_t>(l.C(), 1) + 15) / 16 * 16);
    if (scratch.size() < need) scratch.resize(need);
    args.scratch = scratch.data();
  }
  ItemRunner run{code, l, vp.program.types, nargs, args};
  kFormDrivers[static_cast<int>(vp.program.form)].run(run, begin, end);
  return true;
}

size_t code_bytes_in_use(Isa isa) { return g_code_bytes[static_cast<int>(isa)].load(std::memory_order_relaxed); }

size_t code_bytes_in_use() {
  size_t n = 0;
  for (const auto& b : g_code_bytes) n += b.load(std::memory_order_relaxed);
  return n;
}

void set_log(bool on) { set_target_log(on); }
void set_bf16_instructions(bool on) { set_target_bf16(on); }
void set_stream_min_bytes(int64_t bytes) { g_stream_min_bytes.store(bytes < 0 ? -1 : bytes, std::memory_order_relaxed); }
int64_t stream_min_bytes_for_tests() { return stream_min_bytes(); }
int64_t streaming_variants_compiled() { return g_streaming_compiles.load(std::memory_order_relaxed); }
int64_t one_vector_row_variants_compiled() { return g_one_vector_compiles.load(std::memory_order_relaxed); }
int64_t row_block_launches() { return g_row_block_launches.load(std::memory_order_relaxed); }
int64_t periodic_row_launches() { return g_periodic_row_launches.load(std::memory_order_relaxed); }
int64_t gather_runs_declined() { return g_gathers_declined.load(std::memory_order_relaxed); }

}  // namespace dvm::backends::jit
