// CPU feature detection (cpuid + xgetbv), the ISA in use, and the choice of
// micro-kernel table. Compiled at the baseline ISA. Off x86-64 only the
// portable table is built, and it is the only ISA detected.
#include "backends/isa.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <atomic>

#include "backends/microkernels.h"
#include "backends/microkernels_impl.h"

namespace dvm::backends {

namespace {

#if defined(__x86_64__)
// XCR0 via xgetbv (inline asm: the intrinsic would need -mxsave).
uint64_t read_xcr0() {
  uint32_t eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

Isa detect() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return Isa::Portable;
  const bool fma = ecx & (1u << 12);
  const bool osxsave = ecx & (1u << 27);
  const bool avx = ecx & (1u << 28);
  const bool f16c = ecx & (1u << 29);
  if (!(osxsave && avx && fma && f16c)) return Isa::Portable;
  const uint64_t xcr0 = read_xcr0();
  if ((xcr0 & 0x6) != 0x6) return Isa::Portable;  // SSE + AVX state
  unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf < 7) return Isa::Portable;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  const bool avx2 = ebx & (1u << 5);
  if (!avx2) return Isa::Portable;
  const bool f = ebx & (1u << 16), dq = ebx & (1u << 17);
  const bool bw = ebx & (1u << 30), vl = ebx & (1u << 31);
  // opmask (bit 5), ZMM_Hi256 (6), Hi16_ZMM (7) state saved by the OS.
  const bool zmm_state = (xcr0 & 0xE0) == 0xE0;
  if (f && dq && bw && vl && zmm_state) return Isa::Avx512;
  return Isa::Avx2;
}
bool detect_avx512_bf16() {
  if (detect() != Isa::Avx512 || __get_cpuid_max(0, nullptr) < 7) return false;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  __cpuid_count(7, 1, eax, ebx, ecx, edx);
  return eax & (1u << 5);
}
#else
Isa detect() { return Isa::Portable; }
bool detect_avx512_bf16() { return false; }
#endif

Isa clamp(Isa wanted) {
  Isa best = detected_isa();
  return static_cast<uint8_t>(wanted) > static_cast<uint8_t>(best) ? best : wanted;
}

std::atomic<int> g_active{-1};  // -1: not yet decided

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Portable: return "portable";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "unknown";
}

bool parse_isa(std::string_view text, Isa* out) {
  if (text == "portable") *out = Isa::Portable;
  else if (text == "avx2") *out = Isa::Avx2;
  else if (text == "avx512") *out = Isa::Avx512;
  else return false;
  return true;
}

bool cpu_has_avx512_bf16() {
  static const bool kHas = detect_avx512_bf16();
  return kHas;
}

Isa detected_isa() {
  static const Isa kDetected = detect();
  return kDetected;
}

Isa active_isa() {
  int v = g_active.load(std::memory_order_acquire);
  if (v < 0) {
    int expected = -1;
    g_active.compare_exchange_strong(expected, static_cast<int>(detected_isa()),
                                     std::memory_order_acq_rel);
    v = g_active.load(std::memory_order_acquire);
  }
  return static_cast<Isa>(v);
}

Isa set_isa(Isa isa) {
  Isa now = clamp(isa);
  g_active.store(static_cast<int>(now), std::memory_order_release);
  return now;
}

bool isa_supported(Isa isa) {
  return static_cast<uint8_t>(isa) <= static_cast<uint8_t>(detected_isa());
}

const MicroKernels* microkernels_for(Isa isa) {
  if (!isa_supported(isa)) return nullptr;
  switch (isa) {
    case Isa::Portable: return &kMicroKernelsPortable;
#if defined(__x86_64__)
    case Isa::Avx2: return &kMicroKernelsAvx2;
    case Isa::Avx512: return &kMicroKernelsAvx512;
#else
    case Isa::Avx2:
    case Isa::Avx512: return nullptr;  // never supported here
#endif
  }
  return nullptr;
}

const MicroKernels& active_microkernels() { return *microkernels_for(active_isa()); }

}  // namespace dvm::backends
