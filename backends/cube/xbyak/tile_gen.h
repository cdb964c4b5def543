// The cube unit's micro-kernel generator: register-tile GEMM micro-kernels
// (cube::TileFn) emitted at run time with xbyak for the ISA and tile shape at
// hand, with the K loop unrolled, the B prefetch of the precompiled PF tiles
// and masked column edges. Each output element is accumulated exactly as the
// precompiled tile<> of gemm_driver.h does it (from +0 or c, ascending k, one
// vfmadd231ps of a vbroadcastss'd a per step), so the two give the same bits.
// This folder is the only place that includes xbyak; this header does not.
// Built with DVM_JIT (x86-64); elsewhere every request is refused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "backends/cube/gemm.h"
#include "backends/isa.h"

namespace dvm::backends::cube::gen {

// One micro-kernel variant: `rows` (1..8) x `cols` columns of a tile `nv`
// vectors wide (1..4 vectors of the ISA's lanes); cols == nv * lanes is the
// full tile, fewer a masked edge tile that touches only those columns of b
// and c. prefetch: each k step also prefetches the nv * lanes floats of b
// that follow the tile's strip (as the precompiled PF tiles do).
struct TileKey {
  Isa isa = Isa::Avx512;  // Avx2 or Avx512
  int rows = 1;
  int nv = 1;
  bool prefetch = false;
  int cols = 0;  // 0 means the full width, nv * lanes
};

// Whether executable memory may be made (an interpreter-only caller says No:
// then nothing is ever generated).
enum class Exec : uint8_t { Forbidden, Allowed };

// Floats per vector of an x86 ISA (8 or 16; 0 for Portable).
int lanes(Isa isa);

// Whether tiles can be generated for `isa` here (build, CPU); if not, why.
bool available(Isa isa, std::string* why = nullptr);

// The micro-kernel for `key` from the process-wide cache, generated on first
// request (once, however many threads ask at once); it lives until exit.
// nullptr with the reason in *why when exec is Forbidden, the build or CPU
// lacks the ISA, the key is out of range or generation failed.
TileFn tile(const TileKey& key, Exec exec, std::string* why = nullptr);

// One generated micro-kernel that owns its executable memory (freed with
// it). generate() bypasses the cache: for measuring generation itself.
class Code {
 public:
  struct Body;
  explicit Code(std::unique_ptr<Body> body);
  Code(Code&&) noexcept;
  Code& operator=(Code&&) noexcept;
  ~Code();
  TileFn fn() const;
  size_t bytes() const;  // bytes of code and constants emitted
 private:
  std::unique_ptr<Body> body_;
};
std::unique_ptr<Code> generate(const TileKey& key, Exec exec, std::string* why = nullptr);

// What the cache holds.
struct Stats {
  int64_t kernels = 0;       // variants generated
  int64_t code_bytes = 0;    // bytes emitted, all variants
  int64_t mapped_bytes = 0;  // executable pages they occupy
};
Stats stats();

}  // namespace dvm::backends::cube::gen
