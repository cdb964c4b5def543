// Shared by the JIT's tests: the ISAs the JIT can be tested on here (those
// this CPU runs: AVX2, AVX-512) and a verified kernel from an encoder.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/isa.h"
#include "backends/microkernels.h"
#include "vm/encoder.h"
#include "vm/kernel.h"
#include "vm/verifier.h"

namespace dvm::backends::testing {

inline std::vector<Isa> jit_isas() {
  std::vector<Isa> out;
  for (Isa i : {Isa::Avx2, Isa::Avx512})
    if (microkernels_for(i)) out.push_back(i);
  return out;
}

// The verified kernel e encodes, or null after a test failure naming why.
inline std::shared_ptr<vm::Kernel> make_kernel(const vm::Encoder& e) {
  vm::Bytecode bc = e.finish();
  vm::VerifiedProgram vp;
  std::string err;
  if (!vm::verify(bc, &vp, &err)) {
    ADD_FAILURE() << err;
    return nullptr;
  }
  return std::make_shared<vm::Kernel>(std::move(bc), std::move(vp));
}

}  // namespace dvm::backends::testing
