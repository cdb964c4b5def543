// Static graphs with symbolic dimensions: record a computation once, with
// some extents named by symbols (a batch B, a sequence length S), and run it
// for any values of them.
//
//   dvm::Graph g;
//   dvm::Dim B = g.symbol("B"), S = g.symbol("S");
//   dvm::Tensor x = g.input("x", {B, S, 768});
//   dvm::Tensor y = dvm::layer_norm(x, {768}, w, b).reshape({B * S, 768});
//   g.output("y", y);
//   dvm::Executable exe = g.compile();
//   exe.run({{"x", x_ptr}}, {{"y", y_ptr}}, {{"B", 8}, {"S", 77}});
//
// Between the Graph's construction and compile(), the ordinary ops record
// the graph on this thread (nothing is computed; an observer such as data()
// is an error). Tensors made before the graph (weights) are constants of it.
//
// The first run under new relations of the extents (which are 1, which
// equal each other or a constant) plans them: it rebuilds the recorded ops
// at the bound sizes and fuses them as the lazy path would, computing
// nothing (the kernels are the lazy path's for the same ops: the plan and
// kernel caches are shared, so a graph's results are bit-identical to the
// lazy path's), and makes a launch program of that plan. That run and
// every later one under the same relations replay it: its kernels launched in order with the bound sizes,
// intermediates in one arena of the executable (memory()), outputs stored
// straight into the caller's buffers; nothing is rebuilt or looked up.
// compile() plans (computing nothing) the relations most bindings share
// (no extent 1, none equal) and those with each symbol at 1 and all at 1,
// so runs at new sizes compile nothing. Each run checks its extents, and
// the bounds of every view, before anything is computed.
//
// A symbol's extent is captured as a number of its own (a large prime), so
// any size argument accepts a Dim (it converts to that number) and the graph
// reads every extent back as a product of symbols and a constant: B * S * 12
// works anywhere a size does, through reshape, permute, narrow and the rest.
// The numbers are above 40000, so one tensor's extents may multiply at most
// three symbols ([B, H, S, 64] is fine, [B, H, S, D] is a dvm::Error at
// capture: make one of them a constant).
// arange of a symbolic length (and what is made of it: attention's causal
// mask, tril/triu, argmax's indices) is filled by each run at its length.
// Not supported yet, each a dvm::Error at capture or compile: sums and
// differences of symbols (S - 1, cat along a symbolic axis), lengths divided
// from a symbolic axis (chunk, split, a slice step), writes into buffers (cat,
// KVCache), an arange whose start or step is made of symbols, other values
// filled on the host with symbolic extents, var/std over symbolic axes,
// and the default scale of attention over a symbolic head size. A number computed
// from a Dim in the user's own code (1.0f / S) is a constant of the graph,
// the value at capture: pass such values as inputs. The capture tells a
// sum or a quotient from a constant by its number, so it misses some: a
// length taken along a symbolic axis that lies more than 2048 below it (S -
// 5000), or an extent of a new tensor (full({S - 20})), is kept as the
// constant the capture saw.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dvm/dtype.h"
#include "dvm/shape.h"
#include "dvm/tensor.h"

namespace dvm {

namespace detail {
struct GraphState;
struct ExecutableState;
}  // namespace detail

// An extent of a graph: a constant, or a product of its symbols and a
// constant. Converts to the number the capture gives it, so it can be
// passed wherever a size is taken.
class Dim {
 public:
  Dim(int64_t constant) : value_(constant) {}  // NOLINT(google-explicit-constructor)
  operator int64_t() const { return value_; }  // NOLINT(google-explicit-constructor)
  friend Dim operator*(const Dim& a, const Dim& b) { return times(a.value_, b.value_); }
  friend Dim operator*(const Dim& a, int64_t k) { return times(a.value_, k); }
  friend Dim operator*(int64_t k, const Dim& a) { return times(a.value_, k); }
  friend Dim operator*(const Dim& a, int k) { return times(a.value_, k); }
  friend Dim operator*(int k, const Dim& a) { return times(a.value_, k); }

 private:
  static Dim times(int64_t a, int64_t b) {
    int64_t r = 0;
    if (__builtin_mul_overflow(a, b, &r)) throw Error("dvm::Dim: the product of two extents overflows int64");
    return Dim(r);
  }
  int64_t value_;
};

// Named values for a run.
using Bindings = std::vector<std::pair<std::string, int64_t>>;
using GraphInputs = std::vector<std::pair<std::string, const void*>>;
using GraphOutputs = std::vector<std::pair<std::string, void*>>;

class Executable;

class Graph {
 public:
  // Starts recording on this thread (what is pending there is computed
  // first). One graph at a time per thread; dvm::Error otherwise.
  Graph();
  ~Graph();  // a graph never compiled drops what it recorded
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // A new symbol (a non-empty name of letters, digits and '_', unique in
  // this graph; at most 16 symbols).
  Dim symbol(const std::string& name);
  // A named input of the given extents and type. Its run binds a pointer to
  // numel() contiguous elements of dtype, never written.
  Tensor input(const std::string& name, const std::vector<Dim>& shape, Dtype dtype = Dtype::F32);
  // A named output: the result of an op recorded in this graph, or one of
  // its inputs (each run copies it), not a constant of it. Inputs and
  // outputs need distinct names.
  void output(const std::string& name, const Tensor& t);
  // Ends the recording and returns the executable, its kernels compiled
  // (by planning a run at sizes of its choosing; nothing is computed). The graph's
  // tensors have no values afterwards (reading one is a dvm::Error); the
  // Graph is spent.
  Executable compile();

 private:
  std::unique_ptr<detail::GraphState> s_;
};

class Executable {
 public:
  Executable();
  ~Executable();
  Executable(Executable&&) noexcept;
  Executable& operator=(Executable&&) noexcept;
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  // Computes the outputs for one binding of every symbol (each at least 1):
  // every input by name (a pointer to its elements, contiguous, row-major,
  // in its dtype), every output by name (written with its numel() elements
  // of its dtype and nothing else; an output may overlap an input, at a
  // cost: such a run computes everything before it writes; two outputs may
  // not overlap). A missing, unknown or repeated name, a symbol below 1,
  // extents that overflow, or outputs that overlap are dvm::Errors naming
  // them; no output is written then. Runs of one
  // executable from several threads at once are safe (one at a time
  // replays; the others rebuild their ops and compute them as the lazy path
  // does, with its buffers). A thread that is building a
  // dvm::Graph runs no executable (a dvm::Error): compile it first.
  void run(const GraphInputs& inputs, const GraphOutputs& outputs, const Bindings& bindings) const;

  // The extents of input or output `name` for a binding.
  Shape shape(const std::string& name, const Bindings& bindings) const;
  Dtype dtype(const std::string& name) const;
  std::vector<std::string> symbols() const;
  std::vector<std::string> inputs() const;
  std::vector<std::string> outputs() const;
  // "input x: float32[B, S, 768]" per input and "output y: ..." per output,
  // one per line.
  std::string describe() const;
  // How many recorded ops the graph has.
  int64_t ops() const;
  // The bytes of dvm memory a run at this binding uses for the graph's
  // intermediates: one arena, in which values whose lifetimes do not
  // overlap share bytes (inputs and outputs are the caller's buffers), and
  // the values of aranges of symbolic length, as the buffer pool hands them
  // out and the memory limit counts them (size classes: up to a quarter
  // above the bytes the values take). The executable keeps its
  // arena between runs (counted in memory_stats' live bytes): it grows to
  // a run that needs more and is replaced by a smaller one when a run
  // needs under a quarter of it. The first time a binding's
  // relations (which extents are 1, which equal) are seen it plans a run of
  // them: nothing is computed and no buffer is allocated, at any size. -1 for a graph whose
  // runs rebuild their ops every time (a plan it cannot replay). A binding
  // no run could take (bad bindings, a view past its constant) is the
  // dvm::Error run() would raise, naming memory.
  int64_t memory(const Bindings& bindings) const;

  // Writes the executable to a file (docs/EXECUTABLES.md): its symbols,
  // inputs, outputs, constants (weights included) and the launch programs
  // its runs have made so far, with the format's version and a checksum.
  // A regular file is written beside path and renamed over it once
  // complete (keeping the replaced file's permissions), so a failed save
  // (a full disk) leaves path as it was.
  void save(const std::string& path) const;
  // An executable from a file save() wrote, which runs without recording or
  // fusing anything: it replays the saved programs (a binding under
  // relations none was made for runs compile()'s, which computes any
  // binding's values; the bits may differ from the lazy path's there).
  // Every kernel is verified, every index and type checked, and every run
  // checks where its arguments reach; a truncated, corrupt or other-version
  // file is a dvm::Error naming the path and what is wrong.
  static Executable load(const std::string& path);

 private:
  friend class Graph;
  // Plans a run at sizes where every extent differs from the others as at
  // any binding: compiles the kernels before the first run.
  void make_kernels() const;
  // Plans a run at binding b (its kernels encoded, its program made) and
  // launches nothing; errors name `caller` (run, memory).
  void plan_at(const Bindings& b, const char* caller = "run") const;
  std::unique_ptr<detail::ExecutableState> s_;
};

}  // namespace dvm
