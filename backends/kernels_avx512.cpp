// The AVX-512 micro-kernel table (16 lanes). Compiled with the AVX-512 flags;
// the table is constant-initialised, so nothing here runs unless isa.cpp hands
// it out after detecting AVX-512.
#include "backends/microkernels_impl.h"
#include "backends/simd/vec_avx512.h"

namespace dvm::backends {

constinit const MicroKernels kMicroKernelsAvx512 =
    detail::make_microkernels<simd::VecAvx512>(Isa::Avx512);

}  // namespace dvm::backends
