// TEMPORARY placeholder so the library links while the real lowering is
// being written: the JIT author deletes this file when backends/jit provides
// compile(), run_items() and code_bytes_in_use(). Until then every kernel
// stays on the interpreter with this reason in its stats.
#include "backends/jit/jit.h"

namespace dvm::backends::jit {

std::unique_ptr<JitCode> compile(const vm::VerifiedProgram&, Isa, std::string* reason) {
  *reason = "the JIT backend is not built yet";
  return nullptr;
}

void run_items(const JitCode&, const vm::VerifiedProgram&, const vm::Launch&, int64_t, int64_t) {}

size_t code_bytes_in_use() { return 0; }

}  // namespace dvm::backends::jit
