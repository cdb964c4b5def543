// Which SIMD instruction set the backends use: detected from the CPU at run
// time, and forcible lower (never higher) with set_isa().
#pragma once

#include <cstdint>
#include <string_view>

namespace dvm::backends {

enum class Isa : uint8_t { Portable = 0, Avx2 = 1, Avx512 = 2 };

const char* isa_name(Isa isa);
// Parses "portable", "avx2" or "avx512"; returns false on anything else.
bool parse_isa(std::string_view text, Isa* out);

// The best ISA this CPU and OS support (AVX2 needs FMA too; AVX-512 needs
// F, DQ, BW and VL with the OS saving zmm state). Portable off x86-64.
Isa detected_isa();
// The ISA in use: detected_isa() until set_isa() lowers it.
Isa active_isa();
// Forces the ISA in use (clamped to detected_isa()); returns the one now active.
Isa set_isa(Isa isa);
bool isa_supported(Isa isa);
// Whether the CPU converts float32 to bfloat16 in one instruction
// (AVX512_BF16: vcvtneps2bf16), with AVX-512 usable. False off x86-64.
bool cpu_has_avx512_bf16();

}  // namespace dvm::backends
