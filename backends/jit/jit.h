// The JIT backend: lowers a verified kernel to one machine-code function for
// AVX2 or AVX-512 (the x86 target, backends/jit/x86/). jit_backend.h puts
// compile() and run_items() behind the vm's backend interface.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backends/isa.h"
#include "vm/backend.h"
#include "vm/bytecode.h"
#include "vm/launch.h"
#include "vm/verifier.h"

namespace dvm::backends::jit {

// One call's arguments, filled by run_items() below.
//
// Elementwise: one call runs `n` elements of each of `rows` rows, (p, r) to
//              (p, r + rows - 1); row k starts at base[a] + k * rs[a].
// RowReduce:   one call runs `rows` whole rows (n = C) the same way: every
//              pass, every fold, row after row.
// ColReduce:   one call runs one (p, c-tile) of n columns, folding `rows` rows.
//
// For argument a, base[a] is the address of its element at the call's first
// (p, r, c). Per instruction:
//   LD, ST:  element i at base[a] + i
//   LDG:     as LD, base[a] found through the argument's gather dims
//   LDS:     element i at base[a] + i * cs[a]
//   LDB:     one value at base[a] (one per row)
//   STB:     writes one value to base[a]
//   Elementwise and RowReduce rows, ColReduce prologue loads: row r
//   (0 <= r < rows) adds r * rs[a] elements.
//   PARAM:   scalars[s] (Launch::scalars), broadcast.
struct JitArgs {
  const void* base[vm::kMaxArgs];  // elements of the argument's type (Program::types)
  int64_t cs[vm::kMaxArgs];
  int64_t rs[vm::kMaxArgs];
  int64_t n;
  int64_t rows;
  // RowReduce: room for `scratch_rows` rows of n floats each rounded up to
  // a multiple of 16 (JitCode), where a multi-phase kernel keeps vec values a
  // later pass reads again instead of recomputing them. Unused by the other
  // forms.
  float* scratch;
  const float* scalars;  // the launch's scalar parameters (Launch::scalars)
};

using EntryFn = void (*)(const JitArgs* args);

// Machine code for one kernel and one ISA (code_bytes of it). Destroying it
// frees the code.
class JitCode : public vm::CompiledKernel {
 public:
  EntryFn entry = nullptr;
  Isa isa = Isa::Portable;
  int scratch_rows = 0;  // rows of JitArgs::scratch the entry point uses
};

// Lowers vp for isa (Avx2 or Avx512; the CPU must support it). Returns null
// and sets *reason when the kernel uses what the JIT does not lower or code
// generation fails; that is never a user-visible error (the kernel stays on
// the interpreter). Results are bit-identical to the interpreter's for the
// same ISA: same operations, same order, same approximations.
std::unique_ptr<JitCode> compile(const vm::VerifiedProgram& vp, Isa isa, std::string* reason);

// Whether code runs launch l: an LDG argument's gather must be contiguous
// along C with one stride between rows (a permuted view whose inner axis
// stays inner); other launches of the kernel run on the interpreter.
bool can_run(const JitCode& code, const vm::Launch& l);

// Runs work items [begin, end) of a launch (the same items as
// vm::work_items / vm::interpret) through the compiled entry point. False,
// having run nothing, when l fails can_run: the caller interprets them.
bool run_items(const JitCode& code, const vm::VerifiedProgram& vp, const vm::Launch& l,
               int64_t begin, int64_t end);

// Bytes of executable memory held by live JitCode objects, of every ISA or
// of one.
size_t code_bytes_in_use();
size_t code_bytes_in_use(Isa isa);

// While on, the assembly of every generated function goes to the message
// sink (vm/log.h) at LogLevel::Debug: a debugging aid, off by default, and it
// slows compiles.
void set_log(bool on);

// Test hook: whether compiles may use the CPU's float32-to-bfloat16
// instruction where it has one (AVX512_BF16; on by default). The bits are
// the interpreter's either way: tests run both paths on such CPUs.
void set_bf16_instructions(bool on);

// Launches of Elementwise and RowReduce kernels whose vector-aligned
// outputs total at least this many bytes store them with streaming
// (non-temporal) stores, through a variant of the kernel compiled on first
// use; the values are the same. By default half the last-level cache.
// Test hook: set it (0: every aligned launch streams), or -1 for the default.
void set_stream_min_bytes(int64_t bytes);
// The alignment a streamed full-vector store of elements of type t needs on
// AVX-512 (avx512) or AVX2: the bytes of one vector's elements, 64 at most
// (int64 stores two zmm); 0 where such a store is under 16 bytes (uint8 and
// bool on AVX2), which never streams.
constexpr int stream_bytes_per_vector(Dtype t, bool avx512) {
  const int bytes = (avx512 ? 16 : 8) * static_cast<int>(dtype_size(t));
  return bytes < 16 ? 0 : bytes > 64 ? 64 : bytes;
}
int64_t stream_min_bytes_for_tests();
// How many streaming variants have been compiled in this process.
int64_t streaming_variants_compiled();
// A RowReduce kernel's variant for rows of at most one vector (lower(),
// one_vector_rows): run_items runs it, compiled on first use, for launches
// whose rows fit one vector; the bits are those of compile()'s code. For
// tests: the variant itself, and how many have been compiled in this process.
std::unique_ptr<JitCode> compile_one_vector_rows(const vm::VerifiedProgram& vp, Isa isa, std::string* reason);
int64_t one_vector_row_variants_compiled();
// Item ranges of Elementwise launches run in blocks of rows because an
// argument is read across rows (jit.cpp, run_row_blocks): for tests.
int64_t row_block_launches();
// Item ranges of Elementwise launches run several narrow rows to a call
// because an argument repeats one row (jit.cpp, run_periodic_rows): for tests.
int64_t periodic_row_launches();
// How many run_items calls declined a launch (can_run) in this process.
int64_t gather_runs_declined();

}  // namespace dvm::backends::jit
