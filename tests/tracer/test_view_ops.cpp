// squeeze, unsqueeze, flatten, narrow, chunk and split: generated shapes
// (size-0 and size-1 axes, 0-d) over contiguous leaves, transposed views
// and pending values, against an index computation of the test's own; and
// the errors of each.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "dvm/dvm.h"
#include "tests/tracer/tracer_testing.h"

namespace dvm {
namespace {

using testing::expect_error;

std::vector<float> iota_values(int64_t n, float base) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = base + static_cast<float>(i);
  return v;
}

// Elements [start, start + len) of axis of (values, s), in row-major order.
std::vector<float> narrow_ref(const std::vector<float>& values, const Shape& s, int axis, int64_t start, int64_t len) {
  std::vector<float> out;
  const std::vector<int64_t> st = testing::row_major_strides(s);
  for (size_t i = 0; i < values.size(); ++i) {
    const int64_t idx = static_cast<int64_t>(i) / st[static_cast<size_t>(axis)] % s[axis];
    if (idx >= start && idx < start + len) out.push_back(values[i]);
  }
  return out;
}

// A random shape of rank 0-4 with extents 0-5 (0 rarely).
Shape random_shape(std::mt19937& rng) {
  Shape s;
  const int rank = static_cast<int>(rng() % 5);
  for (int i = 0; i < rank; ++i) s.push_back(rng() % 9 == 0 ? 0 : static_cast<int64_t>(rng() % 5 + 1));
  return s;
}

// The source in one of three forms with the same values: a contiguous
// leaf, a transposed view of a leaf, or a pending value (x + 0).
Tensor source(const Shape& s, const std::vector<float>& values, int form) {
  if (form == 1 && s.rank() >= 2) {
    Shape t = s;
    std::swap(t[0], t[1]);
    // Values laid out so that the transpose reads `values` in row-major order.
    std::vector<float> laid(values.size());
    const std::vector<int64_t> ss = testing::row_major_strides(s), ts = testing::row_major_strides(t);
    for (size_t i = 0; i < values.size(); ++i) {
      int64_t off = 0;
      for (int k = 0; k < s.rank(); ++k) {
        const int64_t idx = static_cast<int64_t>(i) / ss[static_cast<size_t>(k)] % s[k];
        const int tk = k == 0 ? 1 : k == 1 ? 0 : k;
        off += idx * ts[static_cast<size_t>(tk)];
      }
      laid[static_cast<size_t>(off)] = values[i];
    }
    return Tensor::from_vector(laid, t).transpose(0, 1);
  }
  const Tensor x = Tensor::from_vector(values, s);
  return form == 2 ? x + 0.0f : x;
}

TEST(ViewOps, GeneratedShapesMatchAnIndexReference) {
  std::mt19937 rng(404);
  int checked = 0;
  for (int iter = 0; iter < 400; ++iter) {
    const Shape s = random_shape(rng);
    const std::vector<float> values = iota_values(s.numel(), 1.0f);
    const int form = static_cast<int>(rng() % 3);
    const Tensor x = source(s, values, form);
    const int rank = s.rank();
    const std::string what = "iteration " + std::to_string(iter) + " " + s.to_string() + " form " + std::to_string(form);
    // squeeze(), squeeze(axis), unsqueeze(axis), flatten: the values in
    // row-major order are the source's; the shapes as torch gives them.
    {
      Shape want;
      for (int i = 0; i < rank; ++i)
        if (s[i] != 1) want.push_back(s[i]);
      const Tensor y = x.squeeze();
      EXPECT_EQ(y.shape(), want) << what;
      EXPECT_EQ(y.to_vector(), values) << what;
    }
    if (rank > 0) {
      const int axis = static_cast<int>(rng() % static_cast<uint32_t>(2 * rank)) - rank;
      const int a = axis < 0 ? axis + rank : axis;
      Shape want;
      for (int i = 0; i < rank; ++i)
        if (i != a || s[i] != 1) want.push_back(s[i]);
      const Tensor y = x.squeeze(axis);
      EXPECT_EQ(y.shape(), want) << what << " squeeze(" << axis << ")";
      EXPECT_EQ(y.to_vector(), values) << what;
    }
    if (rank < kMaxRank) {
      const int axis = static_cast<int>(rng() % static_cast<uint32_t>(2 * rank + 2)) - rank - 1;
      const int a = axis < 0 ? axis + rank + 1 : axis;
      Shape want;
      for (int i = 0; i <= rank; ++i) {
        if (i == a) want.push_back(1);
        if (i < rank) want.push_back(s[i]);
      }
      const Tensor y = x.unsqueeze(axis);
      EXPECT_EQ(y.shape(), want) << what << " unsqueeze(" << axis << ")";
      EXPECT_EQ(y.to_vector(), values) << what;
    }
    {
      const int r = std::max(rank, 1);
      int a = static_cast<int>(rng() % static_cast<uint32_t>(r)), b = static_cast<int>(rng() % static_cast<uint32_t>(r));
      if (a > b) std::swap(a, b);
      Shape want;
      if (rank == 0) {
        want = Shape{1};
      } else {
        int64_t m = 1;
        for (int i = 0; i < rank; ++i) {
          if (i < a || i > b) want.push_back(s[i]);
          else m *= s[i];
          if (i == b) want.push_back(m);
        }
      }
      const Tensor y = x.flatten(a, b - r);  // the end axis counted from the end
      EXPECT_EQ(y.shape(), want) << what << " flatten(" << a << ", " << b - r << ")";
      EXPECT_EQ(y.to_vector(), values) << what;
    }
    if (rank == 0) continue;
    // narrow, split and chunk along one axis: each piece is that range's
    // elements, and the pieces cover the axis in order.
    const int axis = static_cast<int>(rng() % static_cast<uint32_t>(rank));
    const int64_t n = s[axis];
    {
      const int64_t start = n == 0 ? 0 : static_cast<int64_t>(rng() % static_cast<uint32_t>(n + 1));
      const int64_t len = static_cast<int64_t>(rng() % static_cast<uint32_t>(n - start + 1));
      const bool negative = start > 0 && rng() % 2 == 0;
      const Tensor y = x.narrow(axis, negative ? start - n : start, len);
      Shape want = s;
      want[axis] = len;
      EXPECT_EQ(y.shape(), want) << what << " narrow(" << axis << ", " << start << ", " << len << ")";
      EXPECT_EQ(y.to_vector(), narrow_ref(values, s, axis, start, len)) << what;
    }
    auto check_pieces = [&](const std::vector<Tensor>& pieces, const std::vector<int64_t>& sizes, const std::string& op) {
      ASSERT_EQ(pieces.size(), sizes.size()) << what << " " << op;
      int64_t start = 0;
      for (size_t p = 0; p < pieces.size(); ++p) {
        Shape want = s;
        want[axis] = sizes[p];
        EXPECT_EQ(pieces[p].shape(), want) << what << " " << op << " piece " << p;
        EXPECT_EQ(pieces[p].to_vector(), narrow_ref(values, s, axis, start, sizes[p])) << what << " " << op << " piece " << p;
        start += sizes[p];
      }
      EXPECT_EQ(start, n) << what << " " << op;
    };
    {
      const int64_t size = n == 0 ? 0 : static_cast<int64_t>(rng() % static_cast<uint32_t>(n + 1) + 1);
      std::vector<int64_t> want;  // torch.split's pieces
      if (n == 0) want.push_back(0);
      for (int64_t st = 0; st < n; st += size) want.push_back(std::min(size, n - st));
      check_pieces(x.split(size, axis), want, "split(" + std::to_string(size) + ")");
    }
    {
      std::vector<int64_t> sizes;
      for (int64_t left = n; left > 0;) {
        const int64_t k = static_cast<int64_t>(rng() % static_cast<uint32_t>(left + 1));
        sizes.push_back(k);
        left -= k;
      }
      if (rng() % 2) sizes.push_back(0);
      check_pieces(x.split(sizes, axis - rank), sizes, "split(sizes)");
    }
    {
      const int64_t chunks = static_cast<int64_t>(rng() % 6 + 1);
      std::vector<int64_t> want;  // torch.chunk's pieces
      if (n == 0) want.assign(static_cast<size_t>(chunks), 0);
      const int64_t each = (n + chunks - 1) / chunks;
      for (int64_t st = 0; st < n; st += each) want.push_back(std::min(each, n - st));
      check_pieces(x.chunk(chunks, axis), want, "chunk(" + std::to_string(chunks) + ")");
    }
    ++checked;
  }
  EXPECT_GE(checked, 250);
}

TEST(ViewOps, TheyAreViewsOfTheirSource) {
  const Tensor x = Tensor::from_vector(iota_values(24, 0.0f), {2, 3, 4});
  x.sync();
  const int64_t before = dvm::stats().kernels_run;
  const std::vector<Tensor> parts = x.chunk(2, -1);
  const Tensor y = x.unsqueeze(0).squeeze(0).narrow(1, 1, 2).flatten(1, 2);
  for (const Tensor& t : {parts[0], parts[1], y}) EXPECT_EQ(t.node()->storage, x.node()->storage);
  EXPECT_EQ(dvm::stats().kernels_run, before) << "no copy";
  EXPECT_EQ(y.to_vector(), (std::vector<float>{4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 19, 20, 21, 22, 23}));
}

TEST(ViewOps, BadArgumentsAreErrors) {
  const Tensor x = Tensor::from_vector(iota_values(6, 0.0f), {2, 3}), s = Tensor::scalar(1.0f), u;
  expect_error("squeeze axis", [&] { (void)x.squeeze(2); }, {"squeeze", "axis", "[2, 3]"});
  expect_error("unsqueeze axis", [&] { (void)x.unsqueeze(3); }, {"unsqueeze", "axis 3", "[2, 3]", "-3 <= axis <= 2"});
  expect_error("unsqueeze axis", [&] { (void)x.unsqueeze(-4); }, {"unsqueeze", "axis -4"});
  expect_error("unsqueeze full", [&] { (void)Tensor::zeros(Shape(std::vector<int64_t>(kMaxRank, 1))).unsqueeze(0); },
               {"unsqueeze", "most axes"});
  expect_error("flatten order", [&] { (void)x.flatten(1, 0); }, {"flatten", "start axis 1", "end axis 0", "[2, 3]"});
  expect_error("flatten axis", [&] { (void)x.flatten(0, 2); }, {"flatten", "axis", "[2, 3]"});
  expect_error("narrow start", [&] { (void)x.narrow(1, 4, 0); }, {"narrow", "start 4", "[2, 3]", "-3 <= start <= 3"});
  expect_error("narrow start", [&] { (void)x.narrow(1, -4, 1); }, {"narrow", "start -4"});
  expect_error("narrow length", [&] { (void)x.narrow(1, 1, 3); }, {"narrow", "length 3", "0 <= length <= 2"});
  expect_error("narrow length", [&] { (void)x.narrow(0, 0, -1); }, {"narrow", "length -1"});
  expect_error("narrow 0-d", [&] { (void)s.narrow(0, 0, 1); }, {"narrow", "0-d"});
  expect_error("chunk 0", [&] { (void)x.chunk(0); }, {"chunk", "at least 1", "got 0"});
  expect_error("chunk 0-d", [&] { (void)s.chunk(1); }, {"chunk", "0-d"});
  expect_error("split 0", [&] { (void)x.split(0, 1); }, {"split", "size 0", "[2, 3]"});
  expect_error("split negative", [&] { (void)x.split(-1, 1); }, {"split", "size -1"});
  expect_error("split sizes", [&] { (void)x.split(std::vector<int64_t>{1, 1}, 1); }, {"split", "[1, 1]", "add up to 3"});
  expect_error("split sizes", [&] { (void)x.split(std::vector<int64_t>{4, -1}, 1); }, {"split", "[4, -1]"});
  expect_error("split axis", [&] { (void)x.split(1, 2); }, {"split", "axis", "[2, 3]"});
  expect_error("undefined", [&] { (void)u.squeeze(); }, {"squeeze", "undefined"});
  expect_error("undefined", [&] { (void)u.split(1); }, {"split", "undefined"});
}

}  // namespace
}  // namespace dvm
