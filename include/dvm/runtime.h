// Runtime configuration and statistics: trace limits, ISA and tier choice,
// counters a user or a test can read.
//
// Each setting can also come from an environment variable (README.md,
// "Settings"), read once at the first call into dvm; a bad value there is a
// warning on stderr and the default stays. A setter given a value outside
// its range throws dvm::Error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
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
// lower it below what the CPU has (environment DVM_ISA does the same). It is
// process-wide and takes effect at each kernel's next launch: a flush running
// on another thread meanwhile may run some kernels at each level (results
// that differ between ISAs, as reductions may, then match neither).
std::string isa();
void set_isa(const std::string& name);

// Threads a launch may use, 0 to 1024 (else dvm::Error): n >= 1 gives dvm
// its own TBB arena of n threads (at most the machine's hardware threads;
// launches still cut their work for n); 0 (the default) runs in the
// caller's arena, so a host engine's tbb::task_arena bounds dvm.
// Environment DVM_NUM_THREADS sets it at start.
// Small launches (under ~64K elements) always run on the calling thread.
// Results are bit-identical for every thread count.
void set_num_threads(int n);
// The threads launches use now: n as set, or with 0 the caller's arena's
// concurrency (a host's pool's workers under set_parallel_for). Never 0.
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

// Runs background JIT compiles on the host's threads instead of dvm's own
// compile thread. For each compile dvm calls fn(host, run, job) on the
// thread that launched the kernel; the host must call run(job) exactly once,
// on any thread, whenever it likes (its kernel runs on the interpreter until
// then; run never throws). wait_for_jit() waits for those calls too. fn =
// nullptr returns to dvm's thread (compiles already handed over still count).
using CompileJobFn = void (*)(void* job);
using CompileExecutorFn = void (*)(void* host, CompileJobFn run, void* job);
void set_compile_executor(CompileExecutorFn fn, void* host);

// Tensor buffers (results, copies, from_vector: what memory_stats() counts)
// come from the host's allocator: allocate(host, bytes, 64) returns bytes
// aligned to 64, or null when it has none (dvm throws dvm::Error then);
// deallocate(host, p, bytes) gets back each block with the size it was
// asked for. Both may be called from any thread dvm runs on. Passing two
// nulls returns to the system's allocator. Cached blocks are freed to the
// previous allocator first; changing it while tensors hold its blocks
// throws dvm::Error (set it before creating tensors). It flushes the
// calling thread's trace first, so a result dropped unread holds nothing. The allocator must
// outlive dvm's use of it: before destroying it, destroy the tensors and
// call set_allocator(nullptr, nullptr, nullptr), which hands the cache back
// (else dvm frees its cache through it at exit). dvm's small bookkeeping
// (traces, kernels, plans, scratch rows) still uses operator new.
using AllocateFn = void* (*)(void* host, size_t bytes, size_t alignment);
using DeallocateFn = void (*)(void* host, void* p, size_t bytes);
void set_allocator(AllocateFn allocate, DeallocateFn deallocate, void* host);

// Messages: a warning (a bad environment variable), information (a kernel
// the JIT declined, with its reason) and debugging output (the JIT's
// assembly, with DVM_JIT_LOG=1). Without a callback, warnings and debugging
// output go to stderr and information is dropped. With one, fn(ctx, level,
// text) gets every message, on the thread that has it, one at a time; it must
// not throw, and a message it causes by calling into dvm is dropped. fn =
// nullptr restores stderr. dvm writes to stderr no other way.
enum class LogLevel { Debug, Info, Warning };
using LogFn = void (*)(void* ctx, LogLevel level, const char* message);
void set_log_callback(LogFn fn, void* ctx);

// While on, each JIT compile appends "<address> <size> dvm_<form>_<hash>_<isa>" to
// /tmp/perf-<pid>.map, so `perf report` names the kernels' machine code.
// Off by default; environment DVM_PERF_MAP=1. The file is appended to, never
// truncated (perf reads it after the process exits).
void set_perf_map(bool on);
bool perf_map();

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
// Blocks until background compiles started so far have finished. Called
// inside a compile (from a log callback of its messages), it returns at
// once: the compiles it would wait for include the caller's own.
void wait_for_jit();
// The same for at most `timeout_ms` milliseconds (a frame's budget): true
// when every compile finished, false when some are still running (their
// kernels keep running on the interpreter meanwhile); false at once inside
// a compile.
bool wait_for_jit(double timeout_ms);

// No hitch at the first frame: warm_up(frame) calls frame() (a function that
// records a workload and reads its results, as one frame of the host does)
// with every kernel it runs compiled to machine code before its first
// launch, on the calling thread, whatever the JIT threshold. Kernels are
// cached by their bytecode, so the frame's kernels then run as machine code
// at any sizes and scalars. TierMode::Off compiles nothing (the frame still
// runs). Exceptions from frame() propagate.
struct WarmUpReport {
  int64_t kernels = 0;   // distinct kernels the frame launched
  int64_t compiled = 0;  // of them, compiled to machine code by this call
  int64_t declined = 0;  // of them, left on the interpreter (the JIT declined)
  double ms = 0;         // the call's wall time
};
WarmUpReport warm_up(const std::function<void()>& frame);
// Computes everything pending on this thread, as flush() does, with every
// kernel compiled to machine code before it runs (as warm_up).
void precompile();

// Memory: the tensor buffers dvm allocates (results, copies, from_vector;
// not wrapped user memory). Freed buffers are cached for reuse (up to 512
// MiB) until trim() gives them back to the system. trim() first flushes the
// calling thread's recorded ops (so a result dropped unread no longer holds
// its inputs), and also frees the calling thread's cached tensor records (up
// to about 1 MiB per thread) and the index ranges argmax/argmin keep (at
// most 4 per thread, 2 MiB).
struct MemoryStats {
  int64_t live_bytes = 0;    // held by tensors now (argmax/argmin's kept index ranges included)
  int64_t cached_bytes = 0;  // freed, kept for reuse
  int64_t peak_bytes = 0;    // the most live + cached held at once
  int64_t limit_bytes = 0;   // set_memory_limit's cap, 0 for none
  int64_t weight_copy_bytes = 0;  // of live_bytes: weights' row-major copies (set_weight_copies)
};
MemoryStats memory_stats();
// Caps live + cached bytes (0, the default: no cap). An allocation that
// would pass it, after the cache is given back, throws dvm::Error (from the
// flush or the creation that needed it: a tensor made with values, or an op
// that makes a one-element buffer for its element count when recorded
// (mean, var, std, layer_norm), whose ops recorded before it the next flush
// drops; a failed flush's tensors raise that error when read, the ones
// whose kernels ran keep their values).
void set_memory_limit(int64_t bytes);
int64_t memory_limit();
void trim();
// A matrix that products of 1 to 16 rows read by columns (linear's weight
// W [out, in], read as W^T) is transposed on every call: block by block in
// registers on AVX2 and AVX-512, into the cube's panels on the portable
// cube. With weight copies on (the default; environment DVM_WEIGHT_COPIES),
// the second such product makes a row-major copy of it (one row on AVX2 and
// AVX-512: only while all copies hold at most 24 MiB), which later products
// read in place (the same sums, so the same bits). The copy is counted in
// memory_stats() (weight_copy_bytes, part of live_bytes), is not made past
// the memory limit (nor later, for a matrix once refused one), and is freed
// with the tensor's buffer: hold weights as
// tensors to keep it. Off: no new copies (existing ones are still read).
void set_weight_copies(bool on);
bool weight_copies();

// Kernels the cache keeps (default 4096; environment DVM_KERNEL_CACHE):
// beyond it the least recently used are evicted (and recompiled if they
// come back). An evicted kernel's machine code is freed once no cached
// fusion plan holds it (each thread keeps up to 1024 plans, each holding
// its kernels). At least 1.
void set_kernel_cache_capacity(int64_t kernels);
int64_t kernel_cache_capacity();

// Per-kernel statistics, one entry per kernel in the cache.
struct KernelStats {
  uint64_t hash = 0;        // bytecode hash
  std::string form;         // elementwise, row_reduce, col_reduce, contraction
  std::string tier;         // "jit" while machine code serves the active ISA (not under TierMode::Off), else "interp"
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
  std::string form;       // elementwise, row_reduce, col_reduce, contraction
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
