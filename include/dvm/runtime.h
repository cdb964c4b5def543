// Runtime configuration and statistics: trace limits, ISA and tier choice,
// counters a user or a test can read.
//
// Each setting can also come from an environment variable (README.md,
// "Settings"), read once at the first call into dvm; a bad value there is a
// warning on stderr and the default stays. A setter given a value outside
// its range throws dvm::Error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dvm {

// Pending nodes per thread before the trace flushes by itself (default 4096;
// environment DVM_TRACE_LIMIT).
void set_trace_limit(int64_t nodes);
int64_t trace_limit();

// Computes everything pending on this thread.
void flush();

// "portable", "avx2" or "avx512": the SIMD level kernels use. Setting can only
// lower it below what the CPU has (environment DVM_ISA does the same).
std::string isa();
void set_isa(const std::string& name);

// Threads a launch may use: n >= 1 gives dvm its own TBB arena of n
// threads; 0 (the default) runs in the caller's arena, so a host engine's
// tbb::task_arena bounds dvm. Environment DVM_NUM_THREADS sets it at start.
// Small launches (under ~64K elements) always run on the calling thread.
// Results are bit-identical for every thread count.
void set_num_threads(int n);
int num_threads();

// Runs launches on the host's job system instead of TBB. dvm calls
// fn(host, tasks, run, ctx) with tasks >= 2; the host must call run(ctx, t)
// once for every t in [0, tasks), on any of its threads and in any order,
// and return when all have returned (run never throws). `workers` is how
// many of them can run at once (dvm's cost model; at least 1). Launches too
// small to split run on the calling thread without calling fn, as before.
// Results are bit-identical whichever threads run the tasks. fn = nullptr
// returns to TBB. Not to be changed while another thread is inside a launch.
using TaskFn = void (*)(void* ctx, int64_t task);
using ParallelForFn = void (*)(void* host, int64_t tasks, TaskFn run, void* ctx);
void set_parallel_for(ParallelForFn fn, void* host, int workers);

// Tiers: every kernel starts on the interpreter; in Auto mode a kernel called
// `jit_threshold` times is compiled to machine code in the background and
// switches over when ready (callers never wait). Eager compiles before the
// first run; Off never makes executable memory (interpreter only).
// Environment: DVM_TIER=off|auto|eager, DVM_JIT_THRESHOLD=N.
enum class TierMode { Off, Auto, Eager };
void set_tier_mode(TierMode mode);
TierMode tier_mode();
void set_jit_threshold(int64_t calls);
int64_t jit_threshold();
// Blocks until background compiles started so far have finished.
void wait_for_jit();
// The same for at most `timeout_ms` milliseconds (a frame's budget): true
// when every compile finished, false when some are still running (their
// kernels keep running on the interpreter meanwhile).
bool wait_for_jit(double timeout_ms);

// Memory: the tensor buffers dvm allocates (results, copies, from_vector;
// not wrapped user memory). Freed buffers are cached for reuse (up to 512
// MiB) until trim() gives them back to the system.
struct MemoryStats {
  int64_t live_bytes = 0;    // held by tensors now
  int64_t cached_bytes = 0;  // freed, kept for reuse
  int64_t peak_bytes = 0;    // the most live + cached held at once
  int64_t limit_bytes = 0;   // set_memory_limit's cap, 0 for none
};
MemoryStats memory_stats();
// Caps live + cached bytes (0, the default: no cap). An allocation that
// would pass it, after the cache is given back, throws dvm::Error (from the
// flush or the creation that needed it; a failed flush's tensors raise that
// error when read, the ones whose kernels ran keep their values).
void set_memory_limit(int64_t bytes);
int64_t memory_limit();
void trim();

// Kernels the cache keeps (default 4096; environment DVM_KERNEL_CACHE):
// beyond it the least recently used are evicted (and recompiled if they
// come back). At least 1.
void set_kernel_cache_capacity(int64_t kernels);
int64_t kernel_cache_capacity();

// Per-kernel statistics, one entry per kernel in the cache.
struct KernelStats {
  uint64_t hash = 0;        // bytecode hash
  std::string form;         // elementwise, row_reduce, col_reduce
  std::string tier;         // "jit" once machine code serves the active ISA, else "interp"
  int64_t calls = 0;
  int64_t total_ns = 0;     // time in launches
  int64_t compile_ns = 0;   // JIT compile time (0 if never compiled)
  std::string jit_failure;  // why the JIT declined, if it did
};
std::vector<KernelStats> kernel_stats();

struct Stats {
  int64_t flushes = 0;
  int64_t nodes_recorded = 0;
  int64_t nodes_computed = 0;     // nodes whose values a kernel produced
  int64_t kernels_launched = 0;   // launches: small kernels of one flush stack into one
  int64_t kernels_run = 0;        // kernels executed (stacked ones counted each)
  int64_t kernels_compiled = 0;   // new bytecode seen (cache misses)
  int64_t cache_hits = 0;
  int64_t jit_compiles = 0;       // machine-code compiles that succeeded
  int64_t jit_failures = 0;       // compiles the JIT declined (kernel stays interpreted)
  int64_t jit_code_bytes = 0;     // executable memory held now
  int64_t new_shapes = 0;         // launches with extents their kernel had not seen
  // (kernels_compiled + jit_compiles) / new_shapes: 0 once shapes only vary.
  double compiles_per_new_shape = 0;
};
// One kernel launch, as recorded when the kernel log is on.
struct KernelRun {
  uint64_t hash = 0;      // the kernel's bytecode hash
  std::string form;       // elementwise, row_reduce, col_reduce
  std::string tier;       // interp or jit
  int ops = 0;            // fused ops in the kernel
  int64_t ns = 0;         // launch time
  int64_t bytes = 0;      // bytes the kernel must read and write once
};
// Records every launch on this thread while on; take_kernel_log() returns
// and clears the records.
void set_kernel_log(bool on);
std::vector<KernelRun> take_kernel_log();

// Profiling (docs/EMBEDDING.md, "Profiling"). profile_begin() starts
// recording events from every thread: each flush, the partition of a new
// trace structure, each encode, each JIT compile (on the thread that runs
// it) and each kernel launch; while it is on, every kernel launches alone
// (no stacking), as with the kernel log, so that each has its own time.
// profile_end(path) stops and writes a Chrome trace-event JSON file
// (chrome://tracing, https://ui.perfetto.dev). profile_begin() while a
// profile is on, and profile_end() with none on or with a path that cannot
// be written, throw dvm::Error; after the last, the profile stays on, so a
// second profile_end() with another path still writes it.
void profile_begin();
void profile_end(const std::string& path);
bool profiling();

// While on, each flush on this thread keeps a record of its fused groups
// (op names, types, shapes, kernels, edges); dump_fusion(path) writes the
// last one as Graphviz DOT: one `subgraph cluster_kN` per kernel (labelled
// with its form and bytecode hash), an ellipse per op, a box per value the
// flush read. Throws dvm::Error when no flush has been recorded on this
// thread or the file cannot be written.
void set_fusion_record(bool on);
bool fusion_record();
void dump_fusion(const std::string& path);

// Counters for this process; reset_stats() zeroes them.
Stats stats();
void reset_stats();

}  // namespace dvm
