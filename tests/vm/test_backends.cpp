// The backend interface: the built-in table, and a backend added from outside
// (a counting machine-code backend for the portable ISA, which has none) that
// tiering selects, whose refusal keeps the kernel on the interpreter with the
// reason, and whose results must match the interpreter bit for bit.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "backends/isa.h"
#include "backends/microkernels.h"
#include "vm/backend.h"
#include "vm/encoder.h"
#include "vm/interpreter.h"
#include "vm/kernel_cache.h"
#include "vm/launcher.h"
#include "vm/schedule.h"
#include "vm/tiering.h"
#include "vm_testing.h"

namespace dvm::vm {
namespace {

using backends::Isa;

TEST(Backends, BuiltinTableHasAnInterpreterPerIsaAndJitsAboveIt) {
  std::set<std::string> names;
  for (const Backend* b : registered_backends()) {
    ASSERT_NE(b->run_items, nullptr) << b->name;
    EXPECT_TRUE(names.insert(b->name).second) << "two backends named " << b->name;
    EXPECT_EQ(b->kind == BackendKind::MachineCode, b->compile != nullptr) << b->name;
    EXPECT_EQ(backend_slot(b), static_cast<int>(names.size()) - 1);
  }
  for (Isa isa : {Isa::Portable, Isa::Avx2, Isa::Avx512}) {
    const bool has = backends::isa_supported(isa);
    EXPECT_EQ(static_cast<bool>(interpreter_for(isa)), has) << backends::isa_name(isa);
    if (interpreter_for(isa)) {
      EXPECT_EQ(interpreter_for(isa).backend->kind, BackendKind::Interpreter);
    }
#if DVM_HAS_JIT
    if (isa != Isa::Portable) {
      EXPECT_EQ(static_cast<bool>(machine_code_for(isa)), has) << backends::isa_name(isa);
    }
#endif
  }
  EXPECT_FALSE(machine_code_for(Isa::Portable));
}

// A machine-code backend that "compiles" by remembering nothing and runs the
// portable interpreter; it declines kernels while `refuse` is set.
std::atomic<int> g_compiles{0}, g_runs{0};
std::atomic<bool> g_refuse{false};

bool test_supports(const Kernel&, std::string* reason) {
  if (!g_refuse) return true;
  *reason = "test backend refuses";
  return false;
}
std::unique_ptr<CompiledKernel> test_compile(const Kernel&, std::string*) {
  ++g_compiles;
  return std::make_unique<CompiledKernel>();
}
void test_run(const CompiledKernel* code, const Kernel& k, const Launch& l, int64_t b, int64_t e) {
  if (!code) std::abort();  // tiering must hand over what compile made
  ++g_runs;
  interpret(k, l, b, e, *backends::microkernels_for(Isa::Portable));
}
constexpr Backend kTestBackend{"test-portable", Isa::Portable, BackendKind::MachineCode, test_supports,
                               test_compile,    test_run,      nullptr};

std::shared_ptr<Kernel> tanh_kernel(float scale) {
  Encoder e(Form::Elementwise);
  const int ax = e.add_arg(ArgRole::Input), ay = e.add_arg(ArgRole::Output);
  e.store(Op::ST, ay, e.binary(Op::MUL, e.unary(Op::TANH, e.load(Op::LD, ax)), e.constant(scale)));
  return KernelCache::global().get(e.finish());
}

std::vector<float> run(const Kernel& k, const std::vector<float>& x, bool* on_machine) {
  std::vector<float> y(x.size());
  Launch l;
  l.extent[kC] = static_cast<int64_t>(x.size());
  l.args = {ArgBinding{x.data(), nullptr, 0, 0, 1}, ArgBinding{nullptr, y.data(), 0, 0, 1}};
  *on_machine = launch(k, l);
  return y;
}

// Runs in a child process: registering a backend changes the process's table.
void added_backend_is_selected_and_agrees() {
  const int slot = register_backend(&kTestBackend);
  if (machine_code_for(Isa::Portable).slot != slot) std::exit(10);
  backends::set_isa(Isa::Portable);
  vm::set_tier_mode(TierMode::Eager);
  const std::vector<float> x = testing::ramp(1000, 0.37f, 4.0f);
  auto k = tanh_kernel(1.5f);
  bool on_machine = false;
  const std::vector<float> y = run(*k, x, &on_machine);
  if (!on_machine || g_compiles != 1 || g_runs < 1) std::exit(11);
  std::vector<float> want(x.size());
  Launch l;
  l.extent[kC] = static_cast<int64_t>(x.size());
  l.args = {ArgBinding{x.data(), nullptr, 0, 0, 1}, ArgBinding{nullptr, want.data(), 0, 0, 1}};
  interpret(*k, l, 0, work_items(*k, l), *backends::microkernels_for(Isa::Portable));
  if (std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) != 0) std::exit(12);
  // A refused kernel stays on the interpreter, with the backend's reason.
  g_refuse = true;
  auto refused = tanh_kernel(2.5f);
  run(*refused, x, &on_machine);
  if (on_machine) std::exit(13);
  const BackendSlot& s = refused->slot(slot);
  if (s.state.load() != BackendSlot::Failed || s.failure != "test backend refuses") std::exit(14);
  std::exit(0);
}

TEST(BackendsDeathTest, AnAddedBackendIsSelectedRefusesWithAReasonAndAgreesBitForBit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(added_backend_is_selected_and_agrees(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace dvm::vm
