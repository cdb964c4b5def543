// The AVX2+FMA micro-kernel table (8 lanes). Compiled with -mavx2 -mfma
// -mf16c; the table is constant-initialised, so nothing here runs unless
// isa.cpp hands it out after detecting AVX2.
#include "backends/microkernels_impl.h"
#include "backends/simd/vec_avx2.h"

namespace dvm::backends {
namespace {

// The 16-bit float types, 8 elements a step (F16C's vcvtph2ps / vcvtps2ph
// with round-to-nearest-even; bf16 by shifts and torch's rounding); the tail
// one element at a time by convert.h, which gives the same bits.
void load_f16(float* d, const void* src, int64_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  for (; i < n; ++i) d[i] = f16_to_f32(s[i]);
}

void store_f16(void* dst, const float* src, int64_t n) {
  auto* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) d[i] = f32_to_f16(src[i]);
}

void load_bf16(float* d, const void* src, int64_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
    _mm256_storeu_ps(d + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
  }
  for (; i < n; ++i) d[i] = bf16_to_f32(s[i]);
}

void store_bf16(void* dst, const float* src, int64_t n) {
  auto* d = static_cast<uint16_t*>(dst);
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff), qnan = _mm256_set1_epi32(0x7fc0);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(src + i);
    const __m256i u = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, bias), lsb), 16);
    r = _mm256_blendv_epi8(r, qnan, _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
    // Narrow to 16 bits: packus works within 128-bit halves, then the two
    // halves' low quadwords are brought together.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm256_castsi256_si128(packed));
  }
  for (; i < n; ++i) d[i] = f32_to_bf16(src[i]);
}

}  // namespace

constinit const MicroKernels kMicroKernelsAvx2 =
    detail::with_16bit_floats(detail::make_microkernels<simd::VecAvx2>(Isa::Avx2), &load_f16, &store_f16, &load_bf16,
                              &store_bf16);

}  // namespace dvm::backends
