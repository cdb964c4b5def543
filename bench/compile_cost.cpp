// Compile-cost figures per kernel of W1..W6 (shared/bench/WORKLOADS.md):
//   fuser/miss/<W>      partition() of the workload's recorded nodes (ns_per_op)
//   fuser/hit/<W>       what a plan-cache hit costs instead: the structural
//                       signature of the nodes and the lookup (ns_per_op)
//   compile/encode/<W>  lower() of its kernel's group: a fresh Lowered and
//                       fresh bytecode every iteration
//   compile/verify/<W>  vm::verify() of that bytecode
//   compile/jit/<W>     backends::jit::compile() of the verified program for
//                       the active ISA: a fresh kernel every iteration, its
//                       machine code freed again inside the timing (no cache)
//   compile/jit/demo_block  the same for the demo's MLP block (gelu, layer_norm,
//                       softmax: one row kernel of about 20 ops)
// The nodes come from recording the workload with the public API and taking
// the trace's pending nodes, marked as Trace::flush marks them; the timed
// loop runs the pass directly and the trace is flushed (computed) at the end,
// and that result is checked against the fused loop.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/common.h"
#include "backends/isa.h"
#include "backends/jit/jit.h"
#include "fuser/lower.h"
#include "fuser/partition.h"
#include "fuser/plan_cache.h"
#include "tracer/trace.h"
#include "vm/verifier.h"

namespace bench {
namespace {

using dvm::detail::Node;

// Sizes never enter the fuser's decisions or the bytecode; 64 rows of 1024.
constexpr int64_t kCompileElems = 64 * kRowWidth;

struct Recorded {
  dvm::Tensor y;              // keeps the result observable, as a user's handle does
  std::vector<Node*> needed;  // what Trace::flush would hand to the fuser
};

Recorded record_nodes(W w) {
  dvm::flush();
  Recorded r;
  r.y = w_record(w, kCompileElems);
  // What a flush would compute (Trace::flush's own marking).
  r.needed = dvm::detail::mark_needed(dvm::detail::Trace::current().pending_nodes());
  return r;
}

// Computes the recorded workload (the flush) and checks it once per name.
void finish(Recorded& r, W w, const std::string& name) {
  const float* got = r.y.data();
  if (!first_time(name)) return;
  const int64_t out = w_out_elems(w, kCompileElems);
  std::vector<float> ref(static_cast<size_t>(out));
  w_fused(w, kCompileElems, ref.data());
  check_close(name, got, ref.data(), out);
}

// The group a workload's kernel is: the first in execution order (the only
// one when the workload fuses into one kernel, which the `groups` counter
// shows; later groups read earlier groups' outputs, which are not computed
// here).
const dvm::fuser::Group& kernel_group(const dvm::fuser::Plan& plan) {
  if (plan.order.empty()) {
    std::fprintf(stderr, "bench_dvm: the fuser made no group\n");
    std::abort();
  }
  return plan.groups[static_cast<size_t>(plan.order.front())];
}

void BM_fuser_miss(benchmark::State& state, W w, const std::string& name) {
  apply_system(kDvm, 1);
  Recorded r = record_nodes(w);
  size_t groups = 0;
  for (auto _ : state) {
    dvm::fuser::Plan plan = dvm::fuser::partition(r.needed);
    groups = plan.order.size();
    benchmark::DoNotOptimize(plan.groups.data());
  }
  finish(r, w, name);
  set_ns_per_item_counter(state, "ns_per_op", static_cast<double>(r.needed.size()));
  state.counters["ops"] = static_cast<double>(r.needed.size());
  state.counters["groups"] = static_cast<double>(groups);
}

void BM_fuser_hit(benchmark::State& state, W w, const std::string& name) {
  apply_system(kDvm, 1);
  {
    // One flush of this structure puts its plan in the cache.
    Recorded first = record_nodes(w);
    finish(first, w, name);
  }
  Recorded r = record_nodes(w);
  dvm::fuser::Signature sig;
  dvm::fuser::make_signature(r.needed, &sig);
  if (!dvm::fuser::PlanCache::current().find(sig)) {
    std::fprintf(stderr, "bench_dvm: %s: the plan cache missed a structure it has seen\n", name.c_str());
    std::abort();
  }
  for (auto _ : state) {
    // A fresh signature each time, as a flush builds one (the executor keeps
    // its buffer's capacity, so does this).
    dvm::fuser::make_signature(r.needed, &sig);
    const dvm::fuser::CachedPlan* plan = dvm::fuser::PlanCache::current().find(sig);
    benchmark::DoNotOptimize(plan);
  }
  finish(r, w, name);
  set_ns_per_item_counter(state, "ns_per_op", static_cast<double>(r.needed.size()));
  state.counters["ops"] = static_cast<double>(r.needed.size());
}

void BM_encode(benchmark::State& state, W w, const std::string& name) {
  apply_system(kDvm, 1);
  Recorded r = record_nodes(w);
  const dvm::fuser::Plan plan = dvm::fuser::partition(r.needed);
  const dvm::fuser::Group& g = kernel_group(plan);
  size_t bytes = 0;
  for (auto _ : state) {
    dvm::fuser::Lowered low = dvm::fuser::lower(g, plan.placement);
    bytes = low.bytecode.bytes.size();
    benchmark::DoNotOptimize(low.bytecode.bytes.data());
  }
  finish(r, w, name);
  state.counters["ops"] = static_cast<double>(g.members.size());
  state.counters["groups"] = static_cast<double>(plan.order.size());
  state.counters["bytecode_bytes"] = static_cast<double>(bytes);
}

// The verified program of a workload's kernel; aborts if it does not verify.
dvm::vm::VerifiedProgram verified_kernel(const dvm::fuser::Lowered& low, const std::string& name) {
  dvm::vm::VerifiedProgram vp;
  std::string err;
  if (!dvm::vm::verify(low.bytecode, &vp, &err)) {
    std::fprintf(stderr, "bench_dvm: %s: the encoder's bytecode does not verify: %s\n", name.c_str(),
                 err.c_str());
    std::abort();
  }
  return vp;
}

void BM_verify(benchmark::State& state, W w, const std::string& name) {
  apply_system(kDvm, 1);
  Recorded r = record_nodes(w);
  const dvm::fuser::Plan plan = dvm::fuser::partition(r.needed);
  const dvm::fuser::Group& g = kernel_group(plan);
  const dvm::fuser::Lowered low = dvm::fuser::lower(g, plan.placement);
  const size_t instructions = verified_kernel(low, name).program.code.size();
  for (auto _ : state) {
    dvm::vm::VerifiedProgram vp;
    std::string err;
    const bool ok = dvm::vm::verify(low.bytecode, &vp, &err);
    benchmark::DoNotOptimize(ok);
    benchmark::DoNotOptimize(vp.info.data());
  }
  finish(r, w, name);
  state.counters["instructions"] = static_cast<double>(instructions);
  state.counters["bytecode_bytes"] = static_cast<double>(low.bytecode.bytes.size());
}

// compile/jit of the first kernel of r's nodes; `finish` computes and checks
// the recorded program afterwards.
void time_jit(benchmark::State& state, Recorded& r, const std::function<void()>& finish, const std::string& name) {
  const dvm::backends::Isa isa = dvm::backends::active_isa();
  const dvm::fuser::Plan plan = dvm::fuser::partition(r.needed);
  const dvm::fuser::Group& g = kernel_group(plan);
  const dvm::fuser::Lowered low = dvm::fuser::lower(g, plan.placement);
  const dvm::vm::VerifiedProgram vp = verified_kernel(low, name);
  std::string reason;
  size_t code_bytes = 0;
  {
    const std::unique_ptr<dvm::backends::jit::JitCode> code = dvm::backends::jit::compile(vp, isa, &reason);
    if (!code) {
      finish();
      state.SkipWithError(("the JIT declines this kernel: " + reason).c_str());
      return;
    }
    code_bytes = code->code_bytes;
  }
  dvm::wait_for_jit();  // no background compile changes the count below
  const size_t live_before = dvm::backends::jit::code_bytes_in_use();
  for (auto _ : state) {
    std::unique_ptr<dvm::backends::jit::JitCode> code = dvm::backends::jit::compile(vp, isa, &reason);
    benchmark::DoNotOptimize(code.get());
    code.reset();  // frees the machine code: the next iteration compiles afresh
  }
  // Every kernel compiled in the loop was freed again.
  if (dvm::backends::jit::code_bytes_in_use() != live_before) {
    std::fprintf(stderr, "bench_dvm: %s: executable memory grew in the timed loop\n", name.c_str());
    std::abort();
  }
  finish();
  state.counters["code_bytes"] = static_cast<double>(code_bytes);
  state.counters["instructions"] = static_cast<double>(vp.program.code.size());
  state.SetLabel(dvm::backends::isa_name(isa));
}

// The JIT tier from the first call, so the checked flush at the end runs the
// kernels as machine code; false (the benchmark skipped) without a target.
bool jit_system(benchmark::State& state) {
  apply_system(System{"dvm_jit", Tier::Eager}, 1);
  if (dvm::backends::active_isa() != dvm::backends::Isa::Portable) return true;
  state.SkipWithError("the active ISA is portable: the JIT has no target");
  return false;
}

void BM_jit(benchmark::State& state, W w, const std::string& name) {
  if (!jit_system(state)) return;
  Recorded r = record_nodes(w);
  time_jit(state, r, [&] { finish(r, w, name); }, name);
}

// The demo's MLP block (examples/demo.cpp): gelu(x + bias), layer_norm,
// scale, softmax over rows of kDemoDim, one row kernel of about 20 ops.
constexpr int64_t kDemoDim = 1024, kDemoRows = 64;

dvm::Tensor record_demo_block() {
  const Pools& p = pools();
  const dvm::Shape row{kDemoDim};
  dvm::Tensor x = dvm::Tensor::from_blob(p.x.data(), {kDemoRows, kDemoDim});
  dvm::Tensor h = dvm::gelu(x + dvm::Tensor::from_blob(p.bias.data(), row));
  return dvm::softmax(
      dvm::layer_norm(h, row, dvm::Tensor::from_blob(p.w.data(), row), dvm::Tensor::from_blob(p.bias.data(), row)) *
          2.0f,
      -1);
}

std::vector<float> demo_block_reference() {
  const Pools& p = pools();
  std::vector<float> y(static_cast<size_t>(kDemoRows * kDemoDim));
  std::vector<double> h(static_cast<size_t>(kDemoDim));
  for (int64_t r = 0; r < kDemoRows; ++r) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < kDemoDim; ++c) {
      const double t = static_cast<double>(p.x[r * kDemoDim + c]) + p.bias[c];
      h[static_cast<size_t>(c)] = 0.5 * t * (1 + std::erf(t / std::sqrt(2.0)));
      mean += h[static_cast<size_t>(c)];
    }
    mean /= kDemoDim;
    for (double v : h) var += (v - mean) * (v - mean);
    const double inv = 1.0 / std::sqrt(var / kDemoDim + 1e-5);
    double mx = -INFINITY, sum = 0;
    for (int64_t c = 0; c < kDemoDim; ++c) {
      double& v = h[static_cast<size_t>(c)];
      v = ((v - mean) * inv * p.w[c] + p.bias[c]) * 2.0;
      mx = std::max(mx, v);
    }
    for (double v : h) sum += std::exp(v - mx);
    for (int64_t c = 0; c < kDemoDim; ++c)
      y[static_cast<size_t>(r * kDemoDim + c)] = static_cast<float>(std::exp(h[static_cast<size_t>(c)] - mx) / sum);
  }
  return y;
}

void BM_jit_demo_block(benchmark::State& state) {
  if (!jit_system(state)) return;
  const std::string name = "compile/jit/demo_block";
  dvm::flush();
  Recorded r;
  r.y = record_demo_block();
  r.needed = dvm::detail::mark_needed(dvm::detail::Trace::current().pending_nodes());
  time_jit(
      state, r,
      [&] {
        const float* got = r.y.data();
        if (first_time(name)) check_close(name, got, demo_block_reference().data(), kDemoRows * kDemoDim);
      },
      name);
}

int register_compile_cost() {
  benchmark::RegisterBenchmark("compile/jit/demo_block", BM_jit_demo_block)->Unit(benchmark::kNanosecond);
  for (W w : kAllW) {
    const std::string id = w_id(w);
    const std::string miss = "fuser/miss/" + id, hit = "fuser/hit/" + id,
                      enc = "compile/encode/" + id, ver = "compile/verify/" + id,
                      jit = "compile/jit/" + id;
    benchmark::RegisterBenchmark(miss.c_str(), [=](benchmark::State& st) { BM_fuser_miss(st, w, miss); })
        ->Unit(benchmark::kNanosecond);
    benchmark::RegisterBenchmark(hit.c_str(), [=](benchmark::State& st) { BM_fuser_hit(st, w, hit); })
        ->Unit(benchmark::kNanosecond);
    benchmark::RegisterBenchmark(enc.c_str(), [=](benchmark::State& st) { BM_encode(st, w, enc); })
        ->Unit(benchmark::kNanosecond);
    benchmark::RegisterBenchmark(ver.c_str(), [=](benchmark::State& st) { BM_verify(st, w, ver); })
        ->Unit(benchmark::kNanosecond);
    benchmark::RegisterBenchmark(jit.c_str(), [=](benchmark::State& st) { BM_jit(st, w, jit); })
        ->Unit(benchmark::kNanosecond);
  }
  return 0;
}
const int registered = register_compile_cost();

}  // namespace
}  // namespace bench
