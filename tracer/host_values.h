// Host-side access to computed values: observers (tensor.cpp) and the ops
// that read them when recorded (tracer/index_ops.cpp).
#pragma once

#include "dvm/tensor.h"
#include "tracer/node.h"

namespace dvm::detail {

// n's values in row-major order into out, in n's own type (n has a buffer
// or is a float32 constant).
void copy_values(const Node* n, void* out);
// n bool bytes at b made 0 or 1 (a user's bool buffer may hold any nonzero
// byte for true; what dvm hands out holds 0s and 1s).
void canonical_bools(uint8_t* b, int64_t n);
// A fresh buffer for op's result of that shape and type; out of memory is a
// dvm::Error naming op and the result.
Storage* allocate_result(const char* op, const Shape& shape, Dtype dtype);
// A new materialized leaf with a fresh contiguous buffer (op names it in errors).
Tensor new_leaf(const Shape& shape, const char* op, Dtype dtype = Dtype::F32);
// Whether start + i * step for i in [0, count) all fit type t (a finite
// float past its largest, an integer past its range): else a dvm::Error
// naming arange and the value.
void check_range_fits(Dtype t, double start, double step, int64_t count);
// Elements i in [0, count) of data, of type t, set to start + i * step as
// arange stores them (a value t cannot hold is a dvm::Error naming arange).
void fill_range(void* data, Dtype t, int64_t count, double start, double step);

}  // namespace dvm::detail
