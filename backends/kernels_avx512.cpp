// The AVX-512 micro-kernel table (16 lanes). Compiled with the AVX-512 flags;
// the table is constant-initialised, so nothing here runs unless isa.cpp hands
// it out after detecting AVX-512.
#include "backends/microkernels_impl.h"
#include "backends/simd/vec_avx512.h"

namespace dvm::backends {
namespace {

// The 16-bit float types, 16 elements a step, the tail masked (the same
// conversions as kernels_avx2.cpp: vcvtph2ps / vcvtps2ph round-to-nearest-
// even, bf16 by shifts and torch's rounding, narrowed by vpmovdw).
__mmask16 tail(int64_t r) { return static_cast<__mmask16>((1u << r) - 1u); }

void load_f16(float* d, const void* src, int64_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : tail(n - i);
    _mm512_mask_storeu_ps(d + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, s + i)));
  }
}

void store_f16(void* dst, const float* src, int64_t n) {
  auto* d = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : tail(n - i);
    const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_mask_storeu_epi16(d + i, m, h);
  }
}

void load_bf16(float* d, const void* src, int64_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : tail(n - i);
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, s + i));
    _mm512_mask_storeu_ps(d + i, m, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
  }
}

void store_bf16(void* dst, const float* src, int64_t n) {
  auto* d = static_cast<uint16_t*>(dst);
  const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff), qnan = _mm512_set1_epi32(0x7fc0);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : tail(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, src + i);
    const __m512i u = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, bias), lsb), 16);
    r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), qnan);
    _mm256_mask_storeu_epi16(d + i, m, _mm512_cvtepi32_epi16(r));
  }
}

}  // namespace

constinit const MicroKernels kMicroKernelsAvx512 =
    detail::with_16bit_floats(detail::make_microkernels<simd::VecAvx512>(Isa::Avx512), &load_f16, &store_f16,
                              &load_bf16, &store_bf16);

}  // namespace dvm::backends
