// A static graph's launch program: the kernels one run of its plan launches,
// in order, with every extent and stride a monomial of the symbols (an
// offset a sum of them)
// and every address a place (an input, an output, a constant, a buffer of
// the arena, a size scalar). Made from the plan a rebuilding run used
// (fuser::PlanObserver), it is valid for every binding under which the
// graph's relations (which extents are 0, which 1, which equal) are those of
// that run: the lazy path would choose the same plan and kernels there. A run
// of a program evaluates its terms, places its buffers in one arena by their
// lifetimes, and launches: no node is built and nothing is looked up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "dvm/dtype.h"
#include "dvm/shape.h"
#include "fuser/executor.h"
#include "graph/symbolic.h"
#include "vm/kernel.h"
#include "vm/launch.h"
#include "vm/launcher.h"

namespace dvm::detail {
struct ExecutableState;
struct Node;
}  // namespace dvm::detail

namespace dvm::graph {

// Where an argument's elements are.
enum class Source : uint8_t {
  Input,     // a graph input (the run's pointer)
  Output,    // a graph output (the run's pointer): written in place
  Constant,  // a tensor made before the graph
  Buffer,    // an intermediate, in the arena
  Size,      // a size scalar (an element count, or its reciprocal)
  Range,     // arange's values of a symbolic length, filled per run
};

// Terms are indices into Program::terms; these two are always there.
inline constexpr int32_t kZeroTerm = 0;
inline constexpr int32_t kOneTerm = 1;

struct ProgramArg {
  Source source = Source::Buffer;
  int32_t index = 0;  // of the input, output, constant, buffer or size scalar
  bool output = false;
  vm::Op access = vm::Op::LD;
  Dtype dtype = Dtype::F32;
  int32_t offset = kZeroTerm;  // in elements
  int32_t stride[vm::kMaxParts] = {};
  uint8_t ndims[vm::kMaxParts] = {};  // LDG: its dims per part
  int32_t dim_size[vm::kMaxParts][kMaxRank] = {};
  int32_t dim_stride[vm::kMaxParts][kMaxRank] = {};
};

struct ProgramLaunch {
  std::shared_ptr<vm::Kernel> kernel;
  int32_t extent[vm::kMaxParts] = {kOneTerm, kOneTerm, kOneTerm, kOneTerm};
  std::vector<ProgramArg> args;
  std::vector<float> scalars;
  int32_t product_b = -1;      // the argument the cube may read from a row-major copy
  std::vector<int32_t> reads;  // the launches whose outputs it reads
};

// An intermediate: written by launch `first`, read last by launch `last`.
struct ProgramBuffer {
  int32_t numel = kZeroTerm;
  Dtype dtype = Dtype::F32;
  int32_t first = 0, last = 0;
};

struct Program {
  std::vector<int32_t> key;  // the relations' classes it was made under (relation_key)
  // Term i < terms.size() is a monomial; term terms.size() + k the sum of
  // the monomial terms sums[k] lists (an offset past several sliced axes).
  std::vector<Monomial> terms;
  std::vector<std::vector<int32_t>> sums;
  size_t term_count() const { return terms.size() + sums.size(); }
  std::vector<ProgramLaunch> launches;
  std::vector<ProgramBuffer> buffers;
  // Outputs that name a node another output already names, copied from it.
  struct Copy {
    int32_t to, from, numel;
    Dtype dtype;
  };
  std::vector<Copy> copies;
  // Outputs no kernel stores (an input, a view of an input or of a value
  // the launches computed), copied element by element after them.
  struct Gather {
    int32_t to;
    ProgramArg from;  // source, index, offset and dtype
    std::vector<int32_t> shape, strides;
  };
  std::vector<Gather> gathers;
};

// What one run of a program uses, kept between runs so that they allocate
// nothing once warm.
struct ProgramScratch {
  ProgramScratch() = default;
  ProgramScratch(const ProgramScratch&) = delete;
  ProgramScratch& operator=(const ProgramScratch&) = delete;
  ~ProgramScratch();
  std::vector<int64_t> terms;
  std::vector<float> sizes;
  // Per range: its values, in a block of the buffer pool (counted, within
  // the memory limit), filled by a run when the bound count changes.
  struct RangeBlock {
    void* data = nullptr;
    size_t bytes = 0;
  };
  std::vector<RangeBlock> ranges;
  std::vector<int64_t> range_counts;
  int64_t range_bytes = 0;  // what the ranges need at the last binding evaluated
  std::vector<int32_t> step;     // per launch: launches of one step may run side by side
  std::vector<int64_t> offset;   // per buffer: its byte offset in the arena
  struct Block {
    int64_t begin, end;
    int32_t last_step;
  };
  std::vector<Block> live;
  std::vector<vm::Launch> launches;
  std::vector<vm::StackEntry> entries;
  void* arena = nullptr;  // from the buffer pool
  size_t arena_bytes = 0;
};

// The classes of the executable's relations under symbol values v: per
// relation 0 (its value is 0), 1 (its value is 1), or 2 + the first relation
// of equal value. False when a relation overflows or an extent passes
// kMaxElements (a rebuilding run names the error).
bool relation_key(const detail::ExecutableState& x, const int64_t* v, std::vector<int32_t>* key);

// Watches the flushes of one rebuilding run and turns their plans into a
// program. A plan it cannot express (a node that is not the graph's, a
// write into a buffer, an output that no kernel stores) makes none.
class ProgramBuilder final : public fuser::PlanObserver {
 public:
  ProgramBuilder(const detail::ExecutableState& x, const int64_t* v) : x_(x), v_(v) {}
  // The node a run built for the graph's node `gnode`.
  void add_node(const detail::Node* n, int32_t gnode) { gnode_of_[n] = gnode; }
  void ran(const std::vector<detail::Node*>& nodes, const fuser::CachedPlan& plan) override;
  // The program, or null when this run's plans could not make one.
  std::shared_ptr<Program> finish();

 private:
  int32_t term(const Monomial& m);
  // A sum's term: a monomial's, or (more than one) a placeholder -1 - k for
  // sums[k], numbered after the monomials by finish().
  int32_t term(const Sum& s);
  int32_t final_term(int32_t t) const {
    return t < 0 ? static_cast<int32_t>(p_.terms.size()) + (-1 - t) : t;
  }
  int64_t value(const Monomial& m) const;
  int32_t gnode(const detail::Node* n) const;
  bool add_group(const std::vector<detail::Node*>& nodes, const fuser::CachedGroup& cg);
  bool shape_of(const detail::Node* n, std::vector<Monomial>* shape) const;
  // launch < 0: read after every launch.
  bool place_of(int32_t gnode, int32_t launch, ProgramArg* a);
  bool source_of(const detail::Node* n, int32_t launch, ProgramArg* a, std::vector<Monomial>* strides,
                 Sum* offset);
  // Constant `ref` (< 0, as GNode::in) as the place a view of it reads:
  // false unless it is contiguous from its buffer's start, the layout the
  // capture made the view's strides for.
  bool constant_place(int32_t ref, ProgramArg* a) const;

  const detail::ExecutableState& x_;
  const int64_t* v_;
  bool ok_ = true;
  Program p_;
  std::unordered_map<const detail::Node*, int32_t> gnode_of_;
  std::unordered_map<int32_t, int32_t> buffer_of_;  // gnode -> buffer
  std::unordered_map<int32_t, int32_t> output_of_;  // gnode -> output port stored in place
  std::unordered_map<int32_t, int32_t> producer_;   // gnode -> launch
};

// Whether the elements offset + sum((size_k - 1) * stride_k), k < n, lie in
// [0, elems) (true when a size is 0: no element is reached).
bool reach_inside(int64_t offset, const int64_t* size, const int64_t* stride, int n, int64_t elems);

// Whether n's layout (shape, strides, offset) lies inside its buffer; true
// for a node without one.
bool layout_inside(const detail::Node* n);

// The bytes of dvm memory a run of p under v needs: its arena (its buffers
// placed by their lifetimes) and its ranges' values; -1 when a term
// overflows. Fills nothing.
int64_t program_memory_bytes(const detail::ExecutableState& x, const Program& p, const int64_t* v,
                             ProgramScratch& s);

// Runs p under v: in and out are the ports' pointers, in port order. False
// when a term overflows (nothing was written). With `check`, every argument
// is first checked to stay inside the place it names (a dvm::Error if not):
// a loaded program's numbers come from a file.
bool run_program(const detail::ExecutableState& x, const Program& p, const int64_t* v, const void* const* in,
                 void* const* out, ProgramScratch& s, bool check);

// The calling thread's count of graph runs that replayed a program and that
// rebuilt their ops (for tests and benchmarks).
struct ProgramStats {
  int64_t replays = 0, rebuilds = 0;
};
ProgramStats& program_stats();

}  // namespace dvm::graph
