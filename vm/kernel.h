// Kernel: one verified bytecode program with what executors derived from it
// and its running statistics. Kernels are shared through the kernel cache.
#pragma once

#include <atomic>
#include <cstdint>

#include <array>
#include <memory>
#include <mutex>
#include <vector>
#include <string>

#include "vm/backend.h"
#include "vm/bytecode.h"
#include "vm/launch.h"
#include "vm/verifier.h"

namespace dvm::vm {

// What one backend made of a kernel, filled in by the tiering policy.
struct BackendSlot {
  // Queued: a background compile was submitted and has not started (an
  // eager launch may take it over); Compiling: a thread is compiling it.
  enum State : uint8_t { None = 0, Compiling = 1, Ready = 2, Failed = 3, Queued = 4 };
  std::atomic<uint8_t> state{None};
  std::unique_ptr<CompiledKernel> code;  // valid once state == Ready
  std::string failure;                   // valid once state == Failed
  int64_t compile_ns = 0;
};

class Kernel : public std::enable_shared_from_this<Kernel> {
 public:
  // The bytecode must already have passed verify(); vp is its result.
  Kernel(Bytecode bc, VerifiedProgram vp);

  const Bytecode& bytecode() const { return bytecode_; }
  uint64_t hash() const { return hash_; }
  const Program& program() const { return vp_.program; }
  const VerifiedProgram& verified() const { return vp_; }
  Form form() const { return vp_.program.form; }

  // The slot of the backend registered at index `slot` (vm/backend.h).
  BackendSlot& slot(int slot) const { return slots_[slot]; }

  // How each argument is accessed, derived once from the program so a launch
  // check does not walk the code.
  struct ArgUse {
    uint8_t arg;
    Op op;          // the load or store, or MMA (once per argument it reads)
    bool prologue;  // ColReduce: before the reductions (runs only when R > 0)
  };
  const std::vector<ArgUse>& arg_uses() const { return arg_uses_; }

  // Running statistics (relaxed atomics: launches may run concurrently).
  mutable std::atomic<int64_t> calls{0};
  mutable std::atomic<uint64_t> last_use_{0};
  mutable std::atomic<int64_t> total_ticks{0};  // time in launches (vm/ticks.h)
  // Records the launch extents; returns true when they are not among the
  // last kRememberedShapes this kernel ran with (a "new shape" for the
  // compiles-per-new-shape figure). Marks the kernel used (touch()).
  bool note_shape(const int64_t (&extent)[kMaxParts]) const;
  // The kernel cache's use clock when this kernel last ran or was fetched:
  // the cache evicts the least recently used (relaxed atomics, no lock).
  void touch() const;
  uint64_t last_use() const { return last_use_.load(std::memory_order_relaxed); }

  void calls_add(int64_t ticks) const {
    calls.fetch_add(1, std::memory_order_relaxed);
    total_ticks.fetch_add(ticks, std::memory_order_relaxed);
  }

  // ColReduce: the kernel that runs this one's prologue and reductions over
  // a range of rows and stores the raw accumulators (its epilogue left out),
  // so machine code can fold the chunks of a split launch. Null when there
  // is none (another form, per-row reductions, general loads). Built on first
  // use; defined in vm/split_launch.cpp.
  const Kernel* fold_kernel() const;

  // RowReduce: pass L of a split row as a kernel of its own, run per row
  // chunk. Passes before the last are ColReduce kernels over the chunk seen
  // as [elements / lanes, lanes] (lanes = the reduction's accumulator
  // floats, so column j folds exactly what accumulator float j folds) that
  // store their raw accumulators; the last pass is an Elementwise kernel
  // with the ST values. The row's finished reductions come in as LDB
  // arguments after the parent's, one per `finished` instruction. Null when
  // a pass has none (general loads, two reductions of a level apart, a
  // reduction of a row value, an argument read both per row and per element).
  struct SplitPass {
    std::shared_ptr<Kernel> kernel;
    std::vector<uint32_t> finished;  // parent instruction of each LDB argument
    std::vector<uint8_t> per_row;    // per parent argument: read by LDB (bound per row)
  };
  const SplitPass* split_pass(int pass) const;

 private:
  Bytecode bytecode_;
  uint64_t hash_;
  VerifiedProgram vp_;
  mutable BackendSlot slots_[kMaxBackends];
  std::vector<ArgUse> arg_uses_;
  // The keys of the last kRememberedShapes launch extents (0: empty slot),
  // see note_shape.
  static constexpr uint32_t kRememberedShapes = 64;
  mutable std::array<std::atomic<uint64_t>, kRememberedShapes> shape_keys_{};
  mutable std::atomic<uint32_t> shape_next_{0};
  mutable std::once_flag fold_once_;
  mutable std::shared_ptr<Kernel> fold_;
  mutable std::once_flag passes_once_;
  mutable std::vector<SplitPass> passes_;
};

// Launches whose extents their kernel had not run with before.
std::atomic<int64_t>& new_shape_count();

}  // namespace dvm::vm
