// Plan cache: structural signatures and their plans.
#include "fuser/plan_cache.h"

#include <cstring>

namespace dvm::fuser {
using detail::Node;
using detail::NodeKind;

namespace {

constexpr size_t kMaxPlans = 1024;

struct SigBuilder {
  std::vector<uint64_t>& w;
  std::vector<int64_t>& sizes;        // distinct extents > 1, by first appearance
  std::vector<const Node*>& leaves;   // distinct leaves, by first appearance

  uint64_t extent_class(int64_t v) {
    if (v <= 1) return static_cast<uint64_t>(v);
    for (size_t i = 0; i < sizes.size(); ++i)
      if (sizes[i] == v) return 2 + i;
    sizes.push_back(v);
    return 1 + sizes.size();
  }
  void shape(const Shape& s) {
    w.push_back(static_cast<uint64_t>(s.rank()));
    for (int i = 0; i < s.rank(); ++i) w.push_back(extent_class(s[i]));
  }
  // Explicit strides (a non-contiguous leaf's, a view's), and which of
  // them continue the next non-1 dim linearly (stride == next stride times
  // next extent): every merge of axes, linear part and row split the
  // lowering chooses follows from these relations, and with extents only
  // classified, equal literal strides alone could still hide a changed one.
  void strides(const Shape& s, const int64_t* st) {
    for (int k = s.rank() - 1; k >= 0; --k) w.push_back(static_cast<uint64_t>(st[k]));
    w.push_back(linear_bits(s, st));
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
  void input(const Node* x, int32_t index) {
    if (x->pending && x->needed) {
      w.push_back(1 | static_cast<uint64_t>(index - x->index) << 8);
      return;
    }
    if (x->kind == NodeKind::Const && !x->storage) {
      // A user's value is a scalar parameter: not part of the structure.
      w.push_back(2 | static_cast<uint64_t>(x->immediate) << 7 | (x->immediate ? bits(x->value) << 8 : 0));
      shape(x->shape);
      return;
    }
    size_t id = 0;
    while (id < leaves.size() && leaves[id] != x) ++id;
    if (id < leaves.size()) {  // seen before: its id says everything
      w.push_back(5 | id << 16);
      return;
    }
    leaves.push_back(x);
    const bool contiguous = x->is_contiguous();
    w.push_back((contiguous ? 3 : 4) | static_cast<uint64_t>(x->dtype) << 8 | id << 16);
    shape(x->shape);
    if (!contiguous) strides(x->shape, x->strides);
  }
};

}  // namespace

void make_signature(const std::vector<Node*>& nodes, Signature* out) {
  out->words.clear();
  out->words.reserve(nodes.size() * 8);
  // Kept per thread: their capacity stays from flush to flush (no malloc).
  thread_local std::vector<int64_t> sizes;
  thread_local std::vector<const Node*> leaves;
  sizes.clear();
  leaves.clear();
  SigBuilder b{out->words, sizes, leaves};
  // Record order is topological: an input's index is set before its
  // consumer reads it.
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node* n = nodes[i];
    if (i + 8 < nodes.size()) __builtin_prefetch(nodes[i + 8]);
    n->index = static_cast<int32_t>(i);
    b.w.push_back(static_cast<uint64_t>(n->kind) | static_cast<uint64_t>(n->op) << 8 |
                  static_cast<uint64_t>(n->dtype) << 16 | static_cast<uint64_t>(n->nin) << 24 |
                  static_cast<uint64_t>(static_cast<uint8_t>(n->scalar_pos)) << 32 |
                  static_cast<uint64_t>(n->keepdim) << 40 |
                  static_cast<uint64_t>(static_cast<uint8_t>(n->red_begin)) << 48 |
                  static_cast<uint64_t>(static_cast<uint8_t>(n->red_end)) << 56);
    const bool imm = n->scalar_pos >= 0 && n->immediate;
    b.w.push_back(static_cast<uint64_t>(n->user_refs() > 0) | static_cast<uint64_t>(imm) << 33 |
                  (imm ? SigBuilder::bits(n->value) << 1 : 0));
    // An op's shape follows from its inputs' shapes and its attributes; only
    // a view's shape and strides are parameters of their own.
    if (n->kind == NodeKind::View) {
      b.shape(n->shape);
      b.strides(n->shape, n->strides);
    } else if (n->target) {
      // A write's store layout: which of its strides continue the next dim
      // linearly (a slice of its buffer's contiguous layout: the lowering's
      // choices follow from these alone, so new sizes keep the plan),
      // and whether its innermost moving dim has a unit stride.
      uint64_t unit = 1;
      for (int k = n->shape.rank() - 1; k >= 0; --k)
        if (n->shape[k] != 1) {
          unit = n->strides[k] == 1;
          break;
        }
      b.w.push_back(SigBuilder::linear_bits(n->shape, n->strides) | unit << 63);
    }
    for (int k = 0; k < n->nin; ++k) b.input(n->in[k], static_cast<int32_t>(i));
  }
  // Four independent lanes so the multiplies overlap.
  uint64_t h[4] = {1469598103934665603ull, 0x9E3779B97F4A7C15ull, 0xC2B2AE3D27D4EB4Full, 0x165667B19E3779F9ull};
  const std::vector<uint64_t>& w = out->words;
  size_t i = 0;
  for (; i + 4 <= w.size(); i += 4)
    for (int k = 0; k < 4; ++k) h[k] = (h[k] ^ w[i + static_cast<size_t>(k)]) * 0x100000001B3ull;
  for (; i < w.size(); ++i) h[0] = (h[0] ^ w[i]) * 0x100000001B3ull;
  uint64_t r = h[0] ^ (h[1] >> 7) ^ (h[2] << 11) ^ (h[3] >> 17) ^ w.size();
  out->hash = r ^ (r >> 29);
}

PlanCache& PlanCache::current() {
  thread_local PlanCache c;
  return c;
}

const CachedPlan* PlanCache::find(const Signature& sig) const {
  auto [lo, hi] = entries_.equal_range(sig.hash);
  for (auto it = lo; it != hi; ++it)
    if (it->second.sig.words == sig.words) return &it->second.plan;
  return nullptr;
}

const CachedPlan& PlanCache::insert(Signature sig, CachedPlan plan) {
  if (entries_.size() >= kMaxPlans) entries_.clear();  // rare: a program with very many structures
  uint64_t h = sig.hash;
  return entries_.emplace(h, Entry{std::move(sig), std::move(plan)})->second.plan;
}

}  // namespace dvm::fuser
