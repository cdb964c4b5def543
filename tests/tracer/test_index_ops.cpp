// index_select, embedding and gather against host references: generated
// shapes, axes, index types and sources (computed, transposed, pending),
// and out-of-range indices as errors.
#include "tests/tracer/int_testing.h"

namespace dvm::testing {
namespace {

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(static_cast<size_t>(s.rank()), 1);
  for (int k = s.rank() - 2; k >= 0; --k) st[static_cast<size_t>(k)] = st[static_cast<size_t>(k + 1)] * s[k + 1];
  return st;
}

std::vector<int64_t> coords(const Shape& s, int64_t i) {
  std::vector<int64_t> c(static_cast<size_t>(s.rank()));
  for (int k = s.rank() - 1; k >= 0; --k) {
    c[static_cast<size_t>(k)] = i % s[k];
    i /= s[k];
  }
  return c;
}

// A source tensor of dtype t holding v (small integers), made one of
// several ways: stored, computed (pending), or a transposed view.
Tensor source(Dtype t, const std::vector<int64_t>& v, const Shape& s, int how) {
  auto of = [&](const std::vector<int64_t>& x, const Shape& shape) {
    if (t == Dtype::F32 || t == Dtype::BF16) return Tensor::from_vector(std::vector<float>(x.begin(), x.end()), shape).to(t);
    return make(t, x, shape);
  };
  if (how == 1) {
    std::vector<int64_t> minus(v.size());
    for (size_t i = 0; i < v.size(); ++i) minus[i] = v[i] - 1;
    return of(minus, s) + of(std::vector<int64_t>(v.size(), 1), s);  // pending
  }
  if (how == 2 && s.rank() >= 2) {
    const int r = s.rank();
    Shape ts = s;
    std::swap(ts[r - 1], ts[r - 2]);
    std::vector<int64_t> tv(v.size());
    for (int64_t i = 0; i < s.numel(); ++i) {
      std::vector<int64_t> c = coords(s, i);
      std::swap(c[static_cast<size_t>(r - 1)], c[static_cast<size_t>(r - 2)]);
      int64_t f = 0;
      for (int k = 0; k < r; ++k) f = f * ts[k] + c[static_cast<size_t>(k)];
      tv[static_cast<size_t>(f)] = v[static_cast<size_t>(i)];
    }
    return of(tv, ts).transpose(r - 1, r - 2);
  }
  return of(v, s);
}

std::vector<int64_t> values_of(const Tensor& y) {
  if (!is_floating(y.dtype())) return read(y);
  std::vector<int64_t> out;
  for (float f : y.to_vector()) out.push_back(static_cast<int64_t>(f));
  return out;
}

// An index tensor holding v, laid out one of three ways: stored (read in
// place), pending (computed first), or a view with a step of 2 along its
// last axis (not contiguous: its values are copied first).
Tensor index_tensor(const std::vector<int64_t>& v, const Shape& s, bool wide, int layout) {
  const Dtype t = wide ? Dtype::I64 : Dtype::I32;
  if (layout == 1) return make(t, v, s) + make(t, std::vector<int64_t>(v.size(), 0), s);
  if (layout == 2 && s.rank() > 0) {
    const int last = s.rank() - 1;
    Shape doubled = s;
    doubled[last] *= 2;
    std::vector<int64_t> spread(static_cast<size_t>(doubled.numel()), -7);  // -7: out of range if read
    for (size_t i = 0; i < v.size(); ++i) spread[2 * i] = v[i];
    return make(t, spread, doubled).slice(last, 0, doubled[last], 2);
  }
  return make(t, v, s);
}

TEST(IndexOps, IndexSelectMatchesTheReference) {
  std::mt19937 rng(3);
  const Dtype types[] = {Dtype::F32, Dtype::BF16, Dtype::I64, Dtype::I32, Dtype::U8};
  for (int iter = 0; iter < 200; ++iter) {
    const int rank = 1 + static_cast<int>(rng() % 4);
    Shape s;
    for (int k = 0; k < rank; ++k) s.push_back(1 + static_cast<int64_t>(rng() % 6));
    const Dtype t = types[rng() % std::size(types)];
    std::vector<int64_t> v(static_cast<size_t>(s.numel()));
    for (int64_t& e : v) e = static_cast<int64_t>(rng() % 100);
    const int axis = static_cast<int>(rng() % static_cast<unsigned>(rank));
    std::vector<int64_t> idx(rng() % 9);
    for (int64_t& e : idx) e = static_cast<int64_t>(rng() % static_cast<unsigned>(s[axis]));
    const Tensor x = source(t, v, s, static_cast<int>(rng() % 3));
    const Tensor ix = index_tensor(idx, Shape{static_cast<int64_t>(idx.size())}, rng() % 2, static_cast<int>(rng() % 3));
    const Tensor y = index_select(x, rng() % 2 ? axis : axis - rank, ix);
    Shape want = s;
    want[axis] = static_cast<int64_t>(idx.size());
    ASSERT_EQ(y.shape(), want) << "iteration " << iter;
    ASSERT_EQ(y.dtype(), t);
    const std::vector<int64_t> got = values_of(y);
    const std::vector<int64_t> st = strides_of(s);
    for (int64_t i = 0; i < want.numel(); ++i) {
      std::vector<int64_t> c = coords(want, i);
      c[static_cast<size_t>(axis)] = idx[static_cast<size_t>(c[static_cast<size_t>(axis)])];
      int64_t f = 0;
      for (int k = 0; k < rank; ++k) f += c[static_cast<size_t>(k)] * st[static_cast<size_t>(k)];
      ASSERT_EQ(got[static_cast<size_t>(i)], v[static_cast<size_t>(f)]) << "iteration " << iter << " element " << i;
    }
  }
}

TEST(IndexOps, EmbeddingMatchesTheTable) {
  std::mt19937 rng(9);
  const Dtype types[] = {Dtype::F32, Dtype::BF16, Dtype::I64, Dtype::I32, Dtype::U8};
  for (int iter = 0; iter < 120; ++iter) {
    // Rows of 1 to 40 elements: copies of 1 to 320 bytes.
    const int64_t V = 1 + static_cast<int64_t>(rng() % 50), D = 1 + static_cast<int64_t>(rng() % 40);
    const int64_t B = 1 + static_cast<int64_t>(rng() % 3), S = 1 + static_cast<int64_t>(rng() % 7);
    const Dtype t = types[rng() % std::size(types)];
    std::vector<int64_t> w(static_cast<size_t>(V * D));
    for (int64_t& e : w) e = static_cast<int64_t>(rng() % (t == Dtype::U8 || t == Dtype::BF16 ? 256 : 1000));
    std::vector<int64_t> ids(static_cast<size_t>(B * S));
    for (int64_t& e : ids) e = static_cast<int64_t>(rng() % static_cast<unsigned>(V));
    // Ids stored, pending (as greedy decoding's argmax gives them) or a
    // strided view; the table stored, pending or transposed.
    const Tensor id = index_tensor(ids, Shape{B, S}, rng() % 2, static_cast<int>(rng() % 3));
    const Tensor weight = source(t, w, Shape{V, D}, static_cast<int>(rng() % 3));
    const Tensor y = embedding(id, weight);
    ASSERT_EQ(y.shape(), (Shape{B, S, D}));
    ASSERT_EQ(y.dtype(), t);
    const std::vector<int64_t> got = values_of(y);
    for (int64_t k = 0; k < B * S; ++k)
      for (int64_t d = 0; d < D; ++d)
        ASSERT_EQ(got[static_cast<size_t>(k * D + d)], w[static_cast<size_t>(ids[static_cast<size_t>(k)] * D + d)])
            << "iteration " << iter << " row " << k << " element " << d;
  }
}

TEST(IndexOps, GatherMatchesTheReference) {
  std::mt19937 rng(13);
  const Dtype types[] = {Dtype::F32, Dtype::BF16, Dtype::I64, Dtype::I32, Dtype::U8};
  for (int iter = 0; iter < 300; ++iter) {
    const int rank = 1 + static_cast<int>(rng() % 4);
    Shape s, is;
    for (int k = 0; k < rank; ++k) s.push_back(1 + static_cast<int64_t>(rng() % 6));
    const int axis = static_cast<int>(rng() % static_cast<unsigned>(rank));
    for (int k = 0; k < rank; ++k)
      is.push_back(k == axis ? static_cast<int64_t>(rng() % 8) : 1 + static_cast<int64_t>(rng() % static_cast<unsigned>(s[k])));
    const Dtype t = types[rng() % std::size(types)];
    std::vector<int64_t> v(static_cast<size_t>(s.numel()));
    for (int64_t& e : v) e = static_cast<int64_t>(rng() % (t == Dtype::U8 || t == Dtype::BF16 ? 256 : 1000));
    std::vector<int64_t> idx(static_cast<size_t>(is.numel()));
    for (int64_t& e : idx) e = static_cast<int64_t>(rng() % static_cast<unsigned>(s[axis]));
    const Tensor y = gather(source(t, v, s, static_cast<int>(rng() % 3)), axis,
                            index_tensor(idx, is, rng() % 2, static_cast<int>(rng() % 3)));
    ASSERT_EQ(y.shape(), is);
    const std::vector<int64_t> got = values_of(y);
    const std::vector<int64_t> st = strides_of(s);
    for (int64_t i = 0; i < is.numel(); ++i) {
      std::vector<int64_t> c = coords(is, i);
      c[static_cast<size_t>(axis)] = idx[static_cast<size_t>(i)];
      int64_t f = 0;
      for (int k = 0; k < rank; ++k) f += c[static_cast<size_t>(k)] * st[static_cast<size_t>(k)];
      ASSERT_EQ(got[static_cast<size_t>(i)], v[static_cast<size_t>(f)]) << "iteration " << iter << " element " << i;
    }
  }
}

TEST(IndexOps, OutOfRangeAndBadOperandsAreErrors) {
  const Tensor table = Tensor::zeros(Shape{5, 3});
  const Tensor ok = make(Dtype::I64, {0, 4, 2});
  const Tensor high = make(Dtype::I64, {0, 5, 2});
  const Tensor low = make(Dtype::I32, {-1});
  const Tensor fl = Tensor::from_vector(std::vector<float>{0.0f, 1.0f});
  const Tensor two_d = make(Dtype::I64, {0, 1, 2, 3}, Shape{2, 2});
  const Tensor one_d = Tensor::zeros(Shape{4});
  const Tensor big = make(Dtype::I64, {0, 6, 1, 2}, Shape{2, 2});
  for (const Tensor* t : {&table, &ok, &high, &low, &fl, &two_d, &one_d, &big}) t->sync();
  EXPECT_EQ(index_select(table, 0, ok).shape(), (Shape{3, 3}));
  expect_error("index past the end", [&] { (void)index_select(table, 0, high); },
               {"index_select", "index 5 at position 1", "axis 0", "float32[5, 3]", "< 5"});
  expect_error("negative index", [&] { (void)index_select(table, 1, low); }, {"index_select", "index -1", "< 3"});
  const Tensor several = make(Dtype::I64, {3, INT64_MIN, 7, INT64_MAX});
  expect_error("the first of several bad indices", [&] { (void)embedding(several, table); },
               {"embedding", "index -9223372036854775808 at position 1", "< 5"});
  expect_error("float index", [&] { (void)index_select(table, 0, fl); }, {"index_select", "int64 or int32"});
  expect_error("2-D index", [&] { (void)index_select(table, 0, two_d); }, {"index_select", "1-D"});
  expect_error("bad axis", [&] { (void)index_select(table, 2, ok); }, {"index_select"});
  expect_error("embedding id past the table", [&] { (void)embedding(high, table); }, {"embedding", "index 5", "< 5"});
  expect_error("embedding of a 1-D weight", [&] { (void)embedding(ok, one_d); }, {"embedding", "2-D"});
  expect_error("gather past the axis", [&] { (void)gather(table, 0, big); }, {"gather", "index 6 at position 1", "< 5"});
  expect_error("gather of another rank", [&] { (void)gather(table, 0, ok); }, {"gather", "same rank"});
  const Tensor ids8 = Tensor::full({1, 1, 1, 1, 1, 1, 1, 2}, 0, Dtype::I64);
  expect_error("embedding of rank-8 ids", [&] { (void)embedding(ids8, table); },
               {"embedding", "int64[1, 1, 1, 1, 1, 1, 1, 2]", "most axes", "adds one"});
}

// A bool buffer of the user's may hold any nonzero byte for true
// (docs/DTYPES.md); the rows these ops copy out of it hold 0 or 1, as every
// other op's bool result does.
TEST(IndexOps, BoolRowsCopiedFromAnyBytesHoldZeroOrOne) {
  static const uint8_t raw[6] = {0, 1, 2, 255, 128, 0};
  const Tensor m = Tensor::from_blob(static_cast<const void*>(raw), Shape{6}, Dtype::Bool);
  const Tensor idx = make(Dtype::I64, {2, 3, 4, 5, 0, 1});
  const std::vector<uint8_t> want = {1, 1, 1, 0, 0, 1};
  auto bytes = [](const Tensor& t) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(t.data<bool>());
    return std::vector<uint8_t>(p, p + t.numel());
  };
  EXPECT_EQ(bytes(index_select(m, 0, idx)), want);
  EXPECT_EQ(bytes(gather(m, 0, idx)), want);
  EXPECT_EQ(bytes(embedding(idx, m.reshape({6, 1}))), want);
  EXPECT_EQ(bytes(index_select(m.reshape({3, 2}), 1, make(Dtype::I32, {1}))), (std::vector<uint8_t>{1, 1, 0}));
}

// data<bool>() hands out 0s and 1s, also of a user's buffer holding other
// nonzero bytes (read through a canonical copy; a bool of another byte is
// undefined behaviour to read) and of a strided view of it; a buffer of 0s
// and 1s is handed out as it is, without a copy.
TEST(IndexOps, DataOfABoolBufferOfAnyBytesHoldsZeroOrOne) {
  static const uint8_t raw[6] = {2, 0, 3, 255, 1, 0};
  const Tensor m = Tensor::from_blob(static_cast<const void*>(raw), Shape{2, 3}, Dtype::Bool);
  auto bytes = [](const Tensor& t) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(t.data<bool>());
    return std::vector<uint8_t>(p, p + t.numel());
  };
  EXPECT_EQ(bytes(m), (std::vector<uint8_t>{1, 0, 1, 1, 1, 0}));
  EXPECT_EQ(bytes(m.transpose(0, 1)), (std::vector<uint8_t>{1, 1, 0, 1, 1, 0}));
  EXPECT_EQ(bytes(m.transpose(0, 1).contiguous()), (std::vector<uint8_t>{1, 1, 0, 1, 1, 0}));
  static const uint8_t canonical[3] = {1, 0, 1};
  const Tensor c = Tensor::from_blob(static_cast<const void*>(canonical), Shape{3}, Dtype::Bool);
  EXPECT_EQ(reinterpret_cast<const void*>(c.data<bool>()), static_cast<const void*>(canonical));
}

}  // namespace
}  // namespace dvm::testing
