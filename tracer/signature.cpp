// Structural signatures, built node by node.
#include "tracer/signature.h"

#include <cstring>

namespace dvm::detail {

namespace {
uint64_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// Which strides continue the next non-1 dim linearly (stride == next
// stride times next extent): every merge of axes, linear part and row split
// the lowering chooses follows from these relations, and with extents only
// classified, equal literal strides alone could still hide a changed one.
uint64_t linear_bits(const Shape& s, const int64_t* st) {
  uint64_t linear = 0;
  int next = -1;  // the next dim after k whose extent is not 1
  for (int k = s.rank() - 1; k >= 0; --k) {
    if (s[k] == 1) continue;
    if (next >= 0 && st[k] == st[next] * s[next]) linear |= uint64_t{1} << k;
    next = k;
  }
  return linear;
}
}  // namespace

void SignatureBuilder::reset() {
  sig_.words.clear();
  sig_.hash = 0;
  sizes_.clear();
  leaves_.clear();
  count_ = 0;
  complete_ = true;
}

uint64_t SignatureBuilder::extent_class(int64_t v) {
  if (v <= 1) return static_cast<uint64_t>(v);
  for (size_t i = 0; i < sizes_.size(); ++i)
    if (sizes_[i] == v) return 2 + i;
  sizes_.push_back(v);
  return 1 + sizes_.size();
}

void SignatureBuilder::shape(const Shape& s) {
  push(static_cast<uint64_t>(s.rank()));
  for (int i = 0; i < s.rank(); ++i) push(extent_class(s[i]));
}

// Explicit strides (a non-contiguous leaf's, a view's) and their linear bits.
void SignatureBuilder::strides(const Shape& s, const int64_t* st) {
  for (int k = s.rank() - 1; k >= 0; --k) push(static_cast<uint64_t>(st[k]));
  push(linear_bits(s, st));
}

void SignatureBuilder::input(const Node* x, int32_t index) {
  if (x->pending) {  // earlier in this list: where, relative to its reader
    push(1 | static_cast<uint64_t>(index - x->index) << 8);
    return;
  }
  if (x->kind == NodeKind::Const && !x->storage) {
    // A user's value is a scalar parameter: not part of the structure.
    push(2 | static_cast<uint64_t>(x->immediate) << 7 | (x->immediate ? bits(x->value) << 8 : 0));
    shape(x->shape);
    return;
  }
  size_t id = 0;
  while (id < leaves_.size() && leaves_[id] != x) ++id;
  if (id < leaves_.size()) {  // seen before: its id says everything
    push(5 | id << 16);
    return;
  }
  leaves_.push_back(x);
  const bool contiguous = x->is_contiguous();
  push((contiguous ? 3 : 4) | static_cast<uint64_t>(x->dtype) << 8 | id << 16);
  shape(x->shape);
  if (!contiguous) strides(x->shape, x->strides);
}

void SignatureBuilder::add(Node* n) {
  complete_ = false;  // until this node's words are all in
  n->index = count_++;
  push(static_cast<uint64_t>(n->kind) | static_cast<uint64_t>(n->op) << 8 | static_cast<uint64_t>(n->dtype) << 16 |
       static_cast<uint64_t>(n->nin) << 24 | static_cast<uint64_t>(static_cast<uint8_t>(n->scalar_pos)) << 32 |
       static_cast<uint64_t>(n->keepdim) << 40 | static_cast<uint64_t>(static_cast<uint8_t>(n->red_begin)) << 48 |
       static_cast<uint64_t>(static_cast<uint8_t>(n->red_end)) << 56);
  const bool imm = n->scalar_pos >= 0 && n->immediate;
  push(static_cast<uint64_t>(imm) | (imm ? bits(n->value) << 1 : 0));
  // An op's shape follows from its inputs' shapes and its attributes; only
  // a view's shape and strides are parameters of their own.
  if (n->kind == NodeKind::View) {
    shape(n->shape);
    strides(n->shape, n->strides);
  } else if (n->target) {
    // A write's store layout: which of its strides continue the next dim
    // linearly (a slice of its buffer's contiguous layout: the lowering's
    // choices follow from these alone, so new sizes keep the plan), and
    // whether its innermost moving dim has a unit stride.
    uint64_t unit = 1;
    for (int k = n->shape.rank() - 1; k >= 0; --k)
      if (n->shape[k] != 1) {
        unit = n->strides[k] == 1;
        break;
      }
    push(linear_bits(n->shape, n->strides) | unit << 63);
  }
  for (int k = 0; k < n->nin; ++k) input(n->in[k], n->index);
  complete_ = true;
}

const Signature& SignatureBuilder::finish(const std::vector<Node*>& nodes) {
  // Two bits a node: needed, and observed (a live Tensor holds it).
  std::vector<uint64_t>& w = sig_.words;
  uint64_t word = 0;
  int used = 0;
  int32_t needed = 0;
  for (Node* n : nodes) {
    if (n->needed) {
      word |= (uint64_t{1} | static_cast<uint64_t>(n->user_refs() > 0) << 1) << used;
      n->index = needed++;
    }
    used += 2;
    if (used == 64) {
      w.push_back(word);
      word = 0;
      used = 0;
    }
  }
  w.push_back(word);
  w.push_back(nodes.size());
  // Four independent lanes so the multiplies overlap.
  uint64_t h[4] = {1469598103934665603ull, 0x9E3779B97F4A7C15ull, 0xC2B2AE3D27D4EB4Full, 0x165667B19E3779F9ull};
  size_t i = 0;
  for (; i + 4 <= w.size(); i += 4)
    for (int k = 0; k < 4; ++k) h[k] = (h[k] ^ w[i + static_cast<size_t>(k)]) * 0x100000001B3ull;
  for (; i < w.size(); ++i) h[0] = (h[0] ^ w[i]) * 0x100000001B3ull;
  const uint64_t r = h[0] ^ (h[1] >> 7) ^ (h[2] << 11) ^ (h[3] >> 17) ^ w.size();
  sig_.hash = r ^ (r >> 29);
  return sig_;
}

void make_signature(const std::vector<Node*>& nodes, Signature* out) {
  thread_local SignatureBuilder b;  // its buffers keep their capacity
  b.reset();
  for (Node* n : nodes) b.add(n);
  *out = b.finish(nodes);
}

}  // namespace dvm::detail
