// Interpreter backends: the vm's tile interpreter with one ISA's micro-kernels.
#include "backends/cpu/interp_backend.h"

#include "backends/microkernels.h"
#include "vm/interpreter.h"

namespace dvm::backends::cpu {
namespace {

template <Isa kIsa>
void run_items(const vm::CompiledKernel*, const vm::Kernel& k, const vm::Launch& l, int64_t begin, int64_t end) {
  static const MicroKernels& mk = *microkernels_for(kIsa);
  vm::interpret(k, l, begin, end, mk);
}

constexpr vm::Backend kInterp[] = {
    {"interp-portable", Isa::Portable, vm::BackendKind::Interpreter, nullptr, nullptr, run_items<Isa::Portable>,
     nullptr},
    {"interp-avx2", Isa::Avx2, vm::BackendKind::Interpreter, nullptr, nullptr, run_items<Isa::Avx2>, nullptr},
    {"interp-avx512", Isa::Avx512, vm::BackendKind::Interpreter, nullptr, nullptr, run_items<Isa::Avx512>,
     nullptr},
};

}  // namespace

const vm::Backend* interpreter_backend(Isa isa) {
  if (!microkernels_for(isa)) return nullptr;
  return &kInterp[static_cast<int>(isa)];
}

}  // namespace dvm::backends::cpu
