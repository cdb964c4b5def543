// argmax and argmin (compositions of a max or min reduction and a min
// reduction of indices: float32 lanes for floats along an axis of at most
// 2^24, int64 lanes otherwise) against a scalar reference written here: the
// index of the first extreme along the axis, the first NaN winning both
// (torch's CPU rule). Generated shapes of rank 1-4, every axis (negative
// too), keepdim or not, every accepted type with ties drawn on purpose and
// NaNs in the floating ones; transposed, permuted and sliced views; inputs
// fused from other ops; the all-elements form; 0-d tensors; the errors. On
// every target (the JIT runs the float-lane index kernels; the int64-lane
// ones, which it declines, still run there on the interpreter).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tests/tracer/int_testing.h"
#include "tracer/buffer_pool.h"

namespace dvm::testing {
namespace {

class Argmax : public IsaTest {};

// A tensor's values as the test knows them: doubles for the floating types
// (each exactly representable in the type), int64 for the integer ones.
struct Values {
  Dtype type = Dtype::F32;
  std::vector<double> f;
  std::vector<int64_t> i;
  int64_t size() const { return static_cast<int64_t>(is_floating(type) ? f.size() : i.size()); }
};

Tensor make_tensor(const Values& v, const Shape& s) {
  switch (v.type) {
    case Dtype::F32: {
      std::vector<float> x(v.f.begin(), v.f.end());
      return Tensor::from_vector(x, s);
    }
    case Dtype::F16: {
      std::vector<Half> x;
      for (double e : v.f) x.push_back(to_half(static_cast<float>(e)));
      return Tensor::from_vector(x, s);
    }
    case Dtype::BF16: {
      std::vector<BFloat16> x;
      for (double e : v.f) x.push_back(to_bfloat16(static_cast<float>(e)));
      return Tensor::from_vector(x, s);
    }
    default: return make(v.type, v.i, s);
  }
}

// e rounded to the floating type t (as its tensor will hold it).
double round_to(Dtype t, double e) {
  const float f = static_cast<float>(e);
  if (t == Dtype::F16) return to_float(to_half(f));
  if (t == Dtype::BF16) return to_float(to_bfloat16(f));
  return f;
}

// n values of type t, most from a small set so that rows hold ties (-0.0
// and 0.0 among them: equal, so tied), the rest random, the types'
// extremes included; for the floating types NaNs at rate nan_rate (a
// negative NaN now and then).
Values random_values(Dtype t, int64_t n, std::mt19937& rng, double nan_rate) {
  Values v;
  v.type = t;
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  if (is_floating(t)) {
    static const double small[] = {-2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.0, 3.0, -INFINITY, INFINITY};
    for (int64_t k = 0; k < n; ++k) {
      double e;
      if (u01(rng) < nan_rate) e = rng() % 4 ? NAN : -NAN;
      else if (rng() % 10 < 7) e = small[rng() % std::size(small)];
      else e = round_to(t, std::uniform_real_distribution<double>(-4.0, 4.0)(rng));
      v.f.push_back(e);
    }
    return v;
  }
  std::vector<int64_t> small;
  if (t == Dtype::U8) small = {0, 255, 1, 128, 7};
  else if (t == Dtype::I32) small = {INT32_MIN, INT32_MAX, -1, 0, 1, 2, 7};
  // 2^53 and 2^53 + 1 are one double: the int64 ties must be exact.
  else small = {INT64_MIN, INT64_MAX, INT64_MAX - 1, int64_t{1} << 53, (int64_t{1} << 53) + 1, -1, 0, 1};
  std::mt19937_64 wide(rng());
  for (int64_t k = 0; k < n; ++k) {
    int64_t e;
    if (rng() % 10 < 7) e = small[rng() % small.size()];
    else if (t == Dtype::U8) e = static_cast<int64_t>(rng() % 256);
    else if (t == Dtype::I32) e = static_cast<int32_t>(rng());
    else e = static_cast<int64_t>(wide());
    v.i.push_back(e);
  }
  return v;
}

// The reference: along axis of s, the index of the first NaN if there is
// one, else of the first largest (smallest) value; out in row-major order
// of the result (the same with keepdim or without).
std::vector<int64_t> reference(const Values& v, const std::vector<int64_t>& s, int axis, bool largest) {
  int64_t outer = 1, inner = 1;
  for (int k = 0; k < axis; ++k) outer *= s[static_cast<size_t>(k)];
  for (size_t k = static_cast<size_t>(axis) + 1; k < s.size(); ++k) inner *= s[k];
  const int64_t n = s[static_cast<size_t>(axis)];
  std::vector<int64_t> out;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      auto at = [&](int64_t j) { return static_cast<size_t>((o * n + j) * inner + in); };
      int64_t best = 0;
      for (int64_t j = 0; j < n; ++j) {
        if (is_floating(v.type)) {
          const double e = v.f[at(j)];
          if (std::isnan(e)) {
            best = j;
            break;
          }
          if (largest ? e > v.f[at(best)] : e < v.f[at(best)]) best = j;
        } else {
          const int64_t e = v.i[at(j)];
          if (largest ? e > v.i[at(best)] : e < v.i[at(best)]) best = j;
        }
      }
      out.push_back(best);
    }
  }
  return out;
}

// The shape the result must have.
Shape result_shape(const std::vector<int64_t>& s, int axis, bool keepdim) {
  Shape out;
  for (size_t k = 0; k < s.size(); ++k)
    if (static_cast<int>(k) != axis) out.push_back(s[k]);
    else if (keepdim) out.push_back(1);
  return out;
}

// One checked call: y (argmax or argmin of a tensor holding v, shape s,
// along axis, normalized; or all elements when axis is -1 and all) against
// the reference. Returns false on a mismatch, reported with `what`.
bool check(const Tensor& y, const Values& v, const std::vector<int64_t>& s, int axis, bool keepdim, bool largest,
           bool all, const std::string& what) {
  std::vector<int64_t> want;
  Shape want_shape;
  if (all) {
    want = reference(v, {v.size()}, 0, largest);
  } else {
    want = reference(v, s, axis, largest);
    want_shape = result_shape(s, axis, keepdim);
  }
  EXPECT_EQ(y.dtype(), Dtype::I64) << what;
  EXPECT_EQ(y.shape(), want_shape) << what;
  if (y.dtype() != Dtype::I64 || y.shape() != want_shape) return false;
  const std::vector<int64_t> got = y.to_vector<int64_t>();
  for (size_t k = 0; k < want.size(); ++k) {
    if (got[k] != want[k]) {
      ADD_FAILURE() << what << ": result " << k << " is " << got[k] << ", expected " << want[k];
      return false;
    }
  }
  return true;
}

std::vector<int64_t> random_shape(std::mt19937& rng) {
  const int rank = 1 + static_cast<int>(rng() % 4);
  std::vector<int64_t> s;
  for (int k = 0; k < rank; ++k) s.push_back(1 + static_cast<int64_t>(rng() % 40));
  // At most 20000 elements: shrink the largest extent until it fits.
  while (numel_of(s) > 20000) {
    auto big = std::max_element(s.begin(), s.end());
    *big = std::max<int64_t>(1, *big / 2);
  }
  return s;
}

const Dtype kTypes[] = {Dtype::F32, Dtype::F16, Dtype::BF16, Dtype::I32, Dtype::I64, Dtype::U8};

// Generated cases of every accepted type: argmax and argmin along a random
// axis (negative half of the time), keepdim or not, now and then the
// all-elements form, computed in one flush; plus rows of several passes.
TEST_P(Argmax, GeneratedInputsMatchAScalarReference) {
  std::mt19937 rng(2024);
  for (Dtype t : kTypes) {
    int failures = 0;
    for (int iter = 0; iter < 48 && failures < 3; ++iter) {
      std::vector<int64_t> s = random_shape(rng);
      if (iter == 0) s = {3, 5003};  // rows longer than 4096 elements
      if (iter == 1) s = {4099, 2};  // a long column
      const int rank = static_cast<int>(s.size());
      const double nan_rate = !is_floating(t) ? 0.0 : iter % 3 == 0 ? 0.0 : iter % 3 == 1 ? 0.01 : 0.2;
      const Values v = random_values(t, numel_of(s), rng, nan_rate);
      const Tensor x = make_tensor(v, Shape(s));
      const int axis = static_cast<int>(rng() % static_cast<uint32_t>(rank));
      const int given = rng() % 2 ? axis : axis - rank;
      const bool keepdim = rng() % 2;
      const bool all = rng() % 4 == 0;
      const Tensor ymax = all ? x.argmax() : x.argmax(given, keepdim);
      const Tensor ymin = all ? x.argmin() : x.argmin(given, keepdim);
      const std::string what = cat(dtype_name(t), shape_str(s), " axis ", given, all ? " (all elements)" : "",
                                   !all && keepdim ? " keepdim" : "", " NaN rate ", nan_rate);
      if (!check(ymax, v, s, axis, keepdim, true, all, "argmax of " + what)) ++failures;
      if (!check(ymin, v, s, axis, keepdim, false, all, "argmin of " + what)) ++failures;
    }
  }
}

// The all-elements form past 65536 elements: one index range to 2^18,
// then x read as rows of 65536 and a tail (float32 lanes for floats, int64
// for integers): lengths with and without a tail, the extreme (and a NaN)
// placed in the first row, a later row, the tail and across a row's edge,
// ties between pieces. It holds no index buffer of x's size: the pool's
// peak rises by about x's own buffer, not 8 bytes an element more.
TEST_P(Argmax, AllElementsOfLongTensorsMatchTheReference) {
  std::mt19937 rng(77);
  for (Dtype t : kTypes) {
    // One range (to 2^18), rows of 2^16 and a tail, rows without a tail.
    for (int64_t n : {int64_t{131072}, int64_t{200003}, int64_t{300001}, int64_t{1} << 19}) {
      for (int place = 0; place < 5; ++place) {
        Values v = random_values(t, n, rng, 0.0);
        // The extremes at chosen places: 0, 65535 / 65536 (a row's edge),
        // a later row, the tail (or the end), twice (a tie across pieces).
        const int64_t at[] = {0, 65535, 65536 + 7, n - 1, 3};
        const int64_t where_max = at[place], tie = place == 4 ? n - 2 : -1;
        if (is_floating(t)) {
          for (double& e : v.f) e = std::isinf(e) ? 0.5 : e;  // the placed ones are the only extremes
          v.f[static_cast<size_t>(where_max)] = 1e4;
          if (tie >= 0) v.f[static_cast<size_t>(tie)] = 1e4;
        } else {
          const int64_t hi = t == Dtype::U8 ? 255 : t == Dtype::I32 ? INT32_MAX : INT64_MAX;
          for (int64_t& e : v.i) e = e == hi ? hi - 1 : e;
          v.i[static_cast<size_t>(where_max)] = hi;
          if (tie >= 0) v.i[static_cast<size_t>(tie)] = hi;
        }
        const Tensor x = make_tensor(v, Shape{n});
        const std::string what = cat(dtype_name(t), " n ", n, " extreme at ", where_max, tie >= 0 ? " and a tie" : "");
        const Shape s2 = n % 2 == 0 ? Shape{2, n / 2} : Shape{n};  // a rank-2 x too
        check(x.reshape(s2).argmax(), v, {n}, 0, false, true, true, "argmax of " + what);
        check(x.argmin(), v, {n}, 0, false, false, true, "argmin of " + what);
        if (is_floating(t) && place < 4) {  // a NaN wins both, before or after the extreme
          Values w = v;
          w.f[static_cast<size_t>(at[(place + 2) % 4])] = NAN;
          const Tensor xn = make_tensor(w, Shape{n});
          check(xn.argmax(), w, {n}, 0, false, true, true, "argmax with a NaN of " + what);
          check(xn.argmin(), w, {n}, 0, false, false, true, "argmin with a NaN of " + what);
        }
      }
    }
  }
  // Memory: the peak over a float32 x of 2^20 elements (4 MiB) grows by far
  // less than the 8 MiB an index per element would take.
  const int64_t n = int64_t{1} << 20;
  const Tensor x = Tensor::uniform({n}, 5);
  x.sync();
  trim();
  detail::pool_reset_peak();
  const int64_t before = memory_stats().live_bytes;
  EXPECT_GE(x.argmax().to_vector<int64_t>()[0], 0);
  EXPECT_LT(memory_stats().peak_bytes - before, int64_t{2} << 20) << "an index buffer as large as x";
}

// A NaN before, after and between the extremes, rows of every length to
// 33 (each vector tail) and one of 4099; every position of a lone NaN.
TEST_P(Argmax, FirstNanWinsBoth) {
  for (Dtype t : {Dtype::F32, Dtype::F16, Dtype::BF16}) {
    for (int64_t n = 1; n <= 33; ++n) {
      for (int64_t at = 0; at < n; ++at) {
        // 0 1 2 ... with the maximum n - 1 at the end and a second NaN at
        // the end when there is room after the first.
        Values v;
        v.type = t;
        for (int64_t k = 0; k < n; ++k) v.f.push_back(static_cast<double>(k % 7));
        v.f[static_cast<size_t>(at)] = NAN;
        if (at + 2 < n) v.f[static_cast<size_t>(n - 1)] = -NAN;
        const Tensor x = make_tensor(v, Shape{1, n});
        const std::string what = cat(dtype_name(t), "[1, ", n, "] with a NaN at ", at);
        EXPECT_EQ(x.argmax(1).to_vector<int64_t>(), std::vector<int64_t>{at}) << what;
        EXPECT_EQ(x.argmin(-1).to_vector<int64_t>(), std::vector<int64_t>{at}) << what;
        EXPECT_EQ(x.argmax().to_vector<int64_t>(), std::vector<int64_t>{at}) << what;
      }
    }
    Values v;
    v.type = t;
    for (int64_t k = 0; k < 4099; ++k) v.f.push_back(static_cast<double>(k % 5));
    v.f[4000] = NAN;
    const Tensor x = make_tensor(v, Shape{4099});
    EXPECT_EQ(x.argmax(0).to_vector<int64_t>(), std::vector<int64_t>{4000}) << dtype_name(t);
    EXPECT_EQ(x.argmin(0).to_vector<int64_t>(), std::vector<int64_t>{4000}) << dtype_name(t);
  }
}

// The values of a strided view of base: shape, strides and offset in
// elements.
Values strided(const Values& base, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
               int64_t offset) {
  Values out;
  out.type = base.type;
  std::vector<int64_t> idx(shape.size());
  for (int64_t f = 0; f < numel_of(shape); ++f) {
    unravel(f, shape, idx.data());
    int64_t at = offset;
    for (size_t k = 0; k < shape.size(); ++k) at += idx[k] * strides[k];
    if (is_floating(base.type)) out.f.push_back(base.f[static_cast<size_t>(at)]);
    else out.i.push_back(base.i[static_cast<size_t>(at)]);
  }
  return out;
}

// Transposed, permuted and sliced (stepped) views along every axis, and
// their all-elements forms (a reshape that copies).
TEST_P(Argmax, NonContiguousViews) {
  std::mt19937 rng(7);
  for (Dtype t : kTypes) {
    const std::vector<int64_t> s = {5, 19, 37};
    const Values base = random_values(t, numel_of(s), rng, is_floating(t) ? 0.02 : 0.0);
    const Tensor x = make_tensor(base, Shape(s));
    struct View {
      std::string name;
      Tensor t;
      std::vector<int64_t> shape, strides;
      int64_t offset;
    };
    const std::vector<View> views = {
        {"transpose(0, 2)", x.transpose(0, 2), {37, 19, 5}, {1, 37, 703}, 0},
        {"permute(1, 2, 0)", x.permute({1, 2, 0}), {19, 37, 5}, {37, 1, 703}, 0},
        {"slice(1, 1, 19, 2)", x.slice(1, 1, 19, 2), {5, 9, 37}, {703, 74, 1}, 37},
        {"slice(2, 3, 36, 3).transpose(1, 2)", x.slice(2, 3, 36, 3).transpose(1, 2), {5, 11, 19}, {703, 3, 37}, 3},
    };
    for (const View& view : views) {
      ASSERT_EQ(view.t.shape(), Shape(view.shape)) << view.name;
      const Values v = strided(base, view.shape, view.strides, view.offset);
      for (int axis = 0; axis < 3; ++axis) {
        for (bool largest : {true, false}) {
          const bool keepdim = axis == 1;
          const Tensor y = largest ? view.t.argmax(axis, keepdim) : view.t.argmin(axis, keepdim);
          check(y, v, view.shape, axis, keepdim, largest, false,
                cat(largest ? "argmax" : "argmin", " of ", dtype_name(t), " ", view.name, " axis ", axis));
        }
      }
      check(view.t.argmax(), v, view.shape, 0, false, true, true, cat("argmax() of ", dtype_name(t), " ", view.name));
      check(view.t.argmin(), v, view.shape, 0, false, false, true, cat("argmin() of ", dtype_name(t), " ", view.name));
    }
  }
}

// argmax of x * 2 + y (y broadcast along rows) and of where(x > y, x, -y)
// fuses the producer into the kernels that read it; the values are exact
// in every type (small integers and halves), so the reference is too. The
// result feeds a consumer (an index times 3 plus 1) as well.
TEST_P(Argmax, FusedProducersAndConsumers) {
  std::mt19937 rng(11);
  for (Dtype t : kTypes) {
    for (int iter = 0; iter < 12; ++iter) {
      const int64_t R = 1 + rng() % 9, C = 1 + rng() % 70;
      Values xv, yv;
      xv.type = yv.type = t;
      for (int64_t k = 0; k < R * C; ++k) {
        const int64_t e = static_cast<int64_t>(rng() % 9) - (t == Dtype::U8 ? 0 : 4);
        if (is_floating(t)) xv.f.push_back(static_cast<double>(e) / 2);
        else xv.i.push_back(e);
      }
      for (int64_t k = 0; k < C; ++k) {
        const int64_t e = static_cast<int64_t>(rng() % 5);
        if (is_floating(t)) yv.f.push_back(static_cast<double>(e));
        else yv.i.push_back(e);
      }
      if (is_floating(t) && rng() % 2) xv.f[rng() % xv.f.size()] = NAN;
      const Tensor x = make_tensor(xv, Shape{R, C}), y = make_tensor(yv, Shape{C});
      const Tensor two = is_floating(t) ? Tensor(2.0f) : Tensor::full(Shape{}, 2.0, t);
      // z = x * 2 + y and w = where(x > y, x, -y) (uint8: y - x, which wraps), as the test computes them.
      Values z, w;
      z.type = w.type = t;
      for (int64_t k = 0; k < R * C; ++k) {
        const size_t c = static_cast<size_t>(k % C), i = static_cast<size_t>(k);
        if (is_floating(t)) {
          z.f.push_back(xv.f[i] * 2 + yv.f[c]);
          w.f.push_back(xv.f[i] > yv.f[c] ? xv.f[i] : -yv.f[c]);
        } else {
          z.i.push_back(wrap(t == Dtype::I64 ? Dtype::I32 : t, xv.i[i] * 2 + yv.i[c]));
          w.i.push_back(xv.i[i] > yv.i[c] ? xv.i[i] : wrap(t == Dtype::I64 ? Dtype::I32 : t, -yv.i[c]));
        }
      }
      const Tensor zt = x * two + y;
      const Tensor wt = where(gt(x, y), x, neg(y));
      const std::string what = cat(dtype_name(t), "[", R, ", ", C, "]");
      const int axis = static_cast<int>(rng() % 2);
      const Tensor a = zt.argmax(-1), b = wt.argmin(axis, true), c = zt.argmin();
      const Tensor d = a * Tensor::full(Shape{}, 3.0, Dtype::I64) + Tensor::full(Shape{}, 1.0, Dtype::I64);
      check(a, z, {R, C}, 1, false, true, false, "argmax(x * 2 + y, -1) of " + what);
      check(b, w, {R, C}, axis, true, false, false, cat("argmin(where(x > y, x, -y), ", axis, ") of ", what));
      check(c, z, {R, C}, 0, false, false, true, "argmin() of x * 2 + y of " + what);
      const std::vector<int64_t> want = reference(z, {R, C}, 1, true);
      std::vector<int64_t> want_d;
      for (int64_t e : want) want_d.push_back(e * 3 + 1);
      EXPECT_EQ(d.dtype(), Dtype::I64) << what;
      EXPECT_EQ(d.to_vector<int64_t>(), want_d) << "argmax(x * 2 + y, -1) * 3 + 1 of " << what;
    }
  }
}

// 0-d tensors: index 0 for argmax(), argmax(0), argmax(-1), with keepdim
// too (torch); a one-element tensor gives 0 as well.
TEST_P(Argmax, ZeroDimensionalAndSingleElements) {
  for (Dtype t : kTypes) {
    Values v;
    v.type = t;
    if (is_floating(t)) v.f = {1.5};
    else v.i = {7};
    const Tensor x0 = make_tensor(v, Shape{});
    for (const Tensor& y : {x0.argmax(), x0.argmin(), x0.argmax(0), x0.argmin(-1), x0.argmax(-1, true)}) {
      EXPECT_EQ(y.dtype(), Dtype::I64) << dtype_name(t);
      EXPECT_EQ(y.shape(), Shape{}) << dtype_name(t);
      EXPECT_EQ(y.to_vector<int64_t>(), std::vector<int64_t>{0}) << dtype_name(t);
    }
    const Tensor x1 = make_tensor(v, Shape{1, 1});
    EXPECT_EQ(x1.argmax(1, true).shape(), (Shape{1, 1})) << dtype_name(t);
    EXPECT_EQ(x1.argmax(1, true).to_vector<int64_t>(), std::vector<int64_t>{0}) << dtype_name(t);
    EXPECT_EQ(x1.argmin().to_vector<int64_t>(), std::vector<int64_t>{0}) << dtype_name(t);
  }
}

// y computed alone (its operands already computed), with the kernels that
// ran; false (reported with `what`) when a target that runs machine code
// for float32 lanes and int64 stores (AVX-512's JIT) ran one on the
// interpreter.
bool ran_on_machine_code(const Tensor& y, bool want_jit, const std::string& what) {
  dvm::set_kernel_log(true);
  (void)dvm::take_kernel_log();
  y.sync();
  const std::vector<KernelRun> log = dvm::take_kernel_log();
  dvm::set_kernel_log(false);
  EXPECT_FALSE(log.empty()) << what;
  for (const KernelRun& k : log) {
    if (want_jit && k.tier != "jit") {
      ADD_FAILURE() << what << ": a " << k.form << " kernel ran on the " << k.tier << " tier";
      return false;
    }
  }
  return true;
}

// Floats along an axis of at most 2^24 elements find their indices in
// float32 lanes (exact there), in the reduction's kernel, which AVX-512's
// JIT runs as machine code, converting the int64 result at its store.
// Generated [R, C] of each floating type: short rows (a classifier's
// classes) and odd ones, single rows and columns, with NaNs (before and
// after the extreme), infinities, ties and -0.0 / 0.0, rows all equal, all
// NaN, all -inf, all inf; along the rows and the columns; and rows past
// the split length (split launches: their partial maxima combine
// propagating NaN).
TEST_P(Argmax, FloatIndicesRunInFloatLanesOnMachineCode) {
  const bool want_jit = std::string(GetParam().name) == "avx512_jit";
  std::mt19937 rng(4242);
  const int64_t cols[] = {1, 2, 3, 7, 8, 9, 10, 15, 16, 17, 31, 32, 33, 100, 1023};
  for (Dtype t : {Dtype::F32, Dtype::F16, Dtype::BF16}) {
    int failures = 0;
    for (size_t iter = 0; iter < 30 && failures < 3; ++iter) {
      const int64_t C = iter < std::size(cols) ? cols[iter] : 1 + static_cast<int64_t>(rng() % 300);
      const uint32_t most_rows = static_cast<uint32_t>(std::max<int64_t>(1, 30000 / C));
      const int64_t R = iter % 4 == 0 ? 1 : 1 + static_cast<int64_t>(rng() % most_rows);
      const double nan_rate = iter % 3 == 0 ? 0.0 : iter % 3 == 1 ? 0.03 : 0.3;
      Values v = random_values(t, R * C, rng, nan_rate);
      const double fill[] = {0.5, NAN, -INFINITY, INFINITY, -0.0};
      for (int64_t r = 0; r < R && r < static_cast<int64_t>(std::size(fill)); ++r)
        if (iter % 2 == 1)
          for (int64_t c = 0; c < C; ++c) v.f[static_cast<size_t>(r * C + c)] = fill[r];
      const Tensor x = make_tensor(v, Shape{R, C});
      x.sync();
      const std::string what = cat(dtype_name(t), "[", R, ", ", C, "] NaN rate ", nan_rate);
      for (int axis : {1, 0}) {
        for (bool largest : {true, false}) {
          const bool keepdim = axis == 0;
          const Tensor y = largest ? x.argmax(axis == 1 ? -1 : 0, keepdim) : x.argmin(axis, keepdim);
          const std::string w = cat(largest ? "argmax" : "argmin", " axis ", axis, " of ", what);
          if (!ran_on_machine_code(y, want_jit, w)) ++failures;
          if (!check(y, v, {R, C}, axis, keepdim, largest, false, w)) ++failures;
        }
      }
    }
  }
  // Two rows of 300007 (past the split length): the maximum, a tie, and a
  // NaN before, between or after them, or none.
  const int64_t n = 300007;
  for (int place = 0; place < 4; ++place) {
    Values v;
    v.type = Dtype::F32;
    for (int64_t k = 0; k < 2 * n; ++k) v.f.push_back(static_cast<double>(k % 1000) / 1000);
    for (int64_t r = 0; r < 2; ++r) {
      double* row = v.f.data() + r * n;
      row[100000 + r] = 5.0;
      row[250000] = 5.0;
      const int64_t nan_at[] = {-1, 3, 200000, 280001};
      if (nan_at[place] >= 0) row[nan_at[place]] = NAN;
    }
    const Tensor x = make_tensor(v, Shape{2, n});
    x.sync();
    for (bool largest : {true, false}) {
      const Tensor y = largest ? x.argmax(1) : x.argmin(1);
      const std::string w = cat(largest ? "argmax" : "argmin", " of [2, ", n, "] case ", place);
      ran_on_machine_code(y, want_jit, w);
      check(y, v, {2, n}, 1, false, largest, false, w);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Target, Argmax, ::testing::ValuesIn(kTargets), target_name);

// With the axis innermost, argmax of a float32 row (and of a fused
// producer's row) is one row kernel: the max and the index min are phases
// of it. The indices and the extent are kernel inputs, so new sizes
// compile nothing.
TEST(ArgmaxFusion, InnermostAxisIsOneRowKernel) {
  const int64_t sizes[][2] = {{64, 1000}, {37, 517}, {3, 5003}};
  for (size_t s = 0; s < std::size(sizes); ++s) {
    const int64_t R = sizes[s][0], C = sizes[s][1];
    const Tensor x = Tensor::normal({R, C}, 3), b = Tensor::normal({C}, 4);
    x.sync();
    b.sync();
    for (int k = 0; k < 2; ++k) {
      const std::string what = cat(k == 0 ? "argmax(x, -1)" : "argmin(x * 2 + b, 1)", " at [", R, ", ", C, "]");
      const Tensor y = k == 0 ? x.argmax(-1) : (x * 2.0f + b).argmin(1);
      dvm::reset_stats();
      dvm::set_kernel_log(true);
      (void)dvm::take_kernel_log();
      y.sync();
      const std::vector<KernelRun> log = dvm::take_kernel_log();
      dvm::set_kernel_log(false);
      ASSERT_EQ(log.size(), 1u) << what;
      EXPECT_EQ(log[0].form, "row_reduce") << what;
      if (s > 0) {
        EXPECT_EQ(dvm::stats().kernels_compiled, 0) << what << " compiled a new kernel";
      }
    }
  }
}

// Errors name the op and the tensor, and record nothing: bool operands (as
// torch), an empty reduced axis (or no elements at all), an axis out of
// range, an undefined tensor.
TEST(ArgmaxErrors, NameTheOpAndTheTensor) {
  const Tensor mask = make(Dtype::Bool, {1, 0, 1});
  expect_error("argmax of bool", [&] { (void)mask.argmax(0); }, {"argmax", "bool[3]", "bool"});
  expect_error("argmin() of bool", [&] { (void)mask.argmin(); }, {"argmin", "bool[3]"});
  const Tensor empty = Tensor::zeros({3, 0});
  expect_error("argmax over an empty axis", [&] { (void)empty.argmax(1); }, {"argmax", "float32[3, 0]", "axis 1", "empty"});
  expect_error("argmin over an empty axis", [&] { (void)empty.argmin(-1, true); }, {"argmin", "float32[3, 0]", "axis 1"});
  expect_error("argmax() of no elements", [&] { (void)empty.argmax(); }, {"argmax", "float32[3, 0]", "no elements"});
  expect_error("argmin() of no elements", [&] { (void)Tensor::zeros({0}).argmin(); }, {"argmin", "float32[0]"});
  const Tensor x = Tensor::zeros({2, 3});
  expect_error("argmax axis 2 of a matrix", [&] { (void)x.argmax(2); }, {"argmax", "axis 2", "[2, 3]"});
  expect_error("argmin axis -3 of a matrix", [&] { (void)x.argmin(-3); }, {"argmin", "axis -3", "[2, 3]"});
  expect_error("argmax axis 1 of a 0-d tensor", [&] { (void)Tensor::scalar(1.0f).argmax(1); }, {"argmax", "axis 1", "[]"});
  expect_error("argmax of an undefined tensor", [] { (void)Tensor().argmax(); }, {"argmax"});
  expect_error("argmin of an undefined tensor", [] { (void)Tensor().argmin(0); }, {"argmin"});
}

// Reducing across an empty axis is fine when the reduced axis is not
// empty: [3, 0] along axis 0 gives [0] (as torch).
TEST(ArgmaxErrors, AnEmptyOtherAxisIsNoError) {
  const Tensor y = Tensor::zeros({3, 0}).argmax(0);
  EXPECT_EQ(y.shape(), Shape{0});
  EXPECT_EQ(y.dtype(), Dtype::I64);
  EXPECT_TRUE(y.to_vector<int64_t>().empty());
  EXPECT_EQ(Tensor::zeros({3, 0}).argmin(0, true).shape(), (Shape{1, 0}));
}

// A 16-bit sum computed in argmax's kernel is rounded before it is
// compared, so argmax sees torch's ties: float16 1 + 2^-11 rounds to 1, and
// the first of two equal maxima wins (DTYPES.md).
TEST(Argmax, ASixteenBitValueComputedInTheKernelComparesAsStored) {
  const std::vector<Half> a = {to_half(1.0f), to_half(1.0f)}, b = {to_half(0.0f), to_half(std::ldexp(1.0f, -11))};
  const Tensor sum = Tensor::from_vector(a, {2}) + Tensor::from_vector(b, {2});
  EXPECT_EQ(sum.argmax().to_vector<int64_t>(), (std::vector<int64_t>{0}));
  EXPECT_EQ(sum.argmax(0, false).to_vector<int64_t>(), (std::vector<int64_t>{0}));
}

// Rows longer than 2^16 (a language model's vocabulary): generated
// lengths to 2^18 and past it, the maximum placed anywhere, against the
// first maximum found here. The index range of one long length is kept for
// the next call (nothing allocated then), and a new long length replaces
// it: what the thread keeps stays one range, not one per length.
TEST(ArgmaxLongRows, MatchTheReferenceAndKeepOneRange) {
  std::mt19937 rng(2026);
  std::vector<float> v;
  for (int iter = 0; iter < 12; ++iter) {
    const int64_t n = iter == 11 ? (int64_t{1} << 18) + 3
                                 : std::uniform_int_distribution<int64_t>(65537, int64_t{1} << 18)(rng);
    const int64_t rows = 1 + iter % 3;
    v.resize(static_cast<size_t>(rows * n));
    for (float& f : v) f = std::uniform_real_distribution<float>(-1, 1)(rng);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t at = std::uniform_int_distribution<int64_t>(0, n - 1)(rng);
      v[static_cast<size_t>(r * n + at)] = 2.0f;
      if (iter % 2) v[static_cast<size_t>(r * n + (at + n / 2) % n)] = 2.0f;  // a tie
    }
    const Tensor x = Tensor::from_blob(v.data(), {rows, n});
    std::vector<int64_t> want;
    for (int64_t r = 0; r < rows; ++r)
      want.push_back(std::max_element(v.begin() + r * n, v.begin() + (r + 1) * n) - (v.begin() + r * n));
    trim();
    EXPECT_EQ(x.argmax(1).to_vector<int64_t>(), want) << "n " << n << " rows " << rows;
    const int64_t kept = memory_stats().live_bytes;
    if (n <= int64_t{1} << 18) {
      EXPECT_GE(kept, n * 4) << "n " << n << ": its range was not kept";
    }
    EXPECT_LE(kept, (int64_t{1} << 18) * 4 + (int64_t{1} << 16) * 4 * 4) << "n " << n;
    EXPECT_EQ(x.argmax(1).to_vector<int64_t>(), want) << "n " << n << ", again";
    EXPECT_EQ(memory_stats().live_bytes, kept) << "n " << n << ": the second call allocated";
  }
}

}  // namespace
}  // namespace dvm::testing
