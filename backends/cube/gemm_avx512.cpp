// The cube GEMM's AVX-512 micro-kernels (8 x 32 register tile, fused
// multiply-add). Compiled with the AVX-512 flags; gemm.cpp calls in only after
// isa.h says the CPU has AVX-512.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include "backends/cube/gemm_driver.h"

namespace dvm::backends::cube::detail {
namespace {

struct V512 {
  using T = __m512;
  static constexpr int kLanes = 16;
  [[gnu::always_inline]] static inline T zero() { return _mm512_setzero_ps(); }
  [[gnu::always_inline]] static inline T load(const float* p) { return _mm512_loadu_ps(p); }
  [[gnu::always_inline]] static inline void store(float* p, T x) { _mm512_storeu_ps(p, x); }
  [[gnu::always_inline]] static inline T bcast(const float* p) { return _mm512_set1_ps(*p); }
  [[gnu::always_inline]] static inline T madd(T a, T b, T acc) { return _mm512_fmadd_ps(a, b, acc); }
};

struct Params {
  using V = V512;
  static constexpr int MR = 8;
  static constexpr int NV = 2;
  static constexpr int64_t KC = 512;
  static constexpr int64_t MB = 256;
  static constexpr int64_t NB = 256;
  static constexpr int64_t kSmallM = 16;
  static constexpr int64_t kSmallKC = 256;
  static constexpr int64_t kSmallPackedKC = 64;
  static constexpr int64_t kSmallNB = 512;
  static constexpr int kSmallMR = 4;
  static constexpr int kSmallNV = 4;
  // dst[t * ldd + j] = src[j * cs + t] for j, t < 8: the ymm 8 x 8 transpose.
  [[gnu::always_inline]] static inline void transpose8(const float* src, int64_t cs, float* dst,
                                                      int64_t ldd) {
    __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + cs),
           r2 = _mm256_loadu_ps(src + 2 * cs), r3 = _mm256_loadu_ps(src + 3 * cs),
           r4 = _mm256_loadu_ps(src + 4 * cs), r5 = _mm256_loadu_ps(src + 5 * cs),
           r6 = _mm256_loadu_ps(src + 6 * cs), r7 = _mm256_loadu_ps(src + 7 * cs);
    const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1),
                 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3),
                 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
                 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
                 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
                 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
                 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps(dst + 0 * ldd, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(dst + 1 * ldd, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(dst + 2 * ldd, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(dst + 3 * ldd, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(dst + 4 * ldd, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(dst + 5 * ldd, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(dst + 6 * ldd, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(dst + 7 * ldd, _mm256_permute2f128_ps(u3, u7, 0x31));
  }
};

}  // namespace

extern const Impl kImplAvx512;
constinit const Impl kImplAvx512 = Driver<Params>::kImpl;

}  // namespace dvm::backends::cube::detail
