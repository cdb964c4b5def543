// The backend interface: what executes verified kernels. A backend is a plain
// table of functions (an interpreter per ISA, a JIT per ISA); tiering and the
// launcher talk to backends only through it, and a Kernel keeps one slot per
// registered backend for what that backend made of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/isa.h"
#include "vm/launch.h"

namespace dvm::vm {

class Kernel;

// What a backend made of one kernel (machine code); destroying it frees it.
class CompiledKernel {
 public:
  virtual ~CompiledKernel() = default;
  size_t code_bytes = 0;  // executable bytes it holds
};

enum class BackendKind : uint8_t {
  Interpreter,  // runs any verified kernel as it is; needs no compile
  MachineCode,  // compiles a kernel first; may decline one (supports, compile)
};

struct Backend {
  const char* name;  // "interp-avx2", "jit-avx512": shown in logs and stats
  backends::Isa isa;  // the SIMD level it runs on
  BackendKind kind;
  // Whether it can run k; when not, *reason says why. Optional (null: any kernel).
  bool (*supports)(const Kernel& k, std::string* reason);
  // Machine-code backends: compiles k; null with *reason set when it cannot.
  // Null member for interpreters.
  std::unique_ptr<CompiledKernel> (*compile)(const Kernel& k, std::string* reason);
  // Runs work items [begin, end) of l (vm/schedule.h) with what compile made
  // (null for interpreters). The same items give the same bits on every
  // backend of one ISA.
  void (*run_items)(const CompiledKernel* code, const Kernel& k, const Launch& l, int64_t begin, int64_t end);
  // Executable bytes its live CompiledKernels hold. Optional.
  size_t (*code_bytes)();
};

inline constexpr int kMaxBackends = 8;

// Adds a backend (at start-up, from backends/registry.cpp); returns its slot
// index in every Kernel. Throws dvm::Error past kMaxBackends.
int register_backend(const Backend* b);
// The registered backends, in registration order (index = slot). Registers
// the built-in ones on first use.
const std::vector<const Backend*>& registered_backends();
// The slot index of a registered backend.
int backend_slot(const Backend* b);
// A registered backend and its slot index in every Kernel.
struct BackendRef {
  const Backend* backend = nullptr;
  int slot = -1;
  explicit operator bool() const { return backend != nullptr; }
};
// The interpreter for isa (every ISA this build compiled in and the CPU has
// has one), and the machine-code backend for isa; empty when none is
// registered.
BackendRef interpreter_for(backends::Isa isa);
BackendRef machine_code_for(backends::Isa isa);
// Executable bytes held by every backend's live code.
size_t code_bytes_in_use();

}  // namespace dvm::vm
