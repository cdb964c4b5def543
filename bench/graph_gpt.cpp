// The GPT decoder of examples/gpt_model.h as static graphs (prefill_graph,
// decode_graph), beside its lazy runs (model/gpt_<cfg>/..., model_gpt.cpp),
// one thread:
//   graph/gpt_<cfg>/prefill/<S>/dvm   one prompt of S tokens from position 0
//                                     through the prefill graph (the wte rows
//                                     copied in, the caches written to the
//                                     caller's buffers); counters
//                                     arena_peak_mb (the graph's arena at S)
//                                     and lazy_peak_mb (the buffer pool's peak
//                                     over the weights during the lazy
//                                     prefill of the same prompt: its caches,
//                                     activations and what it keeps cached)
//   graph/gpt_<cfg>/decode/<ctx>/dvm  time per greedy step through the decode
//                                     graph with ctx tokens in the caches
//   compile/graph/gpt_<cfg>/<which>   capture and compile of the prefill or
//                                     decode graph (its kernels in the cache
//                                     after the first); counter
//                                     compiles_at_50_bindings: kernels
//                                     compiled by 50 runs at new lengths
//                                     after the compile (25 prompts, 25 steps)
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "bench/common.h"
#include "bench/model_gpt.h"
#include "tracer/buffer_pool.h"

namespace bench {
namespace {

using Clock = std::chrono::steady_clock;

// A sequence's caches in the caller's memory, position-major [context, d].
struct GraphCaches {
  std::vector<std::vector<float>> k, v;
  explicit GraphCaches(const gpt::Config& c) {
    for (int64_t l = 0; l < c.n_layers; ++l) {
      k.emplace_back(static_cast<size_t>(c.context * c.d_model));
      v.emplace_back(static_cast<size_t>(c.context * c.d_model));
    }
  }
};

// Runs the prefill graph on tokens (from position 0): the argmax token.
int64_t graph_prefill(const gpt::Model& m, const dvm::Executable& exe, const std::vector<int32_t>& tokens,
                      GraphCaches& cache, std::vector<float>& x, std::vector<float>& logits) {
  const gpt::Config& c = m.config();
  x.resize(tokens.size() * static_cast<size_t>(c.d_model));
  logits.resize(static_cast<size_t>(c.vocab));
  m.embed_rows(tokens, x.data());
  int64_t next = -1;
  dvm::GraphOutputs out = {{"logits", logits.data()}, {"next", &next}};
  for (size_t l = 0; l < cache.k.size(); ++l) {
    out.emplace_back(gpt::Model::port("k", l), cache.k[l].data());
    out.emplace_back(gpt::Model::port("v", l), cache.v[l].data());
  }
  exe.run({{"x", x.data()}}, out, {{"S", static_cast<int64_t>(tokens.size())}});
  return next;
}

// The ports of one decode step at position P (names made once per layer).
struct DecodePorts {
  dvm::GraphInputs in;
  dvm::GraphOutputs out;
  int64_t next = -1;
  std::vector<float> x, logits;
  DecodePorts(const gpt::Config& c, GraphCaches& cache)
      : x(static_cast<size_t>(c.d_model)), logits(static_cast<size_t>(c.vocab)) {
    in.emplace_back("x", x.data());
    out.emplace_back("logits", logits.data());
    out.emplace_back("next", &next);
    for (size_t l = 0; l < cache.k.size(); ++l) {
      in.emplace_back(gpt::Model::port("k", l), cache.k[l].data());
      in.emplace_back(gpt::Model::port("v", l), cache.v[l].data());
      out.emplace_back(gpt::Model::port("k", l, "_new"), nullptr);
      out.emplace_back(gpt::Model::port("v", l, "_new"), nullptr);
    }
  }
  // One step: token at position P; returns the next token.
  int64_t step(const gpt::Model& m, const dvm::Executable& exe, GraphCaches& cache, int32_t token, int64_t P) {
    const int64_t d = m.config().d_model;
    m.embed_rows({token}, x.data());
    for (size_t l = 0; l < cache.k.size(); ++l) {
      out[2 + 2 * l].second = cache.k[l].data() + P * d;
      out[3 + 2 * l].second = cache.v[l].data() + P * d;
    }
    exe.run(in, out, {{"P", P}});
    return next;
  }
};

// The lazy prefill's buffer-pool peak above what the pool held before (the
// weights), cached blocks given back first.
double lazy_prefill_peak_mb(const gpt::Model& m, const std::vector<int32_t>& prompt) {
  gpt::Model::Session s(m);
  (void)m.forward(s, prompt).to_vector();  // the caches' buffers exist, as in a warm loop
  s.reset();
  dvm::trim();
  dvm::detail::pool_reset_peak();
  const dvm::MemoryStats before = dvm::memory_stats();
  (void)m.forward(s, prompt).to_vector();
  return static_cast<double>(dvm::memory_stats().peak_bytes - before.live_bytes - before.cached_bytes) / (1 << 20);
}

void graph_prefill_bench(benchmark::State& state, const gpt::Config& c, int64_t S) {
  const gpt::Model& m = dvm_gpt_model(c);
  const dvm::Executable exe = m.prefill_graph();
  const std::vector<int32_t> prompt = gpt_prompt(S, c.vocab, 1);
  GraphCaches cache(c);
  std::vector<float> x, logits;
  for (int64_t i = 0; i <= dvm::jit_threshold() + 1; ++i) graph_prefill(m, exe, prompt, cache, x, logits);
  dvm::wait_for_jit();
  // The lazy path's logits on the same prompt: the two agree (the graph's
  // products split qkv in three; the sums are the same, within rounding).
  {
    gpt::Model::Session s(m);
    const std::vector<float> want = m.forward(s, prompt).to_vector();
    graph_prefill(m, exe, prompt, cache, x, logits);
    check_close(("graph/gpt_" + c.name + "/prefill").c_str(), logits.data(), want.data(), c.vocab);
  }
  const LoopStats loop_stats;
  for (auto _ : state) benchmark::DoNotOptimize(graph_prefill(m, exe, prompt, cache, x, logits));
  loop_stats.set_counters(state);
  state.counters["arena_peak_mb"] = static_cast<double>(exe.memory({{"S", S}})) / (1 << 20);
  state.counters["lazy_peak_mb"] = lazy_prefill_peak_mb(m, prompt);
  state.SetItemsProcessed(state.iterations() * S);
}

void graph_decode_bench(benchmark::State& state, const gpt::Config& c, int64_t ctx) {
  const gpt::Model& m = dvm_gpt_model(c);
  const dvm::Executable pre = m.prefill_graph(), dec = m.decode_graph();
  const std::vector<int32_t> prompt = gpt_prompt(ctx, c.vocab, 2);
  GraphCaches cache(c);
  DecodePorts ports(c, cache);
  std::vector<float> x, logits;
  // One iteration: the caches refilled to ctx tokens (untimed), then
  // kGptDecodeSteps timed steps; the time is per step.
  auto run = [&] {
    int64_t t = graph_prefill(m, pre, prompt, cache, x, logits);
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < kGptDecodeSteps; ++i) t = ports.step(m, dec, cache, static_cast<int32_t>(t), ctx + i);
    return std::chrono::duration<double>(Clock::now() - t0).count() / static_cast<double>(kGptDecodeSteps);
  };
  for (int64_t i = 0; i <= dvm::jit_threshold() + 1; ++i) run();
  dvm::wait_for_jit();
  for (auto _ : state) state.SetIterationTime(run());
  state.SetItemsProcessed(state.iterations());
}

void graph_compile_bench(benchmark::State& state, const gpt::Config& c, bool decode) {
  const gpt::Model& m = dvm_gpt_model(c);
  for (auto _ : state) {
    const dvm::Executable exe = decode ? m.decode_graph() : m.prefill_graph();
    benchmark::DoNotOptimize(exe.ops());
  }
  // 50 runs at new lengths after a compile: 25 prompts and 25 decode steps.
  const dvm::Executable pre = m.prefill_graph(), dec = m.decode_graph();
  dvm::reset_stats();
  GraphCaches cache(c);
  DecodePorts ports(c, cache);
  std::vector<float> x, logits;
  for (int i = 0; i < 25; ++i) {
    const int64_t S = 2 + 9 * i;
    const int64_t t = graph_prefill(m, pre, gpt_prompt(S, c.vocab, 50 + i), cache, x, logits);
    ports.step(m, dec, cache, static_cast<int32_t>(t), S);
  }
  state.counters["compiles_at_50_bindings"] = static_cast<double>(dvm::stats().kernels_compiled);
}

int register_graph_gpt() {
  for (const gpt::Config& c : {gpt::Config::tiny(), gpt::Config::small()}) {
    const std::string base = "graph/gpt_" + c.name + "/";
    for (int64_t S : {1, 7, 32, 128, 512}) {
      const std::string name = base + "prefill/" + std::to_string(S) + "/dvm";
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
        apply_system(kDvm, 1);
        graph_prefill_bench(st, c, S);
      })->Unit(benchmark::kMillisecond);
    }
    for (int64_t ctx : {32, 256}) {
      const std::string name = base + "decode/" + std::to_string(ctx) + "/dvm";
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
        apply_system(kDvm, 1);
        graph_decode_bench(st, c, ctx);
      })->UseManualTime()->Unit(benchmark::kMicrosecond);
    }
    for (bool decode : {false, true}) {
      const std::string name = "compile/graph/gpt_" + c.name + (decode ? "/decode" : "/prefill");
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
        apply_system(kDvm, 1);
        graph_compile_bench(st, c, decode);
      })->Unit(benchmark::kMicrosecond);
    }
  }
  return 0;
}
const int registered = register_graph_gpt();

}  // namespace
}  // namespace bench
