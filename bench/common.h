// Shared pieces of bench_dvm: seeded input pools, the workloads W1..W6 as a
// user records them, result checks, the triad bandwidth, thread counts and
// the systems.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "bench/fused_loops.h"
#include "dvm/dvm.h"

namespace bench {

inline constexpr int64_t kSmall = 4096;
inline constexpr int64_t kMedium = 1048576;
inline constexpr int64_t kLarge = 16777216;
inline constexpr int64_t kSizes[] = {kSmall, kMedium, kLarge};

// ---- inputs -----------------------------------------------------------------
// Buffers start on a 64-byte boundary, as the tensors dvm's and libtorch's
// allocators make do: malloc's 16-byte alignment would split every vector
// load over two cache lines, for every system alike (W4 at 1M: 17% slower).
template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(size_t n) {
    void* p = std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64);
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { std::free(p); }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const { return true; }
};
using Floats = std::vector<float, CacheLineAllocator<float>>;

// Seeded pools of kLarge floats, generated once per process; a workload of n
// elements uses their first n values. x and a in [-1, 1], b in [-0.5, 0.5];
// w and bias are [kRowWidth] (w in [0.5, 1.5], bias in [-0.5, 0.5]).
struct Pools {
  Floats x, a, b, w, bias;
};
const Pools& pools();

// splitmix64: the same sequence on every platform and standard library.
uint64_t splitmix64(uint64_t* state);
float uniform01(uint64_t* state);

// A zeroed buffer of n floats kept for the whole process (one per key and n):
// outputs are faulted in once, not on every call of a benchmark function.
float* scratch(const char* key, int64_t n);

// ---- workloads W1..W6 -------------------------------------------------------
enum class W { W1 = 0, W2, W3, W4, W5, W6 };
inline constexpr W kAllW[] = {W::W1, W::W2, W::W3, W::W4, W::W5, W::W6};

const char* w_id(W w);    // "W1"
const char* w_name(W w);  // "W1_chain"
bool w_rows(W w);         // [rows, kRowWidth] rather than [n]
int64_t w_out_elems(W w, int64_t n);
// Bytes the math must read and write once.
double w_bytes(W w, int64_t n);

// Records the workload on n elements with the public API, on tensors wrapping
// the pools (Tensor::from_blob), and returns the (pending) result.
dvm::Tensor w_record(W w, int64_t n);
// The hand-written fused loop into y (w_out_elems values). With threads > 1,
// its parallel version: the same loop over pieces of the rows (W3..W6) or of
// the elements (W1, W2), run by parallel_pieces.
void w_fused(W w, int64_t n, float* y, int threads = 1);
// The same with another reference system's loops (fused_loops.h: RefLoops).
void w_loop(const RefLoops& loops, W w, int64_t n, float* y, int threads = 1);
// An independent double-precision reference into y (checks every system).
void w_reference(W w, int64_t n, float* y);
// The same reference before its rounding to float (the accuracy report).
void w_reference_double(W w, int64_t n, double* y);

// ---- W7: op stream ------------------------------------------------------------
// kStreamOps chained ops on kStreamElems floats: op k is add / mul / sub
// (k % 3), with a second tensor when k is even and kStreamScalars[k % 3] when
// k is odd (fused_w7_op_stream computes it element by element).
inline constexpr int kStreamOps = 100;
inline constexpr int64_t kStreamElems = 64;
inline constexpr float kStreamScalars[3] = {0.25f, 0.5f, 0.125f};  // add, mul, sub

// The W7 stream itself, for any tensor type with +, *, - against a tensor
// and a float (dvm::Tensor, torch::Tensor): one definition for every system.
template <class T>
T record_stream(T t, const T& z, int ops) {
  for (int k = 0; k < ops; ++k) {
    const bool tensor = k % 2 == 0;
    switch (k % 3) {
      case 0: t = tensor ? t + z : t + kStreamScalars[0]; break;
      case 1: t = tensor ? t * z : t * kStreamScalars[1]; break;
      default: t = tensor ? t - z : t - kStreamScalars[2]; break;
    }
  }
  return t;
}

// ---- checks -----------------------------------------------------------------
// Aborts with a message unless every |got - want| <= rtol * (|want| + rms(want))
// (relative error, with the reference's RMS as the floor for values near 0).
void check_close(const std::string& what, const float* got, const float* want, int64_t n,
                 double rtol = 1e-4);
// True the first time it is called with this key (a per-process "done once").
bool first_time(const std::string& key);

// ---- threads -------------------------------------------------------------------
// Thread counts the workloads register ("/threads:N"): 1 and all cores
// (std::thread::hardware_concurrency()), without duplicates.
const std::vector<int>& thread_counts();

// The way bench_dvm's own loops (the parallel fused loops, the triad) use
// threads, as a careful engineer writes it: on a task_arena of `threads`
// threads kept for the process, [0, n) is cut into up to 4 pieces per thread
// of at least `grain` units each (cut points on multiples of `align`), run
// by tbb::parallel_for; one piece (n < 2 * grain, or threads == 1) runs
// inline on the caller. body(lo, hi) handles [lo, hi).
// Below two pieces of this many floats a loop stays on one thread: waking
// another costs more than it saves (the usual grain of an elementwise loop).
inline constexpr int64_t kGrainElems = 16384;
using PieceFn = void (*)(void* ctx, int64_t lo, int64_t hi);
void parallel_pieces(int threads, int64_t n, int64_t grain, int64_t align, PieceFn fn, void* ctx);
template <class Body>
void parallel_pieces(int threads, int64_t n, int64_t grain, int64_t align, Body&& body) {
  parallel_pieces(
      threads, n, grain, align,
      [](void* ctx, int64_t lo, int64_t hi) { (*static_cast<Body*>(ctx))(lo, hi); }, &body);
}
// How many distinct threads ran the pieces of parallel_pieces calls since the
// last call of this function (it resets the count). Recording costs a few ns
// per piece; it is always on.
int pieces_threads_seen();
// pieces_threads_seen(), with a warning naming `what` on stderr where it is
// under `threads`: on a busy machine another thread may not get a core while
// the caller works through every piece. The figure is then a one-thread
// figure; benchmarks report the count as the counter threads_used.
int expect_pieces_threads(int threads, const std::string& what);

// What a timed loop cost the process beside its time. Construct it just
// before the loop and call set_counters after:
//   cores_busy   process CPU time (every thread) over wall time: about how
//                many cores the loop kept busy (idle workers spinning count)
//   page_faults  minor page faults per iteration (a fresh page of memory
//                each: ~10 µs apiece on the VM these figures come from)
class LoopStats {
 public:
  LoopStats();
  void set_counters(benchmark::State& state) const;

 private:
  double cpu0_, wall0_;
  long faults0_;
};

// ---- bandwidth ----------------------------------------------------------------
// STREAM triad bytes/s (12 bytes per element), measured once per process and
// thread count at kLarge elements, the best of several runs; with threads > 1
// the triad runs through parallel_pieces, as the parallel fused loops do, and
// the probe warns on stderr unless that many threads took part.
double triad_bytes_per_second(int threads = 1);
// What one minor page fault costs here (a first write to a fresh anonymous
// page, 4 KiB pages, median of 3 runs over 32 MiB), in ns; measured once.
double page_fault_ns();
// Sets bytes_per_second and pct_bw (percent of the triad bandwidth) for
// `bytes` moved per iteration, and the two constants they derive from.
void set_bandwidth_counters(benchmark::State& state, double bytes, int threads = 1);
// Sets a per-item time counter in ns (items per iteration).
void set_ns_per_item_counter(benchmark::State& state, const char* name, double items_per_iter);

// ---- systems ----------------------------------------------------------------
// How a system runs dvm: the library's default tiering, the JIT from the
// first call (TierMode::Eager), the interpreter only (TierMode::Off), or not
// dvm at all: the hand-written loop (NotDvm) or libtorch (Libtorch).
enum class Tier { Default, Eager, Off, NotDvm, Libtorch };
// Which loops a NotDvm system runs (ref_loops): the hand-written fused loops,
// the SLEEF loops or the Eigen Tensor expressions (fused_loops.h).
enum class Ref { None, Fused, Sleef, Eigen };
struct System {
  const char* name;
  Tier tier;
  Ref ref = Ref::None;
  bool is_dvm() const { return tier != Tier::NotDvm && tier != Tier::Libtorch; }
};
inline constexpr System kDvm{"dvm", Tier::Default};

// THE place where systems and their tiers are chosen: every workload W1..W6
// runs on each of these, one line per system.
inline constexpr System kWorkloadSystems[] = {
    {"dvm", Tier::Default},     // auto tiering: what a user gets
    {"dvm_jit", Tier::Eager},   // machine code from the first call
    {"dvm_interp", Tier::Off},  // the interpreter only
    {"fused_loop", Tier::NotDvm, Ref::Fused},
#ifdef DVM_BENCH_HAVE_SLEEF
    {"sleef_loop", Tier::NotDvm, Ref::Sleef},  // SLEEF u10 exp/tanh in intrinsics loops (sleef_loops.cpp)
#endif
#ifdef DVM_BENCH_HAVE_EIGEN
    {"eigen", Tier::NotDvm, Ref::Eigen},  // Eigen Tensor expressions, one thread only (eigen_loops.cpp)
#endif
#ifdef DVM_BENCH_HAVE_LIBTORCH
    {"libtorch", Tier::Libtorch},  // PyTorch eager in C++ (libtorch_workloads.cpp)
#endif
};

// The loops of a NotDvm system; nullptr for the others, and for sleef_loop on
// a CPU without AVX2 (its benchmarks are then not registered).
const RefLoops* ref_loops(const System& s);
// The reference systems that run W7 and W8 besides the workloads: fused_loop,
// and sleef_loop and eigen where built in.
inline constexpr System kRefSystems[] = {
    {"fused_loop", Tier::NotDvm, Ref::Fused},
#ifdef DVM_BENCH_HAVE_SLEEF
    {"sleef_loop", Tier::NotDvm, Ref::Sleef},
#endif
#ifdef DVM_BENCH_HAVE_EIGEN
    {"eigen", Tier::NotDvm, Ref::Eigen},
#endif
};

// Sets dvm's tier for s and its thread count (dvm::set_num_threads), and
// libtorch's (torch::set_num_threads) where it is built in.
void apply_system(const System& s, int threads);

// `bench_dvm --accuracy` (accuracy.cpp): prints each system's max error in
// ULPs on W2, W3 and W5 and on tanh alone, against double; returns 0.
int run_accuracy_report();

// ---- libtorch (libtorch_workloads.cpp, only with DVM_BENCH_HAVE_LIBTORCH) ----
// torch::set_num_threads.
void libtorch_set_num_threads(int threads);
// The timed loop of <W>/libtorch/<n>/threads:<threads>, its result checked
// once against the fused loop first.
void libtorch_workload(benchmark::State& state, const std::string& name, W w, int64_t n, int threads);
// W7_op_stream/libtorch/64: the op stream in libtorch, one thread (ns_per_op).
void libtorch_op_stream(benchmark::State& state);
// "1.13.0, OpenMP, CPU capability AVX2, ..." for the report's context.
std::string libtorch_description();
// (libtorch_matmul.cpp) a [batch, M, K] times b [batch, K, N] (batch 1: two
// matrices), or with bias given gelu_tanh(a times b^T + bias) for b [N, K]:
// once into out (batch * M * N floats), or as the timed loop.
void libtorch_product(const float* a, const float* b, const float* bias, int64_t batch, int64_t M, int64_t K,
                      int64_t N, float* out);
void libtorch_product_loop(benchmark::State& state, const float* a, const float* b, const float* bias, int64_t batch,
                           int64_t M, int64_t K, int64_t N);

}  // namespace bench
