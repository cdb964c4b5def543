// Launcher: launch checks and execution.
#include "vm/launcher.h"

#include <new>
#include <type_traits>
#include <algorithm>
#include <string>
#include <vector>

#include "backends/cube/gemm.h"
#include "backends/microkernels.h"
#include "dvm/error.h"
#include "vm/forms.h"
#include "vm/interpreter.h"
#include "vm/parallel.h"
#include "vm/split_launch.h"
#include "vm/ticks.h"
#include "vm/tiering.h"

namespace dvm::vm {
namespace {

[[noreturn]] void bad(const Kernel& k, const std::string& msg) {
  char h[24];
  std::snprintf(h, sizeof h, "%016llx", static_cast<unsigned long long>(k.hash()));
  throw Error("launch of kernel " + std::string(h) + ": " + msg);
}

// The product and the operand loads step along K: with K = 0 they read nothing.
bool reads_k(Op op) { return op == Op::MMA || op == Op::LDOA || op == Op::LDOB; }

}  // namespace

void check_launch(const Kernel& k, const Launch& l) {
  const Program& p = k.program();
  if (l.args.size() != p.roles.size())
    bad(k, "kernel takes " + std::to_string(p.roles.size()) + " arguments, launch binds " +
               std::to_string(l.args.size()));
  if (l.scalars.size() != static_cast<size_t>(p.nscalars))
    bad(k, "kernel takes " + std::to_string(p.nscalars) + " scalar parameters, launch binds " +
               std::to_string(l.scalars.size()));
  const int parts = form_row(p.form).parts;
  for (int part = 0; part < kMaxParts; ++part) {
    const int64_t e = l.extent[part];
    if (e < 0 || (part >= parts && e != 1)) {
      std::string ext;
      for (int q = 0; q < kMaxParts; ++q) ext += (q ? ", " : "") + std::to_string(l.extent[q]);
      bad(k, "extents [" + ext + "]: " + form_name(p.form) + " kernels use " + std::to_string(parts) +
                 " parts, each >= 0, and the others must be 1");
    }
  }
  // An argument needs a pointer when some instruction will touch it: a
  // load or store of C elements needs C > 0; a ColReduce prologue runs only
  // when R > 0.
  char touched[kMaxArgs] = {};
  if (work_items(k, l) > 0)
    for (const Kernel::ArgUse& u : k.arg_uses()) {
      const bool per_row = u.op == Op::LDB || u.op == Op::STB;
      if ((per_row || l.C() > 0) && (!u.prologue || l.R() > 0) && (!reads_k(u.op) || l.K() > 0))
        touched[u.arg] = 1;
    }
  for (size_t a = 0; a < l.args.size(); ++a) {
    const ArgBinding& b = l.args[a];
    const bool is_out = p.roles[a] == ArgRole::Output;
    if (touched[a] && (is_out ? b.out == nullptr : b.in == nullptr))
      bad(k, "argument " + std::to_string(a) + " (" + (is_out ? "output" : "input") +
                 ") has no pointer");
    // Only arguments the launch touches can alias: an untouched one (an
    // empty view's pointer past its buffer, say) may equal any address.
    if (is_out && touched[a])
      for (size_t o = 0; o < l.args.size(); ++o)
        if (p.roles[o] == ArgRole::Input && touched[o] && l.args[o].in == b.out && b.out)
          bad(k, "output argument " + std::to_string(a) + " is also input argument " +
                     std::to_string(o) + "; outputs must be separate buffers");
  }
  for (const Kernel::ArgUse& u : k.arg_uses()) {
    const ArgBinding& b = l.args[u.arg];
    if ((u.op == Op::LD || u.op == Op::ST) && l.C() > 1 && b.stride[kC] != 1)
      bad(k, std::string(op_name(u.op)) + " of argument " + std::to_string(u.arg) +
                 " needs a unit stride along C, launch gives " + std::to_string(b.stride[kC]));
    if (u.op == Op::LDG && touched[u.arg]) {
      for (int part = 0; part < parts; ++part) {
        if (b.ndims[part] > kMaxRank) bad(k, "ldg argument has too many dims");
        for (int d = 0; d < b.ndims[part]; ++d)
          if (b.dim_size[part][d] <= 0) bad(k, "ldg argument has a non-positive dim size");
      }
    }
  }
}

void launch_stack(const std::vector<StackEntry>& entries) {
  for (const StackEntry& s : entries) check_launch(*s.kernel, *s.launch);
  for (const StackEntry& s : entries) s.kernel->note_shape(s.launch->extent);
  const backends::MicroKernels& mk = backends::active_microkernels();
  size_t begin = 0;
  while (begin < entries.size()) {
    size_t end = begin + 1;
    while (end < entries.size() && entries[end].stage == entries[begin].stage) ++end;
    // One stage: every entry's items in one index space.
    const size_t n = end - begin;
    // Stages of up to kInlineEntries kernels keep their index on the stack
    // (no malloc per launch); larger ones on the heap.
    constexpr size_t kInlineEntries = 32;
    int64_t first_buf[kInlineEntries + 1];
    // Raw storage: an array of Tier would zero its kInlineEntries members
    // (default member initializers) on every launch.
    alignas(Tier) unsigned char tier_buf[sizeof(Tier) * kInlineEntries];
    static_assert(std::is_trivially_copyable_v<Tier> && std::is_trivially_destructible_v<Tier>);
    std::vector<int64_t> first_heap;
    std::vector<Tier> tier_heap;
    int64_t* first = first_buf;
    Tier* tier = reinterpret_cast<Tier*>(tier_buf);
    if (n > kInlineEntries) {
      first_heap.resize(n + 1);
      tier_heap.resize(n);
      first = first_heap.data();
      tier = tier_heap.data();
    }
    first[0] = 0;
    int64_t elems = 0;
    for (size_t i = 0; i < n; ++i) {
      const StackEntry& s = entries[begin + i];
      // A split-row launch runs its own phases (interpret_split_rows below).
      const int64_t items = splits_rows(*s.kernel, *s.launch) ? 0 : work_items(*s.kernel, *s.launch);
      first[i + 1] = first[i] + items;
      elems += items * item_elements(*s.kernel, *s.launch);
      new (&tier[i]) Tier(select_tier(*s.kernel, s.kernel->calls.load(std::memory_order_relaxed), mk.isa));
    }
    const int64_t total = first[n];
    const int64_t t0 = now_ticks();
    for (size_t i = 0; i < n; ++i)
      if (splits_rows(*entries[begin + i].kernel, *entries[begin + i].launch))
        run_split(*entries[begin + i].kernel, *entries[begin + i].launch, mk);
    parallel_items(total, total ? elems / total : 1, [&](int64_t b, int64_t e) {
      size_t i = static_cast<size_t>(std::upper_bound(first, first + n + 1, b) - first) - 1;
      for (; b < e; ++i) {
        const int64_t stop = std::min(e, first[i + 1]);
        const StackEntry& s = entries[begin + i];
        tier[i].run_items(*s.kernel, *s.launch, b - first[i], stop - first[i]);
        b = stop;
      }
    });
    const int64_t ticks = now_ticks() - t0;
    for (size_t i = 0; i < n; ++i) entries[begin + i].kernel->calls_add(ticks / static_cast<int64_t>(n));
    begin = end;
  }
}

bool launch(const Kernel& k, const Launch& l) {
  check_launch(k, l);
  k.note_shape(l.extent);
  const int64_t items = work_items(k, l);
  const int64_t t0 = now_ticks();
  const backends::MicroKernels& mk = backends::active_microkernels();
  const Tier tier = select_tier(k, k.calls.load(std::memory_order_relaxed), mk.isa);
  bool on_jit = tier.machine_code();
  if (splits_rows(k, l)) {
    on_jit = run_split(k, l, mk);  // the chunked order, on the fold kernel where it has one
  } else {
    parallel_items(items, item_elements(k, l), [&](int64_t b, int64_t e) { tier.run_items(k, l, b, e); });
  }
  k.calls_add(now_ticks() - t0);
  return on_jit;
}

void copy_by_rows(const float* src, int64_t cs, int64_t K, int64_t N, float* dst, int64_t ld) {
  backends::cube::transpose_to_rows(backends::active_microkernels().isa, src, cs, K, N, dst, ld);
}

bool one_row_reads_columns() { return backends::cube::one_row_reads_columns(backends::active_microkernels().isa); }

}  // namespace dvm::vm
