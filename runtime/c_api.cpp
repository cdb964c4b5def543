// The C API (include/dvm/dvm_c.h) over the C++ API: each entry point checks
// its pointers, runs the C++ call inside one try block and turns whatever it
// throws into a status and this thread's last-error message.
#include "dvm/dvm_c.h"

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "dvm/dvm.h"

struct dvm_tensor_s {
  dvm::Tensor t;
};

struct dvm_kv_cache_s {
  dvm::KVCache c;
};

struct dvm_weights_s {
  std::vector<dvm::NamedTensor> w;
};
struct dvm_graph_s {
  dvm::Graph g;
};
struct dvm_executable_s {
  dvm::Executable e;
};

namespace {

thread_local std::string t_error;

dvm_status fail(dvm_status s, std::string msg) {
  try {
    t_error = std::move(msg);
  } catch (...) {
    t_error.clear();  // no room even for the message: the status still says what happened
  }
  return s;
}

// Whether a dvm::Error reports a failed allocation: dvm's messages for one
// start "out of memory" (the memory limit, the host allocator, the system),
// and a failed flush's error carries it after its own words.
bool reports_out_of_memory(const char* what) {
  const std::string_view m(what);
  return m.starts_with("out of memory") || m.find(": out of memory") != std::string_view::npos;
}

// Runs f (which may throw); every failure becomes a status.
template <class F>
dvm_status guarded(F&& f) {
  try {
    f();
    return DVM_OK;
  } catch (const dvm::Error& e) {
    return fail(reports_out_of_memory(e.what()) ? DVM_OUT_OF_MEMORY : DVM_ERROR, e.what());
  } catch (const std::bad_alloc&) {
    return fail(DVM_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return fail(DVM_ERROR, std::string("internal: ") + e.what());
  } catch (...) {
    return fail(DVM_ERROR, "internal: an unknown exception");
  }
}

// guarded() for a call that observes values: an error raised by the C++
// read it makes (to_vector, sync) is prefixed with the C function's name.
template <class F>
dvm_status guarded_in(const char* fn, F&& f) {
  return guarded([&] {
    try {
      f();
    } catch (const dvm::Error& e) {
      if (std::string_view(e.what()).starts_with(fn)) throw;
      throw dvm::Error(std::string(fn) + ": " + e.what());
    }
  });
}

dvm_status invalid(const char* fn, const char* what) {
  return fail(DVM_INVALID_ARGUMENT, std::string(fn) + ": " + what);
}

bool valid_dtype(int d) { return d >= 0 && d < dvm::kNumDtypes; }

// The error of a dtype argument outside the enum, naming its value.
dvm_status unknown_dtype(const char* fn, int d) {
  return invalid(fn, ("unknown dtype " + std::to_string(d) + " (expected 0 to " + std::to_string(dvm::kNumDtypes - 1) +
                      ", a dvm_dtype)").c_str());
}

// The shape of shape[0..rank), or false (rank outside [0, DVM_MAX_RANK], or
// a null pointer with rank > 0).
bool make_shape(const int64_t* shape, int rank, dvm::Shape* out) {
  if (rank < 0 || rank > DVM_MAX_RANK || (rank > 0 && !shape)) return false;
  dvm::Shape s;
  for (int i = 0; i < rank; ++i) s.push_back(shape[i]);
  *out = s;
  return true;
}

// A new handle holding t into *out.
void give(dvm::Tensor t, dvm_tensor* out) { *out = new dvm_tensor_s{std::move(t)}; }

// Checks parallel arrays of names and values (n >= 0, non-null arrays when
// n > 0, no null name); pairs() then makes the list.
// Arrays of pointers (buffers) may not hold a null one either.
template <class V>
dvm_status check_pairs(const char* fn, const char* what, const char* const* names, V values, int n) {
  if (n < 0 || (n > 0 && (!names || !values)))
    return fail(DVM_INVALID_ARGUMENT, std::string(fn) + ": " + what + ": a negative count or a null array");
  for (int i = 0; i < n; ++i) {
    if (!names[i]) return fail(DVM_INVALID_ARGUMENT, std::string(fn) + ": " + what + ": a null name");
    if constexpr (std::is_pointer_v<std::remove_cvref_t<decltype(values[0])>>)
      if (!values[i])
        return fail(DVM_INVALID_ARGUMENT,
                    std::string(fn) + ": " + what + ": a null pointer for '" + names[i] + "'");
  }
  return DVM_OK;
}
template <class V, class P>
void pairs(const char* const* names, V values, int n, P* out) {
  for (int i = 0; i < n; ++i) out->emplace_back(names[i], values[i]);
}

#define DVM_NEED(ptr, fn) \
  if (!(ptr)) return invalid(fn, #ptr " is null")

// dvm_var (std = false) and dvm_std.
dvm_status spread(const char* fn, bool std, dvm_tensor x, const int* axes, int naxes, int64_t correction, int keepdim,
                  dvm_tensor* out) {
  DVM_NEED(x, fn);
  DVM_NEED(out, fn);
  if (naxes < 0 || naxes > DVM_MAX_RANK || (naxes > 0 && !axes)) return invalid(fn, "naxes must be 0..8 with an axes array");
  if (keepdim != 0 && keepdim != 1) return invalid(fn, "keepdim must be 0 or 1");
  return guarded([&] {
    const std::vector<int> a(axes, axes + naxes);
    give(std ? x->t.std(a, correction, keepdim != 0) : x->t.var(a, correction, keepdim != 0), out);
  });
}

// dvm_cat (stack = false) and dvm_stack.
dvm_status join(const char* fn, bool stack, const dvm_tensor* tensors, int n, int axis, dvm_tensor* out) {
  DVM_NEED(out, fn);
  if (n < 1 || !tensors) return invalid(fn, "n must be >= 1 with a tensors array");
  for (int i = 0; i < n; ++i)
    if (!tensors[i]) return fail(DVM_INVALID_ARGUMENT, std::string(fn) + ": tensors[" + std::to_string(i) + "] is null");
  return guarded([&] {
    std::vector<dvm::Tensor> ts;
    ts.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) ts.push_back(tensors[i]->t);
    give(stack ? dvm::stack(ts, axis) : dvm::cat(ts, axis), out);
  });
}

// dvm_argmax (max = true) and dvm_argmin.
dvm_status arg_extreme(const char* fn, bool max, dvm_tensor x, int axis, int keepdim, dvm_tensor* out) {
  DVM_NEED(x, fn);
  DVM_NEED(out, fn);
  if (keepdim != 0 && keepdim != 1) return invalid(fn, "keepdim must be 0 or 1");
  return guarded([&] {
    const dvm::Tensor& t = x->t;
    if (axis != DVM_ALL_AXES) {
      give(max ? t.argmax(axis, keepdim != 0) : t.argmin(axis, keepdim != 0), out);
      return;
    }
    dvm::Tensor r = max ? t.argmax() : t.argmin();
    if (keepdim) r = r.reshape(dvm::Shape(std::vector<int64_t>(static_cast<size_t>(t.rank()), 1)));  // as dvm_reduce
    give(std::move(r), out);
  });
}

// Whether i indexes w's tensors, else the status and message of fn.
dvm_status weights_index(const char* fn, dvm_weights w, int64_t i) {
  if (i >= 0 && i < static_cast<int64_t>(w->w.size())) return DVM_OK;
  return fail(DVM_INVALID_ARGUMENT, std::string(fn) + ": index " + std::to_string(i) + " outside [0, " +
                                        std::to_string(w->w.size()) + ")");
}

}  // namespace

extern "C" {

const char* dvm_last_error(void) { return t_error.c_str(); }
const char* dvm_version(void) { return dvm::version(); }

dvm_status dvm_from_blob(const void* data, const int64_t* shape, int rank, int dtype, dvm_tensor* out) {
  DVM_NEED(out, "dvm_from_blob");
  dvm::Shape s;
  if (!make_shape(shape, rank, &s)) return invalid("dvm_from_blob", "rank must be 0..8 with a shape array");
  if (!valid_dtype(dtype)) return unknown_dtype("dvm_from_blob", dtype);
  if (!data && s.numel() > 0) return invalid("dvm_from_blob", "data is null");
  return guarded([&] { give(dvm::Tensor::from_blob(data, s, static_cast<dvm::Dtype>(dtype)), out); });
}

dvm_status dvm_from_copy(const void* data, const int64_t* shape, int rank, int dtype, dvm_tensor* out) {
  DVM_NEED(out, "dvm_from_copy");
  dvm::Shape s;
  if (!make_shape(shape, rank, &s)) return invalid("dvm_from_copy", "rank must be 0..8 with a shape array");
  if (!valid_dtype(dtype)) return unknown_dtype("dvm_from_copy", dtype);
  if (!data && s.numel() > 0) return invalid("dvm_from_copy", "data is null");
  return guarded([&] { give(dvm::Tensor::from_copy(data, s, static_cast<dvm::Dtype>(dtype)), out); });
}

dvm_status dvm_full(const int64_t* shape, int rank, double value, int dtype, dvm_tensor* out) {
  DVM_NEED(out, "dvm_full");
  dvm::Shape s;
  if (!make_shape(shape, rank, &s)) return invalid("dvm_full", "rank must be 0..8 with a shape array");
  if (!valid_dtype(dtype)) return unknown_dtype("dvm_full", dtype);
  return guarded([&] { give(dvm::Tensor::full(s, value, static_cast<dvm::Dtype>(dtype)), out); });
}

dvm_status dvm_scalar(float value, dvm_tensor* out) {
  DVM_NEED(out, "dvm_scalar");
  return guarded([&] { give(dvm::Tensor::scalar(value), out); });
}

dvm_status dvm_scalar_int(int64_t value, dvm_tensor* out) {
  DVM_NEED(out, "dvm_scalar_int");
  return guarded([&] { give(dvm::Tensor(value), out); });
}

dvm_status dvm_arange(double start, double end, double step, int dtype, dvm_tensor* out) {
  DVM_NEED(out, "dvm_arange");
  if (!valid_dtype(dtype)) return unknown_dtype("dvm_arange", dtype);
  return guarded([&] { give(dvm::Tensor::arange(start, end, step, static_cast<dvm::Dtype>(dtype)), out); });
}

dvm_status dvm_retain(dvm_tensor t, dvm_tensor* out) {
  DVM_NEED(t, "dvm_retain");
  DVM_NEED(out, "dvm_retain");
  return guarded([&] { give(t->t, out); });
}

void dvm_release(dvm_tensor t) { delete t; }

dvm_status dvm_shape(dvm_tensor t, int64_t* shape, int* rank) {
  DVM_NEED(t, "dvm_shape");
  DVM_NEED(shape, "dvm_shape");
  DVM_NEED(rank, "dvm_shape");
  return guarded([&] {
    const dvm::Shape& s = t->t.shape();
    for (int i = 0; i < s.rank(); ++i) shape[i] = s[i];
    *rank = s.rank();
  });
}

dvm_status dvm_get_dtype(dvm_tensor t, dvm_dtype* dtype) {
  DVM_NEED(t, "dvm_get_dtype");
  DVM_NEED(dtype, "dvm_get_dtype");
  return guarded([&] { *dtype = static_cast<dvm_dtype>(t->t.dtype()); });
}

dvm_status dvm_numel(dvm_tensor t, int64_t* numel) {
  DVM_NEED(t, "dvm_numel");
  DVM_NEED(numel, "dvm_numel");
  return guarded([&] { *numel = t->t.numel(); });
}

dvm_status dvm_read(dvm_tensor t, int dtype, void* out, size_t bytes) {
  DVM_NEED(t, "dvm_read");
  if (!valid_dtype(dtype)) return unknown_dtype("dvm_read", dtype);
  if (!out && t->t.numel() > 0) return invalid("dvm_read", "out is null");
  return guarded_in("dvm_read", [&] {
    const dvm::Tensor& x = t->t;
    const size_t need = static_cast<size_t>(x.numel()) * dvm::dtype_size(static_cast<dvm::Dtype>(dtype));
    if (x.dtype() != static_cast<dvm::Dtype>(dtype))
      throw dvm::Error(std::string("dvm_read: tensor ") + dvm::dtype_name(x.dtype()) + x.shape().to_string() +
                       " read as " + dvm::dtype_name(static_cast<dvm::Dtype>(dtype)) +
                       " (expected its own type; dvm_read_f32 converts)");
    if (bytes < need)
      throw dvm::Error("dvm_read: " + std::to_string(bytes) + " bytes of room for " + x.shape().to_string() + " " +
                       dvm::dtype_name(x.dtype()) + " values (expected " + std::to_string(need) + ")");
    const void* src = nullptr;
    switch (x.dtype()) {
      case dvm::Dtype::F32: src = x.data<float>(); break;
      case dvm::Dtype::F16: src = x.data<dvm::Half>(); break;
      case dvm::Dtype::BF16: src = x.data<dvm::BFloat16>(); break;
      case dvm::Dtype::I32: src = x.data<int32_t>(); break;
      case dvm::Dtype::I64: src = x.data<int64_t>(); break;
      case dvm::Dtype::U8: src = x.data<uint8_t>(); break;
      case dvm::Dtype::Bool: src = x.data<bool>(); break;
    }
    if (need) std::memcpy(out, src, need);
  });
}

dvm_status dvm_read_f32(dvm_tensor t, float* out, size_t count) {
  DVM_NEED(t, "dvm_read_f32");
  if (!out && t->t.numel() > 0) return invalid("dvm_read_f32", "out is null");
  return guarded_in("dvm_read_f32", [&] {
    const std::vector<float> v = t->t.to_vector();
    if (count < v.size())
      throw dvm::Error("dvm_read_f32: room for " + std::to_string(count) + " floats, the tensor " +
                       t->t.shape().to_string() + " has " + std::to_string(v.size()));
    if (!v.empty()) std::memcpy(out, v.data(), v.size() * sizeof(float));
  });
}

dvm_status dvm_sync(dvm_tensor t) {
  DVM_NEED(t, "dvm_sync");
  return guarded_in("dvm_sync", [&] { t->t.sync(); });
}

dvm_status dvm_flush(void) {
  return guarded([] { dvm::flush(); });
}

dvm_status dvm_unary(int op, dvm_tensor x, dvm_tensor* out) {
  DVM_NEED(x, "dvm_unary");
  DVM_NEED(out, "dvm_unary");
  using F = dvm::Tensor (*)(const dvm::Tensor&);
  static constexpr F kOps[] = {dvm::neg,  dvm::abs,     dvm::exp,  dvm::log,   dvm::sqrt, dvm::rsqrt,
                               dvm::reciprocal, dvm::tanh, dvm::sigmoid, dvm::relu, nullptr, nullptr,
                               dvm::erf,  dvm::sin,     dvm::cos,  dvm::floor, dvm::ceil, dvm::round,
                               dvm::bitwise_not, dvm::logical_not};
  static_assert(sizeof(kOps) / sizeof(kOps[0]) == DVM_LOGICAL_NOT + 1, "an entry per dvm_unary_op");
  const int i = op;
  if (i < 0 || i > DVM_LOGICAL_NOT) return invalid("dvm_unary", "unknown op");
  return guarded([&] {
    if (op == DVM_GELU) give(dvm::gelu(x->t, dvm::GeluApprox::None), out);
    else if (op == DVM_GELU_TANH) give(dvm::gelu(x->t, dvm::GeluApprox::Tanh), out);
    else give(kOps[i](x->t), out);
  });
}

namespace {
using BinaryFn = dvm::Tensor (*)(const dvm::Tensor&, const dvm::Tensor&);
constexpr BinaryFn kBinary[] = {dvm::add, dvm::sub, dvm::mul, dvm::div, dvm::maximum, dvm::minimum, dvm::pow,
                                dvm::eq,  dvm::ne,  dvm::lt,  dvm::le,  dvm::gt,      dvm::ge,
                                dvm::floor_divide, dvm::remainder, dvm::bitwise_and, dvm::bitwise_or,
                                dvm::bitwise_xor, dvm::logical_and, dvm::logical_or, dvm::logical_xor};
static_assert(sizeof(kBinary) / sizeof(kBinary[0]) == DVM_LOGICAL_XOR + 1, "an entry per dvm_binary_op");
bool valid_binary(int op) { return op >= 0 && op <= DVM_LOGICAL_XOR; }
}  // namespace

extern "C++" {
namespace {
// a op s or s op a, s a float (an inline scalar, as x * 2.0f in C++) or an
// integer (torch's wrapped integer, as ids + 1).
template <class Scalar>
dvm_status binary_with_scalar(const char* fn, int op, dvm_tensor a, Scalar s, int scalar_first, dvm_tensor* out) {
  DVM_NEED(a, fn);
  DVM_NEED(out, fn);
  if (!valid_binary(op)) return invalid(fn, "unknown op");
  if (scalar_first != 0 && scalar_first != 1) return invalid(fn, "scalar_first must be 0 or 1");
  return guarded([&] {
    const dvm::Tensor sc(s);
    give(scalar_first ? kBinary[op](sc, a->t) : kBinary[op](a->t, sc), out);
  });
}
}  // namespace
}  // extern "C++"

dvm_status dvm_binary(int op, dvm_tensor a, dvm_tensor b, dvm_tensor* out) {
  DVM_NEED(a, "dvm_binary");
  DVM_NEED(b, "dvm_binary");
  DVM_NEED(out, "dvm_binary");
  if (!valid_binary(op)) return invalid("dvm_binary", "unknown op");
  return guarded([&] { give(kBinary[op](a->t, b->t), out); });
}

dvm_status dvm_binary_scalar(int op, dvm_tensor a, float s, int scalar_first, dvm_tensor* out) {
  return binary_with_scalar("dvm_binary_scalar", op, a, s, scalar_first, out);
}

dvm_status dvm_binary_scalar_int(int op, dvm_tensor a, int64_t s, int scalar_first, dvm_tensor* out) {
  return binary_with_scalar("dvm_binary_scalar_int", op, a, s, scalar_first, out);
}

dvm_status dvm_where(dvm_tensor mask, dvm_tensor a, dvm_tensor b, dvm_tensor* out) {
  DVM_NEED(mask, "dvm_where");
  DVM_NEED(a, "dvm_where");
  DVM_NEED(b, "dvm_where");
  DVM_NEED(out, "dvm_where");
  return guarded([&] { give(dvm::where(mask->t, a->t, b->t), out); });
}

dvm_status dvm_reduce(int op, dvm_tensor x, const int* axes, int naxes, int keepdim, dvm_tensor* out) {
  DVM_NEED(x, "dvm_reduce");
  DVM_NEED(out, "dvm_reduce");
  if (op < 0 || op > DVM_MIN) return invalid("dvm_reduce", "unknown op");
  if (naxes < 0 || naxes > DVM_MAX_RANK || (naxes > 0 && !axes))
    return invalid("dvm_reduce", "naxes must be 0..8 with an axes array");
  if (keepdim != 0 && keepdim != 1) return invalid("dvm_reduce", "keepdim must be 0 or 1");
  return guarded([&] {
    const dvm::Tensor& t = x->t;
    if (naxes == 0) {
      dvm::Tensor r = op == DVM_SUM ? t.sum() : op == DVM_MEAN ? t.mean() : op == DVM_MAX ? t.max() : t.min();
      if (keepdim) {
        std::vector<int64_t> ones(static_cast<size_t>(t.rank()), 1);
        r = r.reshape(dvm::Shape(ones));
      }
      give(std::move(r), out);
      return;
    }
    const std::vector<int> a(axes, axes + naxes);
    const bool kd = keepdim != 0;
    dvm::Tensor r = op == DVM_SUM ? t.sum(a, kd) : op == DVM_MEAN ? t.mean(a, kd) : op == DVM_MAX ? t.max(a, kd) : t.min(a, kd);
    give(std::move(r), out);
  });
}

dvm_status dvm_var(dvm_tensor x, const int* axes, int naxes, int64_t correction, int keepdim, dvm_tensor* out) {
  return spread("dvm_var", false, x, axes, naxes, correction, keepdim, out);
}

dvm_status dvm_std(dvm_tensor x, const int* axes, int naxes, int64_t correction, int keepdim, dvm_tensor* out) {
  return spread("dvm_std", true, x, axes, naxes, correction, keepdim, out);
}

dvm_status dvm_clamp(dvm_tensor x, float lo, float hi, dvm_tensor* out) {
  DVM_NEED(x, "dvm_clamp");
  DVM_NEED(out, "dvm_clamp");
  return guarded([&] { give(dvm::clamp(x->t, lo, hi), out); });
}

dvm_status dvm_clamp_int(dvm_tensor x, int64_t lo, int64_t hi, dvm_tensor* out) {
  DVM_NEED(x, "dvm_clamp_int");
  DVM_NEED(out, "dvm_clamp_int");
  return guarded([&] { give(dvm::clamp(x->t, lo, hi), out); });
}

dvm_status dvm_silu(dvm_tensor x, dvm_tensor* out) {
  DVM_NEED(x, "dvm_silu");
  DVM_NEED(out, "dvm_silu");
  return guarded([&] { give(dvm::silu(x->t), out); });
}

dvm_status dvm_masked_fill(dvm_tensor x, dvm_tensor mask, float value, dvm_tensor* out) {
  DVM_NEED(x, "dvm_masked_fill");
  DVM_NEED(mask, "dvm_masked_fill");
  DVM_NEED(out, "dvm_masked_fill");
  return guarded([&] { give(dvm::masked_fill(x->t, mask->t, value), out); });
}

dvm_status dvm_masked_fill_int(dvm_tensor x, dvm_tensor mask, int64_t value, dvm_tensor* out) {
  DVM_NEED(x, "dvm_masked_fill_int");
  DVM_NEED(mask, "dvm_masked_fill_int");
  DVM_NEED(out, "dvm_masked_fill_int");
  return guarded([&] { give(dvm::masked_fill(x->t, mask->t, value), out); });
}

dvm_status dvm_tril(dvm_tensor x, int64_t diagonal, dvm_tensor* out) {
  DVM_NEED(x, "dvm_tril");
  DVM_NEED(out, "dvm_tril");
  return guarded([&] { give(dvm::tril(x->t, diagonal), out); });
}

dvm_status dvm_triu(dvm_tensor x, int64_t diagonal, dvm_tensor* out) {
  DVM_NEED(x, "dvm_triu");
  DVM_NEED(out, "dvm_triu");
  return guarded([&] { give(dvm::triu(x->t, diagonal), out); });
}

dvm_status dvm_softmax(dvm_tensor x, int axis, dvm_tensor* out) {
  DVM_NEED(x, "dvm_softmax");
  DVM_NEED(out, "dvm_softmax");
  return guarded([&] { give(dvm::softmax(x->t, axis), out); });
}

dvm_status dvm_log_softmax(dvm_tensor x, int axis, dvm_tensor* out) {
  DVM_NEED(x, "dvm_log_softmax");
  DVM_NEED(out, "dvm_log_softmax");
  return guarded([&] { give(dvm::log_softmax(x->t, axis), out); });
}

dvm_status dvm_layer_norm(dvm_tensor x, const int64_t* normalized_shape, int rank, dvm_tensor weight, dvm_tensor bias,
                          float eps, dvm_tensor* out) {
  DVM_NEED(x, "dvm_layer_norm");
  DVM_NEED(out, "dvm_layer_norm");
  dvm::Shape s;
  if (!make_shape(normalized_shape, rank, &s))
    return invalid("dvm_layer_norm", "rank must be 0..8 with a normalized_shape array");
  return guarded([&] {
    give(dvm::layer_norm(x->t, s, weight ? weight->t : dvm::Tensor(), bias ? bias->t : dvm::Tensor(), eps), out);
  });
}

dvm_status dvm_matmul(dvm_tensor a, dvm_tensor b, dvm_tensor* out) {
  DVM_NEED(a, "dvm_matmul");
  DVM_NEED(b, "dvm_matmul");
  DVM_NEED(out, "dvm_matmul");
  return guarded([&] { give(dvm::matmul(a->t, b->t), out); });
}

dvm_status dvm_bmm(dvm_tensor a, dvm_tensor b, dvm_tensor* out) {
  DVM_NEED(a, "dvm_bmm");
  DVM_NEED(b, "dvm_bmm");
  DVM_NEED(out, "dvm_bmm");
  return guarded([&] { give(dvm::bmm(a->t, b->t), out); });
}

dvm_status dvm_linear(dvm_tensor x, dvm_tensor weight, dvm_tensor bias, dvm_tensor* out) {
  DVM_NEED(x, "dvm_linear");
  DVM_NEED(weight, "dvm_linear");
  DVM_NEED(out, "dvm_linear");
  return guarded([&] { give(dvm::linear(x->t, weight->t, bias ? bias->t : dvm::Tensor()), out); });
}

dvm_status dvm_addmm(dvm_tensor input, dvm_tensor a, dvm_tensor b, float beta, float alpha, dvm_tensor* out) {
  DVM_NEED(input, "dvm_addmm");
  DVM_NEED(a, "dvm_addmm");
  DVM_NEED(b, "dvm_addmm");
  DVM_NEED(out, "dvm_addmm");
  return guarded([&] { give(dvm::addmm(input->t, a->t, b->t, beta, alpha), out); });
}

dvm_status dvm_to(dvm_tensor x, int dtype, dvm_tensor* out) {
  DVM_NEED(x, "dvm_to");
  DVM_NEED(out, "dvm_to");
  if (!valid_dtype(dtype)) return unknown_dtype("dvm_to", dtype);
  return guarded([&] { give(x->t.to(static_cast<dvm::Dtype>(dtype)), out); });
}

dvm_status dvm_argmax(dvm_tensor x, int axis, int keepdim, dvm_tensor* out) {
  return arg_extreme("dvm_argmax", true, x, axis, keepdim, out);
}

dvm_status dvm_argmin(dvm_tensor x, int axis, int keepdim, dvm_tensor* out) {
  return arg_extreme("dvm_argmin", false, x, axis, keepdim, out);
}

dvm_status dvm_scaled_dot_product_attention(dvm_tensor q, dvm_tensor k, dvm_tensor v, dvm_tensor attn_mask,
                                            int is_causal, float scale, dvm_tensor* out) {
  const char* fn = "dvm_scaled_dot_product_attention";
  DVM_NEED(q, fn);
  DVM_NEED(k, fn);
  DVM_NEED(v, fn);
  DVM_NEED(out, fn);
  if (is_causal != 0 && is_causal != 1) return invalid(fn, "is_causal must be 0 or 1");
  return guarded([&] {
    give(dvm::scaled_dot_product_attention(q->t, k->t, v->t, attn_mask ? attn_mask->t : dvm::Tensor(), is_causal == 1,
                                           scale),
         out);
  });
}

dvm_status dvm_cat(const dvm_tensor* tensors, int n, int axis, dvm_tensor* out) {
  return join("dvm_cat", false, tensors, n, axis, out);
}

dvm_status dvm_stack(const dvm_tensor* tensors, int n, int axis, dvm_tensor* out) {
  return join("dvm_stack", true, tensors, n, axis, out);
}

dvm_status dvm_index_select(dvm_tensor x, int axis, dvm_tensor index, dvm_tensor* out) {
  DVM_NEED(x, "dvm_index_select");
  DVM_NEED(index, "dvm_index_select");
  DVM_NEED(out, "dvm_index_select");
  return guarded([&] { give(dvm::index_select(x->t, axis, index->t), out); });
}

dvm_status dvm_embedding(dvm_tensor ids, dvm_tensor weight, dvm_tensor* out) {
  DVM_NEED(ids, "dvm_embedding");
  DVM_NEED(weight, "dvm_embedding");
  DVM_NEED(out, "dvm_embedding");
  return guarded([&] { give(dvm::embedding(ids->t, weight->t), out); });
}

dvm_status dvm_gather(dvm_tensor x, int axis, dvm_tensor index, dvm_tensor* out) {
  DVM_NEED(x, "dvm_gather");
  DVM_NEED(index, "dvm_gather");
  DVM_NEED(out, "dvm_gather");
  return guarded([&] { give(dvm::gather(x->t, axis, index->t), out); });
}

dvm_status dvm_kv_cache_create(const int64_t* capacity_shape, int rank, int axis, int dtype, dvm_kv_cache* out) {
  DVM_NEED(out, "dvm_kv_cache_create");
  dvm::Shape s;
  if (!make_shape(capacity_shape, rank, &s))
    return invalid("dvm_kv_cache_create", "rank must be 0..8 with a capacity_shape array");
  if (!valid_dtype(dtype)) return unknown_dtype("dvm_kv_cache_create", dtype);
  return guarded([&] { *out = new dvm_kv_cache_s{dvm::KVCache(s, axis, static_cast<dvm::Dtype>(dtype))}; });
}

dvm_status dvm_kv_cache_append(dvm_kv_cache c, dvm_tensor rows, dvm_tensor* out) {
  DVM_NEED(c, "dvm_kv_cache_append");
  DVM_NEED(rows, "dvm_kv_cache_append");
  DVM_NEED(out, "dvm_kv_cache_append");
  return guarded([&] { give(c->c.append(rows->t), out); });
}

dvm_status dvm_kv_cache_values(dvm_kv_cache c, dvm_tensor* out) {
  DVM_NEED(c, "dvm_kv_cache_values");
  DVM_NEED(out, "dvm_kv_cache_values");
  return guarded([&] { give(c->c.values(), out); });
}

dvm_status dvm_kv_cache_size(dvm_kv_cache c, int64_t* size) {
  DVM_NEED(c, "dvm_kv_cache_size");
  DVM_NEED(size, "dvm_kv_cache_size");
  *size = c->c.size();
  return DVM_OK;
}

dvm_status dvm_kv_cache_clear(dvm_kv_cache c) {
  DVM_NEED(c, "dvm_kv_cache_clear");
  return guarded([&] { c->c.clear(); });
}

void dvm_kv_cache_destroy(dvm_kv_cache c) { delete c; }

dvm_status dvm_reshape(dvm_tensor x, const int64_t* shape, int rank, dvm_tensor* out) {
  DVM_NEED(x, "dvm_reshape");
  DVM_NEED(out, "dvm_reshape");
  dvm::Shape s;
  if (!make_shape(shape, rank, &s)) return invalid("dvm_reshape", "rank must be 0..8 with a shape array");
  return guarded([&] { give(x->t.reshape(s), out); });
}

dvm_status dvm_permute(dvm_tensor x, const int* axes, int rank, dvm_tensor* out) {
  DVM_NEED(x, "dvm_permute");
  DVM_NEED(out, "dvm_permute");
  if (rank < 0 || rank > DVM_MAX_RANK || (rank > 0 && !axes))
    return invalid("dvm_permute", "rank must be 0..8 with an axes array");
  return guarded([&] { give(x->t.permute(std::vector<int>(axes, axes + rank)), out); });
}

dvm_status dvm_transpose(dvm_tensor x, int a, int b, dvm_tensor* out) {
  DVM_NEED(x, "dvm_transpose");
  DVM_NEED(out, "dvm_transpose");
  return guarded([&] { give(x->t.transpose(a, b), out); });
}

dvm_status dvm_slice(dvm_tensor x, int axis, int64_t start, int64_t end, int64_t step, dvm_tensor* out) {
  DVM_NEED(x, "dvm_slice");
  DVM_NEED(out, "dvm_slice");
  return guarded([&] { give(x->t.slice(axis, start, end, step), out); });
}

dvm_status dvm_squeeze(dvm_tensor x, int axis, dvm_tensor* out) {
  DVM_NEED(x, "dvm_squeeze");
  DVM_NEED(out, "dvm_squeeze");
  return guarded([&] { give(axis == DVM_ALL_AXES ? x->t.squeeze() : x->t.squeeze(axis), out); });
}

dvm_status dvm_unsqueeze(dvm_tensor x, int axis, dvm_tensor* out) {
  DVM_NEED(x, "dvm_unsqueeze");
  DVM_NEED(out, "dvm_unsqueeze");
  return guarded([&] { give(x->t.unsqueeze(axis), out); });
}

dvm_status dvm_flatten(dvm_tensor x, int start_axis, int end_axis, dvm_tensor* out) {
  DVM_NEED(x, "dvm_flatten");
  DVM_NEED(out, "dvm_flatten");
  return guarded([&] { give(x->t.flatten(start_axis, end_axis), out); });
}

dvm_status dvm_narrow(dvm_tensor x, int axis, int64_t start, int64_t length, dvm_tensor* out) {
  DVM_NEED(x, "dvm_narrow");
  DVM_NEED(out, "dvm_narrow");
  return guarded([&] { give(x->t.narrow(axis, start, length), out); });
}

dvm_status dvm_split(dvm_tensor x, const int64_t* sizes, int n, int axis, dvm_tensor* outs) {
  DVM_NEED(x, "dvm_split");
  if (n < 0 || (n > 0 && (!sizes || !outs))) return invalid("dvm_split", "n must be >= 0 with sizes and outs arrays");
  return guarded([&] {
    const std::vector<dvm::Tensor> pieces = x->t.split(std::vector<int64_t>(sizes, sizes + n), axis);
    // Every handle first, then the outputs: all or none.
    std::vector<std::unique_ptr<dvm_tensor_s>> handles;
    handles.reserve(pieces.size());
    for (const dvm::Tensor& p : pieces) handles.push_back(std::make_unique<dvm_tensor_s>(dvm_tensor_s{p}));
    for (size_t i = 0; i < handles.size(); ++i) outs[i] = handles[i].release();
  });
}

dvm_status dvm_expand(dvm_tensor x, const int64_t* shape, int rank, dvm_tensor* out) {
  DVM_NEED(x, "dvm_expand");
  DVM_NEED(out, "dvm_expand");
  dvm::Shape s;
  if (!make_shape(shape, rank, &s)) return invalid("dvm_expand", "rank must be 0..8 with a shape array");
  return guarded([&] { give(x->t.expand(s), out); });
}

dvm_status dvm_contiguous(dvm_tensor x, dvm_tensor* out) {
  DVM_NEED(x, "dvm_contiguous");
  DVM_NEED(out, "dvm_contiguous");
  return guarded([&] { give(x->t.contiguous(), out); });
}

dvm_status dvm_save_weights(const char* path, const char* const* names, const dvm_tensor* tensors, int n) {
  const char* fn = "dvm_save_weights";
  DVM_NEED(path, fn);
  if (n < 0 || (n > 0 && (!names || !tensors))) return invalid(fn, "n must be >= 0 with names and tensors arrays");
  for (int i = 0; i < n; ++i)
    if (!names[i] || !tensors[i])
      return fail(DVM_INVALID_ARGUMENT, std::string(fn) + ": " + (names[i] ? "tensors[" : "names[") +
                                            std::to_string(i) + "] is null");
  return guarded([&] {
    std::vector<dvm::NamedTensor> ts;
    ts.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) ts.push_back({names[i], tensors[i]->t});
    dvm::save_weights(path, ts);
  });
}

dvm_status dvm_load_weights(const char* path, dvm_weights* out) {
  DVM_NEED(path, "dvm_load_weights");
  DVM_NEED(out, "dvm_load_weights");
  return guarded([&] { *out = new dvm_weights_s{dvm::load_weights(path)}; });
}

dvm_status dvm_weights_count(dvm_weights w, int64_t* n) {
  DVM_NEED(w, "dvm_weights_count");
  DVM_NEED(n, "dvm_weights_count");
  *n = static_cast<int64_t>(w->w.size());
  return DVM_OK;
}

dvm_status dvm_weights_name(dvm_weights w, int64_t i, const char** name) {
  DVM_NEED(w, "dvm_weights_name");
  DVM_NEED(name, "dvm_weights_name");
  if (const dvm_status s = weights_index("dvm_weights_name", w, i); s != DVM_OK) return s;
  *name = w->w[static_cast<size_t>(i)].name.c_str();
  return DVM_OK;
}

dvm_status dvm_weights_tensor(dvm_weights w, int64_t i, dvm_tensor* out) {
  DVM_NEED(w, "dvm_weights_tensor");
  DVM_NEED(out, "dvm_weights_tensor");
  if (const dvm_status s = weights_index("dvm_weights_tensor", w, i); s != DVM_OK) return s;
  return guarded([&] { give(w->w[static_cast<size_t>(i)].tensor, out); });
}

dvm_status dvm_weights_find(dvm_weights w, const char* name, dvm_tensor* out) {
  DVM_NEED(w, "dvm_weights_find");
  DVM_NEED(name, "dvm_weights_find");
  DVM_NEED(out, "dvm_weights_find");
  for (const dvm::NamedTensor& t : w->w)
    if (t.name == name) return guarded([&] { give(t.tensor, out); });
  return fail(DVM_INVALID_ARGUMENT, std::string("dvm_weights_find: no tensor named \"") + name + "\"");
}

void dvm_weights_free(dvm_weights w) { delete w; }

dvm_status dvm_graph_new(dvm_graph* out) {
  DVM_NEED(out, "dvm_graph_new");
  return guarded([&] { *out = new dvm_graph_s{}; });
}

dvm_status dvm_graph_symbol(dvm_graph g, const char* name, int64_t* dim) {
  DVM_NEED(g, "dvm_graph_symbol");
  DVM_NEED(name, "dvm_graph_symbol");
  DVM_NEED(dim, "dvm_graph_symbol");
  return guarded([&] { *dim = g->g.symbol(name); });
}

dvm_status dvm_graph_input(dvm_graph g, const char* name, const int64_t* shape, int rank, dvm_dtype dtype,
                           dvm_tensor* out) {
  DVM_NEED(g, "dvm_graph_input");
  DVM_NEED(name, "dvm_graph_input");
  DVM_NEED(out, "dvm_graph_input");
  if (rank < 0 || rank > DVM_MAX_RANK || (rank > 0 && !shape))
    return invalid("dvm_graph_input", "rank outside [0, DVM_MAX_RANK] or a null shape");
  if (!valid_dtype(dtype)) return unknown_dtype("dvm_graph_input", dtype);
  return guarded([&] {
    std::vector<dvm::Dim> dims(shape, shape + rank);
    give(g->g.input(name, dims, static_cast<dvm::Dtype>(dtype)), out);
  });
}

dvm_status dvm_graph_output(dvm_graph g, const char* name, dvm_tensor t) {
  DVM_NEED(g, "dvm_graph_output");
  DVM_NEED(name, "dvm_graph_output");
  DVM_NEED(t, "dvm_graph_output");
  return guarded([&] { g->g.output(name, t->t); });
}

dvm_status dvm_graph_compile(dvm_graph g, dvm_executable* out) {
  DVM_NEED(g, "dvm_graph_compile");
  DVM_NEED(out, "dvm_graph_compile");
  return guarded([&] {
    auto e = std::make_unique<dvm_executable_s>();
    e->e = g->g.compile();
    *out = e.release();
  });
}

void dvm_graph_free(dvm_graph g) { delete g; }


dvm_status dvm_executable_run(dvm_executable e, const char* const* input_names, const void* const* inputs,
                              int n_inputs, const char* const* output_names, void* const* outputs, int n_outputs,
                              const char* const* symbols, const int64_t* values, int n_symbols) {
  DVM_NEED(e, "dvm_executable_run");
  const char* fn = "dvm_executable_run";
  for (dvm_status st : {check_pairs(fn, "inputs", input_names, inputs, n_inputs),
                        check_pairs(fn, "outputs", output_names, outputs, n_outputs),
                        check_pairs(fn, "symbols", symbols, values, n_symbols)})
    if (st != DVM_OK) return st;
  return guarded([&] {
    dvm::GraphInputs in;
    dvm::GraphOutputs out;
    dvm::Bindings b;
    pairs(input_names, inputs, n_inputs, &in);
    pairs(output_names, outputs, n_outputs, &out);
    pairs(symbols, values, n_symbols, &b);
    e->e.run(in, out, b);
  });
}

dvm_status dvm_executable_shape(dvm_executable e, const char* name, const char* const* symbols,
                                const int64_t* values, int n_symbols, int64_t* shape, int* rank) {
  DVM_NEED(e, "dvm_executable_shape");
  DVM_NEED(name, "dvm_executable_shape");
  DVM_NEED(shape, "dvm_executable_shape");
  DVM_NEED(rank, "dvm_executable_shape");
  if (const dvm_status st = check_pairs("dvm_executable_shape", "symbols", symbols, values, n_symbols); st != DVM_OK)
    return st;
  return guarded([&] {
    dvm::Bindings b;
    pairs(symbols, values, n_symbols, &b);
    const dvm::Shape s = e->e.shape(name, b);
    for (int i = 0; i < s.rank(); ++i) shape[i] = s[i];
    *rank = s.rank();
  });
}

dvm_status dvm_executable_memory(dvm_executable e, const char* const* symbols, const int64_t* values, int n_symbols,
                                 int64_t* bytes) {
  DVM_NEED(e, "dvm_executable_memory");
  DVM_NEED(bytes, "dvm_executable_memory");
  if (const dvm_status st = check_pairs("dvm_executable_memory", "symbols", symbols, values, n_symbols); st != DVM_OK)
    return st;
  return guarded([&] {
    dvm::Bindings b;
    pairs(symbols, values, n_symbols, &b);
    *bytes = e->e.memory(b);
  });
}

dvm_status dvm_executable_save(dvm_executable e, const char* path) {
  DVM_NEED(e, "dvm_executable_save");
  DVM_NEED(path, "dvm_executable_save");
  return guarded([&] { e->e.save(path); });
}

dvm_status dvm_executable_load(const char* path, dvm_executable* out) {
  DVM_NEED(path, "dvm_executable_load");
  DVM_NEED(out, "dvm_executable_load");
  return guarded([&] {
    auto e = std::make_unique<dvm_executable_s>();
    e->e = dvm::Executable::load(path);
    *out = e.release();
  });
}

void dvm_executable_free(dvm_executable e) { delete e; }

dvm_status dvm_set_num_threads(int n) {
  return guarded([&] { dvm::set_num_threads(n); });
}
dvm_status dvm_set_parallel_for(dvm_parallel_for_fn fn, void* host, int workers) {
  return guarded([&] { dvm::set_parallel_for(fn, host, workers); });
}
dvm_status dvm_set_isa(const char* name) {
  DVM_NEED(name, "dvm_set_isa");
  return guarded([&] { dvm::set_isa(name); });
}
dvm_status dvm_get_isa(char* out, size_t bytes) {
  DVM_NEED(out, "dvm_get_isa");
  return guarded([&] {
    const std::string s = dvm::isa();
    if (bytes < s.size() + 1)
      throw dvm::Error("dvm_get_isa: " + std::to_string(bytes) + " bytes of room for \"" + s + "\" (expected " +
                       std::to_string(s.size() + 1) + ")");
    std::memcpy(out, s.c_str(), s.size() + 1);
  });
}
dvm_status dvm_set_tier_mode(int mode) {
  if (mode < 0 || mode > DVM_TIER_EAGER)
    return invalid("dvm_set_tier_mode", "unknown mode");
  return guarded([&] {
    dvm::set_tier_mode(mode == DVM_TIER_OFF ? dvm::TierMode::Off
                       : mode == DVM_TIER_AUTO ? dvm::TierMode::Auto
                                               : dvm::TierMode::Eager);
  });
}
dvm_status dvm_set_jit_threshold(int64_t calls) {
  return guarded([&] { dvm::set_jit_threshold(calls); });
}
dvm_status dvm_set_trace_limit(int64_t nodes) {
  return guarded([&] { dvm::set_trace_limit(nodes); });
}
dvm_status dvm_set_kernel_cache_capacity(int64_t kernels) {
  return guarded([&] { dvm::set_kernel_cache_capacity(kernels); });
}
dvm_status dvm_wait_for_jit(void) {
  return guarded([] { dvm::wait_for_jit(); });
}

dvm_status dvm_get_stats(dvm_stats* out) {
  DVM_NEED(out, "dvm_get_stats");
  return guarded([&] {
    const dvm::Stats s = dvm::stats();
    *out = dvm_stats{s.flushes,     s.nodes_recorded, s.nodes_computed, s.kernels_launched, s.kernels_run,
                     s.kernels_compiled, s.cache_hits, s.jit_compiles, s.jit_failures, s.jit_code_bytes,
                     s.new_shapes};
  });
}
dvm_status dvm_reset_stats(void) {
  return guarded([] { dvm::reset_stats(); });
}

dvm_status dvm_get_memory_stats(dvm_memory_stats* out) {
  DVM_NEED(out, "dvm_get_memory_stats");
  return guarded([&] {
    const dvm::MemoryStats m = dvm::memory_stats();
    *out = dvm_memory_stats{m.live_bytes, m.cached_bytes, m.peak_bytes, m.limit_bytes};
  });
}
dvm_status dvm_get_weight_copy_bytes(int64_t* out) {
  DVM_NEED(out, "dvm_get_weight_copy_bytes");
  return guarded([&] { *out = dvm::memory_stats().weight_copy_bytes; });
}
dvm_status dvm_set_memory_limit(int64_t bytes) {
  return guarded([&] { dvm::set_memory_limit(bytes); });
}
dvm_status dvm_trim(void) {
  return guarded([] { dvm::trim(); });
}

dvm_status dvm_wait_for_jit_timeout(double timeout_ms, int* done) {
  DVM_NEED(done, "dvm_wait_for_jit_timeout");
  return guarded([&] { *done = dvm::wait_for_jit(timeout_ms) ? 1 : 0; });
}
dvm_status dvm_set_compile_executor(dvm_compile_executor_fn fn, void* host) {
  return guarded([&] { dvm::set_compile_executor(fn, host); });
}
dvm_status dvm_set_allocator(dvm_allocate_fn allocate, dvm_deallocate_fn deallocate, void* host) {
  return guarded([&] { dvm::set_allocator(allocate, deallocate, host); });
}
dvm_status dvm_set_log_callback(dvm_log_fn fn, void* ctx) {
  return guarded([&] {
    // The C callback takes its level as an int: a trampoline converts.
    static std::mutex mu;
    static std::atomic<dvm_log_fn> c_fn{nullptr};
    std::lock_guard<std::mutex> lock(mu);
    dvm::set_log_callback(nullptr, nullptr);  // no message reaches the old ctx with the new fn
    c_fn.store(fn);
    if (fn)
      dvm::set_log_callback(
          [](void* c, dvm::LogLevel level, const char* text) { c_fn.load()(c, static_cast<int>(level), text); }, ctx);
  });
}
dvm_status dvm_set_perf_map(int on) {
  if (on != 0 && on != 1) return invalid("dvm_set_perf_map", "expected 0 or 1");
  return guarded([&] { dvm::set_perf_map(on == 1); });
}

dvm_status dvm_set_weight_copies(int on) {
  if (on != 0 && on != 1) return invalid("dvm_set_weight_copies", "expected 0 or 1");
  return guarded([&] { dvm::set_weight_copies(on == 1); });
}
dvm_status dvm_warm_up(dvm_frame_fn frame, void* ctx, dvm_warm_up_report* out) {
  DVM_NEED(frame, "dvm_warm_up");
  return guarded([&] {
    int rc = 0;
    const dvm::WarmUpReport r = dvm::warm_up([&] { rc = frame(ctx); });
    if (rc != 0) throw dvm::Error("dvm_warm_up: the frame function returned " + std::to_string(rc));
    if (out) *out = dvm_warm_up_report{r.kernels, r.compiled, r.declined, r.ms};
  });
}
dvm_status dvm_precompile(void) {
  return guarded([] { dvm::precompile(); });
}

dvm_status dvm_profile_begin(void) {
  return guarded([] { dvm::profile_begin(); });
}
dvm_status dvm_profile_end(const char* path) {
  DVM_NEED(path, "dvm_profile_end");
  return guarded([&] { dvm::profile_end(path); });
}
dvm_status dvm_set_fusion_record(int on) {
  if (on != 0 && on != 1) return invalid("dvm_set_fusion_record", "expected 0 or 1");
  return guarded([&] { dvm::set_fusion_record(on == 1); });
}
dvm_status dvm_dump_fusion(const char* path) {
  DVM_NEED(path, "dvm_dump_fusion");
  return guarded([&] { dvm::dump_fusion(path); });
}

}  // extern "C"
