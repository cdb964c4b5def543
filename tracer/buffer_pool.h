// The caching allocator for tensor buffers: size classes with free lists, so
// loops that keep producing same-sized results reuse memory instead of
// asking the system (and paying its page faults) on every flush.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dvm/runtime.h"

namespace dvm::detail {

// 64-byte aligned, at least `bytes` long. Throws std::bad_alloc, or
// dvm::Error past the memory limit.
void* pool_allocate(size_t bytes);
// The same, for a caller that keeps the block's size (*block_bytes, what it
// passes to pool_free): the block may then be one of the last few freed,
// up to twice the request, while it is still in the cache, instead of the
// request's own class (whose block a program with changing sizes last
// touched long ago). What a tensor buffer comes from.
void* pool_allocate_recent(size_t bytes, size_t* block_bytes);
// What a request of `bytes` counts against the memory limit and in
// memory_stats (its size class: up to a quarter more).
size_t pool_block_bytes(size_t bytes);
// Returns a block from pool_allocate (with the same request size) or from
// pool_allocate_recent (with its block size).
void pool_free(void* p, size_t bytes);

struct PoolStats {
  int64_t system_allocs = 0;  // blocks obtained from the system
  int64_t reuses = 0;         // requests served from the free lists
  int64_t cached_bytes = 0;   // bytes held in free lists now
  int64_t live_bytes = 0;     // bytes handed out now
  int64_t peak_bytes = 0;     // the most live + cached bytes held at once
  int64_t remapped = 0;       // new blocks made from stale ones kept for reuse
};
PoolStats pool_stats();
// Where new blocks come from (dvm::set_allocator): the host's functions, or
// the system's with two nulls. Gives the cached blocks back to the previous
// one; throws dvm::Error while blocks are live or when only one is null.
void pool_set_allocator(AllocateFn allocate, DeallocateFn deallocate, void* host);
// Returns every cached block to the system (or the host's allocator).
void pool_trim();
// Drops the calling thread's cached index ranges (argmax's, tracer/
// compositions.cpp): tensors whose buffers come from the pool (dvm::trim).
void drop_cached_ranges();
// Starts peak_bytes again from what is held now (for benchmarks that
// measure one computation's peak).
void pool_reset_peak();
// A cap on live + cached bytes (0: none): a request that would pass it,
// after the cached blocks are given back, throws dvm::Error.
void pool_set_limit(int64_t bytes);
int64_t pool_limit();

// Whether blocks of 128 KiB and more are mapped from the system (given
// back to it when the pool lets go of them) rather than taken from malloc:
// on Linux, except under AddressSanitizer and in interpreter-only builds.
bool pool_maps_blocks();

// Test hook: the calling thread's `after`-th next pool_allocate (0: the very
// next) throws std::bad_alloc, as the system would when out of memory; -1
// (the default) disarms it. Fires once.
void pool_fail_after(int64_t after);

}  // namespace dvm::detail
