// dvm::Tensor: the lazy tensor handle. Ops record a node and return at once;
// values are computed when observed (to_vector, data, item, sync).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <new>
#include <type_traits>
#include <stdexcept>
#include <vector>

#include "dvm/dtype.h"
#include "dvm/error.h"
#include "dvm/shape.h"

namespace dvm {

namespace detail {
struct Node;
struct Storage;
}

class Tensor {
 public:
  Tensor() = default;  // undefined: every op on it throws
  Tensor(float value);  // NOLINT(google-explicit-constructor): a scalar operand
  // An integer scalar operand (x + 1, where(mask, x, 0), eq(ids, 7)):
  // torch's wrapped integer, a 0-d int64 tensor that changes the result type
  // of bool operands only (int32 + 1 is int32, bool + 1 int64, float16 * 2
  // float16). Its value converts to the computation type; one that type
  // cannot hold is a dvm::Error, as in torch (docs/DTYPES.md). A bool
  // (where(m, m, false)) is a 0-d bool tensor that changes no type.
  template <class T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
  Tensor(T value)  // NOLINT(google-explicit-constructor)
      : Tensor(std::is_same_v<T, bool>
                   ? bool_scalar(value != 0)
                   : integer_scalar(static_cast<int64_t>(value),
                                    std::is_unsigned_v<T> && static_cast<uint64_t>(value) > static_cast<uint64_t>(INT64_MAX))) {}
  Tensor(const Tensor& o);
  Tensor(Tensor&& o) noexcept;
  Tensor& operator=(const Tensor& o);
  Tensor& operator=(Tensor&& o) noexcept;
  ~Tensor();

  // ---- creation -----------------------------------------------------------
  // Wraps user memory without copying. The user keeps ownership and must keep
  // it alive and unchanged while any tensor reads it; dvm never writes it.
  // Any float alignment works; 64-byte aligned rows are read fastest (malloc's
  // 16-byte alignment splits AVX-512 loads over two cache lines).
  static Tensor from_blob(const float* data, Shape shape);
  // Any element type: data holds shape.numel() elements of dtype (bool: one
  // byte each, any nonzero byte true; data<bool>() hands out 0s and 1s).
  // T is float, Half, BFloat16, int32_t, int64_t, uint8_t or bool.
  static Tensor from_blob(const void* data, Shape shape, Dtype dtype);
  template <class T>
  static Tensor from_blob(const T* data, Shape shape) {
    return from_blob(static_cast<const void*>(data), shape, dtype_of<T>::value);
  }
  // A copy of shape.numel() elements of dtype at data (the caller may free
  // it on return).
  static Tensor from_copy(const void* data, Shape shape, Dtype dtype);
  static Tensor from_vector(const std::vector<float>& values, Shape shape);
  static Tensor from_vector(const std::vector<float>& values);  // 1-D
  // A copy of values (any T of from_blob; std::vector<bool> too).
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, Shape shape) {
    if constexpr (std::is_same_v<T, bool>) {
      std::vector<uint8_t> bytes(values.begin(), values.end());
      return copy_of(bytes.data(), static_cast<int64_t>(bytes.size()), shape, Dtype::Bool);
    } else {
      return copy_of(values.data(), static_cast<int64_t>(values.size()), shape, dtype_of<T>::value);
    }
  }
  static Tensor full(Shape shape, float value);
  // value converted to dtype: floats rounded to nearest even (16-bit types
  // through float32, as torch; a finite
  // value beyond the type's largest is an error, an infinity is kept),
  // integers truncated toward zero (a value outside the type's range, or
  // NaN, is an error), bool: value != 0. float32 gives the constant above; the other
  // types a buffer of numel() elements.
  static Tensor full(Shape shape, double value, Dtype dtype);
  // An integer value, exact for every integer type (an int64 above 2^53
  // too); one the type cannot hold is an error.
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  static Tensor full(Shape shape, T value, Dtype dtype) {
    return full_integer(std::move(shape), static_cast<int64_t>(value),
                        std::is_unsigned_v<T> && static_cast<uint64_t>(value) > static_cast<uint64_t>(INT64_MAX), dtype);
  }
  static Tensor zeros(Shape shape) { return full(shape, 0.0f); }
  static Tensor ones(Shape shape) { return full(shape, 1.0f); }
  static Tensor scalar(float value) { return full(Shape{}, value); }
  static Tensor arange(int64_t n) { return arange(0.0f, static_cast<float>(n), 1.0f); }
  static Tensor arange(float start, float end, float step = 1.0f);
  // start + i * step for i < ceil((end - start) / step), computed in double
  // and converted to dtype as full() converts. A step whose sign leads away
  // from end (arange(0, 10, -1), arange(-5)) is a dvm::Error, as in torch.
  static Tensor arange(double start, double end, double step, Dtype dtype);
  // Seeded, reproducible on every machine.
  static Tensor uniform(Shape shape, uint64_t seed, float lo = 0.0f, float hi = 1.0f);
  static Tensor normal(Shape shape, uint64_t seed, float mean = 0.0f, float stddev = 1.0f);

  // ---- properties (never compute) ------------------------------------------
  bool defined() const { return node_ != nullptr; }
  const Shape& shape() const;
  int rank() const { return shape().rank(); }
  int64_t numel() const { return shape().numel(); }
  int64_t size(int axis) const;
  Dtype dtype() const;

  // ---- observers (flush the pending trace) ---------------------------------
  // The values as float32, whatever the dtype (converted as loads convert:
  // docs/DTYPES.md).
  std::vector<float> to_vector() const;
  // The values in their own type: T must be the tensor's (dtype_of<T>),
  // else dvm::Error.
  template <class T>
  std::vector<T> to_vector() const {
    constexpr bool is_bool = std::is_same_v<T, bool>;
    const char* op = is_bool ? "to_vector<bool>" : "to_vector";
    const size_t n = host_elements(dtype_of<T>::value, op);
    try {
      std::vector<std::conditional_t<is_bool, uint8_t, T>> out(n);
      copy_to(out.data(), dtype_of<T>::value, op);
      if constexpr (is_bool) {
        return std::vector<bool>(out.begin(), out.end());
      } else {
        return out;
      }
    } catch (const std::bad_alloc&) {
      out_of_host_memory(op);
    } catch (const std::length_error&) {  // more elements than a std::vector holds
      out_of_host_memory(op);
    }
  }
  // Contiguous row-major data, valid while this tensor lives. float32
  // tensors only; data<T>() for the others.
  const float* data() const;
  template <class T>
  const T* data() const {
    return static_cast<const T*>(typed_data(dtype_of<T>::value));
  }
  float item() const;  // exactly one element, as float32
  void sync() const;   // computes this tensor

  // ---- views (no copy until a kernel reads them) ---------------------------
  Tensor reshape(Shape shape) const;  // one extent may be -1
  Tensor permute(std::initializer_list<int> axes) const;
  Tensor permute(const std::vector<int>& axes) const;
  Tensor transpose(int a, int b) const;
  // Elements [start, end) with step along axis; negative start/end count from
  // the end, end is clamped.
  Tensor slice(int axis, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor expand(Shape shape) const;  // broadcast_to
  Tensor broadcast_to(Shape shape) const { return expand(shape); }
  Tensor contiguous() const;
  // torch's view helpers, all views: squeeze() drops every axis of extent
  // 1, squeeze(axis) that axis when its extent is 1 (else it is a no-op);
  // unsqueeze inserts an axis of extent 1 at axis (-rank-1 <= axis <= rank);
  // flatten merges [start_axis, end_axis] into one (a 0-d tensor gives [1]).
  Tensor squeeze() const;
  Tensor squeeze(int axis) const;
  Tensor unsqueeze(int axis) const;
  Tensor flatten(int start_axis = 0, int end_axis = -1) const;
  // Elements [start, start + length) of axis; start may be negative (from
  // the end); the range must lie within the axis.
  Tensor narrow(int axis, int64_t start, int64_t length) const;
  // torch.chunk: pieces of ceil(extent / chunks) along axis, the last one
  // smaller, so possibly fewer than `chunks` pieces; chunks >= 1.
  std::vector<Tensor> chunk(int64_t chunks, int axis = 0) const;
  // torch.split: pieces of `size` along axis (the last one smaller), or of
  // the given sizes, which must add up to the axis's extent.
  std::vector<Tensor> split(int64_t size, int axis = 0) const;
  std::vector<Tensor> split(const std::vector<int64_t>& sizes, int axis = 0) const;

  // ---- element type ------------------------------------------------------------
  // torch's Tensor.to(dtype): floats round to nearest even; float to
  // integer truncates toward zero (NaN and out-of-range values: the type's
  // most negative value, then uint8 keeps the low 8 bits); to bool: != 0;
  // between integer types, torch's wrapping (int64 to int32 keeps the low
  // 32 bits, to uint8 the low 8).
  Tensor to(Dtype dtype) const;

  // ---- reductions (axes may be negative) -----------------------------------
  Tensor sum(std::initializer_list<int> axes, bool keepdim = false) const;
  Tensor sum(const std::vector<int>& axes, bool keepdim = false) const;
  Tensor sum(int axis, bool keepdim = false) const { return sum({axis}, keepdim); }
  Tensor sum() const;  // all axes
  Tensor mean(std::initializer_list<int> axes, bool keepdim = false) const;
  Tensor mean(const std::vector<int>& axes, bool keepdim = false) const;
  Tensor mean(int axis, bool keepdim = false) const { return mean({axis}, keepdim); }
  Tensor mean() const;
  Tensor max(std::initializer_list<int> axes, bool keepdim = false) const;
  Tensor max(const std::vector<int>& axes, bool keepdim = false) const;
  Tensor max(int axis, bool keepdim = false) const { return max({axis}, keepdim); }
  Tensor max() const;
  Tensor min(std::initializer_list<int> axes, bool keepdim = false) const;
  Tensor min(const std::vector<int>& axes, bool keepdim = false) const;
  Tensor min(int axis, bool keepdim = false) const { return min({axis}, keepdim); }
  Tensor min() const;
  // torch's argmax / argmin: the int64 index of the first maximum (minimum)
  // along axis; a NaN counts as the maximum for argmax and the minimum for
  // argmin, so the first NaN wins both. With no axis, the index into the
  // flattened tensor, 0-d. Not bool; the reduced axis must not be empty. A
  // 0-d tensor (axis 0 or -1) gives 0.
  Tensor argmax(int axis, bool keepdim = false) const;
  Tensor argmax() const;
  Tensor argmin(int axis, bool keepdim = false) const;
  Tensor argmin() const;
  // torch's var and std over axes with Bessel's correction (divide by
  // count - correction; at or below zero the result is inf or NaN, as in
  // torch). Floating types only; a 16-bit type is computed in float32 and
  // rounded once.
  Tensor var(const std::vector<int>& axes, int64_t correction = 1, bool keepdim = false) const;
  Tensor var(int axis, int64_t correction = 1, bool keepdim = false) const { return var(std::vector<int>{axis}, correction, keepdim); }
  Tensor var() const;  // all axes, correction 1
  Tensor std(const std::vector<int>& axes, int64_t correction = 1, bool keepdim = false) const;
  Tensor std(int axis, int64_t correction = 1, bool keepdim = false) const { return std(std::vector<int>{axis}, correction, keepdim); }
  Tensor std() const;

  // ---- internal ------------------------------------------------------------
  explicit Tensor(detail::Node* node);  // takes a new user reference
  struct Adopt {};
  Tensor(detail::Node* node, Adopt) noexcept : node_(node) {}  // the caller counted the user reference
  detail::Node* node() const { return node_; }

 private:
  // Tensor(integer): too_large says the value was an unsigned one above
  // int64's range (an error).
  static Tensor integer_scalar(int64_t value, bool too_large);
  static Tensor bool_scalar(bool value);
  static Tensor full_integer(Shape shape, int64_t value, bool too_large, Dtype dtype);
  static Tensor copy_of(const void* values, int64_t count, Shape shape, Dtype dtype, const char* op = "from_vector");
  // The element count of a tensor op reads as `expected` on the host: a
  // dvm::Error naming op if it is undefined or of another type.
  size_t host_elements(Dtype expected, const char* op) const;
  [[noreturn]] void out_of_host_memory(const char* op) const;
  void copy_to(void* out, Dtype expected, const char* op) const;
  const void* typed_data(Dtype expected) const;

  detail::Node* node_ = nullptr;
};

// ---- elementwise unary ------------------------------------------------------
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
enum class GeluApprox { None, Tanh };  // None: the erf form
Tensor gelu(const Tensor& x, GeluApprox approx = GeluApprox::None);
Tensor erf(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
// floor, ceil and round of an integer tensor return it as it is (as torch).
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);  // half to even

// ---- elementwise binary (numpy broadcasting; scalars on either side) -------
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, float b);
// An integer exponent is torch's wrapped integer: the float exponent it
// converts to for a floating a. An integer or bool a to an integer power
// e >= 0 is an integer (int64 for bool) computed by multiplies that wrap, as
// torch's; a negative e is a dvm::Error, as in torch. An integer a to a
// tensor exponent is not supported yet (an error).
template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
Tensor pow(const Tensor& a, T b) { return pow(a, Tensor(b)); }
// Comparisons produce a bool mask (one byte per element, 0 or 1).
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
// Python's division, as torch.floor_divide and torch.remainder: the floor of
// the quotient and a - b * floor(a / b) (the divisor's sign). Integers exact
// (x // 0 = 0, x % 0 = x); floats exact while |a / b| < 2^24. Not bool.
Tensor floor_divide(const Tensor& a, const Tensor& b);
Tensor remainder(const Tensor& a, const Tensor& b);
// Bitwise ops of bool and integer (int32, int64, uint8) operands, promoted as torch
// (bool & bool is bool, int32 & bool int32); floating operands are an error.
Tensor bitwise_and(const Tensor& a, const Tensor& b);
Tensor bitwise_or(const Tensor& a, const Tensor& b);
Tensor bitwise_xor(const Tensor& a, const Tensor& b);
Tensor bitwise_not(const Tensor& x);
// Logical ops of any types (nonzero is true, NaN too): bool results.
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& x);
// mask must be bool; a and b broadcast with it.
Tensor where(const Tensor& mask, const Tensor& a, const Tensor& b);

// ---- contractions (the cube unit; elementwise ops on the result fuse into its kernel)
// torch.matmul: 1-D operands are promoted (a to [1, K], b to [K, 1]) and the
// added dim dropped from the result; batch dims broadcast (numpy rules).
Tensor matmul(const Tensor& a, const Tensor& b);
// torch.bmm: [B, M, K] x [B, K, N] -> [B, M, N], no broadcasting.
Tensor bmm(const Tensor& a, const Tensor& b);
// torch.nn.functional.linear: x [..., in] times weight [out, in] transposed,
// plus bias [out] when it is defined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// torch.addmm: beta * input + alpha * (a @ b), a and b 2-D, input broadcast
// to the product's shape. As torch, alpha = 0 ignores a @ b and beta = 0
// ignores input (NaNs and infinities in them too).
Tensor addmm(const Tensor& input, const Tensor& a, const Tensor& b, float beta = 1.0f, float alpha = 1.0f);

// ---- compositions (the fuser makes each one kernel) ---------------------------
Tensor softmax(const Tensor& x, int axis);
Tensor log_softmax(const Tensor& x, int axis);
// Normalizes over the trailing normalized_shape.rank() axes; weight and bias
// may be undefined Tensors.
Tensor layer_norm(const Tensor& x, Shape normalized_shape, const Tensor& weight,
                  const Tensor& bias, float eps = 1e-5f);
// torch.clamp: min(max(x, lo), hi); NaN stays NaN, and lo > hi gives hi.
Tensor clamp(const Tensor& x, float lo, float hi);
Tensor clamp_min(const Tensor& x, float lo);
Tensor clamp_max(const Tensor& x, float hi);
// Tensor bounds (torch.clamp's): broadcast; x and both bounds promote
// together (torch's result_type of the three) and clamp in that type; an
// undefined bound is none (clamp with neither is a dvm::Error, as torch).
Tensor clamp(const Tensor& x, const Tensor& lo, const Tensor& hi);
Tensor clamp_min(const Tensor& x, const Tensor& lo);
Tensor clamp_max(const Tensor& x, const Tensor& hi);
// Integer bounds are integer scalars (Tensor(int)): clamp(ids, 0, n - 1) of
// int32 ids stays int32, as in torch.
template <class L, class H,
          std::enable_if_t<std::is_integral_v<L> && !std::is_same_v<L, bool> && std::is_integral_v<H> &&
                               !std::is_same_v<H, bool>,
                           int> = 0>
Tensor clamp(const Tensor& x, L lo, H hi) { return clamp(x, Tensor(lo), Tensor(hi)); }
template <class L, std::enable_if_t<std::is_integral_v<L> && !std::is_same_v<L, bool>, int> = 0>
Tensor clamp_min(const Tensor& x, L lo) { return clamp_min(x, Tensor(lo)); }
template <class H, std::enable_if_t<std::is_integral_v<H> && !std::is_same_v<H, bool>, int> = 0>
Tensor clamp_max(const Tensor& x, H hi) { return clamp_max(x, Tensor(hi)); }
// torch.nn.functional.silu: x * sigmoid(x). Floating types.
Tensor silu(const Tensor& x);
// torch's masked_fill: value where the bool mask (broadcast to x's shape)
// is true, else x; of x's type (value converted as full() converts: a value
// an integer type cannot hold, NaN, infinity or out of its range, is a
// dvm::Error, as in torch).
Tensor masked_fill(const Tensor& x, const Tensor& mask, float value);
// The value as a 0-d tensor (torch's Tensor overload), converted to x's type
// exactly: an integer literal (masked_fill(ids, m, -100)) keeps every digit.
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value);
template <class T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
Tensor masked_fill(const Tensor& x, const Tensor& mask, T value) { return masked_fill(x, mask, Tensor(value)); }
// torch.tril / torch.triu over the last two axes: elements with
// column - row <= diagonal (tril) or >= diagonal (triu) kept, the rest 0.
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
// torch.nn.functional.scaled_dot_product_attention without dropout:
// softmax(q kᵀ · scale + mask) v over q [..., L, E], k [..., S, E] and
// v [..., S, Ev] (batch axes broadcast), giving [..., L, Ev]. attn_mask: a
// bool mask (true takes part) or a float one (added), broadcasting to
// [..., L, S]; is_causal keeps key j for query i when j <= i (torch's
// top-left alignment; a decode step with a cache passes false). scale <= 0
// means 1 / sqrt(E). A row with no key taking part is NaN, as in torch.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask = Tensor(), bool is_causal = false, float scale = 0.0f);

// ---- operators ------------------------------------------------------------------
// ---- joining (torch names and semantics) -------------------------------------
// torch.cat: tensors of one rank whose extents agree except along axis,
// promoted to one dtype (promote_types), joined along axis. Each piece is
// copied once, straight into its slice of the result.
Tensor cat(const std::vector<Tensor>& tensors, int axis = 0);
// torch.stack: tensors of one shape joined along a new axis
// (-rank - 1 <= axis <= rank).
Tensor stack(const std::vector<Tensor>& tensors, int axis = 0);

// ---- indexing (torch names and semantics) ------------------------------------
// Elements at data-dependent positions, copied when recorded: the indices
// and x are computed first (a flush, if either is pending), and an index
// outside [0, extent) is a dvm::Error naming the op, the index and the
// extent. Indices are int64 or int32.
// torch.index_select: x's slices at `index` (1-D) along axis.
Tensor index_select(const Tensor& x, int axis, const Tensor& index);
// torch.nn.functional.embedding: rows of weight [num, dim] at ids (any
// shape); the result is ids' shape + [dim].
Tensor embedding(const Tensor& ids, const Tensor& weight);
// torch.gather: out[i] = x[i with its axis coordinate replaced by index[i]];
// index has x's rank and extents no larger than x's except along axis.
Tensor gather(const Tensor& x, int axis, const Tensor& index);

// A dvm-owned tensor that grows along one axis up to a fixed capacity: a
// transformer's key or value cache. append() records a write of the new
// rows into its buffer (a kernel that copies only them) and returns every
// row so far as a view of the buffer, so n appends copy each row once, not
// n^2 / 2 rows as cat would. Rows once written never change while any
// tensor can see them: clear() starts over in a new buffer when an earlier
// result is still alive (or still pending), else in the same one. One
// thread at a time uses a cache. An append whose flush fails leaves the
// cache failed (size() counts its rows; later appends and values() raise
// that error) until clear(). Not copyable; movable.
class KVCache {
 public:
  // capacity_shape: the cache when full; its extent along axis is the
  // capacity. dtype: the type of the stored rows (appended rows convert).
  KVCache(Shape capacity_shape, int axis, Dtype dtype = Dtype::F32);
  ~KVCache();
  KVCache(KVCache&& o) noexcept;
  KVCache& operator=(KVCache&& o) noexcept;
  KVCache(const KVCache&) = delete;
  KVCache& operator=(const KVCache&) = delete;

  // rows: the cache's shape with any extent along axis (the rank and the
  // other extents must match); more rows than the capacity left is an error.
  Tensor append(const Tensor& rows);
  Tensor values() const;  // every row so far (extent size() along axis)
  int64_t size() const { return size_; }
  int64_t capacity() const { return shape_[axis_]; }
  int axis() const { return axis_; }
  Dtype dtype() const { return dtype_; }
  void clear();

 private:
  detail::Storage* buffer_ = nullptr;  // allocated when first needed
  Shape shape_;
  int axis_ = 0;
  Dtype dtype_ = Dtype::F32;
  int64_t size_ = 0;
  Tensor last_write_;  // orders the next write after it
  Tensor values_;
};

Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, float b);
Tensor operator-(const Tensor& a, float b);
Tensor operator*(const Tensor& a, float b);
Tensor operator/(const Tensor& a, float b);
Tensor operator+(float a, const Tensor& b);
Tensor operator-(float a, const Tensor& b);
Tensor operator*(float a, const Tensor& b);
Tensor operator/(float a, const Tensor& b);
// With a C++ integer or bool: torch's wrapped integer or bool (Tensor(int)),
// so int32 + 1 stays int32; with a floating tensor, the float scalar it
// converts to.
template <class T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
Tensor operator+(const Tensor& a, T b) {
  return !std::is_same_v<T, bool> && a.defined() && is_floating(a.dtype()) ? a + static_cast<float>(b) : a + Tensor(b);
}
template <class T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
Tensor operator-(const Tensor& a, T b) {
  return !std::is_same_v<T, bool> && a.defined() && is_floating(a.dtype()) ? a - static_cast<float>(b) : a - Tensor(b);
}
template <class T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
Tensor operator*(const Tensor& a, T b) {
  return !std::is_same_v<T, bool> && a.defined() && is_floating(a.dtype()) ? a * static_cast<float>(b) : a * Tensor(b);
}
template <class T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
Tensor operator/(const Tensor& a, T b) {
  return !std::is_same_v<T, bool> && a.defined() && is_floating(a.dtype()) ? a / static_cast<float>(b) : a / Tensor(b);
}
template <class T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
Tensor operator+(T a, const Tensor& b) {
  return !std::is_same_v<T, bool> && b.defined() && is_floating(b.dtype()) ? static_cast<float>(a) + b : Tensor(a) + b;
}
template <class T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
Tensor operator-(T a, const Tensor& b) {
  return !std::is_same_v<T, bool> && b.defined() && is_floating(b.dtype()) ? static_cast<float>(a) - b : Tensor(a) - b;
}
template <class T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
Tensor operator*(T a, const Tensor& b) {
  return !std::is_same_v<T, bool> && b.defined() && is_floating(b.dtype()) ? static_cast<float>(a) * b : Tensor(a) * b;
}
template <class T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
Tensor operator/(T a, const Tensor& b) {
  return !std::is_same_v<T, bool> && b.defined() && is_floating(b.dtype()) ? static_cast<float>(a) / b : Tensor(a) / b;
}
// Bitwise (bitwise_not, bitwise_and, bitwise_or, bitwise_xor).
Tensor operator~(const Tensor& x);
Tensor operator&(const Tensor& a, const Tensor& b);
Tensor operator|(const Tensor& a, const Tensor& b);
Tensor operator^(const Tensor& a, const Tensor& b);

}  // namespace dvm
