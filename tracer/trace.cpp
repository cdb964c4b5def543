// Trace: recording and flushing.
#include "tracer/trace.h"

#include <exception>
#include <memory>
#include <new>
#include <string>

#include "dvm/error.h"
#include "tracer/capture.h"
#include "tracer/pipeline.h"
#include "tracer/thread_counters.h"

namespace dvm::detail {

constinit thread_local Trace* t_trace = nullptr;
constinit thread_local bool t_trace_ended = false;

Trace::Trace() : limit(default_trace_limit()) {
  node_pool_init();
  t_trace = this;
}

Trace::~Trace() {
  t_trace = nullptr;
  t_trace_ended = true;
  // Thread exit: nothing can compute the pending nodes any more. Those
  // another thread still holds fail, saying why.
  std::shared_ptr<const std::string> why;
  try {
    why = std::make_shared<const std::string>(
        "the thread that recorded it ended before computing it (compute a tensor, by reading it or with sync(), "
        "on the thread that recorded it before that thread ends)");
  } catch (...) {  // the nodes still fail, with a generic message
  }
  for (Node* n : nodes_) {
    if (!n->storage) mark_failed(n, why);
    n->pending = false;
    const uint64_t refs = n->take_trace_refs();
    n->owner.store(nullptr, std::memory_order_release);
    n->release(refs);
  }
  unpin(pinned_);
}

bool Trace::pin_new(Node* x) {
  try {
    pinned_.push_back(x);
  } catch (const std::bad_alloc&) {
    return false;
  }
  x->retain();
  pin_cache_[pin_next_++ % 4] = x;
  return true;
}

void Trace::unpin(std::vector<Node*>& pins) {
  for (Node* x : pins) x->release();
  pins.clear();
}

namespace {
[[noreturn, gnu::cold, gnu::noinline]] void trace_ended() {
  throw Error("this thread's dvm state was destroyed at thread exit (this code runs in an atexit handler or a "
              "thread_local's destructor after it): record and compute tensors before the thread ends");
}
}  // namespace

Trace& Trace::current() {
  if (t_trace_ended) [[unlikely]] trace_ended();
  thread_local Trace t;
  return t;
}

Trace& Trace::for_record(Node* n) {
  if (t_trace_ended) [[unlikely]] {
    n->release();
    trace_ended();
  }
  return current();
}

namespace {
[[noreturn, gnu::cold, gnu::noinline]] void out_of_memory_recording(const Node* n) {
  throw Error(std::string("out of memory: cannot record ") + op_name(n->op) + " " + dtype_name(n->dtype) +
              n->shape.to_string());
}
}  // namespace

void Trace::record_growing(Node* n) {
  // Appended first: when the list cannot grow, the trace's reference is
  // dropped (the caller's handle frees n) and the error is a dvm::Error.
  try {
    nodes_.push_back(n);
  } catch (const std::bad_alloc&) {
    n->release();
    out_of_memory_recording(n);
  }
  n->pending = true;
  n->owner.store(this, std::memory_order_relaxed);
  if (static_cast<int64_t>(nodes_.size()) >= limit) reached_limit();
}

void Trace::reached_limit() {
  // A graph being captured is never flushed (it is computed by its runs).
  if (!flushing_ && together_ == 0 && !capture()) flush();
}

std::vector<Node*> mark_needed(const std::vector<Node*>& nodes) {
  std::vector<Node*> needed;
  mark_needed(nodes, &needed);
  return needed;
}

void mark_needed(const std::vector<Node*>& nodes, std::vector<Node*>* needed) {
  // Record order is topological, so one backward sweep from what live
  // Tensors hold marks everything they can reach.
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    Node* n = *it;
    if (nodes.rend() - it > 8) __builtin_prefetch(it[8]);
    if (n->user_refs() > 0) n->needed = true;
    if (!n->needed) continue;
    for (int i = 0; i < n->nin; ++i)
      if (n->in[i]->pending) n->in[i]->needed = true;
  }
  needed->clear();
  for (Node* n : nodes)
    if (n->needed) needed->push_back(n);
}

namespace {

// The dvm::Error a failed flush raises: its own message for a dvm::Error,
// "out of memory" for an allocation failure (so that only dvm::Error leaves
// the API).
std::string flush_error_message(std::exception_ptr e, size_t nodes) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    return err.what();
  } catch (const std::bad_alloc&) {
    return "out of memory: a flush of " + std::to_string(nodes) + " ops could not allocate its working memory";
  } catch (const std::exception& err) {
    return std::string("internal: flush failed: ") + err.what();
  } catch (...) {
    return "internal: flush failed with an unknown exception";
  }
}

// Ends a flush: every node of the list leaves the trace, and the trace's
// reference goes. Latest first, so that a node's pending consumers are
// settled before it: each either died (its uncounted edge to the node went
// with it) or kept its inputs and counted them. A node that then holds only
// the trace's reference (and dropped handles) can be seen by no handle on
// any thread and by no node: it is destroyed without an atomic operation on
// its count. `failed`: the flush failed, and every node but a leaf drops its
// inputs.
void settle(std::vector<Node*>& nodes, bool failed) {
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    Node* n = *it;
    if (nodes.rend() - it > 8) __builtin_prefetch(it[8]);
    n->pending = false;
    n->needed = false;
    const uint64_t refs = n->take_trace_refs();
    // Acquire: a handle that died on another thread just before is done with n.
    if ((n->counts.load(std::memory_order_acquire) & 0xffffffffu) == (refs & 0xffffffffu)) {
      // Most are intermediates that hold nothing: no counted input, no
      // buffer, no failure to forget.
      if (n->holds_nothing()) [[likely]] delete n;
      else n->destroy();
      continue;
    }
    const bool leaf = n->kind == NodeKind::Leaf;
    const bool keeps_inputs = failed ? n->storage && leaf : !n->storage || leaf;
    if (keeps_inputs) n->count_inputs();
    else n->drop_inputs();
    // Last: other threads may read the node from here on.
    n->owner.store(nullptr, std::memory_order_release);
    n->release(refs);
  }
  nodes.clear();
}

}  // namespace

namespace {
[[noreturn, gnu::cold, gnu::noinline]] void flush_while_capturing() {
  throw Error(std::string(capture()->what()) +
              ": values were asked for while the graph is being built (an observer such as data(), item() or "
              "to_vector(), or an op that reads its operands' values when it is recorded, such as embedding or "
              "index_select of a graph tensor); a graph records ops only: its Executable computes them");
}
}  // namespace

void Trace::abandon(const std::shared_ptr<const std::string>& why) noexcept {
  for (Node* n : nodes_)
    if (!n->storage) mark_failed(n, why);
  settle(nodes_, true);
  unpin(pinned_);
  for (Node*& p : pin_cache_) p = nullptr;
}

void Trace::flush() {
  if (flushing_ || nodes_.empty()) return;
  if (capture()) [[unlikely]] flush_while_capturing();
  flushing_ = true;
  // Swap in the spare list so both keep their capacity from flush to flush.
  std::vector<Node*>& nodes = spare_;
  nodes.swap(nodes_);
  std::vector<Node*>& pins = spare_pinned_;
  pins.swap(pinned_);
  for (Node*& p : pin_cache_) p = nullptr;
  count(Count::NodesRecorded, static_cast<int64_t>(nodes.size()));
  std::vector<Node*>& needed = needed_;
  try {
    mark_needed(nodes, &needed);
    int64_t computed = needed.empty() ? 0 : run_flush(needed);
    count(Count::NodesComputed, computed);
  } catch (...) {
    // Every node whose values were not written fails with this flush's
    // error (the executor has already taken back buffers it allocated but
    // never filled); nodes whose kernels ran keep their values. The trace
    // stays usable: new ops record into an empty list.
    std::string why;
    std::shared_ptr<const std::string> shared;
    try {
      why = flush_error_message(std::current_exception(), nodes.size());
      shared = std::make_shared<const std::string>(why);
    } catch (...) {
      why = "out of memory";
    }
    for (Node* n : nodes)
      if (!n->storage) mark_failed(n, shared);
    settle(nodes, true);
    unpin(pins);
    flushing_ = false;
    throw Error(why);
  }
  count(Count::Flushes, 1);
  settle(nodes, false);
  unpin(pins);
  flushing_ = false;
}

void materialize(Node* n) {
  if (!n->readable_by([] { return &Trace::current(); }))
    throw Error("tensor is pending in another thread's trace; observe it on the thread that recorded it");
  if (n->pending) Trace::current().flush();
  // A constant is never given a buffer here: other threads may be reading
  // the node (Tensor::data() keeps a copy beside it instead).
  if (n->available()) return;
  if (n->pending)  // flush() returned at once: this thread is inside one
    throw Error("tensor cannot be computed here: this thread is inside a flush (in a log callback or another "
                "hook dvm called during one); compute it after that call returns");
  throw Error("tensor has no value: the flush that should have computed it failed: " +
              (n->failed ? failure_message(n) : std::string("unknown error")));
}

}  // namespace dvm::detail
