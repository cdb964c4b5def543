// Plan cache: a flushed trace whose structure was seen before reuses its
// fusion plan and kernels without running the partition or the encoder.
//
// The signature holds what fusion and encoding decisions depend on: ops,
// dtypes, immediates (never the user's scalars: a replay binds them from its
// own flush's nodes), which values are observed, how nodes connect, which
// leaves are the same tensor, ranks, and for every extent only its class —
// 0, 1, or "the k-th distinct size seen" — so equal extents stay equal and
// concrete sizes never enter it. Non-contiguous leaves and views add their
// strides and which of them continue the next dim linearly.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "tracer/node.h"
#include "vm/bytecode.h"
#include "fuser/lower.h"
#include "vm/kernel.h"

namespace dvm::fuser {

// Built in a buffer of its own that keeps its capacity from flush to flush
// (make_signature writes it through a raw cursor).
class Signature {
 public:
  const uint64_t* data() const { return buf_.get(); }
  size_t size() const { return size_; }
  uint64_t hash = 0;

 private:
  friend void make_signature(const std::vector<detail::Node*>& nodes, Signature* out);
  void reserve(size_t words);
  std::unique_ptr<uint64_t[]> buf_;
  size_t size_ = 0, capacity_ = 0;
};

// Signature of `nodes` (a flush's needed nodes in record order). Numbers
// them (Node::index = position in nodes).
void make_signature(const std::vector<detail::Node*>& nodes, Signature* out);

struct CachedGroup {
  std::vector<int32_t> members;  // indices into the flushed node list
  vm::Form form = vm::Form::Elementwise;
  int red_begin = 0, red_end = 0;
  int32_t full_from = 0;         // member whose shape is the group's full shape...
  bool full_from_input = false;  // ...or whose input's shape is (a reduction)
  std::shared_ptr<vm::Kernel> kernel;
  ReplayPlan replay;  // its space and arguments, for new sizes
  std::vector<ScalarOrigin> scalars;  // its scalar parameters, by origin
};

struct CachedPlan {
  std::vector<CachedGroup> groups;     // in execution order
  std::vector<Placement> placement;    // per node, as partition left it
};

class PlanCache {
 public:
  static PlanCache& current();  // per thread, like the trace
  const CachedPlan* find(const Signature& sig) const;
  const CachedPlan& insert(const Signature& sig, CachedPlan plan);
  int64_t hits = 0, misses = 0;
  size_t size() const { return entries_.size(); }
  void clear() { entries_.clear(); }

 private:
  struct Entry {
    std::vector<uint64_t> words;  // the signature's
    CachedPlan plan;
  };
  std::unordered_multimap<uint64_t, Entry> entries_;
};

}  // namespace dvm::fuser
