// Split launches on machine code: the fold kernel of a ColReduce, the split
// passes of a RowReduce, and the chunked launches that run them.
#include "vm/split_launch.h"

#include <algorithm>
#include <iterator>
#include <chrono>
#include <string>
#include <vector>

#include "backends/microkernels.h"
#include "vm/forms.h"
#include "vm/interpreter.h"
#include "vm/parallel.h"
#include "vm/tiering.h"

namespace dvm::vm {
namespace {

// The parent's prologue and reduction block, then one ST per reduction into
// a new output argument. The parent's epilogue outputs become inputs nobody
// loads (a kernel must store every output); its prologue outputs (softmax's
// exponentials) stay outputs, each chunk storing its own rows. No LDG: a
// chunk is the parent's launch with its row pointers advanced, which
// general loads do not follow.
std::shared_ptr<Kernel> make_fold_kernel(const Kernel& k) {
  const VerifiedProgram& vp = k.verified();
  const Program& p = vp.program;
  if (form_row(p.form).reduces != ReduceAxis::Outer || vp.first_reduce < 0) return nullptr;
  const size_t r0 = static_cast<size_t>(vp.first_reduce), r1 = static_cast<size_t>(vp.last_reduce);
  if (p.roles.size() + (r1 - r0 + 1) > static_cast<size_t>(kMaxArgs)) return nullptr;
  Program f;
  f.form = Form::ColReduce;
  f.nregs = p.nregs;
  std::vector<uint8_t> prologue_out(p.roles.size(), 0);
  for (size_t i = 0; i < r0; ++i)
    if (op_class(p.code[i].op) == OpClass::Store) prologue_out[p.code[i].r[0]] = 1;
  for (size_t a = 0; a < p.roles.size(); ++a)
    f.roles.push_back(p.roles[a] == ArgRole::Output && !prologue_out[a] ? ArgRole::Input : p.roles[a]);
  f.types = p.types;
  f.int_lanes = p.int_lanes;
  f.nscalars = p.nscalars;
  std::vector<uint8_t> dst_seen(static_cast<size_t>(p.nregs), 0);
  for (size_t i = 0; i <= r1; ++i) {
    const Instr& ins = p.code[i];
    if (ins.op == Op::LDG) return nullptr;
    if (i >= r0) {
      // One float per (p, chunk) reductions, or two reductions in one
      // register, are left to the interpreter.
      if (vp.info[i].dst_kind != Kind::Vec || dst_seen[ins.r[0]]) return nullptr;
      dst_seen[ins.r[0]] = 1;
    }
    f.code.push_back(ins);
  }
  for (size_t i = r0; i <= r1; ++i) {
    Instr st;
    st.op = Op::ST;
    st.r[0] = static_cast<uint8_t>(f.roles.size());
    st.r[1] = p.code[i].r[0];
    st.nr = 2;
    f.roles.push_back(ArgRole::Output);
    f.types.push_back(Dtype::F32);  // raw f32 accumulators
    f.code.push_back(st);
  }
  Bytecode bc = encode(f);
  VerifiedProgram fvp;
  std::string error;
  if (!verify(bc, &fvp, &error)) return nullptr;  // cannot happen for a verified parent
  return std::make_shared<Kernel>(std::move(bc), std::move(fvp));
}

// Pass `pass` of a split RowReduce row as a kernel of its own (see
// Kernel::SplitPass). Walks the parent backwards from the pass's targets
// (reductions of level pass + 1, or in the last pass the ST values) to keep
// only their cone; a finished reduction in it becomes an LDB of its value.
Kernel::SplitPass make_split_pass(const Kernel& k, int pass) {
  const VerifiedProgram& vp = k.verified();
  const Program& p = vp.program;
  const bool last = pass == vp.max_level;
  const size_t ni = p.code.size(), nargs = p.roles.size();
  auto folds = [&](size_t i) {
    return !last && op_class(p.code[i].op) == OpClass::Reduce && vp.info[i].level == pass + 1;
  };
  std::vector<uint8_t> need(ni, 0), live(static_cast<size_t>(p.nregs), 0);
  for (size_t i = ni; i-- > 0;) {
    const Instr& ins = p.code[i];
    const OpInfo& oi = op_info(ins.op);
    const bool writes = oi.signature[0] == 'D';
    if (!(last ? ins.op == Op::ST : folds(i)) && !(writes && live[ins.r[0]])) continue;
    if (ins.op == Op::LDG) return {};  // its dims do not follow a chunk
    need[i] = 1;
    if (writes) live[ins.r[0]] = 0;
    if (oi.cls == OpClass::Reduce && !folds(i)) continue;  // finished: a leaf
    for (int j = 0; j < ins.nr; ++j)
      if (oi.signature[j] == 'R') live[ins.r[j]] = 1;
  }
  // A chunk binds each argument either per row (LDB: strides 0) or per
  // element (rows of `lanes` elements), not both.
  std::vector<uint8_t> per_row(nargs, 0), per_elem(nargs, 0), stored(nargs, 0);
  for (size_t i = 0; i < ni; ++i) {
    if (!need[i]) continue;
    const Instr& ins = p.code[i];
    if (ins.op == Op::LDB) per_row[ins.r[1]] = 1;
    else if (op_class(ins.op) == OpClass::Load) per_elem[ins.r[1]] = 1;
    else if (ins.op == Op::ST) stored[ins.r[0]] = 1;
  }
  for (size_t a = 0; a < nargs; ++a)
    if (per_row[a] && per_elem[a]) return {};
  if (last && std::find(stored.begin(), stored.end(), 1) == stored.end()) return {};  // only STBs: no chunks
  Kernel::SplitPass sp;
  sp.per_row = per_row;
  Program f;
  f.form = last ? Form::Elementwise : Form::ColReduce;
  f.nregs = p.nregs;
  for (size_t a = 0; a < nargs; ++a)
    f.roles.push_back(p.roles[a] == ArgRole::Output && stored[a] ? ArgRole::Output : ArgRole::Input);
  f.types = p.types;
  f.int_lanes = p.int_lanes;
  f.nscalars = p.nscalars;
  std::vector<uint32_t> fold_regs;
  for (size_t i = 0; i < ni; ++i) {
    if (!need[i]) continue;
    Instr ins = p.code[i];
    if (folds(i)) {
      // One block of reductions, each of a vec value into its own register.
      if (vp.info[i].src_kind[0] != Kind::Vec ||
          std::find(fold_regs.begin(), fold_regs.end(), ins.r[0]) != fold_regs.end())
        return {};
      fold_regs.push_back(ins.r[0]);
    } else if (!fold_regs.empty()) {
      return {};  // something between two reductions of the level
    } else if (op_class(ins.op) == OpClass::Reduce) {
      if (f.roles.size() >= static_cast<size_t>(kMaxArgs)) return {};
      sp.finished.push_back(static_cast<uint32_t>(i));
      ins = Instr{Op::LDB, {ins.r[0], static_cast<uint8_t>(f.roles.size()), 0, 0}, 2, 0.0f};
      f.roles.push_back(ArgRole::Input);
      f.types.push_back(Dtype::F32);  // the row's finished reduction
    }
    f.code.push_back(ins);
  }
  for (uint32_t r : fold_regs) {
    if (f.roles.size() >= static_cast<size_t>(kMaxArgs)) return {};
    f.code.push_back(Instr{Op::ST, {static_cast<uint8_t>(f.roles.size()), static_cast<uint8_t>(r), 0, 0}, 2, 0.0f});
    f.roles.push_back(ArgRole::Output);
    f.types.push_back(Dtype::F32);  // raw f32 accumulators
  }
  Bytecode bc = encode(f);
  VerifiedProgram fvp;
  std::string error;
  if (!verify(bc, &fvp, &error)) return {};
  sp.kernel = std::make_shared<Kernel>(std::move(bc), std::move(fvp));
  return sp;
}

// Runs each (row, chunk) item's share of every pass with the pass kernels'
// machine code: whole rounds of `lanes` elements fold as the rows of a
// ColReduce, the last pass stores the whole chunk; the interpreter runs the
// rest and combines (split_row_reduce). True when every pass had code.
bool jit_split_rows(const Kernel& k, const Launch& l, const backends::MicroKernels& mk) {
  const VerifiedProgram& vp = k.verified();
  const Program& p = vp.program;
  const size_t nargs = l.args.size();
  const int64_t lanes = mk.reduce_lanes;
  const int64_t calls = k.calls.load(std::memory_order_relaxed);
  std::vector<const Kernel::SplitPass*> passes(static_cast<size_t>(vp.max_level) + 1, nullptr);
  std::vector<Tier> tiers(passes.size());
  // A last pass of STBs alone streams nothing (split_row_reduce).
  const bool last_streams =
      std::any_of(p.code.begin(), p.code.end(), [](const Instr& i) { return i.op == Op::ST; });
  bool all = true;
  for (size_t pass = 0; pass < passes.size(); ++pass) {
    passes[pass] = k.split_pass(static_cast<int>(pass));
    if (passes[pass]) tiers[pass] = select_tier(*passes[pass]->kernel, calls, mk.isa);
    const bool streams = static_cast<int>(pass) < vp.max_level || last_streams;
    all &= !streams || (tiers[pass].backend && tiers[pass].machine_code());
  }
  RowChunkPass machine = [&](int pass, int64_t row, int64_t c0, int64_t c1, float* partial,
                             const float* results) -> int64_t {
    const Tier& tier = tiers[static_cast<size_t>(pass)];
    if (!tier.backend || !tier.machine_code()) return 0;
    const Kernel::SplitPass& sp = *passes[static_cast<size_t>(pass)];
    const Program& f = sp.kernel->program();
    const bool last = pass == vp.max_level;
    const int64_t len = last ? c1 - c0 : (c1 - c0) / lanes * lanes;
    if (len == 0) return 0;
    Launch cl;
    cl.extent[kP] = 1;
    cl.extent[kR] = last ? 1 : len / lanes;
    cl.extent[kC] = last ? len : lanes;
    cl.args.resize(f.roles.size());
    cl.scalars = l.scalars;
    const int64_t pp = row / l.R(), rr = row % l.R();
    size_t next = nargs;  // finished reductions, then fold outputs
    for (size_t a = 0; a < nargs; ++a) {
      const ArgBinding& src = l.args[a];
      ArgBinding& ab = cl.args[a];
      const bool used = p.roles[a] == ArgRole::Input || f.roles[a] == ArgRole::Output;
      if (!used) continue;
      const int64_t at = pp * src.stride[kP] + rr * src.stride[kR];
      // Element c0 + r * lanes + c of the chunk (a per-row argument ignores
      // the element: LDB reads base + p * stride[kP] + r * stride[kR], both 0 here).
      ab.stride[kC] = src.stride[kC];
      ab.stride[kR] = last ? 0 : lanes * src.stride[kC];
      const Dtype t = p.types[a];
      if (src.in) ab.in = advance(src.in, at + c0 * src.stride[kC], t);
      if (src.out) ab.out = advance(src.out, at + c0 * src.stride[kC], t);
      if (sp.per_row[a]) {
        ab = ArgBinding{};
        ab.in = advance(src.in, at, t);
      }
    }
    for (uint32_t i : sp.finished) cl.args[next++].in = results + i;
    for (int64_t j = 0; next < f.roles.size(); ++j) {
      ArgBinding& ab = cl.args[next++];
      ab.out = partial + j * lanes;
      ab.stride[kC] = 1;
    }
    const int64_t items = last ? (len + kChunk - 1) / kChunk : 1;
    tier.run_items(*sp.kernel, cl, 0, items);
    return len;
  };
  split_row_reduce(k, l, mk, &machine);
  return all;
}

// Folds every (chunk, column tile) with the fold kernel's machine code into
// the split layout, then combines on the interpreter (O(P x C) per chunk).
bool jit_split_cols(const Kernel& k, const Launch& l, const backends::MicroKernels& mk) {
  const Kernel* fold = k.fold_kernel();
  if (!fold) return false;
  // The fold kernel tiers up with its parent's calls: it is hot when they are.
  const Tier tier = select_tier(*fold, k.calls.load(std::memory_order_relaxed), mk.isa);
  if (!tier.machine_code()) return false;
  const ColSplit sp = col_split(k, l);
  std::vector<float> partial(sp.floats());
  const size_t nargs = l.args.size();
  const Program& p = k.program();
  const Program& f = fold->program();
  parallel_items(sp.chunks * sp.items, sp.rows * std::min(l.C(), kTile), [&](int64_t b, int64_t e) {
    Launch cl;
    cl.extent[kP] = l.P();
    cl.extent[kC] = l.C();
    cl.args.resize(nargs + sp.nred);
    cl.scalars = l.scalars;
    while (b < e) {
      const int64_t chunk = b / sp.items, first = b % sp.items;
      const int64_t last = std::min(sp.items, first + (e - b));
      const int64_t r_begin = chunk * sp.rows;
      cl.extent[kR] = std::min(sp.rows, l.R() - r_begin);
      for (size_t a = 0; a < nargs; ++a) {
        ArgBinding& ab = cl.args[a];
        if (f.roles[a] != p.roles[a]) {
          ab = ArgBinding{};  // an epilogue output: an input of the fold kernel that nothing reads
          continue;
        }
        ab = l.args[a];
        if (ab.in) ab.in = advance(ab.in, r_begin * ab.stride[kR], p.types[a]);
        if (ab.out) ab.out = advance(ab.out, r_begin * ab.stride[kR], p.types[a]);  // a prologue store
      }
      for (size_t j = 0; j < sp.nred; ++j) {
        ArgBinding& ab = cl.args[nargs + j];
        ab = ArgBinding{};
        ab.out = sp.at(partial.data(), chunk, j, 0, 0);
        ab.stride[kP] = l.C();
        ab.stride[kC] = 1;
      }
      tier.run_items(*fold, cl, first, last);
      b += last - first;
    }
  });
  finish_split_cols(k, l, sp, mk, partial.data());
  return true;
}

}  // namespace

const Kernel* Kernel::fold_kernel() const {
  std::call_once(fold_once_, [&] { fold_ = make_fold_kernel(*this); });
  return fold_.get();
}

const Kernel::SplitPass* Kernel::split_pass(int pass) const {
  std::call_once(passes_once_, [&] {
    if (form_row(form()).reduces != ReduceAxis::Inner) return;
    for (int L = 0; L <= vp_.max_level; ++L) passes_.push_back(make_split_pass(*this, L));
  });
  if (pass < 0 || static_cast<size_t>(pass) >= passes_.size() || !passes_[static_cast<size_t>(pass)].kernel)
    return nullptr;
  return &passes_[static_cast<size_t>(pass)];
}

namespace {

// Machine code for each form that splits (vm/forms.h: FormRow::splits).
// Returns false when it ran nothing (the interpreter then runs the launch);
// otherwise sets *all when machine code ran every pass.
struct MachineSplit {
  Form form;
  bool (*run)(const Kernel&, const Launch&, const backends::MicroKernels&, bool* all);
};
bool machine_split_rows(const Kernel& k, const Launch& l, const backends::MicroKernels& mk, bool* all) {
  if (!machine_code_for(mk.isa)) return false;
  *all = jit_split_rows(k, l, mk);  // every chunk, on machine code where its pass has it
  return true;
}
bool machine_split_cols(const Kernel& k, const Launch& l, const backends::MicroKernels& mk, bool* all) {
  return *all = jit_split_cols(k, l, mk);
}
constexpr MachineSplit kMachineSplits[] = {
    {Form::Elementwise, nullptr},
    {Form::RowReduce, machine_split_rows},
    {Form::ColReduce, machine_split_cols},
    {Form::Contraction, nullptr},
};
static_assert(std::size(kMachineSplits) == kNumForms, "an entry per form");

}  // namespace

bool run_split(const Kernel& k, const Launch& l, const backends::MicroKernels& mk) {
  const MachineSplit& m = kMachineSplits[static_cast<int>(k.form())];
  bool all = false;
  if (m.run && m.run(k, l, mk, &all)) return all;
  interpret_split_rows(k, l, mk);
  return false;
}

}  // namespace dvm::vm
