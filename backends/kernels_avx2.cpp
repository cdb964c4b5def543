// The AVX2+FMA micro-kernel table (8 lanes). Compiled with -mavx2 -mfma; the
// table is constant-initialised, so nothing here runs unless isa.cpp hands it
// out after detecting AVX2.
#include "backends/microkernels_impl.h"
#include "backends/simd/vec_avx2.h"

namespace dvm::backends {

constinit const MicroKernels kMicroKernelsAvx2 =
    detail::make_microkernels<simd::VecAvx2>(Isa::Avx2);

}  // namespace dvm::backends
