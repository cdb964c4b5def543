// Tiering policy: when a kernel leaves the interpreter for machine code.
// Compiles run on a background thread; the entry is published with an
// atomic state change, so a launch never waits and never sees half a kernel.
#pragma once

#include <cstdint>
#include <memory>

#include "backends/isa.h"
#include "dvm/runtime.h"
#include "vm/kernel.h"

namespace dvm::vm {

TierMode tier_mode();
void set_tier_mode(TierMode mode);
int64_t jit_threshold();
void set_jit_threshold(int64_t calls);

// Called once per launch with the call count so far: returns the machine
// code to run for isa, or null for the interpreter. May start a compile
// (Auto: in the background; Eager: right here).
const backends::jit::JitCode* select_tier(const Kernel& k, int64_t calls, backends::Isa isa);

// Waits for every background compile started so far.
void wait_for_compiles();

struct TierStats {
  std::atomic<int64_t> compiles{0}, failures{0};
};
TierStats& tier_stats();

}  // namespace dvm::vm
