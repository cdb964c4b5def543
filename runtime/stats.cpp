// The statistics calls of include/dvm/runtime.h: counters gathered from the
// tracer, the fuser, the vm and the JIT, and per-kernel figures.
#include "backends/isa.h"
#include "dvm/runtime.h"
#include "fuser/executor.h"
#include "runtime/environment.h"
#include "tracer/thread_counters.h"
#include "tracer/trace.h"
#include "vm/backend.h"
#include "vm/kernel_cache.h"
#include "vm/tiering.h"
#include "vm/ticks.h"

namespace dvm {
namespace {

// The lower layers' cumulative counters at the last reset_stats().
struct Bases {
  std::atomic<int64_t> misses{0}, hits{0}, jit{0}, jit_fail{0}, shapes{0};
  std::atomic<int64_t> counts[static_cast<int>(detail::Count::kCount)] = {};
};
Bases& bases() {
  static Bases b;
  return b;
}

// One kernel's figures, its tier and compile for the active ISA's machine-code
// backend.
KernelStats kernel_figures(const vm::Kernel& k, backends::Isa isa) {
  KernelStats s;
  s.hash = k.hash();
  s.form = vm::form_name(k.form());
  s.tier = "interp";
  s.calls = k.calls.load();
  s.total_ns = vm::ticks_to_ns(k.total_ticks.load());
  if (const vm::BackendRef machine = vm::machine_code_for(isa)) {
    const vm::BackendSlot& slot = k.slot(machine.slot);
    const uint8_t state = slot.state.load(std::memory_order_acquire);
    // Machine code serves launches unless the tier mode is Off (then the
    // code is kept, and serves again once the mode allows it).
    if (state == vm::BackendSlot::Ready && vm::tier_mode() != TierMode::Off) s.tier = "jit";
    if (state == vm::BackendSlot::Ready || state == vm::BackendSlot::Failed) s.compile_ns = slot.compile_ns;
    if (state == vm::BackendSlot::Failed) s.jit_failure = slot.failure;
  }
  return s;
}

}  // namespace

std::vector<KernelStats> kernel_stats() {
  runtime::apply_environment();
  std::vector<KernelStats> out;
  const backends::Isa isa = backends::active_isa();
  for (const auto& k : vm::KernelCache::global().snapshot()) out.push_back(kernel_figures(*k, isa));
  return out;
}

Stats stats() {
  runtime::apply_environment();
  Bases& b = bases();
  auto counted = [&b](detail::Count c) {
    return detail::counted(c) - b.counts[static_cast<int>(c)].load(std::memory_order_relaxed);
  };
  Stats s;
  s.flushes = counted(detail::Count::Flushes);
  // Flushed nodes of every thread, plus what this thread has pending.
  s.nodes_recorded =
      counted(detail::Count::NodesRecorded) + static_cast<int64_t>(detail::t_trace ? detail::t_trace->pending() : 0);
  s.nodes_computed = counted(detail::Count::NodesComputed);
  s.kernels_launched = counted(detail::Count::KernelsLaunched);
  s.kernels_run = counted(detail::Count::KernelsRun);
  s.kernels_compiled = vm::KernelCache::global().misses() - b.misses.load();
  s.cache_hits = vm::KernelCache::global().hits() - b.hits.load();
  s.jit_compiles = vm::tier_stats().compiles.load() - b.jit.load();
  s.jit_failures = vm::tier_stats().failures.load() - b.jit_fail.load();
  s.jit_code_bytes = static_cast<int64_t>(vm::code_bytes_in_use());
  s.new_shapes = vm::new_shape_count().load() - b.shapes.load();
  if (s.new_shapes > 0)
    s.compiles_per_new_shape = static_cast<double>(s.kernels_compiled + s.jit_compiles) / static_cast<double>(s.new_shapes);
  return s;
}

void reset_stats() {
  runtime::apply_environment();
  Bases& b = bases();
  for (int i = 0; i < static_cast<int>(detail::Count::kCount); ++i)
    b.counts[i].store(detail::counted(static_cast<detail::Count>(i)), std::memory_order_relaxed);
  // This thread's pending nodes were recorded before the reset.
  b.counts[static_cast<int>(detail::Count::NodesRecorded)].fetch_add(
      static_cast<int64_t>(detail::t_trace ? detail::t_trace->pending() : 0), std::memory_order_relaxed);
  b.misses = vm::KernelCache::global().misses();
  b.hits = vm::KernelCache::global().hits();
  b.jit = vm::tier_stats().compiles.load();
  b.jit_fail = vm::tier_stats().failures.load();
  b.shapes = vm::new_shape_count().load();
}

}  // namespace dvm
