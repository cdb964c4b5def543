// Executor: plan -> kernels -> launches.
#include "fuser/executor.h"

#include "tracer/thread_counters.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <new>
#include <string>
#include <unordered_map>

#include "dvm/error.h"
#include "fuser/lower.h"
#include "fuser/partition.h"
#include "fuser/plan_cache.h"
#include "vm/disasm.h"
#include "vm/kernel_cache.h"
#include "vm/launcher.h"
#include "vm/parallel.h"
#include "vm/profile.h"

namespace dvm::fuser {
using detail::Node;
using detail::NodeKind;

namespace {
thread_local bool t_log_on = false;
thread_local std::vector<KernelRun> t_log;
thread_local bool t_record_on = false;
thread_local FusionRecord t_record;
std::atomic<bool> g_check_plans{false};

struct FaultPlan {
  Fault kind = Fault::None;
  int group = 0;
};
thread_local FaultPlan t_fault;
thread_local PlanObserver* t_observer = nullptr;

// True (and disarms) when the armed fault is `kind` at group gi.
bool fault_fires(Fault kind, int gi) {
  if (t_fault.kind != kind || t_fault.group != gi) return false;
  t_fault.kind = Fault::None;
  return true;
}

// The reason of a lower-level error, without its own "internal: ".
std::string reason_of(const Error& e) {
  std::string r = e.what();
  const std::string prefix = "internal: ";
  if (r.compare(0, prefix.size(), prefix) == 0) r.erase(0, prefix.size());
  return r;
}
}  // namespace

void inject_fault(Fault kind, int group) { t_fault = {kind, group}; }
void set_plan_observer(PlanObserver* observer) { t_observer = observer; }

namespace {
thread_local bool t_dry_run = false;
thread_local uintptr_t t_dry_run_next = 0;  // the next dry-run buffer's address
}  // namespace
void set_dry_run(bool on) {
  t_dry_run = on;
  t_dry_run_next = uintptr_t{1} << 46;
}
bool dry_run() { return t_dry_run; }
detail::Storage* dry_run_storage(int64_t elems, Dtype dtype) {
  const uintptr_t at = t_dry_run_next;
  const uintptr_t bytes = static_cast<uintptr_t>(elems > 0 ? elems : 1) * dtype_size(dtype);
  t_dry_run_next += (bytes + 127) / 64 * 64;
  return detail::Storage::wrap(reinterpret_cast<const void*>(at), elems, dtype);  // never freed to the pool
}

std::string describe_ops(const std::vector<Node*>& members) {
  std::string s = "[";
  for (size_t i = 0; i < members.size(); ++i) {
    const Node* m = members[i];
    if (i) s += ", ";
    s += m->kind == NodeKind::Copy ? "copy" : detail::op_name(m->op);
    if (m->kind == NodeKind::Reduce && m->in[0]) {
      if (m->red_end - m->red_begin == 1) {
        s += "(axis=" + std::to_string(m->red_begin) + ")";
      } else {
        s += "(axes=[";
        for (int a = m->red_begin; a < m->red_end; ++a) s += (a > m->red_begin ? ", " : "") + std::to_string(a);
        s += "])";
      }
      s += std::string(" ") + dtype_name(m->in[0]->dtype) + m->in[0]->shape.to_string() + "->" +
           m->shape.to_string();
    } else {
      s += std::string(" ") + dtype_name(m->dtype) + m->shape.to_string();
    }
  }
  return s + "]";
}

void set_kernel_log(bool on) { t_log_on = on; }
bool kernel_log() { return t_log_on; }

std::vector<KernelRun> take_kernel_log() {
  std::vector<KernelRun> out;
  out.swap(t_log);
  return out;
}

void set_fusion_record(bool on) { t_record_on = on; }
bool fusion_record() { return t_record_on; }
const FusionRecord& last_fusion() { return t_record; }

void set_plan_check(bool on) { g_check_plans.store(on, std::memory_order_relaxed); }
bool plan_check() { return g_check_plans.load(std::memory_order_relaxed); }

namespace {

// Runs groups in order, stacking small ones (DVM's stacking fusion): small
// independent kernels share one launch and one parallel index space; a small
// kernel that reads a stacked one's output starts a new stage of the same
// launch. Large kernels, and every kernel while the kernel log is on (so it
// can time each), launch alone.
class Runner {
 public:
  // Whether each kernel launches alone and is timed: while the kernel log
  // or a profile is on. Set at the start of each execute().
  void set_timed(bool log, bool profile) {
    log_ = log;
    profile_ = profile;
  }

  // gi: the group's number in this flush (for the test hook).
  static uint64_t new_stage_mark() {
    static std::atomic<uint64_t> marks{0};
    return marks.fetch_add(1, std::memory_order_relaxed) + 1;
  }

  void add(const Group& g, const Lowered& low, std::shared_ptr<vm::Kernel> k, int gi) {
    const int64_t work = low.space.extent(0) * low.space.extent(1) * low.space.extent(2);
    const bool alone = log_ || profile_ || work >= vm::kMinParallelElements;
    if (alone) flush();  // stacked work first: what is staged is then this group's alone
    try {
      allocate_outputs(low);
    } catch (const Error& e) {  // past the memory limit: say whose result it was
      throw Error(std::string(e.what()) + " (for the result of " + describe_ops(g.members) + ")");
    }
    if (t_dry_run) [[unlikely]] return;
    if (fault_fires(Fault::BadAlloc, gi)) throw std::bad_alloc();
    const bool corrupt = fault_fires(Fault::LaunchCheck, gi);
    if (alone) {
      run_alone(g, low, *k, corrupt);
      staged_.clear();  // its outputs hold their values now
      return;
    }
    // A kernel that reads what this stage writes starts the next stage.
    bool depends = false;
    for (const ArgSpec& a : low.args)
      if (!a.output && a.node->storage) depends |= a.node->storage->stage_mark.load(std::memory_order_relaxed) == mark_;
    if (depends) {
      ++stage_;
      mark_ = new_stage_mark();
    }
    for (const ArgSpec& a : low.args)
      if (a.output) a.node->storage->stage_mark.store(mark_, std::memory_order_relaxed);
    // Launches are reused from flush to flush (their argument vectors keep
    // their capacity); the deque keeps their addresses stable.
    if (used_launches_ == launches_.size()) launches_.emplace_back();
    vm::Launch& l = launches_[used_launches_++];
    bind(low, &l);
    if (corrupt) unbind_first_output(low, &l);
    member_begin_.push_back(members_.size());
    members_.insert(members_.end(), g.members.begin(), g.members.end());
    kernels_.push_back(std::move(k));
    entries_.push_back({kernels_.back().get(), &l, stage_});
  }

  void flush() {
    if (entries_.empty()) return;
    struct Reset {  // even when a launch throws
      Runner& r;
      ~Reset() { r.reset(); }
    } reset_after{*this};
    try {
      vm::launch_stack(entries_);
    } catch (const Error& e) {
      // Name the ops of the entry the launcher's checks reject, if one does.
      for (size_t i = 0; i < entries_.size(); ++i) {
        try {
          vm::check_launch(*entries_[i].kernel, *entries_[i].launch);
        } catch (const Error&) {
          const size_t end = i + 1 < member_begin_.size() ? member_begin_[i + 1] : members_.size();
          std::vector<Node*> ops(members_.begin() + static_cast<std::ptrdiff_t>(member_begin_[i]),
                                 members_.begin() + static_cast<std::ptrdiff_t>(end));
          throw launch_error(ops, e, *entries_[i].kernel);
        }
      }
      throw;
    }
    staged_.clear();  // every stacked output holds its values now
    detail::count(detail::Count::KernelsLaunched, 1);
    detail::count(detail::Count::KernelsRun, static_cast<int64_t>(entries_.size()));
  }

  // Forgets stacked work (after it ran, or when a flush failed midway).
  void reset() {
    entries_.clear();
    used_launches_ = 0;
    kernels_.clear();  // releases this flush's references to the kernels
    mark_ = new_stage_mark();
    stage_ = 0;
    members_.clear();
    member_begin_.clear();
  }

  // After a failure: takes back every buffer allocated for a kernel that has
  // not run (from its output nodes and from views already resolved onto
  // it), so that in `nodes` a buffer means correct values.
  void take_back(const std::vector<Node*>& nodes) {
    std::vector<const detail::Storage*> unwritten;
    for (const Node* n : staged_)
      if (n->storage) unwritten.push_back(n->storage);
    staged_.clear();
    if (unwritten.empty()) return;
    std::sort(unwritten.begin(), unwritten.end());
    for (Node* n : nodes)
      if (n->storage && std::binary_search(unwritten.begin(), unwritten.end(), n->storage)) {
        n->storage->release();
        n->storage = nullptr;
        n->offset = 0;
      }
  }

 private:
  void allocate_outputs(const Lowered& low) {
    for (const ArgSpec& a : low.args) {
      if (!a.output) continue;
      Node* n = a.node;
      staged_.push_back(n);  // first: a failed allocation leaves nothing untracked
      if (n->target) {  // a write: its slice of the buffer (offset and strides set when recorded)
        n->target->retain();
        n->storage = n->target;
        continue;
      }
      // A dry run plans: its kernels never run, so no buffer is needed.
      n->storage = t_dry_run ? dry_run_storage(n->shape.numel(), n->dtype)
                             : detail::Storage::allocate(n->shape.numel(), n->dtype);
      n->offset = 0;
      detail::contiguous_strides(n->shape, n->strides);
    }
  }

  // The test hook's launch fault: no pointer for the first output.
  static void unbind_first_output(const Lowered& low, vm::Launch* l) {
    for (size_t a = 0; a < low.args.size(); ++a)
      if (low.args[a].output) {
        l->args[a].out = nullptr;
        return;
      }
  }

  // Executor-built launches always fit their kernels: a launch the checks
  // reject is an internal error, named by the group's ops and shapes.
  static Error launch_error(const std::vector<Node*>& members, const Error& e, const vm::Kernel& k) {
    return Error("internal: launch of the kernel for ops " + describe_ops(members) +
                 " failed its checks: " + reason_of(e) + "\n" + vm::disassemble(k.bytecode()));
  }

  void run_alone(const Group& g, const Lowered& low, const vm::Kernel& k, bool corrupt) {
    vm::Launch& l = alone_launch_;  // reused: its argument vectors keep their capacity
    bind(low, &l);
    if (corrupt) unbind_first_output(low, &l);
    detail::count(detail::Count::KernelsLaunched, 1);
    detail::count(detail::Count::KernelsRun, 1);
    const bool timed = log_ || profile_;
    const auto t0 = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    bool jit = false;
    try {
      jit = vm::launch(k, l);
    } catch (const Error& e) {
      try {
        vm::check_launch(k, l);
      } catch (const Error&) {
        throw launch_error(g.members, e, k);
      }
      throw;
    }
    if (!timed) return;
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
      run.bytes += elems * static_cast<int64_t>(dtype_size(n->dtype));
    }
    if (profile_) emit_launch(k, run, t0, jit);
    if (log_) t_log.push_back(std::move(run));
  }

  // The profile's launch event: named by form and hash, so that each
  // kernel's launches sum up under one name in a trace viewer.
  static void emit_launch(const vm::Kernel& k, const KernelRun& run, std::chrono::steady_clock::time_point t0,
                          bool jit) {
    const int64_t begin = std::chrono::duration_cast<std::chrono::nanoseconds>(t0.time_since_epoch()).count();
    vm::profile::Event e("launch", "launch", begin, begin + run.ns);
    char label[48];
    std::snprintf(label, sizeof label, "%s %08llx", run.form.c_str(),
                  static_cast<unsigned long long>(run.hash >> 32));
    e.set_label(label);
    e.s("form", vm::form_name(k.form())).s("tier", jit ? "jit" : "interp").i("ops", run.ops).i("bytes", run.bytes);
    e.f("GB/s", run.ns > 0 ? static_cast<double>(run.bytes) / static_cast<double>(run.ns) : 0.0);
    e.hash("hash", run.hash);
    vm::profile::emit(e);
  }

  bool log_ = false, profile_ = false;
  std::deque<vm::Launch> launches_;  // stable addresses for the entries
  vm::Launch alone_launch_;          // the launch of a kernel that runs alone
  size_t used_launches_ = 0;         // launches_ in use by this flush
  std::vector<std::shared_ptr<vm::Kernel>> kernels_;
  std::vector<vm::StackEntry> entries_;
  // Marks the output buffers of the current stage (Storage::stage_mark):
  // unique in the process, so a buffer marked by an earlier stage, flush or
  // thread never matches.
  uint64_t mark_ = new_stage_mark();
  int stage_ = 0;
  std::vector<Node*> members_;        // the stacked entries' ops, entry by entry
  std::vector<size_t> member_begin_;  // where each entry's ops start in members_
  std::vector<Node*> staged_;         // outputs allocated whose kernels have not run
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

// Do a replay and a fresh lowering bind the same launch? (The plan check.)
bool same_launch(const Lowered& a, const Lowered& b) {
  const Space &x = a.space, &y = b.space;
  if (x.ndims != y.ndims || x.parts != y.parts || a.args.size() != b.args.size()) return false;
  if (!std::equal(x.size, x.size + x.ndims, y.size) || !std::equal(x.part_end, x.part_end + x.parts, y.part_end))
    return false;
  for (size_t i = 0; i < a.args.size(); ++i) {
    const ArgSpec &p = a.args[i], &q = b.args[i];
    if (p.node != q.node || p.output != q.output || p.access != q.access || p.offset != q.offset ||
        !std::equal(p.strides, p.strides + x.ndims, q.strides))
      return false;
  }
  return true;
}

}  // namespace

namespace {

// The verified kernel for a lowered group. A group the fuser built must
// verify: a failure is internal, named by the group's ops and shapes.
std::shared_ptr<vm::Kernel> fetch_kernel(const Group& g, const Lowered& low, int gi, bool* fresh) {
  try {
    if (fault_fires(Fault::Verify, gi)) throw Error("injected verifier failure (test hook)");
    return vm::KernelCache::global().get(low.bytecode, fresh);
  } catch (const Error& e) {
    throw Error("internal: kernel for ops " + describe_ops(g.members) + " failed verification: " + reason_of(e) +
                "\n" + vm::disassemble(low.bytecode));
  }
}

// Lowering errors of a group the partition built name the group.
[[noreturn]] void lowering_error(const Group& g, const Error& e) {
  const std::string what = e.what();
  if (what.compare(0, 10, "internal: ") == 0)
    throw Error("internal: lowering ops " + describe_ops(g.members) + " failed: " + reason_of(e));
  throw Error("kernel for ops " + describe_ops(g.members) + ": " + what);
}

Lowered lower_group(const Group& g, const std::vector<Placement>& placement) {
  try {
    return lower(g, placement);
  } catch (const Error& e) {
    lowering_error(g, e);
  }
}

bool try_lower_group(const Group& g, const std::vector<Placement>& placement, Lowered* out) {
  try {
    return try_lower(g, placement, out);
  } catch (const Error& e) {
    lowering_error(g, e);
  }
}

// ---- The fusion record (set_fusion_record) ----------------------------------

// Builds t_record for one flush: ops by group, leaves by node.
class Recorder {
 public:
  void begin() {
    t_record = FusionRecord{};
    t_record.filled = true;
    ids_.clear();
  }
  void group(const Group& g, const vm::Kernel& k) {
    const int kernel = static_cast<int>(t_record.kernels.size());
    t_record.kernels.push_back({vm::form_name(k.form()), k.hash()});
    const size_t first = t_record.ops.size();
    for (Node* m : g.members) {  // every member first: members read members
      ids_[m] = static_cast<int>(t_record.ops.size());
      FusionRecord::Op op;
      const std::string d = describe_ops({m});  // "[name(axis=1) float32[3, 4]->[3]]"
      const size_t space = d.find(' ');
      op.name = d.substr(1, space - 1);
      op.type = d.substr(space + 1, d.size() - space - 2);
      op.kernel = kernel;
      t_record.ops.push_back(std::move(op));
    }
    for (size_t i = 0; i < g.members.size(); ++i) {
      const Node* m = g.members[i];
      for (int j = 0; j < m->nin; ++j)
        if (m->in[j]) t_record.ops[first + i].inputs.push_back(id(m->in[j]));
    }
  }

 private:
  // The id of an input (Op::inputs' encoding), making it a leaf on first sight.
  int id(const Node* n) {
    auto it = ids_.find(n);
    if (it != ids_.end()) return it->second;
    FusionRecord::Leaf leaf;
    switch (n->kind) {
      case NodeKind::Leaf: leaf.name = "input"; break;
      case NodeKind::Const: {
        char v[32];
        std::snprintf(v, sizeof v, "const %g", static_cast<double>(n->value));
        leaf.name = v;
        break;
      }
      case NodeKind::View: leaf.name = n->op == detail::OpKind::None ? "view" : detail::op_name(n->op); break;
      default: leaf.name = std::string(n->kind == NodeKind::Copy ? "copy" : detail::op_name(n->op)) + " (computed)";
    }
    leaf.type = std::string(dtype_name(n->dtype)) + n->shape.to_string();
    const int me = -1 - static_cast<int>(t_record.leaves.size());
    ids_[n] = me;
    t_record.leaves.push_back(std::move(leaf));
    // A view still pending in this flush reads its input: draw that edge.
    if (n->kind == NodeKind::View && n->pending && n->in[0]) {
      const int src = id(n->in[0]);
      FusionRecord::Leaf& l = t_record.leaves[static_cast<size_t>(-1 - me)];
      l.has_input = true;
      l.input = src;
    }
    return me;
  }
  std::unordered_map<const Node*, int> ids_;
};
thread_local Recorder t_recorder;

int64_t run_groups(const std::vector<Node*>& nodes, Runner& runner, bool prof, bool recording) {
  thread_local Signature sig;  // reused: its buffer keeps its capacity
  make_signature(nodes, &sig);
  PlanCache& cache = PlanCache::current();
  int64_t computed = 0;
  int gi = 0;  // the group's number in this flush
  const CachedPlan* ran = nullptr;
  if (const CachedPlan* cached = cache.find(sig)) {
    ran = cached;
    ++cache.hits;
    for (const CachedGroup& cg : cached->groups) {
      thread_local Group g;
      replay_group(cg, nodes, g);
      thread_local Lowered low;  // reused: its lists keep their capacity
      replay(g, cg.replay, cg.scalars, nodes, &low);
      if (g_check_plans.load(std::memory_order_relaxed)) {
        Lowered full = lower_group(g, cached->placement);
        if (!(full.bytecode == cg.kernel->bytecode()))
          throw Error("internal: plan cache replay of ops " + describe_ops(g.members) +
                      " would run a different kernel");
        if (!same_launch(full, low))
          throw Error("internal: plan cache replay of ops " + describe_ops(g.members) +
                      " would bind a different space or arguments");
        bool same = full.scalars.size() == low.scalars.size();
        for (size_t s = 0; same && s < low.scalars.size(); ++s)
          same = std::bit_cast<uint32_t>(full.scalars[s]) == std::bit_cast<uint32_t>(low.scalars[s]);
        if (!same)
          throw Error("internal: plan cache replay of ops " + describe_ops(g.members) +
                      " would bind different scalar values");
      }
      runner.add(g, low, cg.kernel, gi++);
      if (recording) [[unlikely]] t_recorder.group(g, *cg.kernel);
      computed += static_cast<int64_t>(g.members.size());
    }
  } else {
    ++cache.misses;
    const int64_t t_part = prof ? vm::profile::now_ns() : 0;
    Plan plan = partition(nodes);
    if (prof) {
      vm::profile::Event e("partition", "fuser", t_part, vm::profile::now_ns());
      e.i("nodes", static_cast<int64_t>(nodes.size())).i("groups", static_cast<int64_t>(plan.order.size()));
      vm::profile::emit(e);
    }
    CachedPlan record;
    for (size_t oi = 0; oi < plan.order.size(); ++oi) {
      Lowered low;
      const int64_t t_enc = prof ? vm::profile::now_ns() : 0;
      const int pgi = plan.order[oi];
      if (!try_lower_group(plan.groups[static_cast<size_t>(pgi)], plan.placement, &low)) {
        // Over the encoder's limits: run it as smaller groups, in its place.
        std::vector<int> pieces = split_group(plan, pgi);
        if (pieces.size() < 2) low = lower_group(plan.groups[static_cast<size_t>(pgi)], plan.placement);  // throws
        plan.order.erase(plan.order.begin() + static_cast<std::ptrdiff_t>(oi));
        plan.order.insert(plan.order.begin() + static_cast<std::ptrdiff_t>(oi), pieces.begin(), pieces.end());
        --oi;
        continue;
      }
      const Group& g = plan.groups[static_cast<size_t>(pgi)];
      bool fresh = false;
      std::shared_ptr<vm::Kernel> k = fetch_kernel(g, low, gi, &fresh);
      if (prof) {
        // Lowering and encoding the group, and verifying its bytecode when
        // the kernel cache had not seen it.
        vm::profile::Event e("encode", "fuser", t_enc, vm::profile::now_ns());
        e.s("form", vm::form_name(k->form())).i("ops", static_cast<int64_t>(g.members.size()));
        e.i("bytecode_bytes", static_cast<int64_t>(low.bytecode.view().size())).hash("hash", k->hash());
        e.b("new_kernel", fresh);
        vm::profile::emit(e);
      }
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
      cg.replay = std::move(low.replay);
      cg.scalars = low.scalar_origins;
      record.groups.push_back(std::move(cg));
      runner.add(g, low, k, gi++);
      if (recording) [[unlikely]] t_recorder.group(g, *k);
      computed += static_cast<int64_t>(g.members.size());
    }
    record.placement = std::move(plan.placement);
    ran = &cache.insert(sig, std::move(record));
  }
  runner.flush();
  if (t_observer) [[unlikely]] t_observer->ran(nodes, *ran);
  return computed;
}

}  // namespace

int64_t execute(const std::vector<Node*>& nodes) {
  thread_local Runner runner;  // reused: its buffers keep their capacity
  runner.reset();
  const bool prof = vm::profile::on();
  runner.set_timed(t_log_on, prof);
  const bool recording = t_record_on;
  if (recording) [[unlikely]] t_recorder.begin();
  int64_t computed = 0;
  try {
    computed = run_groups(nodes, runner, prof, recording);
  } catch (...) {
    t_fault = {};
    runner.reset();
    runner.take_back(nodes);
    // Views of what did run are readable; the rest fail with the flush.
    for (Node* n : nodes)
      if (n->kind == NodeKind::View && n->pending && !n->storage && n->in[0] && n->in[0]->storage)
        resolve_view(n);
    throw;
  }
  t_fault = {};
  // (A view whose input was not stored was read by a product from its
  // prologue in registers; nothing else can read it.)
  for (Node* n : nodes)
    if (n->kind == NodeKind::View && n->pending && !n->storage && (n->in[0]->storage || n->user_refs() > 0))
      resolve_view(n);
  return computed;
}

}  // namespace dvm::fuser
