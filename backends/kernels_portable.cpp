// The portable micro-kernel table: VecScalar (one lane), baseline x86-64.
#include "backends/microkernels_impl.h"
#include "backends/simd/vec_scalar.h"

namespace dvm::backends {

constinit const MicroKernels kMicroKernelsPortable =
    detail::make_microkernels<simd::VecScalar>(Isa::Portable);

}  // namespace dvm::backends
