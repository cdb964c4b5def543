// The GPT decoder benchmarks (model/gpt_<cfg>/...): what dvm's side
// (model_gpt.cpp) and libtorch's (libtorch_gpt.cpp) share: the weights, the
// prompts, the dynamic workload's lengths and the memory probe.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "dvm/dvm.h"
#include "examples/gpt_model.h"

namespace bench {

// Decode steps timed per iteration of model/gpt_<cfg>/decode, and after each
// prompt of model/gpt_<cfg>/dynamic.
inline constexpr int64_t kGptDecodeSteps = 8;
inline constexpr int64_t kGptDynamicSteps = 16;
// The seed of every system's weights (gpt::random_weights).
inline constexpr uint64_t kGptSeed = 2026;

// The configuration's seeded weights, made once per process.
const std::vector<dvm::NamedTensor>& gpt_weights(const gpt::Config& c);
// dvm's model (float32) on those weights, made once per process.
const gpt::Model& dvm_gpt_model(const gpt::Config& c);
// length pseudo-random tokens in [0, vocab), the same for every system.
std::vector<int32_t> gpt_prompt(int64_t length, int64_t vocab, uint64_t seed);
// The dynamic workload: 20 prompt lengths in [1, 256], pseudo-random.
std::vector<int64_t> gpt_dynamic_lengths();

// Resident memory of the process in MiB: now (VmRSS), and at its peak since
// the last reset (VmHWM; reset through /proc/self/clear_refs).
double rss_mb();
void reset_peak_rss();
double peak_rss_mb();
// Sets peak_rss_mb (the process's peak since reset_peak_rss) and model_mb
// (that less baseline_mb, the process's RSS before the model was made);
// the peak is reset once the model's weights are made.
void set_memory_counters(benchmark::State& state, double baseline_mb);

#ifdef DVM_BENCH_HAVE_LIBTORCH
// libtorch_gpt.cpp: the same model in PyTorch eager (C++ API), on the same
// weights. The logits of the last token of tokens, from position 0.
std::vector<float> libtorch_gpt_logits(const gpt::Config& c, const std::vector<int32_t>& tokens);
// The timed loops of the three benchmarks for system libtorch.
void libtorch_gpt_prefill(benchmark::State& state, const gpt::Config& c, int64_t S);
void libtorch_gpt_decode(benchmark::State& state, const gpt::Config& c, int64_t ctx);
void libtorch_gpt_dynamic(benchmark::State& state, const gpt::Config& c);
#endif

}  // namespace bench
