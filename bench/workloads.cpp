// The workloads of shared/bench/WORKLOADS.md:
//   <W>_<name>/<system>/<size>/threads:<N>   W1..W6 on kWorkloadSystems (common.h):
//                                            dvm, dvm_jit, dvm_interp, fused_loop
//                                            and libtorch where built in; N is 1
//                                            and all cores (thread_counts())
//   W7_op_stream/dvm/64                      cost per recorded op, flush and launch included
//                                            (W7_op_stream/libtorch/64 is in
//                                            libtorch_workloads.cpp)
//   record/per_op                            recording alone
//   W8_dynamic/dvm/first, /second            W1 over 50 new shapes, cold and warm caches
//
// A dvm iteration does what a user does: wrap the preallocated inputs
// (Tensor::from_blob), record the ops, observe the result (data()). Every
// benchmark checks its result once, outside the timing, and aborts if it is
// wrong, so a wrong kernel can never report a fast time.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "bench/common.h"
#include "fuser/plan_cache.h"
#include "vm/kernel_cache.h"

namespace bench {
namespace {

// ---- W1..W6 -------------------------------------------------------------------

void run_dvm_once(W w, int64_t n) {
  dvm::Tensor y = w_record(w, n);
  benchmark::DoNotOptimize(y.data());
}

// Share of one call's launches that ran machine code (the kernel log's tier),
// so the report shows which tier a dvm figure measured.
double jit_share(W w, int64_t n) {
  dvm::set_kernel_log(true);
  run_dvm_once(w, n);
  const std::vector<dvm::KernelRun> log = dvm::take_kernel_log();
  dvm::set_kernel_log(false);
  int jit = 0;
  for (const dvm::KernelRun& k : log) jit += k.tier == "jit";
  return log.empty() ? 0.0 : static_cast<double>(jit) / static_cast<double>(log.size());
}

// Says once why a kernel stayed on the interpreter where the JIT was asked for.
void explain_interp(const std::string& name) {
  for (const dvm::KernelStats& k : dvm::kernel_stats())
    if (!k.jit_failure.empty()) {
      std::fprintf(stderr, "bench_dvm: %s: a %s kernel stays interpreted: %s\n", name.c_str(), k.form.c_str(),
                   k.jit_failure.c_str());
      return;
    }
  std::fprintf(stderr, "bench_dvm: %s: kernels still interpreted after warm-up\n", name.c_str());
}

void BM_workload(benchmark::State& state, const std::string& name, W w, const System& sys, int64_t n,
                 int threads) {
  apply_system(sys, threads);
  const int64_t out = w_out_elems(w, n);
  const double bytes = w_bytes(w, n);
  triad_bytes_per_second(threads);  // measured before, never inside, a timing

  if (sys.tier == Tier::NotDvm) {
    float* y = scratch("fused_out", out);
    w_fused(w, n, y, threads);  // warm caches
    if (first_time(name)) {
      std::vector<float> ref(static_cast<size_t>(out));
      w_reference(w, n, ref.data());
      check_close(name, y, ref.data(), out);
    }
    pieces_threads_seen();
    const LoopStats loop_stats;
    for (auto _ : state) {
      w_fused(w, n, y, threads);
      benchmark::ClobberMemory();
    }
    loop_stats.set_counters(state);
    // How many threads the parallel loop ran on, where it splits.
    if (threads > 1 && n >= 2 * kGrainElems) state.counters["threads_used"] = expect_pieces_threads(threads, name);
  } else if (sys.tier == Tier::Libtorch) {
#ifdef DVM_BENCH_HAVE_LIBTORCH
    libtorch_workload(state, name, w, n, threads);
#endif
  } else {
    dvm::flush();
    const bool check = first_time(name);
    std::vector<float> ref;
    if (check) {
      ref.resize(static_cast<size_t>(out));
      w_fused(w, n, ref.data());
      dvm::Tensor y = w_record(w, n);
      check_close(name + " (first call)", y.data(), ref.data(), out);
    }
    // Past the JIT threshold (a cache cleared by another benchmark starts the
    // count again), background compiles finished, buffers pooled: the timed
    // loop measures the steady state, and the check sees the timed tier.
    for (int64_t i = 0; i <= dvm::jit_threshold(); ++i) run_dvm_once(w, n);
    dvm::wait_for_jit();
    if (check) {
      dvm::Tensor y = w_record(w, n);
      check_close(name, y.data(), ref.data(), out);
    }
    const double on_jit = jit_share(w, n);
    if (on_jit < 1.0 && sys.tier == Tier::Eager && first_time(name + "/tier")) explain_interp(name);
    const LoopStats loop_stats;
    for (auto _ : state) {
      dvm::Tensor y = w_record(w, n);
      benchmark::DoNotOptimize(y.data());
    }
    loop_stats.set_counters(state);
    state.counters["on_jit"] = on_jit;
  }
  set_bandwidth_counters(state, bytes, threads);
}

// Per workload, size and thread count, every system in a row, so their
// figures are taken close together in time. Several threads: the time is the
// wall clock (the measuring thread's CPU time would leave the others out).
int register_workloads() {
  for (W w : kAllW)
    for (int64_t n : kSizes)
      for (int threads : thread_counts())
        for (const System& sys : kWorkloadSystems) {
          const std::string name = std::string(w_name(w)) + "/" + sys.name + "/" +
                                   std::to_string(n) + "/threads:" + std::to_string(threads);
          benchmark::internal::Benchmark* b =
              benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
                BM_workload(st, name, w, sys, n, threads);
              });
          b->Unit(benchmark::kMicrosecond);
          if (threads > 1) b->UseRealTime();
        }
  return 0;
}

// ---- W7: op stream ------------------------------------------------------------

void BM_op_stream(benchmark::State& state) {
  apply_system(kDvm, 1);
  dvm::flush();
  const float* xp = pools().x.data();
  const float* zp = pools().w.data();  // in [0.5, 1.5]: the stream stays bounded
  const dvm::Shape s{kStreamElems};
  auto once = [&] {
    dvm::Tensor y = record_stream(dvm::Tensor::from_blob(xp, s), dvm::Tensor::from_blob(zp, s), kStreamOps);
    benchmark::DoNotOptimize(y.data());
    return y;
  };
  if (first_time("W7")) {
    for (int64_t i = 0; i <= dvm::jit_threshold(); ++i) once();
    dvm::wait_for_jit();
    std::vector<float> ref(kStreamElems);
    fused_w7_op_stream(xp, zp, kStreamScalars, ref.data(), kStreamElems, kStreamOps);
    check_close("W7_op_stream/dvm/64", once().data(), ref.data(), kStreamElems);
  }
  const LoopStats loop_stats;
  for (auto _ : state) {
    dvm::Tensor y = record_stream(dvm::Tensor::from_blob(xp, s), dvm::Tensor::from_blob(zp, s), kStreamOps);
    benchmark::DoNotOptimize(y.data());
  }
  loop_stats.set_counters(state);
  set_ns_per_item_counter(state, "ns_per_op", kStreamOps);
}

// ---- record/per_op ------------------------------------------------------------
// Recording alone: each iteration records a batch of kRecordBatch ops (the W7
// stream on 64-element tensors) into a trace whose limit is above the batch,
// so nothing flushes while the clock runs. Then, with the clock paused, the
// handle is dropped and the trace flushed: nothing can observe the batch, so
// the flush computes nothing and returns the nodes to the free list. The
// pause/resume pair costs a few hundred ns of clock reads per iteration, under
// 0.5 ns per op at this batch size: the figure is honest to about that.

constexpr int kRecordBatch = 1000;

void BM_record_per_op(benchmark::State& state) {
  apply_system(kDvm, 1);
  dvm::flush();
  const int64_t old_limit = dvm::trace_limit();
  dvm::set_trace_limit(4 * kRecordBatch);
  const dvm::Shape s{kStreamElems};
  const dvm::Tensor x = dvm::Tensor::from_blob(pools().x.data(), s);
  const dvm::Tensor z = dvm::Tensor::from_blob(pools().w.data(), s);
  if (first_time("record/per_op")) {
    // The stream recorded here computes what W7 checks; check a long one once.
    dvm::Tensor y = record_stream(x, z, kRecordBatch);
    std::vector<float> ref(kStreamElems);
    fused_w7_op_stream(x.data(), z.data(), kStreamScalars, ref.data(), kStreamElems, kRecordBatch);
    check_close("record/per_op", y.data(), ref.data(), kStreamElems);
  }
  const int64_t flushes_before = dvm::stats().flushes;
  for (auto _ : state) {
    {
      dvm::Tensor y = record_stream(x, z, kRecordBatch);
      benchmark::DoNotOptimize(y.node());
      state.PauseTiming();
    }  // y dropped with the clock stopped
    dvm::flush();
    state.ResumeTiming();
  }
  const int64_t flushes = dvm::stats().flushes - flushes_before;
  dvm::set_trace_limit(old_limit);
  // Exactly one flush per iteration, the untimed one: any more means the
  // trace limit was reached while the clock ran.
  if (flushes > static_cast<int64_t>(state.iterations())) {
    std::fprintf(stderr, "bench_dvm: record/per_op: the trace flushed inside the timing\n");
    std::abort();
  }
  set_ns_per_item_counter(state, "ns_per_op", kRecordBatch);
}

// ---- W8: dynamic shapes ----------------------------------------------------------

constexpr int kDynamicShapes = 50;

const std::vector<int64_t>& dynamic_lengths() {
  static const std::vector<int64_t> v = [] {
    std::vector<int64_t> out;
    uint64_t s = 0xd1a0c0de;
    for (int i = 0; i < kDynamicShapes; ++i)
      out.push_back(1024 + static_cast<int64_t>(splitmix64(&s) % (65536 - 1024 + 1)));
    return out;
  }();
  return v;
}

void dynamic_pass() {
  for (int64_t n : dynamic_lengths()) {
    dvm::Tensor y = w_record(W::W1, n);
    benchmark::DoNotOptimize(y.data());
  }
}

// Empties every cache a new shape could hit: kernels and fusion plans.
void clear_caches() {
  dvm::vm::KernelCache::global().clear();
  dvm::fuser::PlanCache::current().clear();
}

void check_dynamic_once() {
  if (!first_time("W8")) return;
  std::vector<float> ref(65536);
  for (int64_t n : dynamic_lengths()) {
    dvm::Tensor y = w_record(W::W1, n);
    w_fused(W::W1, n, ref.data());
    check_close("W8_dynamic (length " + std::to_string(n) + ")", y.data(), ref.data(), n);
  }
}

void BM_dynamic(benchmark::State& state, bool first) {
  apply_system(kDvm, 1);
  dvm::flush();
  check_dynamic_once();
  int64_t compiles_first = 0, compiles_second = 0, first_passes = 0;
  std::optional<LoopStats> loop_stats;
  if (first) {
    loop_stats.emplace();
    for (auto _ : state) {
      state.PauseTiming();
      dvm::wait_for_jit();  // no compile of the previous pass overlaps this one
      clear_caches();
      const int64_t before = dvm::stats().kernels_compiled;
      state.ResumeTiming();
      dynamic_pass();
      state.PauseTiming();
      compiles_first += dvm::stats().kernels_compiled - before;
      ++first_passes;
      state.ResumeTiming();
    }
  } else {
    dvm::wait_for_jit();
    clear_caches();
    int64_t before = dvm::stats().kernels_compiled;
    dynamic_pass();  // the first pass, untimed
    compiles_first = dvm::stats().kernels_compiled - before;
    first_passes = 1;
    dvm::wait_for_jit();
    before = dvm::stats().kernels_compiled;
    loop_stats.emplace();
    for (auto _ : state) dynamic_pass();
    compiles_second = dvm::stats().kernels_compiled - before;
  }
  loop_stats->set_counters(state);  // page faults per pass (the first: with its untimed cache clears)
  const double iters = static_cast<double>(state.iterations());
  state.counters["compiles_first"] = static_cast<double>(compiles_first) / static_cast<double>(first_passes);
  if (!first) state.counters["compiles_second"] = static_cast<double>(compiles_second) / iters;
  state.counters["shapes"] = kDynamicShapes;
}

int register_others() {
  benchmark::RegisterBenchmark("W7_op_stream/dvm/64", BM_op_stream)->Unit(benchmark::kMicrosecond);
#ifdef DVM_BENCH_HAVE_LIBTORCH
  benchmark::RegisterBenchmark("W7_op_stream/libtorch/64", libtorch_op_stream)->Unit(benchmark::kMicrosecond);
#endif
  benchmark::RegisterBenchmark("record/per_op", BM_record_per_op)->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("W8_dynamic/dvm/first", [](benchmark::State& st) { BM_dynamic(st, true); })
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("W8_dynamic/dvm/second", [](benchmark::State& st) { BM_dynamic(st, false); })
      ->Unit(benchmark::kMicrosecond);
  return 0;
}

const int registered_workloads = register_workloads();
const int registered_others = register_others();

}  // namespace
}  // namespace bench
