// What the tracer does differently while a static graph is being captured on
// its thread (graph/, dvm::Graph): nothing is computed (a flush is an error),
// and the values the tracer derives from sizes on the host are reported to
// the graph, which evaluates them again for each binding of its symbols.
// The graph layer implements the hooks; the tracer only calls them.
#pragma once

#include <cstdint>
#include <string>

namespace dvm::detail {

struct Node;

class CaptureHooks {
 public:
  virtual ~CaptureHooks() = default;
  // The graph's name for errors ("graph capture").
  virtual const char* what() const = 0;
  // Whether an extent (or a count made of extents) involves a symbol.
  virtual bool symbolic(int64_t extent) const = 0;
  // An extent as errors show it ("S", "B*S*12"); empty where it involves no
  // symbol or is no product of them (a sum, such as S - 1).
  virtual std::string extent_text(int64_t extent) const = 0;
  // Whether `length`, a constant length taken along an axis of symbolic
  // extent `axis`, is likely computed from that extent (S - 20, ceil(S / 2)),
  // which the graph would keep as the number the symbols stood for.
  virtual bool derived_length(int64_t length, int64_t axis) const = 0;
  // `leaf` (a one-element float32 leaf made during the capture) holds
  // `count`, or 1 / count when `reciprocal`: an element count of the
  // captured shapes.
  virtual void size_scalar(Node* leaf, int64_t count, bool reciprocal) = 0;
  // arange of a symbolic length: `leaf`, a pending leaf of `count`
  // elements, is to hold start + i * step for i in [0, count) (each run
  // fills it at its own count); it has no values during the capture.
  virtual void range(Node* leaf, double start, double step) = 0;
  // A slice keeps elements [start, start + span) of an axis of `extent`
  // (one of the three symbolic): each run checks that they fit its binding.
  virtual void slice_bounds(int64_t start, int64_t span, int64_t extent, int axis) = 0;
  // A squeeze kept `axis`, of symbolic `extent`: each run checks that the
  // extent is not 1 (where the lazy path would drop the axis).
  virtual void kept_axis(int64_t extent, int axis) = 0;
  // A reduction over `count` elements (symbolic) along axis `axis` keeps
  // whole numbers in float32 lanes (argmax's indices, a count of trues):
  // each run checks that count <= kFloatExactCount, past which the lazy
  // path folds them in int64 lanes instead.
  virtual void float_count(int64_t count, int axis) = 0;
};

// The most elements a reduction of indices or counts folds in float32
// lanes: every whole number up to 2^24 is exact there.
inline constexpr int64_t kFloatExactCount = int64_t{1} << 24;

// This thread's capture, or null (the lazy path).
CaptureHooks* capture();
// Installs (or, with null, removes) this thread's capture.
void set_capture(CaptureHooks* hooks);

}  // namespace dvm::detail
