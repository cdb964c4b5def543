// What a dvm::Executable holds: the captured ops with their extents as
// monomials of the symbols (a run that rebuilds them, graph/graph.cpp), and
// the launch programs derived from the plans those runs used
// (graph/program.h), which later runs replay without rebuilding anything.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dvm/tensor.h"
#include "graph/program.h"
#include "graph/symbolic.h"
#include "tracer/node.h"

namespace dvm::detail {

using graph::Monomial;
using graph::Sum;

// One recorded op, as a run rebuilds it.
struct GNode {
  NodeKind kind = NodeKind::Leaf;
  OpKind op = OpKind::None;
  Dtype dtype = Dtype::F32;
  bool keepdim = false, immediate = false;
  int8_t red_begin = 0, red_end = 0, scalar_pos = -1;
  uint8_t nin = 0;
  float value = 0.0f;
  std::vector<Monomial> shape, strides;  // strides: a View's, relative to its input's contiguous layout
  Sum offset;
  // Each input: >= 0 a node of the list; < 0: -1 - an index into constants.
  int32_t in[3] = {0, 0, 0};
  int input = -1;        // a graph input's index
  int size = -1;         // a size scalar's index
  int range = -1;        // a range's index
};

struct SizeScalar {
  Monomial count;
  bool reciprocal = false;
};

// An arange made during the capture whose length is symbolic: start + i *
// step for i in [0, count), filled per run at the bound count.
struct RangeLeaf {
  Monomial count;
  double start = 0.0, step = 1.0;
  Dtype dtype = Dtype::F32;
};

struct Port {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<Monomial> shape;
  int32_t node = -1;
  Monomial numel;  // the product of shape
};

// A view's layout relative to its operand's contiguous one, whose bounds
// every run checks (relations do not decide them: narrow(x, 0, 0, 5) fits
// S = 9, not S = 3).
struct ViewCheck {
  std::vector<Monomial> shape, strides, operand;
  Sum offset;
};

// What an axis of symbolic extent (or a symbolic start or length along
// it) needs at every binding for a run to give the lazy path's shapes:
// start + span <= extent. A slice or narrow keeps the length it was
// captured with (the view it made may fold into a later one or read an
// expanded axis, so the view's own reach, ViewCheck, does not decide it;
// and where the lazy path would clamp a slice's end, a graph would not). A
// squeeze kept the axis at the capture, where the lazy path at an extent of
// 1 would drop it: extent >= 2 (start 0, span 2). A reduction that keeps
// indices or counts in float32 lanes (argmax, a sum of bool) over a count
// of symbolic extents: count <= 2^24 (start 0, span the count, extent 2^24).
struct ExtentBound {
  enum Op : uint8_t { kSlice = 0, kSqueeze = 1, kFloatCount = 2 };
  Monomial start, span, extent;
  int32_t axis = 0;
  Op op = kSlice;
  friend bool operator==(const ExtentBound&, const ExtentBound&) = default;
};

struct ExecutableState {
  std::vector<std::string> symbols;
  std::vector<Port> inputs, outputs;
  std::vector<GNode> nodes;
  std::vector<Tensor> constants;  // tensors made before the graph that it reads
  std::vector<SizeScalar> sizes;
  std::vector<RangeLeaf> ranges;
  // Every distinct monomial a plan's choices may depend on (extents,
  // strides, offsets, element counts, views' layout products): bindings
  // under which they relate alike (which are 0, which 1, which equal) run
  // the same plan, so they share a program.
  std::vector<Monomial> relations;
  std::vector<ViewCheck> views;
  std::vector<ExtentBound> bounds;
  int64_t recorded_ops = 0;
  // Loaded from a file (Executable::load): no ops to rebuild, so a binding
  // under relations no program was made for runs compile()'s program, the
  // one made under the relations of distinct extents (its kernels take
  // every extent and stride from the launch, so it computes any binding).
  bool loaded = false;

  // Programs by the relations they were made under, and what a run of one
  // uses (launches, term values, the arena); a run that finds the lock
  // taken rebuilds its ops instead.
  mutable std::mutex mu;
  mutable std::vector<std::shared_ptr<const graph::Program>> programs;
  mutable std::vector<int32_t> generic_key;  // compile()'s program's relations (empty: none)
  mutable graph::ProgramScratch scratch;
};

}  // namespace dvm::detail
