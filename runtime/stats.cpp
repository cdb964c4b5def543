// The statistics calls of include/dvm/runtime.h: counters gathered from the
// tracer, the fuser, the vm and the JIT, and per-kernel figures.
#include "backends/isa.h"
#include "dvm/runtime.h"
#include "fuser/executor.h"
#include "runtime/environment.h"
#include "tracer/trace.h"
#include "vm/backend.h"
#include "vm/kernel_cache.h"
#include "vm/tiering.h"

namespace dvm {
namespace {

// The lower layers' cumulative counters at the last reset_stats().
struct Bases {
  std::atomic<int64_t> misses{0}, hits{0}, jit{0}, jit_fail{0}, shapes{0};
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
  s.total_ns = k.total_ns.load();
  if (const vm::BackendRef machine = vm::machine_code_for(isa)) {
    const vm::BackendSlot& slot = k.slot(machine.slot);
    const uint8_t state = slot.state.load(std::memory_order_acquire);
    if (state == vm::BackendSlot::Ready) s.tier = "jit";
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
  auto& c = detail::counters();
  Bases& b = bases();
  Stats s;
  s.flushes = c.flushes.load();
  // Flushed nodes of every thread, plus what this thread has pending.
  s.nodes_recorded = c.nodes_recorded.load() + static_cast<int64_t>(detail::Trace::current().pending());
  s.nodes_computed = c.nodes_computed.load();
  s.kernels_launched = fuser::exec_stats().kernels_launched.load(std::memory_order_relaxed);
  s.kernels_run = fuser::exec_stats().kernels_run.load(std::memory_order_relaxed);
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
  auto& c = detail::counters();
  Bases& b = bases();
  c.flushes = 0;
  c.nodes_recorded = -static_cast<int64_t>(detail::Trace::current().pending());
  c.nodes_computed = 0;
  fuser::exec_stats().kernels_launched.store(0, std::memory_order_relaxed);
  fuser::exec_stats().kernels_run.store(0, std::memory_order_relaxed);
  b.misses = vm::KernelCache::global().misses();
  b.hits = vm::KernelCache::global().hits();
  b.jit = vm::tier_stats().compiles.load();
  b.jit_fail = vm::tier_stats().failures.load();
  b.shapes = vm::new_shape_count().load();
}

}  // namespace dvm
