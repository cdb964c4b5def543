// Shared pieces of bench_dvm: seeded input pools, the workloads W1..W6 as a
// user records them, result checks, the triad bandwidth, and the systems.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
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
// Seeded pools of kLarge floats, generated once per process; a workload of n
// elements uses their first n values. x and a in [-1, 1], b in [-0.5, 0.5];
// w and bias are [kRowWidth] (w in [0.5, 1.5], bias in [-0.5, 0.5]).
struct Pools {
  std::vector<float> x, a, b, w, bias;
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
// The hand-written fused loop into y (w_out_elems values).
void w_fused(W w, int64_t n, float* y);
// An independent double-precision reference into y (checks the fused loop).
void w_reference(W w, int64_t n, float* y);

// ---- checks -----------------------------------------------------------------
// Aborts with a message unless every |got - want| <= rtol * (|want| + rms(want))
// (relative error, with the reference's RMS as the floor for values near 0).
void check_close(const std::string& what, const float* got, const float* want, int64_t n,
                 double rtol = 1e-4);
// True the first time it is called with this key (a per-process "done once").
bool first_time(const std::string& key);

// ---- bandwidth ----------------------------------------------------------------
// STREAM triad bytes/s (12 bytes per element), measured once per process and
// thread count at kLarge elements, median of several runs.
double triad_bytes_per_second(int threads = 1);
// Sets bytes_per_second and pct_bw (percent of the triad bandwidth) for
// `bytes` moved per iteration, and the two constants they derive from.
void set_bandwidth_counters(benchmark::State& state, double bytes, int threads = 1);
// Sets a per-item time counter in ns (items per iteration).
void set_ns_per_item_counter(benchmark::State& state, const char* name, double items_per_iter);

// ---- systems ----------------------------------------------------------------
// How a system runs dvm: the library's default tiering, the JIT from the
// first call (TierMode::Eager), the interpreter only (TierMode::Off), or not
// dvm at all (the hand-written loop).
enum class Tier { Default, Eager, Off, NotDvm };
struct System {
  const char* name;
  Tier tier;
  bool is_dvm() const { return tier != Tier::NotDvm; }
};
inline constexpr System kDvm{"dvm", Tier::Default};

// THE place where systems and their tiers are chosen: every workload W1..W6
// runs on each of these, one line per system.
inline constexpr System kWorkloadSystems[] = {
    {"dvm", Tier::Default},     // auto tiering: what a user gets
    {"dvm_jit", Tier::Eager},   // machine code from the first call
    {"dvm_interp", Tier::Off},  // the interpreter only
    {"fused_loop", Tier::NotDvm},
};

// Sets dvm's tier for s and its thread count (dvm::set_num_threads).
void apply_system(const System& s, int threads);

// Thread counts the workloads register ("/threads:N"). Only 1 for now; a
// later issue adds all cores (and the fused loops' parallel versions).
inline constexpr int kThreadCounts[] = {1};

}  // namespace bench
