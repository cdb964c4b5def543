// libFuzzer target: bytes -> verifier -> every backend on guarded buffers
// (fuzz/fuzz_harness.h). Any check failure aborts, so libFuzzer saves the
// input as a crash.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz/fuzz_harness.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

// With DVM_FUZZ_STATS set: how many inputs got how far, printed at exit.
struct Counts {
  long long inputs = 0, accepted = 0, runs = 0, split_runs = 0, declined = 0, nan_differences = 0;
  ~Counts() {
    if (std::getenv("DVM_FUZZ_STATS"))
      std::fprintf(stderr, "dvm fuzz: %lld inputs, %lld verified, %lld backend runs (%lld split), %lld jit declines, "
                   "%lld NaN payload differences\n", inputs, accepted, runs, split_runs, declined, nan_differences);
  }
} g_counts;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string failure;
  dvm::fuzz::Outcome o;
  const bool ok = dvm::fuzz::run_one(data, size, &o, &failure);
  ++g_counts.inputs;
  g_counts.accepted += o.accepted;
  g_counts.runs += o.runs;
  g_counts.split_runs += o.split_runs;
  g_counts.declined += o.jit_declined;
  g_counts.nan_differences += o.nan_payload_differences;
  if (!ok) {
    std::fprintf(stderr, "dvm fuzz check failed: %s\n", failure.c_str());
    std::abort();
  }
  return 0;
}

// Structure-aware half of the time: after libFuzzer's byte mutation, the
// header, the instruction count and most operands are made valid again, so
// more mutants get past the verifier to the backends. The other half stays
// raw, so the verifier's rejections keep being fuzzed.
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  size = LLVMFuzzerMutate(data, size, max_size);
  if (seed % 2) size = dvm::fuzz::repair(data, size, max_size, seed);
  return size;
}
