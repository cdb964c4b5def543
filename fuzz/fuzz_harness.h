// The bytecode fuzzer's harness, shared by the libFuzzer target
// (fuzz/fuzz_bytecode.cpp) and the corpus tool (fuzz/make_corpus.cpp).
//
// A fuzz input is kParamBytes of launch parameters followed by one kernel's
// bytecode. The verifier is the one decoder: the harness only reads what
// verify() returns, so it follows the bytecode format wherever it goes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dvm::fuzz {

// Bytes before the bytecode: extents, layouts, data and ISA choices.
inline constexpr size_t kParamBytes = 8;

// What one input did (for the corpus tool and the regression tests).
struct Outcome {
  bool accepted = false;    // the verifier accepted the bytecode
  int runs = 0;             // backend runs compared
  int split_runs = 0;       // of which split launches (vm/split_launch.h)
  int jit_declined = 0;     // machine-code backends that declined the kernel
  int64_t nan_payload_differences = 0;
};

// Runs one input: verifies the bytecode and, when accepted, launches it on
// every interpreter ISA and every machine-code backend the CPU has with
// guarded buffers, then checks guards, inputs and that each machine-code
// backend matches its ISA's interpreter bit for bit. Returns false and sets
// *failure on a check failure (the fuzzer aborts on it).
bool run_one(const uint8_t* data, size_t size, Outcome* outcome, std::string* failure);

// Repairs a mutated input so its header and instruction count stay valid
// more often than raw byte mutation leaves them (the custom mutator).
// Returns the new size (<= max_size).
size_t repair(uint8_t* data, size_t size, size_t max_size, uint32_t seed);

}  // namespace dvm::fuzz
