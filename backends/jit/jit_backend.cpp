// JIT backends: compile() and run_items() of backends/jit/jit.h behind the
// vm's backend interface.
#include "backends/jit/jit_backend.h"

#include "backends/jit/jit.h"
#include "vm/kernel.h"

namespace dvm::backends::jit {
namespace {

template <Isa kIsa>
std::unique_ptr<vm::CompiledKernel> compile_kernel(const vm::Kernel& k, std::string* reason) {
  return compile(k.verified(), kIsa, reason);
}

void run_kernel_items(const vm::CompiledKernel* code, const vm::Kernel& k, const vm::Launch& l, int64_t begin,
                      int64_t end) {
  run_items(static_cast<const JitCode&>(*code), k.verified(), l, begin, end);
}

template <Isa kIsa>
size_t isa_code_bytes() {
  return code_bytes_in_use(kIsa);
}

constexpr vm::Backend kJitAvx2{"jit-avx2",          Isa::Avx2,      vm::BackendKind::MachineCode,
                               nullptr,             compile_kernel<Isa::Avx2>, run_kernel_items,
                               isa_code_bytes<Isa::Avx2>};
constexpr vm::Backend kJitAvx512{"jit-avx512",        Isa::Avx512,      vm::BackendKind::MachineCode,
                                 nullptr,             compile_kernel<Isa::Avx512>, run_kernel_items,
                                 isa_code_bytes<Isa::Avx512>};

}  // namespace

const vm::Backend* jit_backend(Isa isa) {
  if (!isa_supported(isa)) return nullptr;
  if (isa == Isa::Avx2) return &kJitAvx2;
  if (isa == Isa::Avx512) return &kJitAvx512;
  return nullptr;
}

}  // namespace dvm::backends::jit
