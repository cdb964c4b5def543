// The cube GEMM's entry points and its portable micro-kernels (4 x 8 scalar
// tile, multiply then add: this file, like the library, is compiled with
// -ffp-contract=off, so the two are never fused).
#include "backends/cube/gemm.h"

#include <string>

#include "backends/cube/gemm_driver.h"
#include "dvm/error.h"

namespace dvm::backends::cube {
namespace detail {
#if defined(__x86_64__)
extern const Impl kImplAvx2;
extern const Impl kImplAvx512;
#endif

namespace {

struct VScalar {
  using T = float;
  static constexpr int kLanes = 1;
  static T zero() { return 0.0f; }
  static T load(const float* p) { return *p; }
  static void store(float* p, T x) { *p = x; }
  static T bcast(const float* p) { return *p; }
  static T madd(T a, T b, T acc) { return acc + a * b; }
};

struct Params {
  using V = VScalar;
  static constexpr int MR = 4;
  static constexpr int NV = 8;
  static constexpr int64_t KC = 256;
  static constexpr int64_t MB = 64;
  static constexpr int64_t NB = 128;
  static constexpr int64_t kSmallM = 16;
  static constexpr int64_t kSmallKC = 256;
  static constexpr int64_t kSmallPackedKC = 256;
  static constexpr int64_t kSmallNB = 128;
  static constexpr int kSmallMR = 4;
  static constexpr int kSmallNV = 8;
};

constexpr Impl kImplPortable = Driver<Params>::kImpl;

}  // namespace
}  // namespace detail

namespace {

const detail::Impl& impl_for(Isa isa) {
  if (!isa_supported(isa))
    throw Error(std::string("cube::gemm: ISA ") + isa_name(isa) +
                " is not supported by this CPU (expected one isa_supported() accepts)");
  switch (isa) {
#if defined(__x86_64__)
    case Isa::Avx2: return detail::kImplAvx2;
    case Isa::Avx512: return detail::kImplAvx512;
#else
    case Isa::Avx2:
    case Isa::Avx512: break;
#endif
    case Isa::Portable: break;
  }
  return detail::kImplPortable;
}

}  // namespace

int64_t items(const Gemm& g, Isa isa) { return impl_for(isa).items(g); }

Block item_block(const Gemm& g, Isa isa, int64_t item) { return impl_for(isa).block(g, item); }

void run(const Gemm& g, Isa isa, int64_t begin, int64_t end) { impl_for(isa).run(g, begin, end); }

void gemm(const Gemm& g, Isa isa) {
  const detail::Impl& im = impl_for(isa);
  im.run(g, 0, im.items(g));
}

}  // namespace dvm::backends::cube
