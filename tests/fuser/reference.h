// A double-precision reference for the fuser tests: arrays with a shape,
// numpy broadcasting of a binary op, and reductions over adjacent axes.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace dvm::testing {

// A double array with a shape: the reference's values.
struct Ref {
  std::vector<int64_t> shape;
  std::vector<double> v;
};

inline int64_t numel_of(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Element of a (shape as) broadcast to `out` at the multi-index idx of out.
inline double at_broadcast(const Ref& a, const std::vector<int64_t>& out, const std::vector<int64_t>& idx) {
  const size_t lead = out.size() - a.shape.size();
  int64_t off = 0;
  for (size_t k = 0; k < a.shape.size(); ++k) {
    const int64_t i = a.shape[k] == 1 ? 0 : idx[k + lead];
    off = off * a.shape[k] + i;
  }
  return a.v[static_cast<size_t>(off)];
}

inline std::vector<int64_t> broadcast_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> out(std::max(a.size(), b.size()), 1);
  for (size_t k = 0; k < out.size(); ++k) {
    const int64_t x = k < out.size() - a.size() ? 1 : a[k - (out.size() - a.size())];
    const int64_t y = k < out.size() - b.size() ? 1 : b[k - (out.size() - b.size())];
    out[k] = x == 1 ? y : x;
  }
  return out;
}

template <class F>
Ref binary(const Ref& a, const Ref& b, F f) {
  Ref r;
  r.shape = broadcast_shape(a.shape, b.shape);
  const int64_t n = numel_of(r.shape);
  std::vector<int64_t> idx(r.shape.size(), 0);
  for (int64_t e = 0; e < n; ++e) {
    r.v.push_back(f(at_broadcast(a, r.shape, idx), at_broadcast(b, r.shape, idx)));
    for (size_t k = idx.size(); k-- > 0;) {
      if (++idx[k] < r.shape[k]) break;
      idx[k] = 0;
    }
  }
  return r;
}

enum class Red { Sum, Mean, Max, Min };

// Reduction of a over the axes [a0, a1).
inline Ref reduce(const Ref& a, int a0, int a1, bool keepdim, Red op) {
  Ref r;
  std::vector<int64_t> kept;
  for (int k = 0; k < static_cast<int>(a.shape.size()); ++k) {
    if (k < a0 || k >= a1) kept.push_back(a.shape[static_cast<size_t>(k)]);
    if (k >= a0 && k < a1 && keepdim) kept.push_back(1);
  }
  int64_t outer = 1, red = 1, inner = 1;
  for (int k = 0; k < static_cast<int>(a.shape.size()); ++k)
    (k < a0 ? outer : k < a1 ? red : inner) *= a.shape[static_cast<size_t>(k)];
  r.shape = kept;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double acc = op == Red::Max ? -INFINITY : op == Red::Min ? INFINITY : 0.0;
      for (int64_t j = 0; j < red; ++j) {
        const double x = a.v[static_cast<size_t>((o * red + j) * inner + i)];
        acc = op == Red::Max ? std::max(acc, x) : op == Red::Min ? std::min(acc, x) : acc + x;
      }
      r.v.push_back(op == Red::Mean ? acc / static_cast<double>(red) : acc);
    }
  return r;
}

inline Ref ref_of(const std::vector<float>& v, const std::vector<int64_t>& shape) {
  Ref r;
  r.shape = shape;
  r.v.assign(v.begin(), v.end());
  return r;
}

inline std::vector<float> values(const std::vector<int64_t>& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.5f, 1.5f);
  std::vector<float> v(static_cast<size_t>(numel_of(shape)));
  for (float& x : v) x = u(rng);
  return v;
}

}  // namespace dvm::testing
