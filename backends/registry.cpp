// The built-in backends, interpreters first: tiering moves a kernel from an
// ISA's interpreter to that ISA's machine code.
#include "backends/registry.h"

#include "backends/cpu/interp_backend.h"
#if DVM_HAS_JIT
#include "backends/jit/jit_backend.h"
#endif

namespace dvm::backends {

std::vector<const vm::Backend*> builtin_backends() {
  std::vector<const vm::Backend*> out;
  for (Isa isa : {Isa::Portable, Isa::Avx2, Isa::Avx512})
    if (const vm::Backend* b = cpu::interpreter_backend(isa)) out.push_back(b);
#if DVM_HAS_JIT
  for (Isa isa : {Isa::Avx2, Isa::Avx512})
    if (const vm::Backend* b = jit::jit_backend(isa)) out.push_back(b);
#endif
  return out;
}

}  // namespace dvm::backends
