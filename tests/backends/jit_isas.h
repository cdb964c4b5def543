// The ISAs the JIT can be tested on here: those this CPU runs (AVX2, AVX-512).
#pragma once

#include <vector>

#include "backends/isa.h"
#include "backends/microkernels.h"

namespace dvm::backends::testing {

inline std::vector<Isa> jit_isas() {
  std::vector<Isa> out;
  for (Isa i : {Isa::Avx2, Isa::Avx512})
    if (microkernels_for(i)) out.push_back(i);
  return out;
}

}  // namespace dvm::backends::testing
