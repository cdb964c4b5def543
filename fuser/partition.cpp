// Partition pass: assigns every pending node to a fused group.
#include "fuser/partition.h"

#include <algorithm>
#include <iterator>

namespace dvm::fuser {
using detail::Node;
using detail::NodeKind;

bool is_reduced_shape(const Shape& s, const Shape& full, int a, int b) {
  if (s.rank() == full.rank()) {
    for (int i = 0; i < full.rank(); ++i)
      if (s[i] != ((i >= a && i < b) ? 1 : full[i])) return false;
    return true;
  }
  if (s.rank() == full.rank() - (b - a)) {
    for (int i = 0, j = 0; i < full.rank(); ++i) {
      if (i >= a && i < b) continue;
      if (s[j++] != full[i]) return false;
    }
    return true;
  }
  // Reduced axes that run to the end may include kept axes of extent 1 (a
  // row reduction over [a, b) with only 1s after b, place_reduce): its
  // result keeps some of them. Its elements lie as the reduced shape's.
  if (b != full.rank() || s.rank() < a || s.rank() > full.rank()) return false;
  for (int i = 0; i < s.rank(); ++i)
    if (s[i] != (i < a ? full[i] : 1)) return false;
  return true;
}

void broadcast_strides(const Node* x, const Shape& s, int64_t* out, const int64_t* xs) {
  int64_t own[kMaxRank];
  if (!xs && x->pending && x->kind != NodeKind::View && !x->storage) {
    detail::contiguous_strides(x->shape, own);
    xs = own;
  } else if (!xs) {
    xs = x->strides;
  }
  broadcast_strides(x->shape, xs, s, out);
}

void broadcast_strides(const Shape& xshape, const int64_t* xs, const Shape& s, int64_t* out) {
  const int lead = s.rank() - xshape.rank();
  for (int k = 0; k < s.rank(); ++k) {
    int j = k - lead;
    out[k] = (j < 0 || (xshape[j] == 1 && s[k] != 1)) ? 0 : xs[j];
  }
}

bool view_axes(const Node* v, int8_t* axis) {
  const Node* x = v->in[0];
  if (v->offset != 0) return false;
  int64_t cs[kMaxRank];
  detail::contiguous_strides(x->shape, cs);
  uint32_t taken = 0;
  for (int i = 0; i < v->shape.rank(); ++i) {
    axis[i] = -1;
    if (v->shape[i] == 1 || v->strides[i] == 0) continue;
    int j = 0;
    while (j < x->shape.rank() && !(x->shape[j] == v->shape[i] && x->shape[j] > 1 && cs[j] == v->strides[i])) ++j;
    if (j == x->shape.rank() || (taken >> j & 1u)) return false;
    taken |= 1u << j;
    axis[i] = static_cast<int8_t>(j);
  }
  return true;
}

void to_full_space(const Shape& full, int a, int b, const Shape& s, const int64_t* in, int64_t* out) {
  const int rank = full.rank();
  if (s.rank() == rank) {
    for (int k = 0; k < rank; ++k) out[k] = (k >= a && k < b) ? 0 : in[k];
    return;
  }
  for (int k = 0, j = 0; k < rank; ++k) out[k] = (k >= a && k < b) ? 0 : in[j++];
}

namespace {
bool linear_over(const Shape& f, int b, int e, const int64_t* st) {
  int64_t t = 0, span = 1;
  bool first = true;
  for (int d = e - 1; d >= b; --d) {
    if (f[d] == 1) continue;
    if (first) {
      t = st[d];
      first = false;
    } else if (st[d] != t * span) {
      return false;
    }
    span *= f[d];
  }
  return true;
}
}  // namespace

uint32_t linear_splits(const Shape& full, int k, const int64_t* strides) {
  // Linear over all of [0, k): then over every piece of it too.
  if (linear_over(full, 0, k, strides)) return (2u << k) - 1;
  uint32_t m = 0;
  for (int s = 0; s <= k; ++s)
    if (linear_over(full, 0, s, strides) && linear_over(full, s, k, strides)) m |= 1u << s;
  return m;
}

namespace {

// Whether n computes or reads int64 values (int64 lanes in its kernel).
bool int64_values(const Node* n) {
  if (n->dtype == Dtype::I64) return true;
  for (int i = 0; i < n->data_inputs(); ++i)
    if (n->in[i] && n->in[i]->dtype == Dtype::I64) return true;
  return false;
}
// Whether n sums floats: its kernel's result depends on how a launch splits
// the rows (vm/split_launch.cpp).
bool float_sum(const Node* n) { return n->kind == NodeKind::Reduce && n->op == detail::OpKind::Sum && is_floating(n->dtype); }

class Partitioner {
 public:
  Plan plan;

  Placement& at(const Node* n) { return plan.placement[static_cast<size_t>(n->index)]; }
  const Placement& at(const Node* n) const { return plan.placement[static_cast<size_t>(n->index)]; }

  // A node computed by a group in this flush (not a leaf, constant or view).
  bool in_group(const Node* n) const {
    return n->pending && static_cast<size_t>(n->index) < plan.placement.size() && at(n).group >= 0;
  }

  // An input computed by a group that n may join (not a sealed conversion).
  bool joinable(const Node* x) const { return in_group(x) && !plan.groups[static_cast<size_t>(find(at(x).group))].sealed; }

  int find(int g) const {
    while (!plan.groups[static_cast<size_t>(g)].alive) g = plan.groups[static_cast<size_t>(g)].merged_into;
    return g;
  }

  void place(Node* n) {
    if (n->kind == NodeKind::View) return;  // (finish() stores what views read)
    if (n->kind == NodeKind::Reduce) place_reduce(n);
    else if (n->kind == NodeKind::Contract) place_contract(n);
    else if (n->target) place_write(n);
    else if (n->kind == NodeKind::Copy && n->dtype != n->in[0]->dtype) place_conversion(n);
    else place_elementwise(n);
  }

  void finish(const std::vector<Node*>& nodes) {
    for (Node* n : nodes) {
      if (n->kind == NodeKind::View) {
        // A view reads its pending input from memory, which is then stored,
        // unless a product reads the view of its own prologue's value.
        if (n->in[0]->pending && !at(n).in_registers) at(n->in[0]).output = true;
        continue;
      }
      // A write exists to store (one read only by the next write of its
      // group, through its order-only input, is still stored).
      if (n->user_refs() > 0 || n->target) at(n).output = true;
      for (int i = 0; i < n->nin; ++i) {
        Node* x = n->in[i];
        if (in_group(x) && at(x).group != at(n).group) at(x).output = true;
      }
    }
    // Topological order of live groups (dependencies first). The visit
    // marks sit on the stack for the usual few groups.
    int8_t few[64] = {};
    std::vector<int8_t> many;
    int8_t* state = few;
    if (plan.groups.size() > std::size(few)) {
      many.assign(plan.groups.size(), 0);
      state = many.data();
    }
    for (size_t g = 0; g < plan.groups.size(); ++g)
      if (plan.groups[g].alive) visit(static_cast<int>(g), state);
  }

 private:
  void visit(int g, int8_t* state) {
    if (state[static_cast<size_t>(g)]) return;
    state[static_cast<size_t>(g)] = 1;
    for (int d : plan.groups[static_cast<size_t>(g)].deps) visit(find(d), state);
    plan.order.push_back(g);
  }

  int new_group(vm::Form form, const Shape& full, int a, int b) {
    Group g;
    g.form = form;
    g.full = full;
    g.red_begin = a;
    g.red_end = b;
    plan.groups.push_back(std::move(g));
    return static_cast<int>(plan.groups.size()) - 1;
  }

  Group& G(int g) { return plan.groups[static_cast<size_t>(g)]; }
  const Group& G(int g) const { return plan.groups[static_cast<size_t>(g)]; }

  // Does group `from` read (transitively) from group `to`?
  bool depends(int from, int to) const {
    std::vector<int> stack{from};
    std::vector<int> seen;
    while (!stack.empty()) {
      int g = find(stack.back());
      stack.pop_back();
      if (g == to) return true;
      if (std::find(seen.begin(), seen.end(), g) != seen.end()) continue;
      seen.push_back(g);
      for (int d : plan.groups[static_cast<size_t>(g)].deps) stack.push_back(d);
    }
    return false;
  }

  void add_dep(int g, int on) {
    on = find(on);
    if (on == g) return;
    auto& deps = G(g).deps;
    if (std::find(deps.begin(), deps.end(), on) == deps.end()) deps.push_back(on);
  }

  // Whether n may join group g: not int64 values beside a float sum.
  bool lanes_agree(const Node* n, const Group& g) const {
    return !((g.int64_values || int64_values(n)) && (g.float_sum || float_sum(n)));
  }

  void join(Node* n, int g, Domain d) {
    at(n).group = g;
    at(n).domain = d;
    G(g).members.push_back(n);
    G(g).int64_values |= int64_values(n);
    G(g).float_sum |= float_sum(n);
    // Inputs from other groups (stored there) and from views of pending nodes.
    for (int i = 0; i < n->nin; ++i) {
      Node* x = n->in[i];
      if (in_group(x) && find(at(x).group) != g) add_dep(g, at(x).group);
      if (x->kind == NodeKind::View && x->pending) add_dep(g, at(x->in[0]).group);
    }
  }

  // Groups a node reading input x through a view or another group would
  // make g depend on; g must not be among their own dependencies.
  bool would_cycle(const Node* n, int g) const {
    for (int i = 0; i < n->nin; ++i) {
      const Node* x = n->in[i];
      int src = -1;
      if (x->kind == NodeKind::View && x->pending) src = find(at(x->in[0]).group);
      else if (in_group(x) && find(at(x).group) != g) src = find(at(x).group);
      if (src >= 0 && (src == g || depends(src, g))) return true;
    }
    return false;
  }

  // Domain a node of shape s would have in group g, or false.
  bool domain_in(const Group& g, const Shape& s, Domain* d) const {
    if (s == g.full) {
      *d = Domain::Full;
      return true;
    }
    if (g.form != vm::Form::Elementwise && is_reduced_shape(s, g.full, g.red_begin, g.red_end)) {
      *d = Domain::Reduced;
      return true;
    }
    return false;
  }

  // Can a member x of g (with domain dx) be read by a node of domain dn?
  bool readable(const Group& g, const Node* x, Domain dx, Domain dn) const {
    if (dn == Domain::Full) {
      if (dx == Domain::Full) return true;
      // Broadcast a reduction result back over the row (RowReduce only).
      return g.form == vm::Form::RowReduce && x->shape.rank() == g.full.rank();
    }
    return dx == Domain::Reduced;
  }

  // The row splits (Group::row_splits) that keep n's per-row operands linear
  // when n joins RowReduce group g in the Reduced domain; inputs computed by
  // groups `self` and `other` stay in registers.
  uint32_t row_splits_of(const Group& g, const Node* n, int self, int other) const {
    uint32_t m = ~0u;
    for (int i = 0; i < n->nin; ++i) {
      const Node* x = n->in[i];
      if (x->kind == NodeKind::Const) continue;
      if (in_group(x)) {
        const int xg = find(at(x).group);
        if (xg == self || xg == other) continue;
      }
      int64_t bs[kMaxRank], fs[kMaxRank];
      broadcast_strides(x, n->shape, bs);
      to_full_space(g.full, g.red_begin, g.red_end, n->shape, bs, fs);
      m &= linear_splits(g.full, g.red_begin, fs);
    }
    return m;
  }

  // Merges group b into group a when their iteration spaces agree and no
  // third group sits between them. Returns the surviving group or -1.
  int merge(int a, int b) {
    if (a == b) return a;
    if (depends(a, b) || depends(b, a)) return -1;
    Group* ga = &G(a);
    Group* gb = &G(b);
    if ((ga->int64_values || gb->int64_values) && (ga->float_sum || gb->float_sum)) return -1;
    if (ga->form == vm::Form::Elementwise && gb->form != vm::Form::Elementwise) {
      std::swap(a, b);
      std::swap(ga, gb);
    }
    Domain db;
    if (gb->form == vm::Form::Elementwise) {
      if (!domain_in(*ga, gb->full, &db)) return -1;
    } else {
      // Two products never share a kernel (one mma each).
      if (gb->form != ga->form || !(gb->full == ga->full) || gb->red_begin != ga->red_begin ||
          gb->red_end != ga->red_end || ga->form == vm::Form::Contraction)
        return -1;
      db = Domain::Full;  // members keep their own domains
    }
    uint32_t splits = ga->row_splits & gb->row_splits;
    if (ga->form == vm::Form::RowReduce && gb->form == vm::Form::Elementwise && db == Domain::Reduced)
      for (const Node* m : gb->members) splits &= row_splits_of(*ga, m, a, b);
    if (splits == 0) return -1;
    ga->row_splits = splits;
    for (Node* m : gb->members) {
      at(m).group = a;
      if (gb->form == vm::Form::Elementwise) at(m).domain = db;
      ga->members.push_back(m);
    }
    for (int d : gb->deps) add_dep(a, d);
    ga->int64_values |= gb->int64_values;
    ga->float_sum |= gb->float_sum;
    gb->members.clear();
    gb->deps.clear();
    gb->alive = false;
    gb->merged_into = a;
    // Keep record order (members were pushed in it within each group).
    std::sort(ga->members.begin(), ga->members.end(),
              [](const Node* x, const Node* y) { return x->index < y->index; });
    return a;
  }

  // A conversion starts a kernel of its own: it reads its input from
  // memory (a 16-bit float computed in f32 registers is rounded to its type
  // by its store first). One to float32 is then an ordinary member: its
  // value in registers, the loaded input, is the one its store would keep,
  // so the ops reading it join it (img.to(F32) / 255 - mean is one kernel).
  // One to another type is stored before anything reads it (rounded to its
  // type).
  void place_conversion(Node* n) {
    const int g = new_group(vm::Form::Elementwise, n->shape, 0, 0);
    G(g).sealed = n->dtype != Dtype::F32;
    join(n, g, Domain::Full);
  }

  // A write into a slice of a buffer (Node::target) reads its input from
  // memory: its store's layout is the buffer's, which no other member's
  // values share. Its order-only input orders it after the write before it
  // (join's dependencies). A write that overlaps none before it (cat's and
  // stack's pieces) joins the group of the one before it when that group
  // holds only such writes of its shape reading the same type: one kernel
  // stores every piece, its stores disjoint, so their order is free.
  void place_write(Node* n) {
    const Node* prev = n->nin > 1 ? n->in[1] : nullptr;
    if (n->disjoint_write && prev && prev->disjoint_write && in_group(prev) && prev->target == n->target &&
        prev->in[0]->dtype == n->in[0]->dtype) {
      const int g = find(at(prev).group);
      if (G(g).disjoint_writes && G(g).full == n->shape && lanes_agree(n, G(g)) && !would_cycle(n, g)) {
        join(n, g, Domain::Full);
        return;
      }
    }
    const int g = new_group(vm::Form::Elementwise, n->shape, 0, 0);
    G(g).sealed = true;
    G(g).disjoint_writes = n->disjoint_write;
    join(n, g, Domain::Full);
  }

  void place_elementwise(Node* n) {
    int target = -1;
    bool ok = true;
    for (int i = 0; i < n->nin && ok; ++i) {
      Node* x = n->in[i];
      if (!joinable(x)) continue;
      int g = find(at(x).group);
      if (target < 0) target = g;
      else if (g != target) {
        int m = merge(target, g);
        if (m < 0) ok = false;
        else target = m;
      }
    }
    if (target >= 0 && ok && try_join(n, target)) return;
    // The inputs' groups cannot become one (a product and a reduction of
    // its result: softmax's x - max(x) over a product's scores): join one of
    // them, reading the others' values from memory, before a group of its own.
    if (!ok)
      for (int i = n->nin - 1; i >= 0; --i)
        if (joinable(n->in[i]) && try_join(n, find(at(n->in[i]).group))) return;
    join(n, new_group(vm::Form::Elementwise, n->shape, 0, 0), Domain::Full);
  }

  // Joins n to group `target` when its shape, its inputs' domains and the
  // dependencies allow; inputs of other groups are read from memory.
  bool try_join(Node* n, int target) {
    const Group& g = G(target);
    Domain dn;
    bool ok = lanes_agree(n, g) && domain_in(g, n->shape, &dn) && !would_cycle(n, target);
    uint32_t splits = g.row_splits;
    if (ok && g.form == vm::Form::RowReduce && dn == Domain::Reduced) {
      splits &= row_splits_of(g, n, target, target);
      ok = splits != 0;
    }
    for (int i = 0; i < n->nin && ok; ++i) {
      const Node* x = n->in[i];
      if (joinable(x) && find(at(x).group) == target) {
        ok = readable(g, x, at(x).domain, dn) &&
             (dn == Domain::Reduced || at(x).domain == Domain::Reduced || x->shape == g.full);
      }
    }
    if (!ok) return false;
    G(target).row_splits = splits;
    join(n, target, dn);
    return true;
  }

  // A product starts its own Contraction group: its operands are read from
  // memory (computed by earlier groups), and elementwise consumers of its
  // shape join it as the epilogue.
  void place_contract(Node* n) { join(n, new_group(vm::Form::Contraction, n->shape, 0, 0), Domain::Full); }

  // (Called by partition() once every node is placed.)
 public:
  // Operand prologues: an elementwise group whose values feed only one
  // operand of one product joins the product's Contraction group, to be
  // evaluated while the cube packs that operand (vm/opcodes.h: ldoa, ldob).
  // The product may read the value through a view that walks whole axes
  // (view_axes: linear(x, w * s) reads w * s transposed); the prologue's
  // loads then walk its leaves along the view's axes.
  // The operand must be f32: a prologue's values stay in f32 registers,
  // and a 16-bit operand is rounded to its type by a store alone (so a
  // conversion joins only when it is to f32).
  void absorb_prologues(const std::vector<Node*>& nodes) {
    bool any = false;
    for (const Group& g : plan.groups) any |= g.alive && g.form == vm::Form::Contraction;
    if (!any) return;
    // Reads of each node by other groups' members and by views, and of
    // each view by any node.
    std::vector<int32_t> cross(nodes.size(), 0);
    for (const Node* n : nodes) {
      if (n->kind == NodeKind::View) {
        if (in_group(n->in[0])) ++cross[static_cast<size_t>(n->in[0]->index)];
        continue;
      }
      for (int i = 0; i < n->nin; ++i) {
        const Node* x = n->in[i];
        if (x->kind == NodeKind::View && x->pending) ++cross[static_cast<size_t>(x->index)];
        else if (in_group(n) && in_group(x) && find(at(x).group) != find(at(n).group))
          ++cross[static_cast<size_t>(x->index)];
      }
    }
    int8_t axis[kMaxRank];
    for (const Node* n : nodes) {
      if (n->kind != NodeKind::Contract) continue;
      const int c = find(at(n).group);
      for (int slot = 0; slot < 2; ++slot) {
        const Node* x = n->in[slot];
        const Node* view = nullptr;
        if (x->kind == NodeKind::View && x->pending) {
          if (x->user_refs() > 0 || cross[static_cast<size_t>(x->index)] != 1 || !view_axes(x, axis)) continue;
          view = x;
          x = x->in[0];
        }
        const Node* other = computed_value(n->in[1 - slot]);
        if (!in_group(x)) continue;
        const int e = find(at(x).group);
        const Group& E = G(e);
        if (e == c || E.form != vm::Form::Elementwise || (other && find(at(other).group) == e)) continue;
        if (x->dtype != Dtype::F32) continue;
        bool only = true;
        for (const Node* m : E.members)
          only &= m->user_refs() == 0 && !at(m).output && !m->target &&
                  cross[static_cast<size_t>(m->index)] == (m == x ? 1 : 0);
        if (!only) continue;
        const Domain d = slot == 0 ? Domain::OperandA : Domain::OperandB;
        absorb(e, c, d);
        if (view) at(view).in_registers = true;
        // Groups feeding the prologue join it on the same terms (their
        // values f32, of the operand's shape, read by the prologue alone):
        // a conversion to f32 and then a scale is one prologue.
        for (bool grew = true; grew;) {
          grew = false;
          for (size_t i = 0; i < G(c).members.size() && !grew; ++i) {
            const Node* m = G(c).members[i];
            if (at(m).domain != d) continue;
            for (int j = 0; j < m->nin && !grew; ++j) {
              const Node* y = m->in[j];
              if (!in_group(y) || find(at(y).group) == c) continue;
              const int f = find(at(y).group);
              if (feeds_only(f, c, d, x->shape, cross)) {
                absorb(f, c, d);
                grew = true;
              }
            }
          }
        }
      }
    }
  }

  // The group member whose values x reads: x, or a pending view's input;
  // null for a leaf or a constant.
  const Node* computed_value(const Node* x) const {
    if (x->kind == NodeKind::View && x->pending) x = x->in[0];
    return in_group(x) ? x : nullptr;
  }

  // Is group f elementwise over `shape`, each of its members read only
  // inside it or by members of group c in domain d (as f32), and held by
  // no handle?
  bool feeds_only(int f, int c, Domain d, const Shape& shape, const std::vector<int32_t>& cross) const {
    const Group& F = G(f);
    if (F.form != vm::Form::Elementwise || !(F.full == shape)) return false;
    for (const Node* m : F.members) {
      if (m->user_refs() > 0 || at(m).output || m->target) return false;
      int32_t reads = 0;
      for (const Node* r : G(c).members)
        if (at(r).domain == d)
          for (int j = 0; j < r->nin; ++j) reads += r->in[j] == m;
      if (reads != cross[static_cast<size_t>(m->index)] || (reads > 0 && m->dtype != Dtype::F32)) return false;
    }
    return true;
  }

 private:
  void absorb(int e, int c, Domain d) {
    Group& E = G(e);
    Group& C = G(c);
    for (Node* m : E.members) {
      at(m).group = c;
      at(m).domain = d;
      C.members.push_back(m);
    }
    std::erase(C.deps, e);
    for (int dep : E.deps) add_dep(c, dep);
    E.members.clear();
    E.deps.clear();
    E.alive = false;
    E.merged_into = c;
    std::sort(C.members.begin(), C.members.end(), [](const Node* x, const Node* y) { return x->index < y->index; });
  }

  // A reduction whose kept axes after the reduced ones all have extent 1
  // reduces its rows' elements in order, so it is a row reduction over
  // them too (its result's elements lie alike, is_reduced_shape): not a
  // column reduction one column wide.
  void place_reduce(Node* n) {
    Node* x = n->in[0];
    const int rank = x->shape.rank(), a = n->red_begin;
    int b = n->red_end;
    while (b < rank && x->shape[b] == 1) ++b;
    if (b < rank) b = n->red_end;
    const vm::Form form = b == rank ? vm::Form::RowReduce : vm::Form::ColReduce;
    if (joinable(x) && at(x).domain == Domain::Full) {
      int gi = find(at(x).group);
      Group& g = G(gi);
      if (g.full == x->shape && lanes_agree(n, g) && !would_cycle(n, gi)) {
        bool ok = false;
        if (g.form == vm::Form::Elementwise) {
          g.form = form;
          g.red_begin = a;
          g.red_end = b;
          ok = true;
        } else {
          ok = g.form == form && g.red_begin == a && g.red_end == b;
        }
        if (ok) {
          join(n, gi, Domain::Reduced);
          return;
        }
      }
    }
    join(n, new_group(form, x->shape, a, b), Domain::Reduced);
  }
};

}  // namespace

Plan partition(const std::vector<Node*>& nodes) {
  Partitioner p;
  p.plan.placement.resize(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) nodes[i]->index = static_cast<int32_t>(i);
  for (Node* n : nodes) p.place(n);
  p.absorb_prologues(nodes);
  p.finish(nodes);
  return std::move(p.plan);
}

std::vector<int> split_group(Plan& plan, int gi) {
  // Copies: plan.groups grows below.
  const Group g = plan.groups[static_cast<size_t>(gi)];
  if (g.members.size() < 2) return {gi};
  auto at = [&](const Node* n) -> Placement& { return plan.placement[static_cast<size_t>(n->index)]; };
  std::vector<int> pieces;
  auto add_piece = [&](vm::Form form, const Shape& full, int a, int b) {
    Group p;
    p.form = form;
    p.full = full;
    p.red_begin = a;
    p.red_end = b;
    p.row_splits = g.row_splits;
    plan.groups.push_back(std::move(p));
    pieces.push_back(static_cast<int>(plan.groups.size()) - 1);
    return &plan.groups.back();
  };
  const size_t half = g.members.size() / 2;
  for (size_t lo : {size_t{0}, half}) {
    const size_t hi = lo == 0 ? half : g.members.size();
    bool reduces = false;
    for (size_t m = lo; m < hi; ++m) reduces |= g.members[m]->kind == NodeKind::Reduce;
    Group* cur = nullptr;
    for (size_t m = lo; m < hi; ++m) {
      Node* n = g.members[m];
      if (reduces) {
        // Members keep their domains: the half still has the group's space.
        if (!cur) cur = add_piece(g.form, g.full, g.red_begin, g.red_end);
      } else {
        // No reduction: elementwise over one shape at a time (a reduced
        // member's shape becomes its piece's full shape).
        // A product starts a Contraction piece, which its epilogue follows.
        if (n->kind == NodeKind::Contract) cur = add_piece(vm::Form::Contraction, n->shape, 0, 0);
        else if (!cur || !(cur->full == n->shape)) cur = add_piece(vm::Form::Elementwise, n->shape, 0, 0);
        at(n).domain = Domain::Full;
      }
      cur->members.push_back(n);
      at(n).group = pieces.back();
    }
  }
  // Values read across pieces (directly or through a view) are stored by
  // the piece computing them.
  for (int p : pieces)
    for (const Node* n : plan.groups[static_cast<size_t>(p)].members)
      for (int i = 0; i < n->nin; ++i) {
        const Node* x = n->in[i];
        if (x->kind == NodeKind::View && x->pending) {
          plan.placement[static_cast<size_t>(x->index)].in_registers = false;
          // A view an earlier piece's launch resolved holds its buffer, not
          // its input (resolve_view): its values are in memory already.
          if (x->storage) continue;
          x = x->in[0];
        }
        if (!x->pending || static_cast<size_t>(x->index) >= plan.placement.size()) continue;
        Placement& px = plan.placement[static_cast<size_t>(x->index)];
        if (px.group >= 0 && px.group != p) px.output = true;
      }
  Group& dead = plan.groups[static_cast<size_t>(gi)];
  dead.alive = false;
  dead.members.clear();
  return pieces;
}

}  // namespace dvm::fuser
