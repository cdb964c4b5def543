// Executor: plan -> kernels -> launches.
#include "fuser/executor.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>

#include "dvm/error.h"
#include "fuser/lower.h"
#include "fuser/partition.h"
#include "fuser/plan_cache.h"
#include "vm/kernel_cache.h"
#include "vm/launcher.h"
#include "vm/parallel.h"

namespace dvm::fuser {
using detail::Node;
using detail::NodeKind;

namespace {
thread_local bool t_log_on = false;
thread_local std::vector<KernelRun> t_log;
std::atomic<bool> g_check_plans{false};
}  // namespace

void set_kernel_log(bool on) { t_log_on = on; }

std::vector<KernelRun> take_kernel_log() {
  std::vector<KernelRun> out;
  out.swap(t_log);
  return out;
}

void set_plan_check(bool on) { g_check_plans.store(on, std::memory_order_relaxed); }

ExecStats& exec_stats() {
  static ExecStats s;
  return s;
}

namespace {

// Runs groups in order, stacking small ones (DVM's stacking fusion): small
// independent kernels share one launch and one parallel index space; a small
// kernel that reads a stacked one's output starts a new stage of the same
// launch. Large kernels, and every kernel while the kernel log is on (so it
// can time each), launch alone.
class Runner {
 public:
  void add(const Group& g, const Lowered& low, std::shared_ptr<vm::Kernel> k) {
    for (const ArgSpec& a : low.args) {
      if (!a.output) continue;
      Node* n = a.node;
      n->storage = detail::Storage::allocate(n->shape.numel());
      n->offset = 0;
      detail::contiguous_strides(n->shape, n->strides);
    }
    const int64_t work = low.space.extent(0) * low.space.extent(1) * low.space.extent(2);
    if (t_log_on || work >= vm::kMinParallelElements) {
      flush();
      run_alone(g, low, *k);
      return;
    }
    bool depends = false;
    for (const ArgSpec& a : low.args)
      if (!a.output && a.node->storage)
        depends |= std::find(stage_outputs_.begin(), stage_outputs_.end(), a.node->storage) != stage_outputs_.end();
    if (depends) {
      ++stage_;
      stage_outputs_.clear();
    }
    for (const ArgSpec& a : low.args)
      if (a.output) stage_outputs_.push_back(a.node->storage);
    // Launches are reused from flush to flush (their argument vectors keep
    // their capacity); the deque keeps their addresses stable.
    if (used_launches_ == launches_.size()) launches_.emplace_back();
    vm::Launch& l = launches_[used_launches_++];
    bind(low, &l);
    kernels_.push_back(std::move(k));
    entries_.push_back({kernels_.back().get(), &l, stage_});
  }

  void flush() {
    if (entries_.empty()) return;
    struct Reset {  // even when a launch throws
      Runner& r;
      ~Reset() { r.reset(); }
    } reset_after{*this};
    vm::launch_stack(entries_);
    exec_stats().kernels_launched.fetch_add(1, std::memory_order_relaxed);
    exec_stats().kernels_run.fetch_add(static_cast<int64_t>(entries_.size()), std::memory_order_relaxed);
  }

  // Forgets stacked work (after it ran, or when a flush failed midway).
  void reset() {
    entries_.clear();
    used_launches_ = 0;
    kernels_.clear();  // releases this flush's references to the kernels
    stage_outputs_.clear();
    stage_ = 0;
  }

 private:
  void run_alone(const Group& g, const Lowered& low, const vm::Kernel& k) {
    exec_stats().kernels_launched.fetch_add(1, std::memory_order_relaxed);
    exec_stats().kernels_run.fetch_add(1, std::memory_order_relaxed);
    if (!t_log_on) {
      vm::launch(k, bind(low));
      return;
    }
    auto t0 = std::chrono::steady_clock::now();
    const bool jit = vm::launch(k, bind(low));
    auto t1 = std::chrono::steady_clock::now();
    KernelRun run;
    run.hash = k.hash();
    run.form = vm::form_name(k.form());
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
  }

  std::deque<vm::Launch> launches_;  // stable addresses for the entries
  size_t used_launches_ = 0;         // launches_ in use by this flush
  std::vector<std::shared_ptr<vm::Kernel>> kernels_;
  std::vector<vm::StackEntry> entries_;
  std::vector<const detail::Storage*> stage_outputs_;
  int stage_ = 0;
};

// Rebuilds a cached group over this flush's nodes (into g, whose member
// list keeps its capacity).
void replay_group(const CachedGroup& cg, const std::vector<Node*>& nodes, Group& g) {
  g.form = cg.form;
  g.red_begin = cg.red_begin;
  g.red_end = cg.red_end;
  const Node* f = nodes[static_cast<size_t>(cg.full_from)];
  g.full = cg.full_from_input ? f->in[0]->shape : f->shape;
  g.members.clear();
  for (int32_t m : cg.members) g.members.push_back(nodes[static_cast<size_t>(m)]);
}

}  // namespace

int64_t execute(const std::vector<Node*>& nodes) {
  thread_local Signature sig;  // reused: its buffer keeps its capacity
  make_signature(nodes, &sig);
  PlanCache& cache = PlanCache::current();
  thread_local Runner runner;  // reused: its buffers keep their capacity
  runner.reset();
  int64_t computed = 0;
  if (const CachedPlan* cached = cache.find(sig)) {
    ++cache.hits;
    for (const CachedGroup& cg : cached->groups) {
      thread_local Group g;
      replay_group(cg, nodes, g);
      if (g_check_plans.load(std::memory_order_relaxed)) {
        Lowered full = lower(g, cached->placement);
        if (!(full.bytecode == cg.kernel->bytecode()))
          throw Error("internal: plan cache replay would run a different kernel");
      }
      runner.add(g, replay_args(g, cg.args, nodes, cached->placement), cg.kernel);
      computed += static_cast<int64_t>(g.members.size());
    }
  } else {
    ++cache.misses;
    Plan plan = partition(nodes);
    CachedPlan record;
    for (size_t oi = 0; oi < plan.order.size(); ++oi) {
      Lowered low;
      const int gi = plan.order[oi];
      if (!try_lower(plan.groups[static_cast<size_t>(gi)], plan.placement, &low)) {
        // Over the encoder's limits: run it as smaller groups, in its place.
        std::vector<int> pieces = split_group(plan, gi);
        if (pieces.size() < 2) low = lower(plan.groups[static_cast<size_t>(gi)], plan.placement);  // throws
        plan.order.erase(plan.order.begin() + static_cast<std::ptrdiff_t>(oi));
        plan.order.insert(plan.order.begin() + static_cast<std::ptrdiff_t>(oi), pieces.begin(), pieces.end());
        --oi;
        continue;
      }
      const Group& g = plan.groups[static_cast<size_t>(gi)];
      std::shared_ptr<vm::Kernel> k = vm::KernelCache::global().get(low.bytecode);
      CachedGroup cg;
      cg.form = g.form;
      cg.red_begin = g.red_begin;
      cg.red_end = g.red_end;
      for (const Node* m : g.members) cg.members.push_back(m->index);
      cg.full_from = g.members.front()->index;
      for (const Node* m : g.members) {
        if (m->kind == NodeKind::Reduce) {
          cg.full_from = m->index;
          cg.full_from_input = true;
          break;
        }
        if (m->shape == g.full && plan.placement[static_cast<size_t>(m->index)].domain == Domain::Full) {
          cg.full_from = m->index;
          break;
        }
      }
      cg.kernel = k;
      cg.args = arg_origins(low);
      record.groups.push_back(std::move(cg));
      runner.add(g, low, k);
      computed += static_cast<int64_t>(g.members.size());
    }
    record.placement = std::move(plan.placement);
    cache.insert(sig, std::move(record));
  }
  runner.flush();
  for (Node* n : nodes)
    if (n->kind == NodeKind::View && n->pending) resolve_view(n);
  return computed;
}

}  // namespace dvm::fuser
