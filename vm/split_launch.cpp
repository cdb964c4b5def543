// Split launches on machine code: the fold kernel of a ColReduce and the
// chunked launch that runs it.
#include "vm/split_launch.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "backends/microkernels.h"
#include "vm/interpreter.h"
#include "vm/parallel.h"
#include "vm/tiering.h"

namespace dvm::vm {
namespace {

// The parent's prologue and reduction block, then one ST per reduction into
// a new output argument. The parent's outputs become inputs nobody loads (a
// kernel must store every output). No LDG: a chunk is the parent's launch
// with its row pointers advanced, which general loads do not follow.
std::shared_ptr<Kernel> make_fold_kernel(const Kernel& k) {
  const VerifiedProgram& vp = k.verified();
  const Program& p = vp.program;
  if (p.form != Form::ColReduce || vp.first_reduce < 0) return nullptr;
  const size_t r0 = static_cast<size_t>(vp.first_reduce), r1 = static_cast<size_t>(vp.last_reduce);
  if (p.roles.size() + (r1 - r0 + 1) > static_cast<size_t>(kMaxArgs)) return nullptr;
  Program f;
  f.form = Form::ColReduce;
  f.nregs = p.nregs;
  for (ArgRole r : p.roles) f.roles.push_back(r == ArgRole::Output ? ArgRole::Input : r);
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
    f.code.push_back(st);
  }
  Bytecode bc = encode(f);
  VerifiedProgram fvp;
  std::string error;
  if (!verify(bc, &fvp, &error)) return nullptr;  // cannot happen for a verified parent
  return std::make_shared<Kernel>(std::move(bc), std::move(fvp));
}

// Folds every (chunk, column tile) with the fold kernel's machine code into
// the split layout, then combines on the interpreter (O(P x C) per chunk).
bool jit_split_cols(const Kernel& k, const Launch& l, const backends::MicroKernels& mk) {
  const Kernel* fold = k.fold_kernel();
  if (!fold) return false;
  // The fold kernel tiers up with its parent's calls: it is hot when they are.
  const backends::jit::JitCode* code = select_tier(*fold, k.calls.load(std::memory_order_relaxed), mk.isa);
  if (!code) return false;
  const ColSplit sp = col_split(k, l);
  std::vector<float> partial(sp.floats());
  const size_t nargs = l.args.size();
  const Program& p = k.program();
  parallel_items(sp.chunks * sp.items, sp.rows * std::min(l.C, kTile), [&](int64_t b, int64_t e) {
    Launch cl;
    cl.P = l.P;
    cl.C = l.C;
    cl.args.resize(nargs + sp.nred);
    while (b < e) {
      const int64_t chunk = b / sp.items, first = b % sp.items;
      const int64_t last = std::min(sp.items, first + (e - b));
      const int64_t r_begin = chunk * sp.rows;
      cl.R = std::min(sp.rows, l.R - r_begin);
      for (size_t a = 0; a < nargs; ++a) {
        ArgBinding& ab = cl.args[a];
        if (p.roles[a] == ArgRole::Output) {
          ab = ArgBinding{};  // an input of the fold kernel that nothing reads
          continue;
        }
        ab = l.args[a];
        if (ab.in) ab.in += r_begin * ab.rs;
      }
      for (size_t j = 0; j < sp.nred; ++j) {
        ArgBinding& ab = cl.args[nargs + j];
        ab = ArgBinding{};
        ab.out = sp.at(partial.data(), chunk, j, 0, 0);
        ab.ps = l.C;
        ab.cs = 1;
      }
      backends::jit::run_items(*code, fold->verified(), cl, first, last);
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

bool run_split(const Kernel& k, const Launch& l, const backends::MicroKernels& mk) {
  if (k.form() == Form::ColReduce && jit_split_cols(k, l, mk)) return true;
  interpret_split_rows(k, l, mk);
  return false;
}

}  // namespace dvm::vm
