// The settings calls of include/dvm/runtime.h: each applies the environment
// first, validates through the settings table and sets the layer that owns
// the setting.
#include <chrono>
#include <string>

#include "backends/isa.h"
#include "backends/perf_map.h"
#include "dvm/error.h"
#include "dvm/runtime.h"
#include "runtime/environment.h"
#include "runtime/settings.h"
#include "tracer/row_copies.h"
#include "tracer/trace.h"
#include "vm/kernel_cache.h"
#include "vm/log.h"
#include "vm/parallel.h"
#include "vm/tiering.h"

namespace dvm {
using runtime::apply_environment;
using runtime::Setting;

void set_trace_limit(int64_t nodes) {
  apply_environment();
  detail::Trace::current().limit = runtime::check_api_value(Setting::TraceLimit, nodes);
}
int64_t trace_limit() {
  apply_environment();
  return detail::Trace::current().limit;
}
void flush() {
  apply_environment();
  // No trace: nothing recorded on this thread (or its trace is gone at
  // thread exit, with nothing left to compute).
  if (detail::t_trace) detail::t_trace->flush();
}

std::string isa() {
  apply_environment();
  return backends::isa_name(backends::active_isa());
}
void set_isa(const std::string& name) {
  apply_environment();
  backends::set_isa(static_cast<backends::Isa>(runtime::check_api_text(Setting::Isa, name)));
}

void set_num_threads(int n) {
  apply_environment();
  vm::set_num_threads(static_cast<int>(runtime::check_api_value(Setting::NumThreads, n)));
}
int num_threads() {
  apply_environment();
  return vm::num_threads();
}
void set_kernel_cache_capacity(int64_t kernels) {
  apply_environment();
  vm::KernelCache::global().set_capacity(runtime::check_api_value(Setting::KernelCache, kernels));
}
int64_t kernel_cache_capacity() {
  apply_environment();
  return vm::KernelCache::global().capacity();
}
void set_parallel_for(ParallelForFn fn, void* host, int workers) {
  apply_environment();
  if (fn && workers < 1)
    throw Error("set_parallel_for: workers must be at least 1, got " + std::to_string(workers));
  vm::set_host_parallel_for(fn, host, workers);
}

void set_tier_mode(TierMode mode) {
  apply_environment();
  vm::set_tier_mode(static_cast<TierMode>(runtime::check_api_value(Setting::Tier, static_cast<int64_t>(mode))));
}
TierMode tier_mode() {
  apply_environment();
  return vm::tier_mode();
}
void set_jit_threshold(int64_t calls) {
  apply_environment();
  vm::set_jit_threshold(runtime::check_api_value(Setting::JitThreshold, calls));
}
int64_t jit_threshold() {
  apply_environment();
  return vm::jit_threshold();
}
void wait_for_jit() {
  apply_environment();
  vm::wait_for_compiles();
}
bool wait_for_jit(double timeout_ms) {
  apply_environment();
  if (!(timeout_ms >= 0)) throw Error("wait_for_jit: expected a timeout >= 0 ms, got " + std::to_string(timeout_ms));
  const double ns = timeout_ms * 1e6;
  return vm::wait_for_compiles(ns < 9.2e18 ? static_cast<int64_t>(ns) : INT64_MAX);
}

void set_compile_executor(CompileExecutorFn fn, void* host) {
  apply_environment();
  vm::set_compile_executor(fn, host);
}

// The callback first: the environment's warnings, if this is the first
// call into dvm, then reach it.
void set_log_callback(LogFn fn, void* ctx) {
  vm::log::set_callback(fn, ctx);
  apply_environment();
}

void set_perf_map(bool on) {
  apply_environment();
  backends::set_perf_map(on);
}
bool perf_map() {
  apply_environment();
  return backends::perf_map();
}

void set_weight_copies(bool on) {
  apply_environment();
  detail::set_row_copies(on);
}
bool weight_copies() {
  apply_environment();
  return detail::row_copies_on();
}

WarmUpReport warm_up(const std::function<void()>& frame) {
  apply_environment();
  if (!frame) throw Error("warm_up: expected a function to run, got an empty std::function");
  const auto t0 = std::chrono::steady_clock::now();
  vm::WarmUpScope scope;
  frame();
  detail::Trace::current().flush();  // what the frame recorded and did not read
  vm::wait_for_compiles();           // compiles started in the background before the call
  const vm::WarmUpCounts c = scope.counts();
  WarmUpReport r;
  r.kernels = c.kernels;
  r.compiled = c.compiled;
  r.declined = c.declined;
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

void precompile() {
  apply_environment();
  vm::WarmUpScope scope;
  detail::Trace::current().flush();
}

}  // namespace dvm
