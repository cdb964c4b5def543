// Executor: runs the flushed nodes: partition, then for each group lower,
// fetch the kernel from the cache, allocate outputs, bind and launch.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "dvm/runtime.h"
#include "tracer/node.h"

namespace dvm::fuser {
struct CachedPlan;
struct CachedGroup;
}

namespace dvm::fuser {

// Computes `nodes` (pending, needed, in record order). On return every node
// that is observable has a buffer. Returns the number of nodes computed.
// When it throws, every node that has a buffer holds its correct values:
// buffers allocated for kernels that did not run are taken back, so the
// caller can tell what was computed from what was not by Node::storage.
int64_t execute(const std::vector<detail::Node*>& nodes);

// Told, at the end of each execute() on the thread that installed it, which
// cached plan ran over which nodes (numbered by Node::index, every group
// launched and every node alive): a static graph turns that into a launch
// program it can run without rebuilding its nodes (graph/program.h).
class PlanObserver {
 public:
  virtual ~PlanObserver() = default;
  virtual void ran(const std::vector<detail::Node*>& nodes, const CachedPlan& plan) = 0;
};
// Installs (or, with null, removes) this thread's observer.
void set_plan_observer(PlanObserver* observer);

// While on, this thread's flushes plan and encode as usual but launch
// nothing and allocate no buffers: their results hold no values (and their
// addresses, dry_run_storage's, may be read by nothing). A static graph's compile()
// uses it to make its kernels and its program without computing anything.
void set_dry_run(bool on);
bool dry_run();
// In a dry run, a buffer of elems elements of dtype that nothing reads or
// writes: an address of its own (no two overlap), far above the ports'
// (graph.cpp, plan_at).
detail::Storage* dry_run_storage(int64_t elems, Dtype dtype);

// Test hook: the calling thread's next execute() fails at its group number
// `group` (0-based, in launch order). It fires once and is disarmed at the
// end of that execute() whether it fired or not.
enum class Fault : uint8_t {
  None,
  BadAlloc,     // std::bad_alloc once the group's outputs are allocated
                // (stands for a failed vector growth or kernel-cache insert)
  Verify,       // the group's kernel fails verification; fires only where the
                // kernel is fetched (a plan-cache miss), not on a replay
  LaunchCheck,  // the group's launch binds no pointer for its first output,
                // so the launcher's checks reject it
};
void inject_fault(Fault kind, int group);

// "[mul float32[3, 4], sum(axis=1) float32[3, 4]->[3]]": a group's ops and shapes,
// for errors about its kernel.
std::string describe_ops(const std::vector<detail::Node*>& members);

// Process-wide; every thread's flush adds to them, hence atomic.
// The calling thread's kernel log: while on, every launch runs alone and is
// timed and recorded; take_kernel_log() returns and clears the records.
void set_kernel_log(bool on);
bool kernel_log();
std::vector<KernelRun> take_kernel_log();

// The calling thread's record of its last flush's fused groups, kept while
// set_fusion_record(true) (dvm::set_fusion_record; dvm::dump_fusion draws
// it). Off, a flush records nothing.
struct FusionRecord {
  struct Op {
    std::string name;   // the op ("mul", "sum(axis=1)", "copy")
    std::string type;   // "float32[3, 4]"
    int kernel = -1;    // index into kernels
    // Each input: an op (>= 0, index into ops) or a leaf (-1 - its index
    // into leaves).
    std::vector<int> inputs;
  };
  // A value the flush read without computing it: a user's tensor, a
  // constant, a result of an earlier flush, or a view of one of these or
  // of an op (then `input` says of which, in the encoding of Op::inputs).
  struct Leaf {
    std::string name;   // "input", "const 0.5", "relu (computed)", "view"
    std::string type;
    bool has_input = false;
    int input = 0;
  };
  struct Kernel {
    std::string form;   // vm::form_name
    uint64_t hash = 0;  // its bytecode's
  };
  std::vector<Op> ops;
  std::vector<Leaf> leaves;
  std::vector<Kernel> kernels;  // in launch order
  bool filled = false;          // a flush ran while recording
};
void set_fusion_record(bool on);
bool fusion_record();
const FusionRecord& last_fusion();

// While on, every plan-cache replay is lowered again and compared with the
// cached kernel (off by default; DVM_PLAN_CHECK).
void set_plan_check(bool on);
bool plan_check();

}  // namespace dvm::fuser
