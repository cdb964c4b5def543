// A cheap clock for the time each launch adds to its kernel's total
// (KernelStats::total_ns): the CPU's time-stamp counter where it runs at a
// constant rate (two reads per launch cost a few nanoseconds instead of the
// ~25 ns of two steady_clock reads), converted to nanoseconds only when the
// figures are read; steady_clock elsewhere.
#pragma once

#include <cstdint>

namespace dvm::vm {

int64_t now_ticks();
// Ticks (differences of now_ticks()) in nanoseconds.
int64_t ticks_to_ns(int64_t ticks);

}  // namespace dvm::vm
