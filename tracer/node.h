// Node: one recorded op of the lazy trace, and Storage: the buffers that
// materialized nodes point into.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "dvm/dtype.h"
#include "dvm/shape.h"
#include "tracer/ops.h"

namespace dvm::detail {

// A refcounted buffer of elems elements of elem_size bytes each (the
// node's dtype). Wrapped user memory is never written or freed.
struct RowCopies;

struct Storage {
  std::atomic<int32_t> refs{1};
  void* data = nullptr;
  int64_t elems = 0;
  size_t block_bytes = 0;  // the pool block's size (owned), what it is freed with
  uint8_t elem_size = 4;
  bool owned = false;  // false: user memory (read-only to dvm)
  // Row-major copies of matrices products read from it by columns
  // (tracer/row_copies.h); freed with it.
  std::atomic<RowCopies*> row_copies{nullptr};
  // The executor's mark of the stacked stage whose kernel last wrote it
  // (fuser/executor.cpp). Atomic: a buffer written again (a KVCache's) may
  // be an input of another thread's flush meanwhile.
  std::atomic<uint64_t> stage_mark{0};

  // 64-byte aligned, owned.
  static Storage* allocate(int64_t elems, Dtype type = Dtype::F32);
  static Storage* wrap(const void* data, int64_t elems, Dtype type = Dtype::F32);  // user memory
  float* f32() const { return static_cast<float*>(data); }
  // The address of element i.
  void* at(int64_t i) const { return static_cast<char*>(data) + i * elem_size; }
  size_t bytes() const { return static_cast<size_t>(elems > 0 ? elems : 1) * elem_size; }
  void retain() { refs.fetch_add(1, std::memory_order_relaxed); }
  void release();

  // From a per-thread free list, as nodes are: a flush that wraps inputs
  // and allocates outputs asks the system for nothing in steady state.
  static void* operator new(size_t bytes);
  static void operator delete(void* p) noexcept;
};

class Trace;

enum class NodeKind : uint8_t {
  Leaf,         // materialized from the start (user memory, vectors, random)
  Const,        // one value broadcast to the shape; never needs a buffer to read
  View,         // strided view of its input (reshape, permute, slice, expand)
  Copy,         // identity: makes a view contiguous
  Elementwise,  // op: a Broadcast op of the op table
  Reduce,       // op: a Reduce op over the axes [red_begin, red_end)
  Contract,     // op: a Contract op (matmul) of in[0] and in[1]
};

// A pending node belongs to the thread whose trace recorded it; once
// computed it is read-only and any thread may read it and hold handles to it
// (README.md, "Threads"). So the counts are atomic (a handle may die on any
// thread), and `owner` tells another thread that a node is still pending
// somewhere else.
struct Node {
  // Its shape written once (not zeroed first).
  Node(NodeKind k, OpKind o, Dtype t, const Shape& s) : kind(k), op(o), dtype(t), shape(s) {}

  // The low 32 bits count references (Tensor handles + consumers + the
  // trace), the high 32 bits the Tensor handles alone (what a flush must
  // keep observable). One word: a handle's birth or death is at most one
  // atomic operation (none for a handle of a node pending in this thread's
  // trace: dropped_handles).
  std::atomic<uint64_t> counts{0};
  NodeKind kind = NodeKind::Leaf;
  OpKind op = OpKind::None;
  Dtype dtype = Dtype::F32;
  bool keepdim = false;
  bool pending = false;  // recorded, not yet computed, still in the trace
  // Its flush failed before its values were written: reading it, or using it
  // as an input, throws that flush's error (failure_message()).
  bool failed = false;
  int8_t red_begin = 0, red_end = 0;
  uint8_t nin = 0;
  // Bit i: in[i] is not counted in that input's refs. The recording
  // thread's trace keeps such an input alive until the flush of this node
  // ends: an input pending in it, or one it pinned (Trace::pin). So
  // recording an op counts no edge (one atomic operation fewer per operand);
  // the flush drops or counts these edges (settle).
  uint8_t uncounted = 0;
  // The fields every pass of a flush reads come first (one cache line with
  // the counts): the rest is read once the node is lowered or computed.
  bool needed = false;  // reachable from a live Tensor at flush
  // A write (`target` set) that overlaps none of the writes before it into
  // the same buffer (the chain of in[1]): cat's pieces, each its own slice
  // of a fresh buffer. Such writes of one shape may share a kernel.
  bool disjoint_write = false;
  // Handles of this pending node that died on the thread whose trace holds
  // it, not yet taken off `counts`: such a death is this plain increment
  // instead of an atomic operation (one that waits for the stores of the
  // node just recorded), and the node's flush subtracts them all at once
  // (settle). Only that thread reads or writes it while the node is
  // pending; 0 once it is not.
  uint32_t dropped_handles = 0;
  // Position in the node list of the flush that computes it: the fuser
  // numbers the list it is handed and keeps what it decides about each node
  // in its own arrays, indexed by this.
  int32_t index = 0;
  // A View that permute() made of a tensor that is not a view: bit 31 set,
  // and in bits 3i..3i+2 the input axis that its axis i is. A reduction of
  // it reduces that input and permutes the result (tensor.cpp, reduce):
  // decided by how the view was made, never by its extents, so a graph's
  // capture and the lazy path at any binding decide alike. (Here: it fills
  // the padding before `in`.)
  uint32_t permute_code = 0;
  Node* in[3] = {nullptr, nullptr, nullptr};
  float value = 0.0f;       // Const; or the inline scalar operand
  int8_t scalar_pos = -1;   // Elementwise: operand position of the inline scalar
  // Whether `value` belongs to an op's definition (a composition's own
  // constant: an immediate in the kernel) rather than the user's (a scalar
  // parameter bound at launch, so a new value compiles nothing).
  bool immediate = false;
  // A 0-d int64 leaf made from a C++ integer (Tensor(int)): torch's wrapped
  // integer, which promotes bool operands only (tracer/tensor.cpp, Promotion).
  bool int_scalar = false;
  // A 0-d constant made from a C++ float (Tensor(2.0f)): torch's wrapped
  // float, which pow takes as its scalar exponent (Tensor::scalar and
  // full({}) make 0-d tensors, which it does not).
  bool float_scalar = false;
  Shape shape;

  // Where the values live once materialized: element (i0, i1, ...) is at
  // storage->data[offset + sum(i_k * strides[k])]. A pending View keeps its
  // strides and offset relative to its input's contiguous layout.
  Storage* storage = nullptr;
  int64_t offset = 0;
  int64_t strides[kMaxRank] = {};
  // A write (a Copy of in[0]) stores its values into this dvm-owned buffer,
  // at the offset and strides set when it was recorded, instead of a fresh
  // one: cat's pieces and KVCache::append. Its in[1], when set, is the write
  // before it into the same buffer, an order-only input (its values are
  // never read): the view of the buffer that reads the last write then
  // runs after every write. Holds a reference.
  Storage* target = nullptr;
  // The inputs whose values the op reads (a write's order-only input is not one).
  int data_inputs() const { return target ? 1 : nin; }

  // The trace that holds this node pending, else null. Cleared (release)
  // once the flush has written everything it writes to the node, so a
  // thread that reads null (acquire) may read the node's values.
  std::atomic<const Trace*> owner{nullptr};
  // A contiguous copy of the values made by data() for a constant or a
  // strided view; set once (the first thread to finish wins), then read-only.
  std::atomic<Storage*> dense{nullptr};


  bool materialized() const { return storage != nullptr; }
  // Readable without running a kernel: a buffer or a constant.
  bool available() const { return storage != nullptr || kind == NodeKind::Const; }
  bool is_contiguous() const;

  static constexpr uint64_t kRef = 1;
  static constexpr uint64_t kUserRef = (uint64_t{1} << 32) | 1;  // a reference that is a handle
  // References (handles included), dropped handles already subtracted.
  int32_t refs() const {
    return static_cast<int32_t>(counts.load(std::memory_order_relaxed) & 0xffffffffu) -
           static_cast<int32_t>(dropped_handles);
  }
  // Live handles (dropped ones already subtracted): what a flush must keep
  // observable.
  int32_t user_refs() const {
    return static_cast<int32_t>(counts.load(std::memory_order_relaxed) >> 32) - static_cast<int32_t>(dropped_handles);
  }
  void retain(uint64_t kind = kRef) { counts.fetch_add(kind, std::memory_order_relaxed); }
  // Drops `amount` (kRef, kUserRef or a sum of them). When they are all the
  // references there are, no other thread can make a new one: the node dies
  // without an atomic operation (acquire: a release by another thread just
  // before is done with it).
  void release(uint64_t amount = kRef) {
    if (counts.load(std::memory_order_acquire) == amount ||
        (counts.fetch_sub(amount, std::memory_order_acq_rel) & 0xffffffffu) == (amount & 0xffffffffu))
      destroy();
  }
  // What the trace holding this pending node drops when the node leaves it:
  // its own reference and the handles dropped meanwhile (which it clears).
  uint64_t take_trace_refs() {
    const uint64_t r = kRef + uint64_t{dropped_handles} * kUserRef;
    dropped_handles = 0;
    return r;
  }
  // Whether the calling thread may read this node's fields that a flush
  // writes (storage, strides, inputs): not pending in another thread's trace.
  // mine() gives this thread's trace; it is called only for a pending node
  // (a computed one is the common case, and the lookup is a thread-local).
  template <class Mine>
  bool readable_by(Mine mine) const {
    const Trace* o = owner.load(std::memory_order_acquire);
    return o == nullptr || o == mine();
  }
  void destroy();
  // Whether destroying this node frees nothing but the node: every input
  // uncounted, no buffer, no write target, no dense copy, not failed.
  bool holds_nothing() const {
    return ((uncounted | ~((1u << nin) - 1u)) & 0xffu) == 0xffu && !storage && !target &&
           !dense.load(std::memory_order_relaxed) && !failed;
  }
  // Drops the inputs once this node's values are materialized.
  void drop_inputs();
  // Counts the uncounted edges of a node that keeps its inputs past the
  // flush that made them (before the trace lets go of its nodes).
  void count_inputs();

  // Nodes come from a per-thread free list: recording allocates nothing
  // from the system in steady state.
  static void* operator new(size_t bytes);
  static void operator delete(void* p) noexcept;
};

// Marks n failed with why (the error of the flush that should have computed
// it). Never throws: when even the message cannot be stored, the node still
// fails, with a generic message.
void mark_failed(Node* n, const std::shared_ptr<const std::string>& why) noexcept;
// The error a failed node's flush raised.
std::string failure_message(const Node* n);

// Row-major contiguous strides for shape.
void contiguous_strides(const Shape& shape, int64_t* strides);

// Creates this thread's node and storage free lists. The trace calls it
// first thing, so the lists outlive the trace at thread exit (thread_locals
// die in reverse order of construction) and its last releases find them.
void node_pool_init();
// Frees the calling thread's cached node and storage blocks (dvm::trim).
void node_pool_trim();
// Node blocks the calling thread keeps for reuse (tests).
size_t node_pool_cached();

Node* new_node(NodeKind kind, OpKind op, Dtype dtype, const Shape& shape);
// Sets n's input i (n is new, and is recorded into this thread's trace
// before its next flush): counts the reference, unless the trace holds
// input (see Node::uncounted).
void set_input(Node* n, int i, Node* input);
// new_node with inputs 0..k-1 set (as set_input). The edges are counted
// before the node is written: an atomic operation waits for the stores
// before it, and a new node is a few hundred bytes of them.
Node* new_node(NodeKind kind, OpKind op, Dtype dtype, const Shape& shape, Node* const* inputs, int k);

}  // namespace dvm::detail
