// Tiering policy: when a kernel leaves the interpreter for machine code.
// Compiles run on a background thread; the entry is published with an
// atomic state change, so a launch never waits and never sees half a kernel.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>

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

// While a WarmUpScope lives, the launches of its thread compile machine code
// before they run (TierMode::Eager, unless the mode is Off), and it keeps
// the kernels they launched. Scopes nest.
struct WarmUpCounts {
  int64_t kernels = 0, compiled = 0, declined = 0;
};
class WarmUpScope {
 public:
  WarmUpScope();
  ~WarmUpScope();
  WarmUpScope(const WarmUpScope&) = delete;
  WarmUpScope& operator=(const WarmUpScope&) = delete;
  // Called by select_tier for each launch of the scope's thread.
  void note(const Kernel& k, const BackendSlot* slot);
  // The kernels seen, and how many of them this scope got compiled or saw
  // declined (call after wait_for_compiles()).
  WarmUpCounts counts() const;

 private:
  struct Seen {
    std::shared_ptr<const Kernel> kernel;  // keeps slot alive
    const BackendSlot* slot = nullptr;     // the machine-code slot, if any
    bool was_ready = false;
  };
  WarmUpScope* prev_;
  std::unordered_map<uint64_t, Seen> seen_;
};

// Where background compiles run (dvm::set_compile_executor).
void set_compile_executor(CompileExecutorFn fn, void* host);

// Waits for every background compile started so far.
void wait_for_compiles();
// The same, for at most timeout_ns: true when none is pending.
bool wait_for_compiles(int64_t timeout_ns);

struct TierStats {
  std::atomic<int64_t> compiles{0}, failures{0};
};
TierStats& tier_stats();

}  // namespace dvm::vm
