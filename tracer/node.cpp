// Node and Storage lifetime.
#include "tracer/node.h"

#include "tracer/buffer_pool.h"
#include "tracer/row_copies.h"
#include "tracer/trace.h"

#include "dvm/error.h"

#include <cstdlib>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

namespace dvm::detail {

Storage* Storage::allocate(int64_t elems, Dtype type) {
  // Only dvm::Error leaves the API: an allocation failure becomes one.
  Storage* s = nullptr;
  try {
    s = new Storage;
    s->elems = elems;
    s->elem_size = static_cast<uint8_t>(dtype_size(type));
    s->data = pool_allocate_recent(s->bytes(), &s->block_bytes);
  } catch (const std::bad_alloc&) {
    const size_t bytes = s ? s->bytes() : 0;
    delete s;
    throw Error("out of memory: cannot allocate a buffer of " + std::to_string(elems) + " " + dtype_name(type) +
                " elements (" + std::to_string(bytes) + " bytes)");
  } catch (...) {  // the memory limit's dvm::Error
    delete s;
    throw;
  }
  s->owned = true;
  return s;
}

Storage* Storage::wrap(const void* data, int64_t elems, Dtype type) {
  Storage* s = nullptr;
  try {
    s = new Storage;
  } catch (const std::bad_alloc&) {
    throw Error("out of memory: cannot wrap a buffer of " + std::to_string(elems) + " elements");
  }
  s->data = const_cast<void*>(data);  // never written: owned == false
  s->elems = elems;
  s->elem_size = static_cast<uint8_t>(dtype_size(type));
  s->owned = false;
  return s;
}

void Storage::release() {
  // The last reference: freed without an atomic operation (as Node::release).
  if (refs.load(std::memory_order_acquire) == 1 || refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    free_row_copies(this);
    if (owned) pool_free(data, block_bytes);
    delete this;
  }
}

bool Node::is_contiguous() const {
  int64_t expect = 1;
  for (int i = shape.rank() - 1; i >= 0; --i) {
    if (shape[i] != 1 && strides[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

void Node::drop_inputs() {
  for (int i = 0; i < nin; ++i) {
    if (in[i] && !(uncounted >> i & 1)) in[i]->release();
    in[i] = nullptr;
  }
  nin = 0;
  uncounted = 0;
}

void Node::count_inputs() {
  for (int i = 0; i < nin; ++i)
    if (in[i] && (uncounted >> i & 1)) in[i]->retain();
  uncounted = 0;
}

namespace {
// Failure messages of failed nodes, shared by the nodes of one flush. Only
// failure paths touch it; a node may die on any thread, hence the lock.
struct Failures {
  std::mutex mu;
  std::unordered_map<const Node*, std::shared_ptr<const std::string>> why;
};
Failures& failures() {
  static Failures* f = new Failures;  // outlives every thread's last node
  return *f;
}
}  // namespace

void mark_failed(Node* n, const std::shared_ptr<const std::string>& why) noexcept {
  n->failed = true;
  Failures& f = failures();
  std::lock_guard<std::mutex> lock(f.mu);
  try {
    f.why[n] = why;
  } catch (...) {  // out of memory: the node fails with the generic message
  }
}

std::string failure_message(const Node* n) {
  Failures& f = failures();
  std::lock_guard<std::mutex> lock(f.mu);
  auto it = f.why.find(n);
  return it != f.why.end() && it->second ? *it->second : std::string("out of memory");
}

// Out of line: destroy_from() recurses through chains of inputs, so its
// frame stays small.
[[gnu::cold, gnu::noinline]] static void forget_failure(const Node* n) {
  Failures& f = failures();
  std::lock_guard<std::mutex> lock(f.mu);
  f.why.erase(n);
}

namespace {
void defer_destroy(Node* n);
Node* take_deferred();

// A per-thread stack of free blocks of one size (Node's, Storage's), each
// free block holding the next one's address (no list to grow, so a free
// never allocates). A block freed on another thread joins that thread's
// stack; each returns its blocks at thread exit, and blocks freed later in
// the exit go straight to the heap.
struct BlockStack {
  void* top = nullptr;
  size_t count = 0;
  bool alive = true;
  ~BlockStack() {
    release_all();
    alive = false;
  }
  void release_all() {
    while (top) {
      void* next = *static_cast<void**>(top);
      ::operator delete(top);
      top = next;
    }
    count = 0;
  }
  void* take(size_t bytes, size_t block_bytes) {
    if (bytes == block_bytes && top) {
      void* b = top;
      top = *static_cast<void**>(b);
      --count;
      return b;
    }
    return ::operator new(bytes);
  }
  void give(void* p, size_t most) noexcept {
    if (alive && count < most) {
      *static_cast<void**>(p) = top;
      top = p;
      ++count;
      return;
    }
    ::operator delete(p);
  }
};

struct NodeFreeList : BlockStack {
  // Dead nodes waiting for the outermost Node::destroy; empty whenever no
  // destroy runs on this thread.
  std::vector<Node*> deferred;
};
thread_local NodeFreeList t_free_nodes;
// A trace's default limit of nodes: what one flush frees. A thread that
// mostly frees (a consumer of other threads' results) keeps no more.
constexpr size_t kMaxFreeNodes = 4096;

void defer_destroy(Node* n) {
  if (t_free_nodes.alive) {
    try {
      t_free_nodes.deferred.push_back(n);
      return;
    } catch (...) {  // no memory to defer it: destroy it here
    }
  }
  n->destroy();
}

Node* take_deferred() {
  auto& d = t_free_nodes.deferred;
  if (d.empty()) return nullptr;
  Node* n = d.back();
  d.pop_back();
  return n;
}
}  // namespace

namespace {
// Destroys n and, depth first, the inputs that die with it, as far as
// kMaxDestroyDepth levels down; deeper ones wait on the thread's deferred
// list for the outermost call. A chain of a million unobserved ops would
// otherwise nest a frame per node and overflow the stack; short chains keep
// the plain depth-first order (inputs freed before their consumer).
constexpr int kMaxDestroyDepth = 256;
void destroy_from(Node* n, int depth) {
  for (int i = 0; i < n->nin; ++i) {
    Node* x = n->in[i];
    n->in[i] = nullptr;
    if (!x || (n->uncounted >> i & 1) ||
        (x->counts.fetch_sub(Node::kRef, std::memory_order_acq_rel) & 0xffffffffu) != 1)
      continue;
    if (depth < kMaxDestroyDepth) destroy_from(x, depth + 1);
    else defer_destroy(x);
  }
  n->nin = 0;
  n->uncounted = 0;
  if (n->failed) [[unlikely]] forget_failure(n);
  if (n->storage) n->storage->release();
  if (n->target) n->target->release();
  if (Storage* d = n->dense.load(std::memory_order_acquire)) d->release();
  delete n;
}
}  // namespace

void Node::destroy() {
  destroy_from(this, 0);
  // Only the outermost call has deferred nodes to finish; nested ones
  // (defer_destroy's fallback) find the list as it is and take from it too.
  while (Node* n = take_deferred()) destroy_from(n, 1);
}

void* Node::operator new(size_t bytes) { return t_free_nodes.take(bytes, sizeof(Node)); }

void Node::operator delete(void* p) noexcept { t_free_nodes.give(p, kMaxFreeNodes); }

namespace {
thread_local BlockStack t_free_storage;
constexpr size_t kMaxFreeStorage = 1 << 12;
}  // namespace

void node_pool_trim() {
  for (BlockStack* stack : {static_cast<BlockStack*>(&t_free_nodes), &t_free_storage})
    if (stack->alive) stack->release_all();  // (a dead one gave its blocks back at thread exit)
}

size_t node_pool_cached() { return t_free_nodes.alive ? t_free_nodes.count : 0; }

void node_pool_init() {
  // Touching them constructs them (before the trace, so they die after it).
  if (!t_free_nodes.alive || !t_free_storage.alive) return;
}

void* Storage::operator new(size_t bytes) { return t_free_storage.take(bytes, sizeof(Storage)); }

void Storage::operator delete(void* p) noexcept { t_free_storage.give(p, kMaxFreeStorage); }

void contiguous_strides(const Shape& shape, int64_t* strides) {
  int64_t s = 1;
  for (int i = shape.rank() - 1; i >= 0; --i) {
    strides[i] = s;
    // Ops reject shapes whose strides do not fit (check_extents); one that
    // got past them must not wrap silently.
    if (i > 0 && __builtin_mul_overflow(s, shape[i], &s))
      throw Error("internal: contiguous strides of shape " + shape.to_string() + " overflow int64");
  }
}

namespace {
[[noreturn, gnu::cold, gnu::noinline]] void out_of_memory_node(OpKind op) {
  throw Error(std::string("out of memory: cannot record ") + (op == OpKind::None ? "a tensor" : op_name(op)));
}
}  // namespace

Node* new_node(NodeKind kind, OpKind op, Dtype dtype, const Shape& shape) {
  Node* n = nullptr;
  try {
    n = new Node(kind, op, dtype, shape);
  } catch (const std::bad_alloc&) {
    out_of_memory_node(op);
  }
  return n;
}

namespace {
bool count_edge(Node* input) {
  // `pending` is this thread's to read: the ops take only inputs that are
  // not pending in another thread's trace.
  if (input->pending) return false;
  // Every new node with inputs is recorded into this thread's trace, which
  // then holds the input (Trace::pin).
  if (t_trace != nullptr && t_trace->pin(input)) return false;
  input->retain();
  return true;
}

void attach_input(Node* n, int i, Node* input, bool counted) {
  const uint8_t bit = static_cast<uint8_t>(1u << i);
  n->uncounted = static_cast<uint8_t>(counted ? n->uncounted & ~bit : n->uncounted | bit);
  n->in[i] = input;
  if (n->nin <= i) n->nin = static_cast<uint8_t>(i + 1);
}
}  // namespace

// Every recorded op comes through here: the node is taken from the free
// list and written in one frame (no nested call), its edge bits at once.
Node* new_node(NodeKind kind, OpKind op, Dtype dtype, const Shape& shape, Node* const* inputs, int k) {
  uint8_t uncounted = 0;
  for (int i = 0; i < k; ++i)
    if (!count_edge(inputs[i])) uncounted = static_cast<uint8_t>(uncounted | 1u << i);
  void* block = nullptr;
  try {
    block = Node::operator new(sizeof(Node));
  } catch (const std::bad_alloc&) {
    for (int i = 0; i < k; ++i)
      if (!(uncounted >> i & 1)) inputs[i]->release();
    out_of_memory_node(op);
  }
  Node* n = ::new (block) Node(kind, op, dtype, shape);
  for (int i = 0; i < k; ++i) n->in[i] = inputs[i];
  n->nin = static_cast<uint8_t>(k);
  n->uncounted = uncounted;
  return n;
}

void set_input(Node* n, int i, Node* input) { attach_input(n, i, input, count_edge(input)); }

}  // namespace dvm::detail
