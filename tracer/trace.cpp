// Trace: recording and flushing, and the runtime settings behind
// include/dvm/runtime.h.
#include "tracer/trace.h"

#include <cstdlib>
#include <string>

#include "backends/isa.h"
#include "dvm/error.h"
#include "dvm/runtime.h"
#include "fuser/executor.h"
#include "vm/kernel_cache.h"
#include "vm/parallel.h"
#include "vm/tiering.h"

namespace dvm::detail {

Counters& counters() {
  static Counters c;
  return c;
}

namespace {
int64_t default_limit() {
  static const int64_t v = [] {
    const char* e = std::getenv("DVM_TRACE_LIMIT");
    long long n = e ? std::atoll(e) : 0;
    return n > 0 ? static_cast<int64_t>(n) : int64_t{4096};
  }();
  return v;
}
}  // namespace

Trace::Trace() : limit(default_limit()) { node_pool_init(); }

Trace::~Trace() {
  // Thread exit: nothing can observe the pending nodes any more.
  for (Node* n : nodes_) {
    n->pending = false;
    n->release();
  }
}

Trace& Trace::current() {
  thread_local Trace t;
  return t;
}

void Trace::record(Node* n) {
  n->pending = true;
  n->retain();  // the trace's reference
  nodes_.push_back(n);
  if (static_cast<int64_t>(nodes_.size()) >= limit && !flushing_) flush();
}

std::vector<Node*> mark_needed(const std::vector<Node*>& nodes) {
  std::vector<Node*> needed;
  mark_needed(nodes, &needed);
  return needed;
}

void mark_needed(const std::vector<Node*>& nodes, std::vector<Node*>* needed) {
  // Record order is topological, so one backward sweep from what live
  // Tensors hold marks everything they can reach.
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    Node* n = *it;
    if (n->user_refs > 0) n->needed = true;
    if (!n->needed) continue;
    for (int i = 0; i < n->nin; ++i)
      if (n->in[i]->pending) n->in[i]->needed = true;
  }
  needed->clear();
  for (Node* n : nodes)
    if (n->needed) needed->push_back(n);
}

void Trace::flush() {
  if (flushing_ || nodes_.empty()) return;
  flushing_ = true;
  // Swap in the spare list so both keep their capacity from flush to flush.
  std::vector<Node*>& nodes = spare_;
  nodes.swap(nodes_);
  counters().nodes_recorded.fetch_add(static_cast<int64_t>(nodes.size()), std::memory_order_relaxed);
  std::vector<Node*>& needed = needed_;
  mark_needed(nodes, &needed);
  try {
    int64_t computed = needed.empty() ? 0 : fuser::execute(needed);
    counters().nodes_computed.fetch_add(computed, std::memory_order_relaxed);
  } catch (...) {
    for (Node* n : nodes) {
      n->pending = false;
      n->needed = false;
      n->release();
    }
    nodes.clear();
    flushing_ = false;
    throw;
  }
  counters().flushes.fetch_add(1, std::memory_order_relaxed);
  for (Node* n : nodes) {
    n->pending = false;
    n->needed = false;
    if (n->storage && n->kind != NodeKind::Leaf) n->drop_inputs();
  }
  for (Node* n : nodes) n->release();
  nodes.clear();
  flushing_ = false;
}

void materialize(Node* n) {
  if (n->pending) Trace::current().flush();
  if (n->storage) return;
  if (n->kind == NodeKind::Const) {
    n->storage = Storage::allocate(n->shape.numel());
    for (int64_t i = 0; i < n->shape.numel(); ++i) n->storage->data[i] = n->value;
    n->offset = 0;
    contiguous_strides(n->shape, n->strides);
    return;
  }
  if (n->pending)
    throw Error("tensor is pending on another thread's trace; observe it on the thread that recorded it");
  throw Error("tensor has no value: the flush that should have computed it failed");
}

}  // namespace dvm::detail

namespace dvm {

void set_trace_limit(int64_t nodes) {
  if (nodes < 1) throw Error("set_trace_limit: limit must be at least 1, got " + std::to_string(nodes));
  detail::Trace::current().limit = nodes;
}
int64_t trace_limit() { return detail::Trace::current().limit; }
void flush() { detail::Trace::current().flush(); }

std::string isa() { return backends::isa_name(backends::active_isa()); }
void set_isa(const std::string& name) {
  backends::Isa i;
  if (!backends::parse_isa(name, &i))
    throw Error("set_isa: unknown ISA '" + name + "' (expected portable, avx2 or avx512)");
  backends::set_isa(i);
}

void set_num_threads(int n) {
  if (n < 0) throw Error("set_num_threads: expected n >= 0, got " + std::to_string(n));
  vm::set_num_threads(n);
}
int num_threads() { return vm::num_threads(); }

void set_tier_mode(TierMode mode) { vm::set_tier_mode(mode); }
TierMode tier_mode() { return vm::tier_mode(); }
void set_jit_threshold(int64_t calls) {
  if (calls < 1) throw Error("set_jit_threshold: expected calls >= 1, got " + std::to_string(calls));
  vm::set_jit_threshold(calls);
}
int64_t jit_threshold() { return vm::jit_threshold(); }
void wait_for_jit() { vm::wait_for_compiles(); }

std::vector<KernelStats> kernel_stats() {
  std::vector<KernelStats> out;
  const backends::Isa isa = backends::active_isa();
  for (const auto& k : vm::KernelCache::global().snapshot()) {
    KernelStats s;
    s.hash = k->hash();
    s.form = vm::form_name(k->form());
    s.tier = "interp";
    s.calls = k->calls.load();
    s.total_ns = k->total_ns.load();
    if (const vm::BackendRef machine = vm::machine_code_for(isa)) {
      const vm::BackendSlot& slot = k->slot(machine.slot);
      const uint8_t state = slot.state.load(std::memory_order_acquire);
      if (state == vm::BackendSlot::Ready) s.tier = "jit";
      if (state == vm::BackendSlot::Ready || state == vm::BackendSlot::Failed) s.compile_ns = slot.compile_ns;
      if (state == vm::BackendSlot::Failed) s.jit_failure = slot.failure;
    }
    out.push_back(std::move(s));
  }
  return out;
}

Stats stats() {
  auto& c = detail::counters();
  Stats s;
  s.flushes = c.flushes.load();
  // Flushed nodes of every thread, plus what this thread has pending.
  s.nodes_recorded = c.nodes_recorded.load() + static_cast<int64_t>(detail::Trace::current().pending());
  s.nodes_computed = c.nodes_computed.load();
  s.kernels_launched = fuser::exec_stats().kernels_launched;
  s.kernels_run = fuser::exec_stats().kernels_run;
  s.kernels_compiled = vm::KernelCache::global().misses() - c.misses_base.load();
  s.cache_hits = vm::KernelCache::global().hits() - c.hits_base.load();
  s.jit_compiles = vm::tier_stats().compiles.load() - c.jit_base.load();
  s.jit_failures = vm::tier_stats().failures.load() - c.jit_fail_base.load();
  s.jit_code_bytes = static_cast<int64_t>(vm::code_bytes_in_use());
  s.new_shapes = vm::new_shape_count().load() - c.shapes_base.load();
  if (s.new_shapes > 0)
    s.compiles_per_new_shape = static_cast<double>(s.kernels_compiled + s.jit_compiles) / static_cast<double>(s.new_shapes);
  return s;
}

void reset_stats() {
  auto& c = detail::counters();
  c.flushes = 0;
  c.nodes_recorded = -static_cast<int64_t>(detail::Trace::current().pending());
  c.nodes_computed = 0;
  fuser::exec_stats().kernels_launched = 0;
  fuser::exec_stats().kernels_run = 0;
  c.misses_base = vm::KernelCache::global().misses();
  c.hits_base = vm::KernelCache::global().hits();
  c.jit_base = vm::tier_stats().compiles.load();
  c.jit_fail_base = vm::tier_stats().failures.load();
  c.shapes_base = vm::new_shape_count().load();
}

}  // namespace dvm
