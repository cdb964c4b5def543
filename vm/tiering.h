// Tiering policy: when a kernel leaves the interpreter for machine code.
// Compiles run on a background thread; the entry is published with an
// atomic state change, so a launch never waits and never sees half a kernel.
#pragma once

#include <cstdint>
#include <memory>

#include "backends/isa.h"
#include "dvm/runtime.h"
#include "vm/backend.h"
#include "vm/kernel.h"
#include "vm/launch.h"

namespace dvm::vm {

TierMode tier_mode();
void set_tier_mode(TierMode mode);
int64_t jit_threshold();
void set_jit_threshold(int64_t calls);

// The backend a launch runs on and what it compiled of the kernel (null for
// interpreters).
struct Tier {
  const Backend* backend = nullptr;
  const CompiledKernel* code = nullptr;
  bool machine_code() const { return backend->kind == BackendKind::MachineCode; }
  void run_items(const Kernel& k, const Launch& l, int64_t begin, int64_t end) const {
    backend->run_items(code, k, l, begin, end);
  }
};

// Called once per launch with the call count so far: isa's machine-code
// backend once it has compiled k, else isa's interpreter. May start a
// compile (Auto: in the background; Eager: right here).
Tier select_tier(const Kernel& k, int64_t calls, backends::Isa isa);

// Waits for every background compile started so far.
void wait_for_compiles();
// The same, for at most timeout_ns: true when none is pending.
bool wait_for_compiles(int64_t timeout_ns);

struct TierStats {
  std::atomic<int64_t> compiles{0}, failures{0};
};
TierStats& tier_stats();

}  // namespace dvm::vm
