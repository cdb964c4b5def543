// The structural signature of a list of recorded nodes: what the plan cache
// (fuser/plan_cache.h) keys fusion plans by. Built a node at a time, in
// record order, as the trace records them (the node and its inputs are in
// cache then), and completed at the flush with what only the flush knows:
// which nodes a live Tensor can reach and which it observes.
//
// It holds what fusion and encoding decisions depend on: ops, dtypes,
// immediates (never the user's scalars: a replay binds them from its own
// flush's nodes), which nodes are computed and observed, how nodes connect,
// which leaves are the same tensor, ranks, and for every extent only its
// class — 0, 1, or "the k-th distinct size seen" — so equal extents stay
// equal and concrete sizes never enter it. Non-contiguous leaves and views
// add their strides and which of them continue the next dim linearly.
#pragma once

#include <cstdint>
#include <vector>

#include "tracer/node.h"

namespace dvm::detail {

struct Signature {
  std::vector<uint64_t> words;
  uint64_t hash = 0;
};

class SignatureBuilder {
 public:
  // Starts the signature of a new list (keeps the buffers' capacity).
  void reset();
  // Appends n, the list's next node: every pending input of n is in the
  // list before it. Numbers it (Node::index = its position in the list).
  // Throws std::bad_alloc when its words cannot be stored; the builder is
  // then incomplete (complete() is false) until the next reset().
  void add(Node* n);
  bool complete() const { return complete_; }
  // Completes the signature of `nodes`, the list added since reset(), each
  // node's Node::needed already marked: appends which nodes are needed and
  // which of those a live Tensor observes, and hashes. Numbers the needed
  // nodes (Node::index = position among them), as the fuser expects.
  const Signature& finish(const std::vector<Node*>& nodes);

 private:
  void push(uint64_t w) { sig_.words.push_back(w); }
  uint64_t extent_class(int64_t v);
  void shape(const Shape& s);
  void strides(const Shape& s, const int64_t* st);
  void input(const Node* x, int32_t index);

  Signature sig_;
  std::vector<int64_t> sizes_;        // distinct extents > 1, by first appearance
  std::vector<const Node*> leaves_;   // distinct leaves, by first appearance
  int32_t count_ = 0;
  bool complete_ = true;
};

// The signature of `nodes` (needed nodes in record order, as the fuser is
// handed them), built at once: for callers that drive the fuser directly.
void make_signature(const std::vector<Node*>& nodes, Signature* out);

}  // namespace dvm::detail
