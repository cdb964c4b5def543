// The launch clock: the time-stamp counter calibrated against steady_clock
// over the process's lifetime since its first launch.
#include "vm/ticks.h"

#include <atomic>
#include <chrono>

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

namespace dvm::vm {
namespace {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

#if defined(__x86_64__)
// An invariant TSC (CPUID 0x80000007 EDX bit 8) ticks at one rate whatever
// the core's frequency or sleep state.
bool invariant_tsc() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u) return false;
  __get_cpuid(0x80000007u, &a, &b, &c, &d);
  return (d >> 8) & 1u;
}
// Whether the TSC serves, and the calibration's start: both clocks read
// together at the first launch. A function's static, not namespace-scope
// objects: a launch from a host's static initializer may come before this
// file's initializers would run.
struct Clock {
  bool tsc = invariant_tsc();
  int64_t ticks = static_cast<int64_t>(__rdtsc());
  int64_t ns = steady_ns();
};
const Clock& launch_clock() {
  static const Clock c;
  return c;
}
#endif

}  // namespace

int64_t now_ticks() {
#if defined(__x86_64__)
  if (launch_clock().tsc) return static_cast<int64_t>(__rdtsc());
#endif
  return steady_ns();
}

int64_t ticks_to_ns(int64_t ticks) {
#if defined(__x86_64__)
  if (const Clock& c = launch_clock(); c.tsc) {
    // The rate over everything since the first launch, measured over at least 10 ms
    // (a read that early waits for it: once, and only while figures are read).
    int64_t t = 0, ns = 0;
    do {
      t = static_cast<int64_t>(__rdtsc());
      ns = steady_ns();
    } while (ns - c.ns < 10'000'000);
    const double rate = static_cast<double>(ns - c.ns) / static_cast<double>(t - c.ticks);
    return static_cast<int64_t>(static_cast<double>(ticks) * rate);
  }
#endif
  return ticks;
}

}  // namespace dvm::vm
