// Static graphs (dvm::Graph, dvm::Executable):
//   graph/W7/dvm/64     W7's 100-op stream captured once as a graph with its
//                       length a symbol, then run at 64 elements; counter
//                       ns_per_op (W7_op_stream/dvm/64 is the lazy path's)
//   compile/graph/W7    capturing and compiling that graph
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "bench/common.h"
#include "dvm/dvm.h"

namespace bench {
namespace {

using dvm::Bindings;
using dvm::Dim;
using dvm::Executable;
using dvm::Graph;
using dvm::GraphInputs;
using dvm::GraphOutputs;
using dvm::Tensor;

Executable w7_graph() {
  Graph g;
  const Dim N = g.symbol("N");
  const Tensor x = g.input("x", {N}), z = g.input("z", {N});
  g.output("y", record_stream(x, z, kStreamOps));
  return g.compile();
}

void BM_graph_w7(benchmark::State& state) {
  apply_system(kDvm, 1);
  dvm::flush();
  const Executable exe = w7_graph();
  const float* xp = pools().x.data();
  const float* zp = pools().w.data();  // in [0.5, 1.5], as for the lazy stream
  float* y = scratch("graph_w7_out", kStreamElems);
  const GraphInputs in = {{"x", xp}, {"z", zp}};
  const GraphOutputs out = {{"y", y}};
  const Bindings bind = {{"N", kStreamElems}};
  if (first_time("graph/W7")) {
    for (int64_t i = 0; i <= dvm::jit_threshold(); ++i) exe.run(in, out, bind);
    dvm::wait_for_jit();
    std::vector<float> ref(kStreamElems);
    fused_w7_op_stream(xp, zp, kStreamScalars, ref.data(), kStreamElems, kStreamOps);
    exe.run(in, out, bind);
    check_close("graph/W7/dvm/64", y, ref.data(), kStreamElems);
  }
  const LoopStats loop_stats;
  for (auto _ : state) {
    exe.run(in, out, bind);
    benchmark::ClobberMemory();
  }
  loop_stats.set_counters(state);
  set_ns_per_item_counter(state, "ns_per_op", kStreamOps);
}

void BM_compile_graph_w7(benchmark::State& state) {
  apply_system(kDvm, 1);
  dvm::flush();
  for (auto _ : state) benchmark::DoNotOptimize(w7_graph().ops());
}

int register_graph() {
  benchmark::RegisterBenchmark("graph/W7/dvm/64", BM_graph_w7)->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("compile/graph/W7", BM_compile_graph_w7)->Unit(benchmark::kMicrosecond);
  return 0;
}
const int registered_graph = register_graph();

}  // namespace
}  // namespace bench
