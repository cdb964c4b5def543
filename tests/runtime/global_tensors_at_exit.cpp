// A program of its own (run by CTest; under AddressSanitizer in CI's
// sanitizer job): tensors held in a global outlive main, as a program's
// weights often do. They die after dvm's own statics were made, so after
// main returns their buffers go back to a pool that must still exist. A
// graph never compiled ends its capture after this thread's trace is gone.
#include <cstdio>
#include <memory>
#include <vector>

#include "dvm/dvm.h"

namespace {
std::vector<dvm::Tensor> g_weights;  // made before main: destroyed after dvm's statics
dvm::Tensor g_pending;               // recorded and never computed
std::unique_ptr<dvm::Graph> g_graph;  // recorded, never compiled: its capture ends after the trace is gone
}  // namespace

int main() {
  {
    dvm::Tensor t = dvm::Tensor::ones({1000}) + 1.0f;
    t.sync();  // a buffer freed before the globals die: the pool holds it
  }
  for (int i = 0; i < 64; ++i) {
    dvm::Tensor w = dvm::Tensor::uniform({1000 + 8 * i}, static_cast<uint64_t>(i)) * 2.0f;
    w.sync();
    g_weights.push_back(w);
  }
  g_pending = g_weights[3] * 3.0f;
  const float s = g_weights[0].sum().item();
  if (!(s > 0.0f)) {
    std::fprintf(stderr, "global_tensors_at_exit: sum %g\n", s);
    return 1;
  }
  g_graph = std::make_unique<dvm::Graph>();  // the capture is still on when main returns
  const dvm::Tensor x = g_graph->input("x", {g_graph->symbol("N")});
  g_graph->output("y", dvm::exp(x) * 2.0f);
  return 0;
}
