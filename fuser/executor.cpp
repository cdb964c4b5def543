// Executor: plan -> kernels -> launches.
#include "fuser/executor.h"

#include <algorithm>
#include <chrono>

#include "dvm/runtime.h"
#include "fuser/lower.h"
#include "fuser/partition.h"
#include "vm/kernel_cache.h"
#include "vm/launcher.h"

namespace dvm::fuser {
using detail::Node;
using detail::NodeKind;

namespace {
thread_local bool t_log_on = false;
thread_local std::vector<KernelRun> t_log;
}  // namespace

ExecStats& exec_stats() {
  static ExecStats s;
  return s;
}

int64_t execute(const std::vector<Node*>& nodes) {
  Plan plan = partition(nodes);
  int64_t computed = 0;
  for (int gi : plan.order) {
    const Group& g = plan.groups[static_cast<size_t>(gi)];
    Lowered low = lower(g);
    std::shared_ptr<vm::Kernel> k = vm::KernelCache::global().get(low.bytecode);
    for (ArgSpec& a : low.args) {
      if (!a.output) continue;
      Node* n = a.node;
      n->storage = detail::Storage::allocate(n->shape.numel());
      n->offset = 0;
      detail::contiguous_strides(n->shape, n->strides);
    }
    if (t_log_on) {
      auto t0 = std::chrono::steady_clock::now();
      const bool jit = vm::launch(*k, bind(low));
      auto t1 = std::chrono::steady_clock::now();
      KernelRun run;
      run.hash = k->hash();
      run.form = vm::form_name(k->form());
      run.tier = jit ? "jit" : "interp";
      run.ops = static_cast<int>(g.members.size());
      run.ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
      for (const ArgSpec& a : low.args) {
        const Node* n = a.node;
        int64_t elems = n->shape.numel();
        if (!a.output && n->storage) elems = std::min<int64_t>(elems, n->storage->elems);
        run.bytes += elems * static_cast<int64_t>(sizeof(float));
      }
      t_log.push_back(std::move(run));
    } else {
      vm::launch(*k, bind(low));
    }
    ++exec_stats().kernels_launched;
    computed += static_cast<int64_t>(g.members.size());
  }
  for (Node* n : nodes)
    if (n->kind == NodeKind::View && n->pending) resolve_view(n);
  return computed;
}

}  // namespace dvm::fuser

namespace dvm {
void set_kernel_log(bool on) { fuser::t_log_on = on; }
std::vector<KernelRun> take_kernel_log() {
  std::vector<KernelRun> out;
  out.swap(fuser::t_log);
  return out;
}
}  // namespace dvm
