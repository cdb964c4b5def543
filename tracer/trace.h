// The per-thread trace: recorded nodes not yet computed, and the flush that
// hands them to the pipeline (tracer/pipeline.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tracer/node.h"

namespace dvm::detail {

class Trace;
// This thread's trace once Trace::current() has made it, else null: the
// handle operations compare a node's owner with it.
extern constinit thread_local Trace* t_trace;
// Set when this thread's trace was destroyed (thread exit): code that runs
// later on the thread (an atexit handler, a thread_local's destructor) can
// record nothing.
extern constinit thread_local bool t_trace_ended;

class Trace {
 public:
  // This thread's trace; after it was destroyed, a dvm::Error.
  static Trace& current();
  // The trace n is recorded into; after it was destroyed, drops the trace's
  // reference to n (its caller's handle frees it) and throws dvm::Error.
  static Trace& for_record(Node* n);

  // Appends a freshly built node whose count already holds the trace's
  // reference (see record() in tensor.cpp) and flushes when the node limit
  // is reached. Inline, with the growth of the list and the flush out of
  // line: every recorded op comes through here.
  void record(Node* n) {
    if (nodes_.size() == nodes_.capacity()) [[unlikely]] {
      record_growing(n);
      return;
    }
    nodes_.push_back(n);
    n->pending = true;
    n->owner.store(this, std::memory_order_relaxed);
    if (static_cast<int64_t>(nodes_.size()) >= limit) [[unlikely]] reached_limit();
  }
  // Computes every pending node a live Tensor can still observe; pending
  // nodes nothing can reach are dropped without being computed.
  void flush();
  // Every pending node fails with `why` and leaves the trace uncomputed (a
  // captured graph's nodes, once the graph has taken their description).
  void abandon(const std::shared_ptr<const std::string>& why) noexcept;
  size_t pending() const { return nodes_.size(); }
  // The pending nodes in record order (for tests and benchmarks that drive
  // the fuser directly).
  const std::vector<Node*>& pending_nodes() const { return nodes_; }

  // Takes a reference to x, a node that is not pending, for the nodes
  // recorded until the next flush: their edges to x need no count of their
  // own (Node::uncounted), so an input read by many recorded ops (a weight,
  // W7's tensor operand) costs no atomic operation per op. False when x
  // could not be pinned (no memory): the caller counts the edge.
  bool pin(Node* x) {
    for (Node* p : pin_cache_)
      if (p == x) return true;
    return pin_new(x);
  }

  int64_t limit;  // flush when this many nodes are pending

 private:
  friend class RecordTogether;
  bool pin_new(Node* x);
  // record() of a node when the list is full: grows it first.
  [[gnu::noinline]] void record_growing(Node* n);
  // Flushes unless a flush, a RecordTogether scope or a capture defers it.
  [[gnu::noinline]] void reached_limit();
  // Drops the pins of a list of nodes once they left the trace.
  static void unpin(std::vector<Node*>& pins);

  Trace();
  ~Trace();
  std::vector<Node*> nodes_;  // in record order, which is a topological order
  std::vector<Node*> spare_;  // the list being flushed
  std::vector<Node*> needed_;  // what the flush computes
  std::vector<Node*> pinned_;  // pins of the nodes in nodes_ (may repeat)
  std::vector<Node*> spare_pinned_;  // pins of the list being flushed
  Node* pin_cache_[4] = {};  // recent entries of pinned_
  uint32_t pin_next_ = 0;
  bool flushing_ = false;
  int together_ = 0;  // live RecordTogether scopes: the limit waits
};

// While one lives on the thread, reaching the trace limit does not flush:
// the ops of a composition reach the fuser in one flush, whatever was
// pending before it. Split by a flush, a value the fused kernel keeps in
// float32 (a 16-bit softmax's row sums, a product before its bias) would be
// stored in the 16-bit type and rounded twice. The first op recorded after
// the scope flushes if the limit was passed.
class RecordTogether {
 public:
  RecordTogether() : trace_(Trace::current()) { ++trace_.together_; }
  ~RecordTogether() { --trace_.together_; }
  RecordTogether(const RecordTogether&) = delete;
  RecordTogether& operator=(const RecordTogether&) = delete;

 private:
  Trace& trace_;
};

// Marks (Node::needed) and returns, in record order, the pending nodes a
// live Tensor can reach: what a flush computes. Callers other than the flush
// (tests, benchmarks driving the fuser) clear the marks when done.
std::vector<Node*> mark_needed(const std::vector<Node*>& nodes);
// The same into *needed (cleared first; its capacity is kept).
void mark_needed(const std::vector<Node*>& nodes, std::vector<Node*>* needed);


// Makes n's values readable (computing them if needed): afterwards n has a
// buffer or is a constant. Throws dvm::Error for a node pending in another
// thread's trace.
void materialize(Node* n);

}  // namespace dvm::detail
