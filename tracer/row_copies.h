// Row-major copies of matrices that products read by columns. linear(x, W)
// reads W [N, K] as the product's B = W^T, each column contiguous in k; a
// product of a few rows cannot amortize transposing B (into the cube's
// panels, or block by block in registers), and does the transpose again on
// every call. A matrix read that way
// a second time keeps a row-major copy beside its buffer (the modeled NPU's
// weights stored once in the cube's layout), and later products read the
// copy in place. Tensor buffers are never written once computed (wrapped
// user memory must stay unchanged while tensors read it; a KVCache writes
// only rows no tensor has seen, and drops the copies when clear() reuses
// its buffer), so a copy stays right for as long as its buffer lives; it is
// freed with it.
#pragma once

#include <cstdint>

namespace dvm::detail {

struct Storage;

// The copy of the K x N matrix whose element (k, n) is s's element
// offset + k + n * cs, with its row stride in *ld (element (k, n) of the copy
// at k * *ld + n); made by `fill` at the second request for the same (offset, K, N,
// cs). Null when there is none: a first request, copies turned off
// (set_row_copies), or no memory for one (the memory limit, an allocation
// failure: the matrix is then never copied). Safe from any thread.
// fill(src, cs, K, N, dst, ld) writes the copy: dst[k * ld + n] = src[n * cs
// + k] (the caller's layout change, vm::copy_by_rows).
// budget >= 0: no new copy is made that would take the bytes all copies
// hold past it (one is read if it exists).
using FillRows = void (*)(const float* src, int64_t cs, int64_t K, int64_t N, float* dst, int64_t ld);
const float* row_copy(Storage* s, int64_t offset, int64_t K, int64_t N, int64_t cs, FillRows fill,
                      int64_t* ld, int64_t budget = -1);

// The copy row_copy made of that matrix, if one exists (never makes one,
// and does not count as a request).
const float* existing_row_copy(Storage* s, int64_t offset, int64_t K, int64_t N, int64_t cs, int64_t* ld);

// The row stride of a copy of N columns: whole cache lines (16 floats), and
// off multiples of 4 KiB (rows that far apart share L1 sets, and the cube
// reads many of them at once).
int64_t row_copy_stride(int64_t N);

// Frees s's copies (Storage::release, when its last reference goes).
void free_row_copies(Storage* s);

// dvm::set_weight_copies: whether new copies are made (existing ones are
// still read). Process-wide.
void set_row_copies(bool on);
bool row_copies_on();
// Bytes the copies hold now (MemoryStats::weight_copy_bytes).
int64_t row_copy_bytes();

}  // namespace dvm::detail
