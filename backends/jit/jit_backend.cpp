// JIT backends: compile() and run_items() of backends/jit/jit.h behind the
// vm's backend interface.
#include "backends/jit/jit_backend.h"

#include <cstdio>

#include "backends/cube/gemm.h"
#include "backends/jit/jit.h"
#include "backends/perf_map.h"
#include "backends/microkernels.h"
#include "vm/interpreter.h"
#include "vm/kernel.h"

namespace dvm::backends::jit {
namespace {

// A Contraction kernel on machine code: the cube unit's micro-kernels
// generated for the ISA (backends/cube/xbyak, shared by every contraction and
// counted by cube::gen::stats()), the epilogue on the vector micro-kernels as
// on the interpreter: the same items, the same bits.
class CubeCode final : public vm::CompiledKernel {
 public:
  explicit CubeCode(const MicroKernels& m) : mk(m) {}
  const MicroKernels& mk;
};

template <Isa kIsa>
std::unique_ptr<vm::CompiledKernel> compile_kernel(const vm::Kernel& k, std::string* reason) {
  if (k.form() == vm::Form::Contraction) {
    const MicroKernels* mk = microkernels_for(kIsa);
    if (!mk) {
      *reason = std::string("no ") + isa_name(kIsa) + " micro-kernels in this build";
      return nullptr;
    }
    if (!cube::prepare_generated(kIsa, reason)) return nullptr;
    return std::make_unique<CubeCode>(*mk);
  }
  std::unique_ptr<JitCode> code = compile(k.verified(), kIsa, reason);
  if (code && perf_map()) {
    char name[64];
    std::snprintf(name, sizeof name, "dvm_%s_%016llx_%s", vm::form_name(k.form()),
                  static_cast<unsigned long long>(k.hash()), isa_name(kIsa));
    perf_map_add(reinterpret_cast<const void*>(code->entry), code->code_bytes, name);
  }
  return code;
}

void run_kernel_items(const vm::CompiledKernel* code, const vm::Kernel& k, const vm::Launch& l, int64_t begin,
                      int64_t end) {
  if (k.form() == vm::Form::Contraction) {
    vm::run_contraction(k, l, begin, end, static_cast<const CubeCode&>(*code).mk, cube::Kernels::Generated);
    return;
  }
  const JitCode& jc = static_cast<const JitCode&>(*code);
  // A gather the code does not walk runs on the interpreter: the same bits.
  if (!run_items(jc, k.verified(), l, begin, end)) vm::interpret(k, l, begin, end, *microkernels_for(jc.isa));
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
