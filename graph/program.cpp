// Launch programs of static graphs (graph/program.h).
#include "graph/program.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <string>

#include "fuser/lower.h"
#include "fuser/plan_cache.h"
#include "graph/executable_state.h"
#include "tracer/buffer_pool.h"
#include "tracer/host_values.h"
#include "tracer/thread_counters.h"
#include "vm/parallel.h"

namespace dvm::graph {

using detail::GNode;
using detail::Node;
using detail::NodeKind;

ProgramScratch::~ProgramScratch() {
  if (arena) detail::pool_free(arena, arena_bytes);
  for (const RangeBlock& r : ranges)
    if (r.data) detail::pool_free(r.data, r.bytes);
}

ProgramStats& program_stats() {
  thread_local ProgramStats s;
  return s;
}

bool relation_key(const detail::ExecutableState& x, const int64_t* v, std::vector<int32_t>* key) {
  const size_t n = x.relations.size();
  thread_local std::vector<int64_t> values;
  values.resize(n);
  key->resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (!x.relations[i].eval(v, &values[i]) || std::llabs(values[i]) > kMaxElements) return false;
    const int64_t e = values[i];
    int32_t k = e == 0 ? 0 : e == 1 ? 1 : -1;
    for (size_t j = 0; k < 0 && j <= i; ++j)
      if (values[j] == e) k = 2 + static_cast<int32_t>(j);
    (*key)[i] = k;
  }
  return true;
}

// ---------------------------------------------------------------------------
// Building a program from the plans of a rebuilding run
// ---------------------------------------------------------------------------

namespace {

std::vector<Monomial> contiguous(const std::vector<Monomial>& shape) {
  std::vector<Monomial> st(shape.size(), constant(1));
  for (size_t d = shape.size(); d-- > 1;)
    if (!multiply(st[d], shape[d], &st[d - 1])) return {};
  return st;
}

}  // namespace

int32_t ProgramBuilder::term(const Monomial& m) {
  if (p_.terms.empty()) {
    p_.terms.push_back(constant(0));
    p_.terms.push_back(constant(1));
  }
  for (size_t i = 0; i < p_.terms.size(); ++i)
    if (p_.terms[i] == m) return static_cast<int32_t>(i);
  p_.terms.push_back(m);
  return static_cast<int32_t>(p_.terms.size() - 1);
}

int32_t ProgramBuilder::term(const Sum& sum) {
  if (sum.terms.empty()) return kZeroTerm;
  if (sum.terms.size() == 1) return term(sum.terms.front());
  std::vector<int32_t> parts;
  for (const Monomial& m : sum.terms) parts.push_back(term(m));
  for (size_t k = 0; k < p_.sums.size(); ++k)
    if (p_.sums[k] == parts) return -1 - static_cast<int32_t>(k);
  p_.sums.push_back(std::move(parts));
  return -static_cast<int32_t>(p_.sums.size());
}

int64_t ProgramBuilder::value(const Monomial& m) const {
  int64_t e = 0;
  return m.eval(v_, &e) ? e : -1;
}

int32_t ProgramBuilder::gnode(const Node* n) const {
  auto it = gnode_of_.find(n);
  return it == gnode_of_.end() ? -1 : it->second;
}

bool ProgramBuilder::shape_of(const Node* n, std::vector<Monomial>* shape) const {
  const int32_t g = gnode(n);
  if (g >= 0) {
    *shape = x_.nodes[static_cast<size_t>(g)].shape;
    return true;
  }
  for (const Tensor& c : x_.constants)
    if (c.node() == n) {
      shape->clear();
      for (int d = 0; d < n->shape.rank(); ++d) shape->push_back(constant(n->shape[d]));
      return true;
    }
  return false;
}

bool ProgramBuilder::constant_place(int32_t ref, ProgramArg* a) const {
  const Node* c = x_.constants[static_cast<size_t>(-1 - ref)].node();
  if (c->offset != 0 || !c->is_contiguous()) return false;
  a->source = Source::Constant;
  a->index = -1 - ref;
  return true;
}

// Where graph node `g`'s values are, for a launch that reads them.
bool ProgramBuilder::place_of(int32_t g, int32_t launch, ProgramArg* a) {
  const GNode& gn = x_.nodes[static_cast<size_t>(g)];
  if (gn.input >= 0) {
    a->source = Source::Input;
    a->index = gn.input;
    return true;
  }
  if (gn.size >= 0) {
    a->source = Source::Size;
    a->index = gn.size;
    return true;
  }
  if (gn.range >= 0) {
    a->source = Source::Range;
    a->index = gn.range;
    return true;
  }
  auto producer = producer_.find(g);
  if (producer == producer_.end()) return false;  // computed by none of this run's launches
  if (launch >= 0) {
    ProgramLaunch& l = p_.launches[static_cast<size_t>(launch)];
    if (std::find(l.reads.begin(), l.reads.end(), producer->second) == l.reads.end())
      l.reads.push_back(producer->second);
  } else {
    launch = static_cast<int32_t>(p_.launches.size()) - 1;
  }
  if (auto out = output_of_.find(g); out != output_of_.end()) {
    a->source = Source::Output;
    a->index = out->second;
    return true;
  }
  const int32_t b = buffer_of_.at(g);
  a->source = Source::Buffer;
  a->index = b;
  p_.buffers[static_cast<size_t>(b)].last = launch;
  return true;
}

// The place, strides and offset of leaf n that a launch reads.
bool ProgramBuilder::source_of(const Node* n, int32_t launch, ProgramArg* a, std::vector<Monomial>* strides,
                               Sum* offset) {
  a->dtype = n->dtype;
  *offset = Sum{};
  for (size_t c = 0; c < x_.constants.size(); ++c)
    if (x_.constants[c].node() == n) {
      a->source = Source::Constant;
      a->index = static_cast<int32_t>(c);
      strides->clear();
      for (int d = 0; d < n->shape.rank(); ++d) strides->push_back(constant(n->strides[d]));
      *offset = graph::sum_of(constant(n->offset));
      return true;
    }
  const int32_t g = gnode(n);
  if (g < 0) return false;  // not the graph's
  const GNode& gn = x_.nodes[static_cast<size_t>(g)];
  if (gn.kind == NodeKind::View) {
    *strides = gn.strides;
    *offset = gn.offset;
    return gn.in[0] < 0 ? constant_place(gn.in[0], a) : place_of(gn.in[0], launch, a);
  }
  if (gn.kind == NodeKind::Const) return false;  // read as a value, never an argument
  *strides = contiguous(gn.shape);
  return strides->size() == gn.shape.size() && place_of(g, launch, a);
}

bool ProgramBuilder::add_group(const std::vector<Node*>& nodes, const fuser::CachedGroup& cg) {
  const fuser::ReplayPlan& rp = cg.replay;
  term(constant(0));  // the first two terms are 0 and 1
  const int32_t li = static_cast<int32_t>(p_.launches.size());
  p_.launches.emplace_back();
  {
    ProgramLaunch& l = p_.launches.back();
    l.kernel = cg.kernel;
    l.product_b = rp.product_b;
    for (const fuser::ScalarOrigin& o : cg.scalars) {
      const Node* n = nodes[static_cast<size_t>(o.node)];
      l.scalars.push_back(o.slot < 0 ? n->value : n->in[o.slot]->value);
    }
  }
  // The space's dims, as replay() computes them from the group's full shape.
  const Node* f = nodes[static_cast<size_t>(cg.full_from)];
  std::vector<Monomial> extent;
  if (!shape_of(cg.full_from_input ? f->in[0] : f, &extent)) return false;
  if (rp.k_node >= 0) {
    std::vector<Monomial> a;
    if (!shape_of(nodes[static_cast<size_t>(rp.k_node)]->in[0], &a) || a.empty()) return false;
    extent.push_back(a.back());
  }
  int32_t size_term[kMaxRank] = {};
  int64_t size_value[kMaxRank] = {};
  Monomial size[kMaxRank];
  for (int d = 0; d < rp.ndims; ++d) {
    Monomial m = constant(1);
    for (uint32_t bits = rp.axes[d]; bits; bits &= bits - 1) {
      const size_t k = static_cast<size_t>(std::countr_zero(bits));
      if (k >= extent.size() || !multiply(m, extent[k], &m)) return false;
    }
    size[d] = m;
    size_term[d] = term(m);
    size_value[d] = value(m);
  }
  for (int part = 0; part < vm::kMaxParts; ++part) {
    Monomial m = constant(1);
    if (part < rp.parts)
      for (int d = part ? rp.part_end[part - 1] : 0; d < rp.part_end[part]; ++d)
        if (!multiply(m, size[d], &m)) return false;
    p_.launches.back().extent[part] = term(m);
  }
  std::vector<ProgramArg> args(rp.args.size());
  for (size_t ai = 0; ai < rp.args.size(); ++ai) {
    const fuser::ReplayArg& ra = rp.args[ai];
    ProgramArg& a = args[ai];
    const Node* n = nodes[static_cast<size_t>(ra.node)];
    std::vector<Monomial> strides;
    Sum offset;
    if (ra.slot < 0) {  // an output: stored contiguously in its place
      const int32_t g = gnode(n);
      if (g < 0 || n->target || producer_.count(g)) return false;
      const GNode& gn = x_.nodes[static_cast<size_t>(g)];
      a.output = true;
      a.dtype = n->dtype;
      producer_[g] = li;
      int32_t port = -1;
      for (size_t o = 0; o < x_.outputs.size() && port < 0; ++o)
        if (x_.outputs[o].node == g) port = static_cast<int32_t>(o);
      if (port >= 0) {
        output_of_[g] = port;
        a.source = Source::Output;
        a.index = port;
      } else {
        Monomial numel = constant(1);
        for (const Monomial& e : gn.shape)
          if (!multiply(numel, e, &numel)) return false;
        buffer_of_[g] = static_cast<int32_t>(p_.buffers.size());
        p_.buffers.push_back({term(numel), gn.dtype, li, li});
        a.source = Source::Buffer;
        a.index = buffer_of_[g];
      }
      strides = contiguous(gn.shape);
      if (strides.size() != gn.shape.size()) return false;
    } else if (!source_of(n->in[ra.slot], li, &a, &strides, &offset)) {
      return false;
    }
    a.access = ra.access;
    a.offset = term(offset);
    int32_t dim_stride[kMaxRank] = {};
    for (int d = 0; d < rp.ndims; ++d) {
      if (ra.src[d] < 0) continue;
      if (static_cast<size_t>(ra.src[d]) >= strides.size()) return false;
      dim_stride[d] = term(strides[static_cast<size_t>(ra.src[d])]);
    }
    // As fuser::bind(): a part's stride is its innermost dim's other than
    // 1; a gather walks the part's dims larger than 1.
    for (int part = 0; part < rp.parts; ++part) {
      const int lo = part ? rp.part_end[part - 1] : 0, hi = rp.part_end[part];
      for (int d = hi - 1; d >= lo; --d)
        if (size_value[d] != 1) {
          a.stride[part] = dim_stride[d];
          break;
        }
      if (a.access == vm::Op::LDG)
        for (int d = lo; d < hi; ++d) {
          if (size_value[d] <= 1) continue;
          a.dim_size[part][a.ndims[part]] = size_term[d];
          a.dim_stride[part][a.ndims[part]] = dim_stride[d];
          ++a.ndims[part];
        }
    }
  }
  p_.launches[static_cast<size_t>(li)].args = std::move(args);
  return true;
}

void ProgramBuilder::ran(const std::vector<Node*>& nodes, const fuser::CachedPlan& plan) {
  for (const fuser::CachedGroup& cg : plan.groups)
    if (ok_ && !add_group(nodes, cg)) ok_ = false;
}

std::shared_ptr<Program> ProgramBuilder::finish() {
  if (!ok_ || !relation_key(x_, v_, &p_.key)) return nullptr;
  for (size_t o = 0; o < x_.outputs.size(); ++o) {
    const int32_t g = x_.outputs[o].node;
    auto it = output_of_.find(g);
    if (it == output_of_.end()) {  // no kernel stores it: an input or a view
      const GNode& gn = x_.nodes[static_cast<size_t>(g)];
      Program::Gather gather;
      gather.to = static_cast<int32_t>(o);
      gather.from.dtype = gn.dtype;
      std::vector<Monomial> strides = contiguous(gn.shape);
      Sum offset;
      int32_t source = g;
      if (gn.kind == NodeKind::View) {
        strides = gn.strides;
        offset = gn.offset;
        source = gn.in[0];
      }
      if (strides.size() != gn.shape.size()) return nullptr;
      if (!(source < 0 ? constant_place(source, &gather.from) : place_of(source, -1, &gather.from))) return nullptr;
      gather.from.offset = term(offset);
      for (size_t d = 0; d < gn.shape.size(); ++d) {
        gather.shape.push_back(term(gn.shape[d]));
        gather.strides.push_back(term(strides[d]));
      }
      p_.gathers.push_back(std::move(gather));
      continue;
    }
    if (it->second == static_cast<int32_t>(o)) continue;
    Monomial numel = constant(1);
    for (const Monomial& e : x_.outputs[o].shape)
      if (!multiply(numel, e, &numel)) return nullptr;
    p_.copies.push_back({static_cast<int32_t>(o), it->second, term(numel), x_.outputs[o].dtype});
  }
  // Sums are numbered after every monomial.
  for (ProgramLaunch& l : p_.launches)
    for (ProgramArg& a : l.args) a.offset = final_term(a.offset);
  for (Program::Gather& g : p_.gathers) g.from.offset = final_term(g.from.offset);
  return std::make_shared<Program>(std::move(p_));
}

// ---------------------------------------------------------------------------
// Running a program
// ---------------------------------------------------------------------------

namespace {

// The terms and sizes at binding v; with fill_ranges, the ranges' values
// too (a run's), else only their bytes (memory()).
bool eval_terms(const detail::ExecutableState& x, const Program& p, const int64_t* v, ProgramScratch& s,
                bool fill_ranges) {
  s.terms.resize(p.term_count());
  for (size_t i = 0; i < p.terms.size(); ++i)
    if (!p.terms[i].eval(v, &s.terms[i])) return false;
  for (size_t k = 0; k < p.sums.size(); ++k) {
    int64_t total = 0;
    for (int32_t t : p.sums[k])
      if (__builtin_add_overflow(total, s.terms[static_cast<size_t>(t)], &total)) return false;
    s.terms[p.terms.size() + k] = total;
  }
  s.sizes.resize(x.sizes.size());
  for (size_t k = 0; k < x.sizes.size(); ++k) {
    int64_t count = 0;
    if (!x.sizes[k].count.eval(v, &count)) return false;
    const double c = static_cast<double>(count);
    s.sizes[k] = static_cast<float>(x.sizes[k].reciprocal ? 1.0 / c : c);
  }
  s.ranges.resize(x.ranges.size());
  s.range_counts.resize(x.ranges.size(), -1);
  s.range_bytes = 0;
  for (size_t k = 0; k < x.ranges.size(); ++k) {
    const detail::RangeLeaf& r = x.ranges[k];
    int64_t count = 0;
    if (!r.count.eval(v, &count) || count > kMaxElements) return false;
    const size_t bytes = static_cast<size_t>(count > 0 ? count : 1) * dtype_size(r.dtype);
    s.range_bytes += static_cast<int64_t>(detail::pool_block_bytes(bytes));
    if (!fill_ranges || count == s.range_counts[k]) continue;
    s.range_counts[k] = -1;  // until filled: a value the type cannot hold throws
    ProgramScratch::RangeBlock& b = s.ranges[k];
    // As the arena: grown to the largest run's, replaced when a run needs
    // under a quarter of it.
    if (b.bytes < bytes || bytes < b.bytes / 4) {
      if (b.data) detail::pool_free(b.data, b.bytes);
      b = {};
      b.data = detail::pool_allocate(bytes);  // a dvm::Error past the memory limit
      b.bytes = bytes;
    }
    detail::fill_range(b.data, r.dtype, count, r.start, r.step);
    s.range_counts[k] = count;
  }
  return true;
}

// The launch's P * R * C; a product past int64 (a changed file's extents)
// counts as the largest work.
int64_t work_of(const ProgramLaunch& l, const ProgramScratch& s) {
  int64_t pr = 0, prc = 0;
  if (__builtin_mul_overflow(s.terms[static_cast<size_t>(l.extent[vm::kP])],
                             s.terms[static_cast<size_t>(l.extent[vm::kR])], &pr) ||
      __builtin_mul_overflow(pr, s.terms[static_cast<size_t>(l.extent[vm::kC])], &prc))
    return std::numeric_limits<int64_t>::max();
  return prc;
}

// Steps, as the executor's stacking would run them: a large launch is a
// step of its own; small ones share a step (a stacked launch's stage) until
// one reads what another of the stage writes. Launches of one step may run
// side by side, so their buffers must not share memory.
void assign_steps(const Program& p, ProgramScratch& s) {
  s.step.resize(p.launches.size());
  int32_t step = 0;
  size_t stage_begin = 0;  // the current stage's first launch
  bool stacked = false;    // the current step holds small launches
  for (size_t i = 0; i < p.launches.size(); ++i) {
    const ProgramLaunch& l = p.launches[i];
    if (work_of(l, s) >= vm::kMinParallelElements) {
      if (stacked) ++step;
      s.step[i] = step++;
      stage_begin = i + 1;
      stacked = false;
      continue;
    }
    bool depends = false;
    for (int32_t r : l.reads) depends |= static_cast<size_t>(r) >= stage_begin;
    if (depends && stacked) {
      ++step;
      stage_begin = i;
    }
    if (!stacked) stage_begin = i;
    s.step[i] = step;
    stacked = true;
  }
}

constexpr int64_t kAlign = 64;

// Places every buffer in the arena: first fit among the blocks whose steps
// overlap its own. Returns the arena's size, or -1 on overflow.
int64_t place_buffers(const Program& p, ProgramScratch& s) {
  s.offset.resize(p.buffers.size());
  s.live.clear();
  int64_t top = 0;
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    const ProgramBuffer& buf = p.buffers[b];
    const int32_t first = s.step[static_cast<size_t>(buf.first)], last = s.step[static_cast<size_t>(buf.last)];
    int64_t bytes = 0;
    if (__builtin_mul_overflow(std::max<int64_t>(s.terms[static_cast<size_t>(buf.numel)], 1),
                               static_cast<int64_t>(dtype_size(buf.dtype)), &bytes) ||
        bytes > kMaxElements)
      return -1;
    bytes = (bytes + kAlign - 1) / kAlign * kAlign;
    // Blocks whose last step ended before this one's first are free.
    std::erase_if(s.live, [&](const ProgramScratch::Block& k) { return k.last_step < first; });
    int64_t at = 0;
    for (const ProgramScratch::Block& k : s.live) {  // sorted by begin
      if (k.begin - at >= bytes) break;
      at = std::max(at, k.end);
    }
    const ProgramScratch::Block block{at, at + bytes, last};
    s.live.insert(std::upper_bound(s.live.begin(), s.live.end(), block,
                                   [](const auto& a, const auto& k) { return a.begin < k.begin; }),
                  block);
    s.offset[b] = at;
    top = std::max(top, at + bytes);
  }
  return top;
}

void* place(const detail::ExecutableState& x, const ProgramArg& a, const void* const* in, void* const* out,
            ProgramScratch& s) {
  const int64_t off = s.terms[static_cast<size_t>(a.offset)];
  switch (a.source) {
    case Source::Input:
      return const_cast<void*>(vm::advance(in[a.index], off, a.dtype));
    case Source::Output:
      return vm::advance(out[a.index], off, a.dtype);
    case Source::Constant: {
      const Node* n = x.constants[static_cast<size_t>(a.index)].node();
      return n->storage->at(off);
    }
    case Source::Buffer:
      return vm::advance(static_cast<char*>(s.arena) + s.offset[static_cast<size_t>(a.index)], off, a.dtype);
    case Source::Size:
      return &s.sizes[static_cast<size_t>(a.index)];
    case Source::Range:
      return vm::advance(s.ranges[static_cast<size_t>(a.index)].data, off, a.dtype);
  }
  return nullptr;
}

void bind(const detail::ExecutableState& x, const ProgramLaunch& pl, const void* const* in, void* const* out,
          ProgramScratch& s, vm::Launch& l) {
  const int64_t* t = s.terms.data();
  for (int part = 0; part < vm::kMaxParts; ++part) l.extent[part] = t[pl.extent[part]];
  l.scalars.assign(pl.scalars.begin(), pl.scalars.end());
  l.item_threads = pl.kernel->form() == vm::Form::Contraction ? vm::num_threads() : 1;
  l.args.resize(pl.args.size());
  for (size_t i = 0; i < pl.args.size(); ++i) {
    const ProgramArg& a = pl.args[i];
    vm::ArgBinding& b = l.args[i];
    void* base = place(x, a, in, out, s);
    b.in = a.output ? nullptr : base;
    b.out = a.output ? base : nullptr;
    for (int part = 0; part < vm::kMaxParts; ++part) {
      b.stride[part] = t[a.stride[part]];
      b.ndims[part] = a.ndims[part];
      for (int d = 0; d < a.ndims[part]; ++d) {
        b.dim_size[part][d] = t[a.dim_size[part][d]];
        b.dim_stride[part][d] = t[a.dim_stride[part][d]];
      }
    }
  }
  if (pl.product_b >= 0) {
    const ProgramArg& a = pl.args[static_cast<size_t>(pl.product_b)];
    if (a.source == Source::Constant && !a.output)
      fuser::read_b_by_rows(x.constants[static_cast<size_t>(a.index)].node()->storage, t[a.offset], a.dtype,
                            a.access, pl.product_b, l, true);
  }
}

void launch_entries(ProgramScratch& s) {
  if (s.entries.empty()) return;
  vm::launch_stack(s.entries);
  detail::count(detail::Count::KernelsLaunched, 1);
  detail::count(detail::Count::KernelsRun, static_cast<int64_t>(s.entries.size()));
  s.entries.clear();
}

// Copies the elements of a strided view (element strides) to dst, in order.
void gather(const char* src, const int64_t* shape, const int64_t* strides, int rank, size_t elem, char* dst) {
  if (rank == 0) {
    std::memcpy(dst, src, elem);
    return;
  }
  int64_t index[kMaxRank] = {};
  for (int d = 0; d < rank; ++d)
    if (shape[d] == 0) return;
  const int inner = rank - 1;
  const int64_t n = shape[inner], st = strides[inner];
  for (;;) {
    int64_t base = 0;
    for (int d = 0; d < inner; ++d) base += index[d] * strides[d];
    const char* row = src + base * static_cast<int64_t>(elem);
    if (st == 1) {
      std::memcpy(dst, row, static_cast<size_t>(n) * elem);
      dst += static_cast<size_t>(n) * elem;
    } else {
      for (int64_t i = 0; i < n; ++i, dst += elem) std::memcpy(dst, row + i * st * static_cast<int64_t>(elem), elem);
    }
    int d = inner - 1;
    for (; d >= 0; --d) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

// The elements and type of the place an argument names under v.
int64_t place_elems(const detail::ExecutableState& x, const Program& p, const ProgramArg& a, const int64_t* v,
                    const ProgramScratch& s, Dtype* dtype) {
  int64_t n = -1;
  switch (a.source) {
    case Source::Input:
    case Source::Output: {
      const detail::Port& port = (a.source == Source::Input ? x.inputs : x.outputs)[static_cast<size_t>(a.index)];
      *dtype = port.dtype;
      return port.numel.eval(v, &n) ? n : -1;
    }
    case Source::Constant: {
      const Node* c = x.constants[static_cast<size_t>(a.index)].node();
      *dtype = c->dtype;
      return c->storage ? c->storage->elems : -1;
    }
    case Source::Buffer: {
      const ProgramBuffer& b = p.buffers[static_cast<size_t>(a.index)];
      *dtype = b.dtype;
      return s.terms[static_cast<size_t>(b.numel)];
    }
    case Source::Size:
      *dtype = Dtype::F32;
      return 1;
    case Source::Range:
      *dtype = x.ranges[static_cast<size_t>(a.index)].dtype;
      return s.range_counts[static_cast<size_t>(a.index)];
  }
  return -1;
}

}  // namespace

bool reach_inside(int64_t offset, const int64_t* size, const int64_t* stride, int n, int64_t elems) {
  int64_t lo = offset, hi = offset;
  for (int k = 0; k < n; ++k) {
    if (size[k] == 0) return true;  // no element at all
    int64_t r = 0;
    if (size[k] < 0 || __builtin_mul_overflow(size[k] - 1, stride[k], &r) ||
        __builtin_add_overflow(r < 0 ? lo : hi, r, r < 0 ? &lo : &hi))
      return false;
  }
  return lo >= 0 && hi < elems;
}

bool layout_inside(const Node* n) {
  if (!n->storage) return true;
  const int rank = n->shape.rank();
  int64_t size[kMaxRank];
  for (int d = 0; d < rank; ++d) size[d] = n->shape[d];
  return reach_inside(n->offset, size, n->strides, rank, n->storage->elems);
}

namespace {

[[noreturn]] void outside(size_t launch, size_t arg, const char* what) {
  throw Error("dvm::Executable::run: launch " + std::to_string(launch) + " of the executable's program " + what +
              " argument " + std::to_string(arg) + " (is the executable file corrupt?)");
}

// Checks, before anything runs, that every argument of every launch (and
// every gather and copy of outputs) stays inside the place it names, in
// that place's type: a loaded program's numbers come from a file.
void check_reach(const detail::ExecutableState& x, const Program& p, const int64_t* v, const ProgramScratch& s) {
  const int64_t* t = s.terms.data();
  for (size_t i = 0; i < p.launches.size(); ++i) {
    const ProgramLaunch& pl = p.launches[i];
    const vm::Program& kp = pl.kernel->program();
    if (kp.types.size() != pl.args.size()) outside(i, pl.args.size(), "binds a wrong number of arguments beside");
    int64_t extent[vm::kMaxParts];
    for (int part = 0; part < vm::kMaxParts; ++part) extent[part] = t[pl.extent[part]];
    if (extent[vm::kP] == 0 || extent[vm::kR] == 0 || extent[vm::kC] == 0) continue;
    for (size_t a = 0; a < pl.args.size(); ++a) {
      const ProgramArg& arg = pl.args[a];
      Dtype dtype = Dtype::F32;
      const int64_t elems = place_elems(x, p, arg, v, s, &dtype);
      if (dtype != arg.dtype || dtype != kp.types[a]) outside(i, a, "reads another type than the place of");
      int64_t size[vm::kMaxParts * kMaxRank], stride[vm::kMaxParts * kMaxRank];
      int n = 0;
      for (int part = 0; part < vm::kMaxParts; ++part) {
        // One value per row: these read or write no element along C.
        if (part == vm::kC && (arg.access == vm::Op::LDB || arg.access == vm::Op::STB)) continue;
        if (arg.ndims[part] > kMaxRank) outside(i, a, "gathers too many dims of");
        for (int d = 0; d < arg.ndims[part]; ++d) {
          size[n] = t[arg.dim_size[part][d]];
          stride[n++] = t[arg.dim_stride[part][d]];
        }
        if (arg.ndims[part] == 0) {
          size[n] = std::max<int64_t>(extent[part], 1);
          stride[n++] = t[arg.stride[part]];
        }
      }
      if (elems <= 0 || !reach_inside(t[arg.offset], size, stride, n, elems)) outside(i, a, "reaches outside");
    }
  }
  for (const Program::Gather& g : p.gathers) {
    Dtype dtype = Dtype::F32;
    const int64_t elems = place_elems(x, p, g.from, v, s, &dtype);
    int64_t size[kMaxRank], stride[kMaxRank];
    const int n = static_cast<int>(std::min<size_t>(g.shape.size(), kMaxRank));
    int64_t numel = 1, want = -1;
    for (int d = 0; d < n; ++d) {
      size[d] = t[g.shape[static_cast<size_t>(d)]];
      stride[d] = t[g.strides[static_cast<size_t>(d)]];
      numel *= size[d];
    }
    const detail::Port& to = x.outputs[static_cast<size_t>(g.to)];
    if (dtype != g.from.dtype || dtype != to.dtype || !to.numel.eval(v, &want) || want != numel ||
        g.shape.size() > kMaxRank || (numel > 0 && (elems <= 0 || !reach_inside(t[g.from.offset], size, stride, n, elems))))
      outside(p.launches.size(), static_cast<size_t>(g.to), "copies an output from outside the place of");
  }
  for (const Program::Copy& c : p.copies) {
    const detail::Port &to = x.outputs[static_cast<size_t>(c.to)], &from = x.outputs[static_cast<size_t>(c.from)];
    int64_t a = 0, b = 0;
    if (to.dtype != c.dtype || from.dtype != c.dtype || !to.numel.eval(v, &a) || !from.numel.eval(v, &b) ||
        a != b || a != t[c.numel])
      outside(p.launches.size(), static_cast<size_t>(c.to), "copies another output's size into");
  }
}

}  // namespace

namespace {
int64_t arena_bytes(const detail::ExecutableState& x, const Program& p, const int64_t* v, ProgramScratch& s,
                    bool fill_ranges) {
  if (!eval_terms(x, p, v, s, fill_ranges)) return -1;
  assign_steps(p, s);
  return place_buffers(p, s);
}
}  // namespace

int64_t program_memory_bytes(const detail::ExecutableState& x, const Program& p, const int64_t* v,
                             ProgramScratch& s) {
  // What the pool hands out for them (a size class), as the memory limit counts it.
  const int64_t arena = arena_bytes(x, p, v, s, false);
  if (arena < 0) return -1;
  return (arena > 0 ? static_cast<int64_t>(detail::pool_block_bytes(static_cast<size_t>(arena))) : 0) + s.range_bytes;
}

bool run_program(const detail::ExecutableState& x, const Program& p, const int64_t* v, const void* const* in,
                 void* const* out, ProgramScratch& s, bool check) {
  const int64_t arena = arena_bytes(x, p, v, s, true);
  if (arena < 0) return false;
  if (check) check_reach(x, p, v, s);
  // The arena grows to the largest run's, and shrinks when a run needs
  // under a quarter of it, so one large binding does not hold its bytes
  // for good (the pool caches the block given back).
  const size_t need = static_cast<size_t>(arena);
  if (need > s.arena_bytes || need < s.arena_bytes / 4) {
    if (s.arena) detail::pool_free(s.arena, s.arena_bytes);
    s.arena = nullptr;
    s.arena_bytes = 0;
    s.arena = detail::pool_allocate(static_cast<size_t>(arena));
    s.arena_bytes = static_cast<size_t>(arena);
  }
  s.launches.resize(p.launches.size());
  s.entries.clear();
  for (size_t i = 0; i < p.launches.size(); ++i) {
    const ProgramLaunch& pl = p.launches[i];
    vm::Launch& l = s.launches[i];
    bind(x, pl, in, out, s, l);
    if (work_of(pl, s) >= vm::kMinParallelElements) {
      launch_entries(s);
      detail::count(detail::Count::KernelsLaunched, 1);
      detail::count(detail::Count::KernelsRun, 1);
      vm::launch(*pl.kernel, l);
      continue;
    }
    const int stage = s.entries.empty() ? 0 : s.entries.back().stage + (s.step[i] != s.step[i - 1]);
    s.entries.push_back({pl.kernel.get(), &l, stage});
  }
  launch_entries(s);
  for (const Program::Gather& g : p.gathers) {
    int64_t shape[kMaxRank], strides[kMaxRank];
    const int rank = static_cast<int>(g.shape.size());
    for (int d = 0; d < rank; ++d) {
      shape[d] = s.terms[static_cast<size_t>(g.shape[static_cast<size_t>(d)])];
      strides[d] = s.terms[static_cast<size_t>(g.strides[static_cast<size_t>(d)])];
    }
    gather(static_cast<const char*>(place(x, g.from, in, out, s)), shape, strides, rank, dtype_size(g.from.dtype),
           static_cast<char*>(out[g.to]));
    if (g.from.dtype == Dtype::Bool) {  // an input's bool bytes may be any nonzero value for true
      int64_t n = 1;
      for (int d = 0; d < rank; ++d) n *= shape[d];
      detail::canonical_bools(static_cast<uint8_t*>(out[g.to]), n);
    }
  }
  for (const Program::Copy& c : p.copies)
    std::memcpy(out[c.to], out[c.from],
                static_cast<size_t>(s.terms[static_cast<size_t>(c.numel)]) * dtype_size(c.dtype));
  return true;
}

}  // namespace dvm::graph
