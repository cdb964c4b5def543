// The workloads of shared/bench/WORKLOADS.md:
//   <W>_<name>/<system>/<size>/threads:<N>   W1..W6 on kWorkloadSystems (common.h):
//                                            dvm, dvm_jit, dvm_interp, fused_loop,
//                                            sleef_loop, eigen and libtorch where
//                                            built in; N is 1 and all cores
//                                            (thread_counts()); eigen 1 only
//   W7_op_stream/dvm/64                      cost per recorded op, flush and launch included
//                                            (W7_op_stream/libtorch/64 is in
//                                            libtorch_workloads.cpp)
//   W7_op_stream/<ref>/64                    the same 100 ops on the reference loops
//                                            (fused_loop, sleef_loop, eigen)
//   record/per_op                            recording alone
//   W8_dynamic/dvm/first, /second            W1 over 50 new shapes, cold and warm caches
//   W8_dynamic/<ref>/first, /second          the same passes on the reference loops (no
//                                            cache to be cold: the two are the same work,
//                                            registered under both names to line up)
//   W1_chain/dvm_f16/<size>/threads:<N>      W1 with float16 inputs and output
//   W5_bias_tanh/dvm_bf16/<size>/threads:<N> W5 with bfloat16 inputs and output
//                                            (pct_bw counts 2-byte elements);
//                                            N as for W1..W6
//
// A dvm iteration does what a user does: wrap the preallocated inputs
// (Tensor::from_blob), record the ops, observe the result (data()). Every
// benchmark checks its result once, outside the timing, and aborts if it is
// wrong, so a wrong kernel can never report a fast time.
#include <cmath>
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
    const RefLoops& loops = *ref_loops(sys);
    float* y = scratch("fused_out", out);
    w_loop(loops, w, n, y, threads);  // warm caches
    if (first_time(name)) {
      std::vector<float> ref(static_cast<size_t>(out));
      w_reference(w, n, ref.data());
      check_close(name, y, ref.data(), out);
    }
    pieces_threads_seen();
    const LoopStats loop_stats;
    for (auto _ : state) {
      w_loop(loops, w, n, y, threads);
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
          if (sys.tier == Tier::NotDvm && !ref_loops(sys)) continue;  // sleef_loop without AVX2
          // Eigen Tensor on its default device is one thread; the other
          // reference loops split over threads by parallel_pieces.
          if (sys.ref == Ref::Eigen && threads > 1) continue;
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

// ---- W1 / W5 on 16-bit floats ----------------------------------------------------
// The pools' values rounded to float16 (W1: x, a, b) and bfloat16 (W5: x,
// bias), once per process; the result is observed without a copy
// (data<Half>() / data<BFloat16>()), as the f32 figure observes data().

template <class T>
using Vec16 = std::vector<T, CacheLineAllocator<T>>;
struct Pools16 {
  Vec16<dvm::Half> x, a, b;
  Vec16<dvm::BFloat16> bx, bbias;
};
const Pools16& pools16() {
  static const Pools16 q = [] {
    const Pools& p = pools();
    Pools16 h;
    for (size_t i = 0; i < static_cast<size_t>(kLarge); ++i) {
      h.x.push_back(dvm::to_half(p.x[i]));
      h.a.push_back(dvm::to_half(p.a[i]));
      h.b.push_back(dvm::to_half(p.b[i]));
      h.bx.push_back(dvm::to_bfloat16(p.x[i]));
    }
    for (size_t i = 0; i < static_cast<size_t>(kRowWidth); ++i) h.bbias.push_back(dvm::to_bfloat16(p.bias[i]));
    return h;
  }();
  return q;
}

// W1 in float16 or W5 in bfloat16, recorded as a user would.
dvm::Tensor w_record16(W w, int64_t n) {
  const Pools16& p = pools16();
  if (w == W::W1) {
    dvm::Tensor x = dvm::Tensor::from_blob(p.x.data(), {n});
    dvm::Tensor a = dvm::Tensor::from_blob(p.a.data(), {n});
    dvm::Tensor b = dvm::Tensor::from_blob(p.b.data(), {n});
    return dvm::relu(x * a + b) * 0.5f + x;
  }
  return dvm::tanh(dvm::Tensor::from_blob(p.bx.data(), {n / kRowWidth, kRowWidth}) +
                   dvm::Tensor::from_blob(p.bbias.data(), {kRowWidth}));
}

const void* observe16(W w, const dvm::Tensor& y) {
  return w == W::W1 ? static_cast<const void*>(y.data<dvm::Half>()) : static_cast<const void*>(y.data<dvm::BFloat16>());
}

// One unit in the last place of a 16-bit float of magnitude |v| (mantissa
// bits m: float16 10, bfloat16 7; smallest exponent emin: -14, -126).
double ulp16(double v, int m, int emin) {
  const int e = v == 0 ? emin : std::max(emin, static_cast<int>(std::floor(std::log2(std::fabs(v)))));
  return std::ldexp(1.0, e - m);
}

// Checks y (n values of W1 in float16 or W5 in bfloat16) against a double
// reference on the same 16-bit inputs: |y - ref| <= 1 ulp of the 16-bit type
// at ref plus the f32 computation's error (W1: a few roundings, 2^-23 of
// |x a| + |b| + |x|; W5: tanh's 1.84 ULP (docs/MATH.md) and the rounding of
// x + bias, 3 float ULPs of the result, at least 2^-24). Aborts otherwise.
void check16(const std::string& name, W w, const void* y, int64_t n) {
  const Pools16& p = pools16();
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    double ref, err32, got;
    if (w == W::W1) {
      const double x = dvm::to_float(p.x[k]), a = dvm::to_float(p.a[k]), b = dvm::to_float(p.b[k]);
      const double t = x * a + b;
      ref = (t > 0 ? t : 0.0) * 0.5 + x;
      err32 = std::ldexp(std::fabs(x * a) + std::fabs(b) + std::fabs(x), -23);
      got = dvm::to_float(static_cast<const dvm::Half*>(y)[k]);
    } else {
      const double x = dvm::to_float(p.bx[k]), b = dvm::to_float(p.bbias[k % static_cast<size_t>(kRowWidth)]);
      ref = std::tanh(x + b);
      err32 = 3.0 * std::max(std::ldexp(std::fabs(ref), -23), std::ldexp(1.0, -24));
      got = dvm::to_float(static_cast<const dvm::BFloat16*>(y)[k]);
    }
    const double tol = (w == W::W1 ? ulp16(ref, 10, -14) : ulp16(ref, 7, -126)) + err32;
    if (!(std::fabs(got - ref) <= tol)) {
      std::fprintf(stderr, "bench_dvm: %s: element %lld is %.9g, the double reference %.9g (tolerance %.3g)\n",
                   name.c_str(), static_cast<long long>(i), got, ref, tol);
      std::abort();
    }
  }
}

void BM_workload16(benchmark::State& state, const std::string& name, W w, int64_t n, int threads) {
  apply_system(kDvm, threads);
  triad_bytes_per_second(threads);
  const double e = static_cast<double>(n);
  const double bytes = w == W::W1 ? 2.0 * 4 * e : 2.0 * (2 * e + kRowWidth);
  dvm::flush();
  const bool check = first_time(name);
  if (check) check16(name + " (first call)", w, observe16(w, w_record16(w, n)), n);
  for (int64_t i = 0; i <= dvm::jit_threshold(); ++i) {
    dvm::Tensor y = w_record16(w, n);
    benchmark::DoNotOptimize(observe16(w, y));
  }
  dvm::wait_for_jit();
  if (check) check16(name, w, observe16(w, w_record16(w, n)), n);
  dvm::set_kernel_log(true);
  {
    dvm::Tensor y = w_record16(w, n);
    benchmark::DoNotOptimize(observe16(w, y));
  }
  const std::vector<dvm::KernelRun> log = dvm::take_kernel_log();
  dvm::set_kernel_log(false);
  int jit = 0;
  for (const dvm::KernelRun& k : log) jit += k.tier == "jit";
  const double on_jit = log.empty() ? 0.0 : static_cast<double>(jit) / static_cast<double>(log.size());
  const LoopStats loop_stats;
  for (auto _ : state) {
    dvm::Tensor y = w_record16(w, n);
    benchmark::DoNotOptimize(observe16(w, y));
  }
  loop_stats.set_counters(state);
  state.counters["on_jit"] = on_jit;
  set_bandwidth_counters(state, bytes, threads);
}

int register_workloads16() {
  for (W w : {W::W1, W::W5})
    for (int64_t n : kSizes)
      for (int threads : thread_counts()) {
        const std::string name = std::string(w_name(w)) + (w == W::W1 ? "/dvm_f16/" : "/dvm_bf16/") +
                                 std::to_string(n) + "/threads:" + std::to_string(threads);
        benchmark::internal::Benchmark* b = benchmark::RegisterBenchmark(
            name.c_str(), [=](benchmark::State& st) { BM_workload16(st, name, w, n, threads); });
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

// The W7 stream in double, element by element (checks the reference loops).
void op_stream_reference(const float* x, const float* z, float* y, int64_t n, int ops) {
  for (int64_t i = 0; i < n; ++i) {
    double t = x[i];
    for (int k = 0; k < ops; ++k) {
      const double v = k % 2 == 0 ? static_cast<double>(z[i]) : static_cast<double>(kStreamScalars[k % 3]);
      t = k % 3 == 0 ? t + v : k % 3 == 1 ? t * v : t - v;
    }
    y[i] = static_cast<float>(t);
  }
}

// W7_op_stream/<ref>/64: the 100 ops on 64 floats by a reference system's
// loops, one op after another over the vector (there is nothing to record).
void BM_op_stream_ref(benchmark::State& state, const std::string& name, const RefLoops& loops) {
  const float* xp = pools().x.data();
  const float* zp = pools().w.data();
  float* y = scratch("w7_out", kStreamElems);
  loops.w7_op_stream(xp, zp, kStreamScalars, y, kStreamElems, kStreamOps);
  if (first_time(name)) {
    std::vector<float> ref(kStreamElems);
    op_stream_reference(xp, zp, ref.data(), kStreamElems, kStreamOps);
    check_close(name, y, ref.data(), kStreamElems);
  }
  const LoopStats loop_stats;
  for (auto _ : state) {
    loops.w7_op_stream(xp, zp, kStreamScalars, y, kStreamElems, kStreamOps);
    benchmark::ClobberMemory();
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

// W8_dynamic/<ref>/first and /second: one pass of W1 over the 50 lengths on
// a reference system's loops, each length checked once against the double
// reference. There is nothing to compile or cache, so both names time the
// same pass (compiles_first and compiles_second are 0).
void BM_dynamic_ref(benchmark::State& state, const std::string& name, const RefLoops& loops, bool first) {
  float* y = scratch("w8_out", 65536);
  if (first_time(name.substr(0, name.rfind('/')))) {
    std::vector<float> ref(65536);
    for (int64_t n : dynamic_lengths()) {
      w_loop(loops, W::W1, n, y);
      w_reference(W::W1, n, ref.data());
      check_close(name + " (length " + std::to_string(n) + ")", y, ref.data(), n);
    }
  }
  const LoopStats loop_stats;
  for (auto _ : state) {
    for (int64_t n : dynamic_lengths()) {
      w_loop(loops, W::W1, n, y);
      benchmark::ClobberMemory();
    }
  }
  loop_stats.set_counters(state);
  state.counters[first ? "compiles_first" : "compiles_second"] = 0;
  state.counters["shapes"] = kDynamicShapes;
}

int register_others() {
  benchmark::RegisterBenchmark("W7_op_stream/dvm/64", BM_op_stream)->Unit(benchmark::kMicrosecond);
#ifdef DVM_BENCH_HAVE_LIBTORCH
  benchmark::RegisterBenchmark("W7_op_stream/libtorch/64", libtorch_op_stream)->Unit(benchmark::kMicrosecond);
#endif
  for (const System& sys : kRefSystems)
    if (const RefLoops* loops = ref_loops(sys)) {
      const std::string name = std::string("W7_op_stream/") + sys.name + "/64";
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) { BM_op_stream_ref(st, name, *loops); })
          ->Unit(benchmark::kMicrosecond);
    }
  benchmark::RegisterBenchmark("record/per_op", BM_record_per_op)->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("W8_dynamic/dvm/first", [](benchmark::State& st) { BM_dynamic(st, true); })
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("W8_dynamic/dvm/second", [](benchmark::State& st) { BM_dynamic(st, false); })
      ->Unit(benchmark::kMicrosecond);
  for (const System& sys : kRefSystems)
    if (const RefLoops* loops = ref_loops(sys))
      for (const bool first : {true, false}) {
        const std::string name = std::string("W8_dynamic/") + sys.name + (first ? "/first" : "/second");
        benchmark::RegisterBenchmark(name.c_str(),
                                     [=](benchmark::State& st) { BM_dynamic_ref(st, name, *loops, first); })
            ->Unit(benchmark::kMicrosecond);
      }
  return 0;
}

const int registered_workloads = register_workloads();
const int registered_workloads16 = register_workloads16();
const int registered_others = register_others();

}  // namespace
}  // namespace bench
