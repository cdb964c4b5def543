// model/gpt_<cfg>/...: the GPT decoder of examples/gpt_model.h, end to end,
// on dvm (default tiering and interpreter only) and on libtorch with the same
// weights (libtorch_gpt.cpp).
//   prefill/<S>/<system>/threads:N   one prompt of S tokens from position 0,
//                                    the last token's logits computed
//   decode/<ctx>/<system>/threads:N  time per generated token (greedy) with
//                                    ctx tokens already in the cache; counter
//                                    overhead_us: what a step spends outside
//                                    kernels (recording, plan replay, launch),
//                                    from the kernel log (dvm only)
//   dynamic/<system>                 20 prompts of pseudo-random lengths in
//                                    [1, 256], each then decoded for 16 tokens;
//                                    counters compiles_after_first_prompt
//                                    (from an emptied kernel cache, dvm only)
//                                    peak_rss_mb (the process's peak: run one
//                                    system per process to compare) and
//                                    model_mb (that less the process's RSS
//                                    before the model was made)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/common.h"
#include "bench/model_gpt.h"

namespace bench {

const std::vector<dvm::NamedTensor>& gpt_weights(const gpt::Config& c) {
  // Never destroyed: dvm's runtime may be gone when statics are.
  static auto& made = *new std::map<std::string, std::vector<dvm::NamedTensor>>();
  auto it = made.find(c.name);
  if (it == made.end()) it = made.emplace(c.name, gpt::random_weights(c, kGptSeed)).first;
  return it->second;
}

std::vector<int32_t> gpt_prompt(int64_t length, int64_t vocab, uint64_t seed) {
  std::vector<int32_t> t(static_cast<size_t>(length));
  uint64_t s = seed;
  for (int32_t& v : t) v = static_cast<int32_t>(splitmix64(&s) % static_cast<uint64_t>(vocab));
  return t;
}

std::vector<int64_t> gpt_dynamic_lengths() {
  std::vector<int64_t> n;
  uint64_t s = 20261125;
  for (int i = 0; i < 20; ++i) n.push_back(1 + static_cast<int64_t>(splitmix64(&s) % 256));
  return n;
}

void reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
}

namespace {
double status_mb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const size_t n = std::string(key).size();
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) return std::strtod(line.c_str() + n, nullptr) / 1024.0;
  return 0;
}
}  // namespace

double rss_mb() { return status_mb("VmRSS:"); }

const gpt::Model& dvm_gpt_model(const gpt::Config& c) {
  static auto& made = *new std::map<std::string, std::unique_ptr<gpt::Model>>();  // never destroyed
  auto& m = made[c.name];
  if (!m) m = std::make_unique<gpt::Model>(c, gpt_weights(c));
  return *m;
}
double peak_rss_mb() { return status_mb("VmHWM:"); }

void set_memory_counters(benchmark::State& state, double baseline_mb) {
  const double peak = peak_rss_mb();
  state.counters["peak_rss_mb"] = peak;
  state.counters["model_mb"] = peak - baseline_mb;
}

namespace {

using Clock = std::chrono::steady_clock;

const gpt::Model& dvm_model(const gpt::Config& c) { return dvm_gpt_model(c); }

// One greedy step: the next token after `token`.
int32_t dvm_step(const gpt::Model& m, gpt::Model::Session& s, int32_t token) {
  return static_cast<int32_t>(m.forward(s, {token}).argmax(-1).to_vector<int64_t>()[0]);
}

// Runs f until its kernels have passed the JIT threshold and their machine
// code is in (f is what one timed iteration records).
template <class F>
void warm(F&& f) {
  for (int64_t i = 0; i <= dvm::jit_threshold() + 1; ++i) f();
  dvm::wait_for_jit();
}

// dvm's logits against libtorch's on one short prompt, once per config:
// max |difference| over the vocabulary relative to the largest logit.
void check_against_libtorch(const gpt::Config& c) {
#ifdef DVM_BENCH_HAVE_LIBTORCH
  if (!first_time("gpt logits " + c.name)) return;
  const std::vector<int32_t> prompt = gpt_prompt(7, c.vocab, 5);
  gpt::Model::Session s(dvm_model(c));
  const std::vector<float> got = dvm_model(c).forward(s, prompt).to_vector();
  const std::vector<float> want = libtorch_gpt_logits(c, prompt);
  double scale = 0, worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, static_cast<double>(std::abs(want[i])));
    worst = std::max(worst, static_cast<double>(std::abs(got[i] - want[i])));
  }
  std::fprintf(stderr, "bench_dvm: gpt_%s logits, dvm vs libtorch: max difference %.2e of the largest logit\n",
               c.name.c_str(), worst / scale);
  if (got.size() != want.size() || !(worst <= 1e-4 * scale)) {
    std::fprintf(stderr, "bench_dvm: WRONG RESULT: gpt_%s logits differ from libtorch's\n", c.name.c_str());
    std::abort();
  }
#else
  (void)c;
#endif
}

void dvm_prefill(benchmark::State& state, const gpt::Config& c, int64_t S) {
  check_against_libtorch(c);
  const gpt::Model& m = dvm_model(c);
  gpt::Model::Session s(m);
  const std::vector<int32_t> prompt = gpt_prompt(S, c.vocab, 1);
  auto run = [&] {
    s.reset();
    dvm::Tensor y = m.forward(s, prompt);
    benchmark::DoNotOptimize(y.data());
  };
  warm(run);
  const LoopStats loop_stats;
  for (auto _ : state) run();
  loop_stats.set_counters(state);
  state.SetItemsProcessed(state.iterations() * S);
}

void dvm_decode(benchmark::State& state, const gpt::Config& c, int64_t ctx) {
  check_against_libtorch(c);
  const gpt::Model& m = dvm_model(c);
  gpt::Model::Session s(m);
  const std::vector<int32_t> prompt = gpt_prompt(ctx, c.vocab, 2);
  // One iteration: the cache refilled to ctx tokens (untimed), then
  // kGptDecodeSteps timed steps; the time is per step.
  auto run = [&](bool log) {
    s.reset();
    int32_t t = static_cast<int32_t>(m.forward(s, prompt).argmax(-1).to_vector<int64_t>()[0]);
    if (log) {
      dvm::set_kernel_log(true);
      (void)dvm::take_kernel_log();
    }
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < kGptDecodeSteps; ++i) t = dvm_step(m, s, t);
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return seconds / static_cast<double>(kGptDecodeSteps);
  };
  warm([&] { run(false); });
  for (auto _ : state) state.SetIterationTime(run(false));
  // Outside kernels: a logged iteration's step time less its launches'.
  double overhead = 0;
  constexpr int kLogged = 5;
  for (int i = 0; i < kLogged; ++i) {
    const double step = run(true);
    dvm::set_kernel_log(false);
    int64_t kernel_ns = 0;
    for (const dvm::KernelRun& r : dvm::take_kernel_log()) kernel_ns += r.ns;
    overhead += step - static_cast<double>(kernel_ns) * 1e-9 / static_cast<double>(kGptDecodeSteps);
  }
  state.counters["overhead_us"] = overhead / kLogged * 1e6;
  state.SetItemsProcessed(state.iterations());
}

void dvm_dynamic(benchmark::State& state, const gpt::Config& c) {
  const double baseline = rss_mb();
  const gpt::Model& m = dvm_model(c);
  reset_peak_rss();  // after the weights are made: their generation is not the model's
  gpt::Model::Session s(m);
  const std::vector<int64_t> lengths = gpt_dynamic_lengths();
  // From an empty kernel cache: the first prompt compiles what it needs,
  // the later ones (other lengths, other cache sizes) should compile nothing.
  const int64_t capacity = dvm::kernel_cache_capacity();
  dvm::set_kernel_cache_capacity(1);
  dvm::set_kernel_cache_capacity(capacity);
  int64_t compiles_after_first = -1, tokens = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < lengths.size(); ++i) {
      s.reset();
      const std::vector<int32_t> out = m.generate(s, gpt_prompt(lengths[i], c.vocab, 100 + i), kGptDynamicSteps);
      benchmark::DoNotOptimize(out.data());
      tokens += lengths[i] + kGptDynamicSteps;
      if (compiles_after_first < 0 && i == 0) dvm::reset_stats();
    }
    if (compiles_after_first < 0) compiles_after_first = dvm::stats().kernels_compiled;
  }
  state.counters["compiles_after_first_prompt"] = static_cast<double>(compiles_after_first);
  set_memory_counters(state, baseline);
  // dvm's own buffers: the most held at once (live + cached for reuse),
  // and of what is live now, the weights' row-major copies.
  const dvm::MemoryStats mem = dvm::memory_stats();
  state.counters["pool_peak_mb"] = static_cast<double>(mem.peak_bytes) / (1 << 20);
  state.counters["weight_copy_mb"] = static_cast<double>(mem.weight_copy_bytes) / (1 << 20);
  state.SetItemsProcessed(tokens);
}

int register_model_gpt() {
  const System systems[] = {kDvm, {"dvm_interp", Tier::Off}
#ifdef DVM_BENCH_HAVE_LIBTORCH
                            ,
                            {"libtorch", Tier::Libtorch}
#endif
  };
  for (const gpt::Config& c : {gpt::Config::tiny(), gpt::Config::small()}) {
    const std::string base = "model/gpt_" + c.name + "/";
    for (int64_t S : {1, 7, 32, 128, 512})
      for (const System& sys : systems)
        for (int threads : thread_counts()) {
          const std::string name =
              base + "prefill/" + std::to_string(S) + "/" + sys.name + "/threads:" + std::to_string(threads);
          benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
            apply_system(sys, threads);
#ifdef DVM_BENCH_HAVE_LIBTORCH
            if (sys.tier == Tier::Libtorch) return libtorch_gpt_prefill(st, c, S);
#endif
            dvm_prefill(st, c, S);
          })->Unit(benchmark::kMillisecond);
        }
    for (int64_t ctx : {32, 256})
      for (const System& sys : systems)
        for (int threads : thread_counts()) {
          const std::string name =
              base + "decode/" + std::to_string(ctx) + "/" + sys.name + "/threads:" + std::to_string(threads);
          benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
            apply_system(sys, threads);
#ifdef DVM_BENCH_HAVE_LIBTORCH
            if (sys.tier == Tier::Libtorch) return libtorch_gpt_decode(st, c, ctx);
#endif
            dvm_decode(st, c, ctx);
          })->UseManualTime()->Unit(benchmark::kMicrosecond);
        }
    for (const System& sys : systems) {
      const std::string name = base + "dynamic/" + sys.name;
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
        apply_system(sys, 1);
#ifdef DVM_BENCH_HAVE_LIBTORCH
        if (sys.tier == Tier::Libtorch) return libtorch_gpt_dynamic(st, c);
#endif
        dvm_dynamic(st, c);
      })->Unit(benchmark::kMillisecond)->Iterations(2);
    }
  }
  return 0;
}
const int registered = register_model_gpt();

}  // namespace
}  // namespace bench
