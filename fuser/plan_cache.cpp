// Plan cache: structural signatures and their plans.
#include "fuser/plan_cache.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace dvm::fuser {
using detail::Node;
using detail::NodeKind;

namespace {

constexpr size_t kMaxPlans = 1024;

// The most words one node adds: its two, a view's shape and strides (or a
// write's layout word), and per input a leaf's word, shape and strides.
constexpr size_t kMaxNodeWords = 2 + 2 * (kMaxRank + 1) + 3 * (1 + 2 * (kMaxRank + 1));

// The distinct leaves of one signature by first appearance, and each one's
// number: a scan while there are few, an open-addressing table of pointers
// beyond (a flush of many independent ops or cat pieces has a leaf per op,
// and a scan per input made it quadratic). Kept per thread: the capacity
// stays from flush to flush.
class LeafIds {
 public:
  void clear() {
    if (!leaves_.empty() && leaves_.size() > kScan) std::fill(slots_.begin(), slots_.end(), 0u);
    leaves_.clear();
  }
  // x's number, or -1 when it is new.
  int64_t find(const Node* x) const {
    if (leaves_.size() <= kScan) {
      for (size_t id = 0; id < leaves_.size(); ++id)
        if (leaves_[id] == x) return static_cast<int64_t>(id);
      return -1;
    }
    for (size_t i = hash(x);; i = (i + 1) & (slots_.size() - 1)) {
      const uint32_t v = slots_[i];
      if (v == 0) return -1;
      if (leaves_[v - 1] == x) return v - 1;
    }
  }
  // Numbers x (new): its number.
  size_t add(const Node* x) {
    leaves_.push_back(x);
    const size_t id = leaves_.size() - 1;
    if (leaves_.size() == kScan + 1 || leaves_.size() * 2 > slots_.size()) {
      rehash();
    } else if (leaves_.size() > kScan) {
      place(id);
    }
    return id;
  }

 private:
  static constexpr size_t kScan = 8;
  size_t hash(const Node* x) const {
    return static_cast<size_t>((reinterpret_cast<uintptr_t>(x) >> 4) * 0x9E3779B97F4A7C15ull >> 32) & (slots_.size() - 1);
  }
  void place(size_t id) {
    size_t i = hash(leaves_[id]);
    while (slots_[i] != 0) i = (i + 1) & (slots_.size() - 1);
    slots_[i] = static_cast<uint32_t>(id + 1);
  }
  void rehash() {
    size_t n = std::max<size_t>(slots_.size(), 64);
    while (n < leaves_.size() * 4) n *= 2;
    slots_.assign(n, 0u);
    for (size_t id = 0; id < leaves_.size(); ++id) place(id);
  }
  std::vector<const Node*> leaves_;
  std::vector<uint32_t> slots_;  // leaf number + 1, 0 empty
};

// Writes words through a raw cursor: the caller reserves kMaxNodeWords
// before each node, so no write checks capacity.
struct SigBuilder {
  uint64_t* w;
  std::vector<int64_t>& sizes;  // distinct extents > 1, by first appearance
  LeafIds& leaves;              // distinct leaves, by first appearance

  uint64_t extent_class(int64_t v) {
    if (v <= 1) return static_cast<uint64_t>(v);
    for (size_t i = 0; i < sizes.size(); ++i)
      if (sizes[i] == v) return 2 + i;
    sizes.push_back(v);
    return 1 + sizes.size();
  }
  void shape(const Shape& s) {
    *w++ = static_cast<uint64_t>(s.rank());
    for (int i = 0; i < s.rank(); ++i) *w++ = extent_class(s[i]);
  }
  // Explicit strides (a non-contiguous leaf's, a view's), and which of
  // them continue the next non-1 dim linearly (stride == next stride times
  // next extent): every merge of axes, linear part and row split the
  // lowering chooses follows from these relations, and with extents only
  // classified, equal literal strides alone could still hide a changed one.
  void strides(const Shape& s, const int64_t* st) {
    for (int k = s.rank() - 1; k >= 0; --k) *w++ = static_cast<uint64_t>(st[k]);
    *w++ = linear_bits(s, st);
  }
  static uint64_t linear_bits(const Shape& s, const int64_t* st) {
    uint64_t linear = 0;
    int next = -1;  // the next dim after k whose extent is not 1
    for (int k = s.rank() - 1; k >= 0; --k) {
      if (s[k] == 1) continue;
      if (next >= 0 && st[k] == st[next] * s[next]) linear |= uint64_t{1} << k;
      next = k;
    }
    return linear;
  }
  static uint64_t bits(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
  }
  // An input computed in this flush, or a leaf seen before: one word,
  // written inline.
  void input(const Node* x, int32_t index) {
    if (x->pending && x->needed) [[likely]] {
      *w++ = 1 | static_cast<uint64_t>(index - x->index) << 8;
      return;
    }
    if (const int64_t id = leaves.find(x); id >= 0) {  // seen before: its id says everything
      *w++ = 5 | static_cast<uint64_t>(id) << 16;
      return;
    }
    new_input(x);
  }
  [[gnu::noinline]] void new_input(const Node* x) {
    if (x->kind == NodeKind::Const && !x->storage) {
      // A user's value is a scalar parameter: not part of the structure.
      *w++ = 2 | static_cast<uint64_t>(x->immediate) << 7 | (x->immediate ? bits(x->value) << 8 : 0);
      shape(x->shape);
      return;
    }
    const size_t id = leaves.add(x);
    const bool contiguous = x->is_contiguous();
    *w++ = (contiguous ? 3 : 4) | static_cast<uint64_t>(x->dtype) << 8 | id << 16;
    shape(x->shape);
    if (!contiguous) strides(x->shape, x->strides);
  }
};

// A node's kind, op, dtype, keepdim and reduced axes in one load: the eight
// bytes from `kind` to `red_end`, less `pending` and `failed` (flush state,
// not structure).
static_assert(offsetof(Node, op) == offsetof(Node, kind) + 1 && offsetof(Node, dtype) == offsetof(Node, kind) + 2 &&
              offsetof(Node, keepdim) == offsetof(Node, kind) + 3 &&
              offsetof(Node, pending) == offsetof(Node, kind) + 4 &&
              offsetof(Node, failed) == offsetof(Node, kind) + 5 &&
              offsetof(Node, red_begin) == offsetof(Node, kind) + 6 &&
              offsetof(Node, red_end) == offsetof(Node, kind) + 7);
uint64_t head_word(const Node* n) {
  uint64_t head;
  std::memcpy(&head, &n->kind, 8);
  return head & ~(uint64_t{0xffff} << 32);
}

}  // namespace

void Signature::reserve(size_t words) {
  if (words <= capacity_) return;
  const size_t cap = std::max(words, 2 * capacity_);
  std::unique_ptr<uint64_t[]> grown(new uint64_t[cap]);
  if (size_) std::memcpy(grown.get(), buf_.get(), size_ * sizeof(uint64_t));
  buf_ = std::move(grown);
  capacity_ = cap;
}

void make_signature(const std::vector<Node*>& nodes, Signature* out) {
  out->size_ = 0;
  // Kept per thread: their capacity stays from flush to flush (no malloc).
  thread_local std::vector<int64_t> sizes;
  thread_local LeafIds leaves;
  sizes.clear();
  leaves.clear();
  out->reserve(nodes.size() * 8 + kMaxNodeWords);
  SigBuilder b{out->buf_.get(), sizes, leaves};
  uint64_t* limit = out->buf_.get() + out->capacity_;
  // Record order is topological: an input's index is set before its
  // consumer reads it.
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node* n = nodes[i];
    if (i + 8 < nodes.size()) __builtin_prefetch(nodes[i + 8]);
    if (static_cast<size_t>(limit - b.w) < kMaxNodeWords) [[unlikely]] {
      out->size_ = static_cast<size_t>(b.w - out->buf_.get());
      out->reserve(out->size_ + (nodes.size() - i) * 8 + kMaxNodeWords);
      b.w = out->buf_.get() + out->size_;
      limit = out->buf_.get() + out->capacity_;
    }
    n->index = static_cast<int32_t>(i);
    *b.w++ = head_word(n);
    const bool imm = n->scalar_pos >= 0 && n->immediate;
    *b.w++ = static_cast<uint64_t>(n->user_refs() > 0) | (imm ? SigBuilder::bits(n->value) << 1 : 0) |
             static_cast<uint64_t>(imm) << 33 | static_cast<uint64_t>(n->nin) << 34 |
             static_cast<uint64_t>(static_cast<uint8_t>(n->scalar_pos)) << 36;
    // An op's shape follows from its inputs' shapes and its attributes; only
    // a view's shape and strides are parameters of their own.
    if (n->kind == NodeKind::View) {
      b.shape(n->shape);
      b.strides(n->shape, n->strides);
    } else if (n->target) {
      // A write's store layout: which of its strides continue the next dim
      // linearly (a slice of its buffer's contiguous layout: the lowering's
      // choices follow from these alone, so new sizes keep the plan),
      // whether its innermost moving dim has a unit stride, and whether it
      // overlaps no earlier write.
      uint64_t unit = 1;
      for (int k = n->shape.rank() - 1; k >= 0; --k)
        if (n->shape[k] != 1) {
          unit = n->strides[k] == 1;
          break;
        }
      // Whether it may share a kernel with the writes before it (partition).
      *b.w++ = SigBuilder::linear_bits(n->shape, n->strides) | unit << 63 | uint64_t{n->disjoint_write} << 62;
    }
    const int32_t at = static_cast<int32_t>(i);
    switch (n->nin) {
      case 3: b.input(n->in[0], at); b.input(n->in[1], at); b.input(n->in[2], at); break;
      case 2: b.input(n->in[0], at); b.input(n->in[1], at); break;
      case 1: b.input(n->in[0], at); break;
      default: break;
    }
  }
  out->size_ = static_cast<size_t>(b.w - out->buf_.get());
  // Four independent lanes so the multiplies overlap.
  uint64_t h[4] = {1469598103934665603ull, 0x9E3779B97F4A7C15ull, 0xC2B2AE3D27D4EB4Full, 0x165667B19E3779F9ull};
  const uint64_t* w = out->buf_.get();
  const size_t size = out->size_;
  size_t i = 0;
  for (; i + 4 <= size; i += 4)
    for (int k = 0; k < 4; ++k) h[k] = (h[k] ^ w[i + static_cast<size_t>(k)]) * 0x100000001B3ull;
  for (; i < size; ++i) h[0] = (h[0] ^ w[i]) * 0x100000001B3ull;
  uint64_t r = h[0] ^ (h[1] >> 7) ^ (h[2] << 11) ^ (h[3] >> 17) ^ size;
  out->hash = r ^ (r >> 29);
}

PlanCache& PlanCache::current() {
  thread_local PlanCache c;
  return c;
}

const CachedPlan* PlanCache::find(const Signature& sig) const {
  auto [lo, hi] = entries_.equal_range(sig.hash);
  for (auto it = lo; it != hi; ++it) {
    const std::vector<uint64_t>& w = it->second.words;
    if (w.size() == sig.size() && std::memcmp(w.data(), sig.data(), w.size() * sizeof(uint64_t)) == 0)
      return &it->second.plan;
  }
  return nullptr;
}

const CachedPlan& PlanCache::insert(const Signature& sig, CachedPlan plan) {
  if (entries_.size() >= kMaxPlans) entries_.clear();  // rare: a program with very many structures
  return entries_.emplace(sig.hash, Entry{std::vector<uint64_t>(sig.data(), sig.data() + sig.size()), std::move(plan)})
      ->second.plan;
}

}  // namespace dvm::fuser
