// Views: reshape, permute, transpose, slice (steps, negative indices), expand
// and contiguous, of materialized tensors and of pending results, in chains
// and feeding ops, checked element by element against a reference that
// indexes the source values itself; data() of non-contiguous views; user
// memory wrapped by from_blob is never written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "dvm/dvm.h"
#include "tests/tracer/tracer_testing.h"
#include "tracer/trace.h"

namespace dvm::testing {
namespace {

// ---------------------------------------------------------------------------
// Reference views: numpy semantics over a shared value array
// ---------------------------------------------------------------------------
struct RefView {
  std::vector<int64_t> shape, strides;
  int64_t offset = 0;
  std::shared_ptr<const std::vector<float>> base;

  static RefView of(std::vector<float> v, std::vector<int64_t> shape) {
    RefView r;
    r.base = std::make_shared<const std::vector<float>>(std::move(v));
    r.shape = std::move(shape);
    r.strides.resize(r.shape.size());
    int64_t s = 1;
    for (size_t k = r.shape.size(); k-- > 0;) {
      r.strides[k] = s;
      s *= r.shape[k];
    }
    return r;
  }

  size_t rank() const { return shape.size(); }
  size_t norm(int axis) const { return static_cast<size_t>(axis < 0 ? axis + static_cast<int>(rank()) : axis); }

  float at(const int64_t* idx) const {
    int64_t off = offset;
    for (size_t k = 0; k < rank(); ++k) off += idx[k] * strides[k];
    return (*base)[static_cast<size_t>(off)];
  }

  std::vector<float> values() const {
    std::vector<float> out(static_cast<size_t>(numel_of(shape)));
    int64_t idx[kMaxRank];
    for (size_t i = 0; i < out.size(); ++i) {
      unravel(static_cast<int64_t>(i), shape, idx);
      out[i] = at(idx);
    }
    return out;
  }

  RefView permute(const std::vector<int>& axes) const {
    RefView r = *this;
    for (size_t k = 0; k < axes.size(); ++k) {
      r.shape[k] = shape[norm(axes[k])];
      r.strides[k] = strides[norm(axes[k])];
    }
    return r;
  }

  RefView transpose(int a, int b) const {
    std::vector<int> axes(rank());
    std::iota(axes.begin(), axes.end(), 0);
    std::swap(axes[norm(a)], axes[norm(b)]);
    return permute(axes);
  }

  // Python slicing for a positive step: negative bounds count from the end,
  // both are clamped to the axis.
  RefView slice(int axis, int64_t start, int64_t end, int64_t step) const {
    const size_t a = norm(axis);
    const int64_t n = shape[a];
    if (start < 0) start += n;
    if (end < 0) end += n;
    start = std::min(std::max<int64_t>(start, 0), n);
    end = std::min(std::max<int64_t>(end, start), n);
    RefView r = *this;
    r.shape[a] = (end - start + step - 1) / step;
    r.offset += start * strides[a];
    r.strides[a] *= step;
    return r;
  }

  RefView expand(std::vector<int64_t> to) const {
    RefView r = *this;
    const size_t lead = to.size() - rank();
    r.shape = to;
    r.strides.assign(to.size(), 0);
    for (size_t k = lead; k < to.size(); ++k) {
      if (to[k] == -1) r.shape[k] = shape[k - lead];
      r.strides[k] = shape[k - lead] == r.shape[k] ? strides[k - lead] : 0;
    }
    return r;
  }

  RefView reshape(std::vector<int64_t> to) const {
    int64_t known = 1, infer = -1;
    for (size_t k = 0; k < to.size(); ++k) {
      if (to[k] == -1) infer = static_cast<int64_t>(k);
      else known *= to[k];
    }
    if (infer >= 0) to[static_cast<size_t>(infer)] = numel_of(shape) / known;
    return of(values(), to);
  }
};

std::vector<float> iota_values(int64_t n, float start = 1.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<float>(i);
  return v;
}

// t's shape and values match the reference, element by element.
void expect_view(const Tensor& t, const RefView& r, const std::string& what) {
  ASSERT_EQ(t.shape(), Shape(r.shape)) << what;
  const std::vector<float> got = t.to_vector();
  const std::vector<float> want = r.values();
  ASSERT_EQ(got.size(), want.size()) << what;
  Checker chk(what);
  int64_t idx[kMaxRank];
  for (size_t i = 0; i < got.size(); ++i) {
    if (same_float(got[i], want[i])) continue;
    unravel(static_cast<int64_t>(i), r.shape, idx);
    std::string at = "[";
    for (size_t k = 0; k < r.rank(); ++k) at += cat(k ? ", " : "", idx[k]);
    chk.fail(cat(at, "]"), cat("got ", got[i], ", expected ", want[i]));
  }
}

// The same view, through pending results: values are 2x and nothing is
// computed until observed.
struct ViewCase {
  const char* name;
  std::function<Tensor(const Tensor&)> view;
  std::function<RefView(const RefView&)> ref;
};

std::vector<ViewCase> view_cases() {
  using T = const Tensor&;
  using R = const RefView&;
  return {
      {"reshape [4, 6]", [](T t) { return t.reshape({4, 6}); }, [](R r) { return r.reshape({4, 6}); }},
      {"reshape [-1]", [](T t) { return t.reshape({-1}); }, [](R r) { return r.reshape({-1}); }},
      {"reshape [3, -1, 2]", [](T t) { return t.reshape({3, -1, 2}); }, [](R r) { return r.reshape({3, -1, 2}); }},
      {"reshape [2, 1, 3, 1, 4]", [](T t) { return t.reshape({2, 1, 3, 1, 4}); },
       [](R r) { return r.reshape({2, 1, 3, 1, 4}); }},
      {"permute {2, 0, 1}", [](T t) { return t.permute({2, 0, 1}); }, [](R r) { return r.permute({2, 0, 1}); }},
      {"permute {1, 2, 0}", [](T t) { return t.permute({1, 2, 0}); }, [](R r) { return r.permute({1, 2, 0}); }},
      {"permute {-1, 0, -2}", [](T t) { return t.permute(std::vector<int>{-1, 0, -2}); },
       [](R r) { return r.permute({2, 0, 1}); }},
      {"transpose(0, 2)", [](T t) { return t.transpose(0, 2); }, [](R r) { return r.transpose(0, 2); }},
      {"transpose(-1, -2)", [](T t) { return t.transpose(-1, -2); }, [](R r) { return r.transpose(2, 1); }},
      {"slice(1, 1, 3)", [](T t) { return t.slice(1, 1, 3); }, [](R r) { return r.slice(1, 1, 3, 1); }},
      {"slice(2, 1, 100, 2)", [](T t) { return t.slice(2, 1, 100, 2); }, [](R r) { return r.slice(2, 1, 100, 2); }},
      {"slice(-1, -3, -1)", [](T t) { return t.slice(-1, -3, -1); }, [](R r) { return r.slice(2, -3, -1, 1); }},
      {"slice(0, -1, 2)", [](T t) { return t.slice(0, -1, 2); }, [](R r) { return r.slice(0, -1, 2, 1); }},
      {"slice(2, -100, 100, 3)", [](T t) { return t.slice(2, -100, 100, 3); },
       [](R r) { return r.slice(2, -100, 100, 3); }},
      {"slice(2, 0, 4, 5)", [](T t) { return t.slice(2, 0, 4, 5); }, [](R r) { return r.slice(2, 0, 4, 5); }},
      {"slice empty (start > end)", [](T t) { return t.slice(2, 3, 1); }, [](R r) { return r.slice(2, 3, 1, 1); }},
      {"slice empty (start past end)", [](T t) { return t.slice(0, 5, 10); }, [](R r) { return r.slice(0, 5, 10, 1); }},
      {"expand [5, 2, 3, 4]", [](T t) { return t.expand({5, 2, 3, 4}); }, [](R r) { return r.expand({5, 2, 3, 4}); }},
      {"slice then expand", [](T t) { return t.slice(1, 1, 2).expand({2, 3, 4}); },
       [](R r) { return r.slice(1, 1, 2, 1).expand({2, 3, 4}); }},
      {"expand -1", [](T t) { return t.slice(2, 0, 1).expand({2, -1, 6}); },
       [](R r) { return r.slice(2, 0, 1, 1).expand({2, -1, 6}); }},
      {"broadcast_to", [](T t) { return t.slice(0, 0, 1).broadcast_to({3, 2, 3, 4}); },
       [](R r) { return r.slice(0, 0, 1, 1).expand({3, 2, 3, 4}); }},
      {"contiguous of transpose", [](T t) { return t.transpose(0, 1).contiguous(); },
       [](R r) { return r.transpose(0, 1); }},
      {"chain permute.slice.transpose.slice",
       [](T t) { return t.permute({2, 0, 1}).slice(0, 1, 4, 2).transpose(1, 2).slice(-1, -1, 2); },
       [](R r) { return r.permute({2, 0, 1}).slice(0, 1, 4, 2).transpose(1, 2).slice(2, -1, 2, 1); }},
      {"chain transpose.reshape (copies)", [](T t) { return t.transpose(0, 2).reshape({-1, 2}); },
       [](R r) { return r.transpose(0, 2).reshape({-1, 2}); }},
      {"chain slice.reshape.permute.expand",
       [](T t) { return t.slice(2, 0, 4, 2).reshape({6, 2}).permute({1, 0}).reshape({2, 1, 6}).expand({2, 5, 6}); },
       [](R r) {
         return r.slice(2, 0, 4, 2).reshape({6, 2}).permute({1, 0}).reshape({2, 1, 6}).expand({2, 5, 6});
       }},
      {"chain reshape.slice.reshape", [](T t) { return t.reshape({6, 4}).slice(0, 1, 6, 2).reshape({3, 2, 2}); },
       [](R r) { return r.reshape({6, 4}).slice(0, 1, 6, 2).reshape({3, 2, 2}); }},
  };
}

TEST(Views, OfMaterializedTensors) {
  const std::vector<float> v = iota_values(24);
  const RefView ref = RefView::of(v, {2, 3, 4});
  for (const ViewCase& c : view_cases()) {
    Tensor x = Tensor::from_vector(v, {2, 3, 4});
    expect_view(c.view(x), c.ref(ref), cat("materialized ", c.name));
  }
}

TEST(Views, OfPendingResults) {
  const std::vector<float> v = iota_values(24);
  std::vector<float> v2(v.size());
  for (size_t i = 0; i < v.size(); ++i) v2[i] = v[i] * 2.0f - 1.0f;
  const RefView ref = RefView::of(v2, {2, 3, 4});
  for (const ViewCase& c : view_cases()) {
    Tensor x = Tensor::from_vector(v, {2, 3, 4});
    dvm::reset_stats();
    Tensor y = x * 2.0f - 1.0f;
    Tensor view = c.view(y);
    EXPECT_EQ(dvm::stats().nodes_computed, 0) << c.name << ": a view of a pending result computed it";
    expect_view(view, c.ref(ref), cat("pending ", c.name));
    // The source is still correct after its view was observed, and a view
    // taken now, of the materialized result, reads the same values.
    expect_view(y, ref, cat("source of ", c.name));
    expect_view(c.view(y), c.ref(ref), cat("computed ", c.name));
  }
}

TEST(Views, OfConstants) {
  Tensor f = Tensor::full({3}, 2.5f);
  const RefView ref = RefView::of({2.5f, 2.5f, 2.5f}, {3});
  expect_view(f.expand({2, 3}), ref.expand({2, 3}), "full.expand");
  expect_view(f.reshape({3, 1}).expand({3, 4}), ref.reshape({3, 1}).expand({3, 4}), "full.reshape.expand");
  expect_view(f.slice(0, 1, 3), ref.slice(0, 1, 3, 1), "full.slice");
  expect_view(Tensor::scalar(-1.0f).expand({2, 2}), RefView::of({-1.0f}, {}).expand({2, 2}), "scalar.expand");
  expect_view(Tensor(4.0f).reshape({1, 1}), RefView::of({4.0f}, {1, 1}), "Tensor(float).reshape");
  Tensor y = f.expand({2, 3}) + Tensor::arange(3);
  expect_view(y, RefView::of({2.5f, 3.5f, 4.5f, 2.5f, 3.5f, 4.5f}, {2, 3}), "expanded constant in an op");
}

TEST(Views, OfEmptyTensors) {
  Tensor e = Tensor::from_vector({}, {0, 3});
  EXPECT_EQ(e.transpose(0, 1).shape(), Shape({3, 0}));
  EXPECT_TRUE(e.transpose(0, 1).to_vector().empty());
  EXPECT_EQ(e.reshape({3, -1, 2}).shape(), Shape({3, 0, 2}));
  EXPECT_EQ(e.slice(1, 1, 3).shape(), Shape({0, 2}));
  EXPECT_EQ(e.expand({2, 0, 3}).shape(), Shape({2, 0, 3}));
  Tensor y = (e * 2.0f).transpose(0, 1).contiguous();
  EXPECT_EQ(y.shape(), Shape({3, 0}));
  EXPECT_TRUE(y.to_vector().empty());
}

// Views whose layout needs a general gather (several broadcast or permuted
// axes), with an empty output: no values to read, nothing to launch.
TEST(Views, EmptyGatheredViews) {
  Tensor a = Tensor::from_vector(iota_values(6), {2, 1, 3, 1});
  Tensor e = Tensor::from_vector({}, {2, 0, 3, 4});
  const std::vector<std::pair<const char*, std::function<Tensor()>>> cases = {
      {"a + [1, 4, 1, 0]", [&] { return a + Tensor::from_vector({}, {1, 4, 1, 0}); }},
      {"exp of a permuted empty tensor", [&] { return dvm::exp(e.permute({3, 1, 0, 2})); }},
      {"contiguous of a permuted empty tensor", [&] { return e.permute({3, 1, 0, 2}).contiguous(); }},
      {"contiguous of an empty expand", [&] { return a.expand({2, 0, 3, 5}).contiguous(); }},
      {"sum over a non-empty axis of an empty gather", [&] { return dvm::exp(a.expand({2, 4, 3, 0})).sum(1); }},
      {"max over a non-empty axis of an empty gather",
       [&] { return (a + Tensor::from_vector({}, {1, 4, 1, 0})).max(1); }},
  };
  for (const auto& [name, build] : cases) {
    try {
      Tensor y = build();
      EXPECT_EQ(y.numel(), 0) << name;
      EXPECT_TRUE(y.to_vector().empty()) << name;
    } catch (const std::exception& ex) {
      ADD_FAILURE() << name << " threw: " << ex.what();
    }
  }
}

// Views as op operands: strided, broadcast (stride 0), offset; of leaves and
// of pending values in the same flush. Integer data keep the arithmetic exact.
TEST(Views, FeedingOps) {
  const std::vector<float> v = iota_values(24);
  const RefView rx = RefView::of(v, {2, 3, 4});
  Tensor x = Tensor::from_vector(v, {2, 3, 4});

  // A transposed and a sliced view of the same leaf, added.
  {
    Tensor z = x.transpose(0, 2).slice(0, 1, 4, 2) * 3.0f + x.permute({2, 1, 0}).slice(0, 0, 2);
    RefView a = rx.transpose(0, 2).slice(0, 1, 4, 2), b = rx.permute({2, 1, 0}).slice(0, 0, 2, 1);
    std::vector<float> va = a.values(), vb = b.values(), want(va.size());
    for (size_t i = 0; i < va.size(); ++i) want[i] = va[i] * 3.0f + vb[i];
    expect_view(z, RefView::of(want, a.shape), "transposed*3 + permuted slice");
  }
  // Views of a pending result feeding ops in the same flush.
  {
    Tensor y = x - 10.0f;
    Tensor z = y.transpose(1, 2) * y.transpose(1, 2).slice(0, -1, 2).expand({2, 4, 3}) + y.permute({0, 2, 1});
    std::vector<float> want;
    RefView ry = RefView::of([&] {
      std::vector<float> w(v);
      for (float& e : w) e -= 10.0f;
      return w;
    }(), {2, 3, 4});
    std::vector<float> a = ry.transpose(1, 2).values(),
                       b = ry.transpose(1, 2).slice(0, -1, 2, 1).expand({2, 4, 3}).values(),
                       c = ry.permute({0, 2, 1}).values();
    for (size_t i = 0; i < a.size(); ++i) want.push_back(a[i] * b[i] + c[i]);
    expect_view(z, RefView::of(want, {2, 4, 3}), "pending transposed * expanded slice + permuted");
    // y itself, observed after its views were consumed.
    expect_view(y, ry, "pending source");
  }
  // A reduction over a permuted view and over a stepped slice.
  {
    Tensor s0 = x.permute({2, 0, 1}).sum(0);  // sums over the original last axis
    Tensor s1 = x.slice(2, 0, 4, 3).sum({0, 2});
    RefView p = rx.permute({2, 0, 1});
    std::vector<float> want0(6, 0.0f), want1(3, 0.0f);
    std::vector<float> pv = p.values();
    for (int64_t k = 0; k < 4; ++k)
      for (int64_t j = 0; j < 6; ++j) want0[static_cast<size_t>(j)] += pv[static_cast<size_t>(k * 6 + j)];
    std::vector<float> sv = rx.slice(2, 0, 4, 3).values();  // [2, 3, 2]
    for (int64_t a = 0; a < 2; ++a)
      for (int64_t b = 0; b < 3; ++b)
        for (int64_t c = 0; c < 2; ++c) want1[static_cast<size_t>(b)] += sv[static_cast<size_t>((a * 3 + b) * 2 + c)];
    expect_view(s0, RefView::of(want0, {2, 3}), "sum over a permuted view");
    expect_view(s1, RefView::of(want1, {3}), "sum over a stepped slice");
  }
  // An expanded (stride 0) operand and an elementwise op on a view of a
  // reduction result.
  {
    Tensor m = x.max(2, true);                                   // [2, 3, 1]
    Tensor z = x - m.expand({2, 3, 4}) + m.reshape({6}).slice(0, 0, 6, 5).reshape({2, 1, 1});
    std::vector<float> want(24);
    for (int64_t a = 0; a < 2; ++a)
      for (int64_t b = 0; b < 3; ++b)
        for (int64_t c = 0; c < 4; ++c) {
          // m[a, b] is the row's last element (increasing data); the slice of
          // the flattened m with step 5 picks m[0, 0] and m[1, 2].
          const float mx = v[static_cast<size_t>((a * 3 + b) * 4 + 3)];
          const float sel = a == 0 ? v[3] : v[23];
          want[static_cast<size_t>((a * 3 + b) * 4 + c)] = v[static_cast<size_t>((a * 3 + b) * 4 + c)] - mx + sel;
        }
    expect_view(z, RefView::of(want, {2, 3, 4}), "ops on views of a reduction");
  }
}

// Rank 8 (the maximum): a full permutation, a slice and a broadcast op.
TEST(Views, RankEight) {
  const std::vector<int64_t> shape = {2, 1, 3, 1, 2, 1, 2, 3};
  const std::vector<float> v = iota_values(numel_of(shape));
  const RefView rx = RefView::of(v, shape);
  Tensor x = Tensor::from_vector(v, Shape(shape));
  const std::vector<int> perm = {7, 0, 6, 2, 5, 4, 3, 1};
  expect_view(x.permute(perm), rx.permute(perm), "rank-8 permute");
  expect_view(x.permute(perm).slice(0, 1, 3).slice(-1, 0, 1), rx.permute(perm).slice(0, 1, 3, 1).slice(7, 0, 1, 1),
              "rank-8 permute and slices");
  // permuted shape [3, 2, 2, 3, 1, 2, 1, 1]; add a value per index of axis 1.
  Tensor y = x.permute(perm) * 2.0f + Tensor::arange(2).reshape({1, 2, 1, 1, 1, 1, 1, 1});
  const RefView rp = rx.permute(perm);
  std::vector<float> want = rp.values();
  int64_t idx[kMaxRank];
  for (size_t i = 0; i < want.size(); ++i) {
    unravel(static_cast<int64_t>(i), rp.shape, idx);
    want[i] = want[i] * 2.0f + static_cast<float>(idx[1]);
  }
  expect_view(y, RefView::of(want, rp.shape), "rank-8 op on a permuted view");
  expect_view(x.sum({1, 3, 5}), RefView::of(v, {2, 3, 2, 2, 3}), "rank-8 sum over unit axes");
}

// item() reads the single element of a view (its offset), pending or not.
TEST(Views, ItemOfViews) {
  const std::vector<float> v = iota_values(24);
  Tensor x = Tensor::from_vector(v, {2, 3, 4});
  EXPECT_EQ(x.slice(0, 1, 2).slice(1, 2, 3).slice(2, 3, 4).item(), v[23]);
  EXPECT_EQ(x.slice(2, -2, -1).slice(1, 1, 2).slice(0, 0, 1).item(), v[6]);
  EXPECT_EQ(x.permute({2, 1, 0}).slice(0, 3, 4).slice(1, 1, 2).slice(2, 1, 2).item(), v[1 * 12 + 1 * 4 + 3]);
  EXPECT_EQ((x * 2.0f).slice(0, 1, 2).slice(1, 0, 1).slice(2, 2, 3).reshape({1}).item(), 2.0f * v[12 + 2]);
  EXPECT_EQ((x + 1.0f).sum().reshape({1, 1}).item(), 24.0f + 300.0f);
}

// Reductions and row compositions over strided views (rows longer than 4096,
// read with a stride) equal the same ops over a contiguous copy, bit for bit.
TEST(Views, RowOpsOverStridedViews) {
  const int64_t n = 5003;
  std::vector<float> v(static_cast<size_t>(3 * n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(static_cast<int>(i * 7919 % 129) - 64) / 8.0f;
  Tensor x = Tensor::from_vector(v, {n, 3});
  Tensor xt = x.transpose(0, 1);  // [3, n], stride 3 along the row
  Tensor xc = xt.contiguous();
  // Exact data: the sums are exact whatever the order.
  const std::vector<float> s = xt.sum(-1).to_vector();
  for (int64_t r = 0; r < 3; ++r) {
    double want = 0;
    for (int64_t j = 0; j < n; ++j) want += v[static_cast<size_t>(j * 3 + r)];
    EXPECT_EQ(s[static_cast<size_t>(r)], static_cast<float>(want)) << "row " << r;
  }
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> ops = {
      {"max", [](const Tensor& t) { return t.max(-1); }},
      {"mean", [](const Tensor& t) { return t.mean(-1, true); }},
      {"softmax", [](const Tensor& t) { return dvm::softmax(t, -1); }},
      {"log_softmax", [](const Tensor& t) { return dvm::log_softmax(t, 1); }},
      {"layer_norm", [](const Tensor& t) { return dvm::layer_norm(t, {5003}, Tensor(), Tensor()); }},
      {"sum over the strided axis", [](const Tensor& t) { return t.sum(0); }},
  };
  for (const auto& [name, f] : ops) {
    const std::vector<float> a = f(xt).to_vector(), b = f(xc).to_vector();
    ASSERT_EQ(a.size(), b.size()) << name;
    for (size_t i = 0; i < a.size(); ++i)
      ASSERT_TRUE(same_float(a[i], b[i])) << name << " [" << i << "]: view " << a[i] << " vs copy " << b[i];
  }
}

// data() of a non-contiguous view returns contiguous row-major values and
// leaves the handle's shape and values as they were.
TEST(Views, DataOfNonContiguousViews) {
  const std::vector<float> v = iota_values(60);
  const RefView rx = RefView::of(v, {3, 4, 5});
  Tensor x = Tensor::from_vector(v, {3, 4, 5});
  struct Case {
    const char* name;
    Tensor t;
    RefView r;
  };
  Case cases[] = {
      {"transpose", x.transpose(0, 2), rx.transpose(0, 2)},
      {"slice step 2", x.slice(2, 1, 5, 2), rx.slice(2, 1, 5, 2)},
      {"negative slice", x.slice(1, -3, -1), rx.slice(1, -3, -1, 1)},
      {"expand", x.slice(0, 1, 2).expand({2, 3, 4, 5}), rx.slice(0, 1, 2, 1).expand({2, 3, 4, 5})},
      {"pending transpose", (x * 1.0f).permute({1, 2, 0}), rx.permute({1, 2, 0})},
      {"pending slice", (x + 0.0f).slice(2, 0, 5, 4), rx.slice(2, 0, 5, 4)},
  };
  for (Case& c : cases) {
    const Shape shape = c.t.shape();
    const float* p = c.t.data();
    const std::vector<float> want = c.r.values();
    ASSERT_NE(p, nullptr) << c.name;
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_TRUE(same_float(p[i], want[i])) << c.name << " data()[" << i << "] = " << p[i] << ", expected " << want[i];
    EXPECT_EQ(c.t.shape(), shape) << c.name;
    expect_view(c.t, c.r, cat(c.name, " after data()"));
    // A second call returns the same contiguous values.
    const float* q = c.t.data();
    for (size_t i = 0; i < want.size(); ++i) ASSERT_TRUE(same_float(q[i], want[i])) << c.name;
  }
  // data() of a contiguous leaf is its own memory; of a contiguous view of it
  // (a leading slice), the same memory at the view's offset.
  const float* base = x.data();
  EXPECT_EQ(x.slice(0, 1, 3).data(), base + 20);
}

// from_blob: user memory is read in place and never written, whatever reads
// it and whenever the results are observed.
TEST(Views, FromBlobIsNeverWritten) {
  const int64_t n = 4099;
  std::vector<float> buf(static_cast<size_t>(n + 64));
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<float>(i % 97) * 0.25f - 3.0f;
  const std::vector<float> copy = buf;
  const float* user = buf.data() + 32;  // guards on both sides
  {
    Tensor x = Tensor::from_blob(user, {n});
    EXPECT_EQ(x.data(), user) << "from_blob copied the user's memory";
    Tensor x2 = Tensor::from_blob(user, {1, n}).expand({3, n});
    Tensor y = dvm::exp(x) * 2.0f + x;  // same shape as the input: tempts an in-place store
    Tensor s = x2.sum(1);
    Tensor t = dvm::softmax(x2, -1);
    Tensor r = x.reshape({-1, 1}).slice(0, 0, n, 3);
    Tensor m = dvm::layer_norm(x.slice(0, 0, 4096).reshape({64, 64}), {64}, Tensor(), Tensor());
    (void)y.to_vector();
    (void)s.data();
    (void)t.to_vector();
    (void)r.data();  // non-contiguous: a copy, not the user memory
    EXPECT_NE(r.data(), user);
    (void)m.to_vector();
    (void)x.max().item();
  }
  EXPECT_EQ(std::memcmp(buf.data(), copy.data(), buf.size() * sizeof(float)), 0) << "user memory was written";
  {
    // The input handle dropped before the flush: its buffer must not be
    // reused for the result.
    Tensor x = Tensor::from_blob(user, {n});
    Tensor y = dvm::neg(x);
    Tensor z = (x + 1.0f).reshape({n});
    x = Tensor();
    const std::vector<float> out = y.to_vector();
    const std::vector<float> out2 = z.to_vector();
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(out[static_cast<size_t>(i)], -copy[static_cast<size_t>(32 + i)]) << i;
      ASSERT_EQ(out2[static_cast<size_t>(i)], copy[static_cast<size_t>(32 + i)] + 1.0f) << i;
    }
  }
  EXPECT_EQ(std::memcmp(buf.data(), copy.data(), buf.size() * sizeof(float)), 0) << "user memory was written";
}

// Sanity of the reference itself against hand-written indices, so a wrong
// reference cannot hide a wrong view.
TEST(Views, ReferenceIndexing) {
  const RefView r = RefView::of(iota_values(24, 0.0f), {2, 3, 4});
  EXPECT_EQ(r.permute({2, 0, 1}).values()[1], 4.0f);       // [0, 0, 1] -> x[0, 1, 0]
  EXPECT_EQ(r.slice(2, -3, -1, 1).values(), (std::vector<float>{1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22}));
  EXPECT_EQ(r.slice(0, 1, 9, 1).slice(1, 0, 3, 2).slice(2, 1, 4, 2).values(),
            (std::vector<float>{13, 15, 21, 23}));
  EXPECT_EQ(r.slice(1, 1, 2, 1).expand({2, 2, 1, 4}).values().size(), 16u);
}

}  // namespace
}  // namespace dvm::testing
