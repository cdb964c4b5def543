// The C API (include/dvm/dvm_c.h): every op gives the C++ API's bits,
// every dtype round-trips, and bad input is a status with a message, never
// an exception or a written output.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "dvm/dvm.h"
#include "dvm/dvm_c.h"

namespace dvm {
namespace {

// A handle released at scope exit.
struct H {
  dvm_tensor t = nullptr;
  ~H() { dvm_release(t); }
  dvm_tensor* out() { return &t; }
};

std::vector<float> read_f32(dvm_tensor t) {
  int64_t n = 0;
  EXPECT_EQ(dvm_numel(t, &n), DVM_OK);
  std::vector<float> v(static_cast<size_t>(n));
  EXPECT_EQ(dvm_read_f32(t, v.data(), v.size()), DVM_OK) << dvm_last_error();
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

const std::vector<float> kX = {-2.5f, -1.0f, -0.25f, 0.0f, 0.5f, 1.0f, 2.0f, 3.5f, -0.75f, 4.0f, 0.125f, -3.0f};
const int64_t kShape[2] = {3, 4};

TEST(CApi, EveryUnaryAndBinaryOpIsTheCppOp) {
  const std::vector<float> y = {1.5f, -0.5f, 2.0f, 0.25f};
  H x, b;
  ASSERT_EQ(dvm_from_blob(kX.data(), kShape, 2, DVM_F32, x.out()), DVM_OK);
  const int64_t bs[1] = {4};
  ASSERT_EQ(dvm_from_blob(y.data(), bs, 1, DVM_F32, b.out()), DVM_OK);
  const Tensor cx = Tensor::from_blob(kX.data(), {3, 4}), cb = Tensor::from_blob(y.data(), {4});
  using U = Tensor (*)(const Tensor&);
  const U unary[] = {neg,  abs,  exp,   log,   sqrt, rsqrt, reciprocal,
                     tanh, sigmoid, relu, [](const Tensor& t) { return gelu(t); },
                     [](const Tensor& t) { return gelu(t, GeluApprox::Tanh); }, erf, sin, cos, floor, ceil, round};
  for (int op = DVM_NEG; op <= DVM_ROUND; ++op) {
    H r;
    ASSERT_EQ(dvm_unary(op, x.t, r.out()), DVM_OK) << op << dvm_last_error();
    EXPECT_TRUE(same_bits(read_f32(r.t), unary[op](cx).to_vector())) << "unary op " << op;
  }
  using B = Tensor (*)(const Tensor&, const Tensor&);
  const B binary[] = {add, sub, mul, div, maximum, minimum, pow, eq, ne, lt, le, gt, ge};
  for (int op = DVM_ADD; op <= DVM_GE; ++op) {
    H r, rs, rf;
    ASSERT_EQ(dvm_binary(op, x.t, b.t, r.out()), DVM_OK) << op;
    EXPECT_TRUE(same_bits(read_f32(r.t), binary[op](cx, cb).to_vector())) << "binary op " << op;
    ASSERT_EQ(dvm_binary_scalar(op, x.t, 1.5f, 0, rs.out()), DVM_OK);
    EXPECT_TRUE(same_bits(read_f32(rs.t), binary[op](cx, Tensor(1.5f)).to_vector())) << "scalar op " << op;
    ASSERT_EQ(dvm_binary_scalar(op, x.t, 1.5f, 1, rf.out()), DVM_OK);
    EXPECT_TRUE(same_bits(read_f32(rf.t), binary[op](Tensor(1.5f), cx).to_vector())) << "scalar-first op " << op;
  }
}

// The integer, bitwise and logical ops (appended to the enums) on int32
// operands, as the C++ functions compute them; bitwise on floats is an error.
TEST(CApi, IntegerBitwiseAndLogicalOps) {
  const std::vector<int32_t> av = {7, -7, INT32_MIN, 0, 5, -1}, bv = {2, 2, -1, 3, 0, -4};
  const int64_t shape[1] = {6};
  H a, b, f;
  ASSERT_EQ(dvm_from_blob(av.data(), shape, 1, DVM_I32, a.out()), DVM_OK);
  ASSERT_EQ(dvm_from_blob(bv.data(), shape, 1, DVM_I32, b.out()), DVM_OK);
  const Tensor ca = Tensor::from_blob(av.data(), {6}), cb = Tensor::from_blob(bv.data(), {6});
  using B = Tensor (*)(const Tensor&, const Tensor&);
  const B binary[] = {floor_divide, remainder, bitwise_and, bitwise_or, bitwise_xor,
                      logical_and,  logical_or, logical_xor};
  for (int op = DVM_FLOOR_DIVIDE; op <= DVM_LOGICAL_XOR; ++op) {
    H r;
    ASSERT_EQ(dvm_binary(op, a.t, b.t, r.out()), DVM_OK) << op << dvm_last_error();
    EXPECT_TRUE(same_bits(read_f32(r.t), binary[op - DVM_FLOOR_DIVIDE](ca, cb).to_vector())) << "binary op " << op;
  }
  H n, l;
  ASSERT_EQ(dvm_unary(DVM_BITWISE_NOT, a.t, n.out()), DVM_OK);
  EXPECT_TRUE(same_bits(read_f32(n.t), bitwise_not(ca).to_vector()));
  ASSERT_EQ(dvm_unary(DVM_LOGICAL_NOT, a.t, l.out()), DVM_OK);
  EXPECT_TRUE(same_bits(read_f32(l.t), logical_not(ca).to_vector()));
  const float fv[1] = {1.0f};
  const int64_t one[1] = {1};
  ASSERT_EQ(dvm_from_blob(fv, one, 1, DVM_F32, f.out()), DVM_OK);
  dvm_tensor out = nullptr;
  EXPECT_EQ(dvm_binary(DVM_BITWISE_AND, f.t, f.t, &out), DVM_ERROR);
  EXPECT_NE(std::string(dvm_last_error()).find("bitwise_and"), std::string::npos) << dvm_last_error();
  EXPECT_EQ(dvm_unary(DVM_LOGICAL_NOT + 1, a.t, &out), DVM_INVALID_ARGUMENT);
  EXPECT_EQ(dvm_binary(DVM_LOGICAL_XOR + 1, a.t, b.t, &out), DVM_INVALID_ARGUMENT);
  // A dtype outside the enum names its value and the range.
  EXPECT_EQ(dvm_to(a.t, 42, &out), DVM_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dvm_last_error()).find("dvm_to: unknown dtype 42 (expected 0 to"), std::string::npos)
      << dvm_last_error();
  EXPECT_EQ(dvm_full(one, 1, 1.0, -1, &out), DVM_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dvm_last_error()).find("unknown dtype -1"), std::string::npos) << dvm_last_error();
}

TEST(CApi, ReductionsCompositionsProductsAndViews) {
  H x, w, bias;
  ASSERT_EQ(dvm_from_blob(kX.data(), kShape, 2, DVM_F32, x.out()), DVM_OK);
  const std::vector<float> wv = {0.5f, -1.0f, 2.0f, 0.25f, 1.0f, 1.5f, -0.5f, 0.75f};
  const int64_t ws[2] = {2, 4}, bs[1] = {2};
  const float bv[2] = {0.1f, -0.2f};
  ASSERT_EQ(dvm_from_blob(wv.data(), ws, 2, DVM_F32, w.out()), DVM_OK);
  ASSERT_EQ(dvm_from_blob(bv, bs, 1, DVM_F32, bias.out()), DVM_OK);
  const Tensor cx = Tensor::from_blob(kX.data(), {3, 4}), cw = Tensor::from_blob(wv.data(), {2, 4}),
               cb = Tensor::from_blob(bv, {2});
  const int axis1[1] = {1}, both[2] = {0, 1};
  struct Case {
    std::function<dvm_status(dvm_tensor*)> c;
    Tensor want;
    const char* what;
  };
  const int64_t ns[1] = {4}, rs[2] = {4, 3}, es[3] = {2, 3, 4};
  const int perm[2] = {1, 0};
  const Case cases[] = {
      {[&](dvm_tensor* o) { return dvm_reduce(DVM_SUM, x.t, axis1, 1, 0, o); }, cx.sum(1), "sum(1)"},
      {[&](dvm_tensor* o) { return dvm_reduce(DVM_MEAN, x.t, both, 2, 1, o); }, cx.mean({0, 1}, true), "mean keepdim"},
      {[&](dvm_tensor* o) { return dvm_reduce(DVM_MAX, x.t, nullptr, 0, 0, o); }, cx.max(), "max()"},
      {[&](dvm_tensor* o) { return dvm_reduce(DVM_MIN, x.t, axis1, 1, 1, o); }, cx.min(1, true), "min(1, true)"},
      {[&](dvm_tensor* o) { return dvm_softmax(x.t, -1, o); }, softmax(cx, -1), "softmax"},
      {[&](dvm_tensor* o) { return dvm_log_softmax(x.t, 0, o); }, log_softmax(cx, 0), "log_softmax"},
      {[&](dvm_tensor* o) { return dvm_layer_norm(x.t, ns, 1, nullptr, nullptr, 1e-5f, o); },
       layer_norm(cx, {4}, Tensor(), Tensor()), "layer_norm"},
      {[&](dvm_tensor* o) { return dvm_linear(x.t, w.t, bias.t, o); }, linear(cx, cw, cb), "linear"},
      {[&](dvm_tensor* o) { return dvm_linear(x.t, w.t, nullptr, o); }, linear(cx, cw), "linear, no bias"},
      {[&](dvm_tensor* o) { return dvm_reshape(x.t, rs, 2, o); }, cx.reshape({4, 3}), "reshape"},
      {[&](dvm_tensor* o) { return dvm_permute(x.t, perm, 2, o); }, cx.permute({1, 0}), "permute"},
      {[&](dvm_tensor* o) { return dvm_transpose(x.t, 0, 1, o); }, cx.transpose(0, 1), "transpose"},
      {[&](dvm_tensor* o) { return dvm_slice(x.t, 1, 1, 4, 2, o); }, cx.slice(1, 1, 4, 2), "slice"},
      {[&](dvm_tensor* o) { return dvm_expand(x.t, es, 3, o); }, cx.expand({2, 3, 4}), "expand"},
      {[&](dvm_tensor* o) { return dvm_to(x.t, DVM_F16, o); }, cx.to(Dtype::F16), "to f16"},
      {[&](dvm_tensor* o) { return dvm_var(x.t, axis1, 1, 0, 1, o); }, cx.var(1, 0, true), "var"},
      {[&](dvm_tensor* o) { return dvm_std(x.t, nullptr, 0, 1, 0, o); }, cx.std(), "std()"},
      {[&](dvm_tensor* o) { return dvm_clamp(x.t, -0.5f, 0.5f, o); }, clamp(cx, -0.5f, 0.5f), "clamp"},
      {[&](dvm_tensor* o) { return dvm_silu(x.t, o); }, silu(cx), "silu"},
      {[&](dvm_tensor* o) { return dvm_tril(x.t, 1, o); }, tril(cx, 1), "tril"},
      {[&](dvm_tensor* o) { return dvm_triu(x.t, -1, o); }, triu(cx, -1), "triu"},
      {[&](dvm_tensor* o) { return dvm_unsqueeze(x.t, 1, o); }, cx.unsqueeze(1), "unsqueeze"},
      {[&](dvm_tensor* o) { return dvm_squeeze(x.t, DVM_ALL_AXES, o); }, cx.squeeze(), "squeeze()"},
      {[&](dvm_tensor* o) { return dvm_flatten(x.t, 0, -1, o); }, cx.flatten(), "flatten"},
      {[&](dvm_tensor* o) { return dvm_narrow(x.t, 1, -3, 2, o); }, cx.narrow(1, -3, 2), "narrow"},
  };
  for (const Case& c : cases) {
    H r;
    ASSERT_EQ(c.c(r.out()), DVM_OK) << c.what << ": " << dvm_last_error();
    int64_t shape[DVM_MAX_RANK];
    int rank = -1;
    ASSERT_EQ(dvm_shape(r.t, shape, &rank), DVM_OK);
    EXPECT_EQ(Shape(std::vector<int64_t>(shape, shape + rank)), c.want.shape()) << c.what;
    EXPECT_TRUE(same_bits(read_f32(r.t), c.want.to_vector())) << c.what;
  }
  H m, mm, a;
  const int64_t sq[2] = {4, 4};
  std::vector<float> sv(16);
  for (int i = 0; i < 16; ++i) sv[static_cast<size_t>(i)] = 0.25f * static_cast<float>(i % 5) - 0.5f;
  ASSERT_EQ(dvm_from_blob(sv.data(), sq, 2, DVM_F32, m.out()), DVM_OK);
  ASSERT_EQ(dvm_matmul(x.t, m.t, mm.out()), DVM_OK);
  const Tensor cm = Tensor::from_blob(sv.data(), {4, 4});
  EXPECT_TRUE(same_bits(read_f32(mm.t), matmul(cx, cm).to_vector()));
  ASSERT_EQ(dvm_addmm(x.t, x.t, m.t, 0.5f, 2.0f, a.out()), DVM_OK);
  EXPECT_TRUE(same_bits(read_f32(a.t), addmm(cx, cx, cm, 0.5f, 2.0f).to_vector()));
  // masked_fill with a comparison's mask; split into handles, all or none.
  H mask, filled;
  ASSERT_EQ(dvm_binary_scalar(DVM_GT, x.t, 0.0f, 0, mask.out()), DVM_OK);
  ASSERT_EQ(dvm_masked_fill(x.t, mask.t, 9.0f, filled.out()), DVM_OK);
  EXPECT_TRUE(same_bits(read_f32(filled.t), masked_fill(cx, gt(cx, 0.0f), 9.0f).to_vector()));
  const int64_t sizes[2] = {1, 3}, bad[2] = {1, 2};
  H p0, p1;
  dvm_tensor pieces[2] = {nullptr, nullptr};
  EXPECT_EQ(dvm_split(x.t, bad, 2, 1, pieces), DVM_ERROR);
  EXPECT_TRUE(std::string(dvm_last_error()).find("add up to 4") != std::string::npos) << dvm_last_error();
  EXPECT_EQ(pieces[0], nullptr);
  ASSERT_EQ(dvm_split(x.t, sizes, 2, -1, pieces), DVM_OK);
  *p0.out() = pieces[0];
  *p1.out() = pieces[1];
  const std::vector<Tensor> want = cx.split(std::vector<int64_t>{1, 3}, 1);
  EXPECT_TRUE(same_bits(read_f32(p0.t), want[0].to_vector()));
  EXPECT_TRUE(same_bits(read_f32(p1.t), want[1].to_vector()));
  EXPECT_EQ(dvm_split(x.t, nullptr, 2, 1, pieces), DVM_INVALID_ARGUMENT);
  EXPECT_EQ(dvm_var(x.t, nullptr, 1, 1, 0, pieces), DVM_INVALID_ARGUMENT);
}

TEST(CApi, EveryDtypeRoundTrips) {
  const int64_t s[1] = {4};
  const float f32[4] = {1.5f, -2.0f, 0.0f, 3.25f};
  const uint16_t f16[4] = {to_half(1.5f).bits, to_half(-2.0f).bits, 0, to_half(65504.0f).bits};
  const int32_t i32[4] = {16777217, -1, INT32_MIN, 7};
  const int64_t i64[4] = {(int64_t{1} << 50) + 1, -3, 0, INT64_MAX};
  const uint8_t u8[4] = {0, 255, 128, 7};
  const uint8_t bl[4] = {1, 0, 1, 1};
  const void* data[] = {f32, f16, f16, i32, bl, i64, u8};
  for (int d = DVM_F32; d <= DVM_U8; ++d) {
    const size_t bytes = 4 * dtype_size(static_cast<Dtype>(d));
    for (int copy = 0; copy < 2; ++copy) {
      H t;
      ASSERT_EQ((copy ? dvm_from_copy : dvm_from_blob)(data[d], s, 1, d, t.out()), DVM_OK);
      dvm_dtype got_type;
      ASSERT_EQ(dvm_get_dtype(t.t, &got_type), DVM_OK);
      EXPECT_EQ(got_type, d);
      std::vector<unsigned char> back(bytes);
      ASSERT_EQ(dvm_read(t.t, d, back.data(), bytes), DVM_OK) << dvm_last_error();
      EXPECT_EQ(std::memcmp(back.data(), data[d], bytes), 0) << dtype_name(static_cast<Dtype>(d));
    }
  }
  // from_copy owns its values: the source may change afterwards.
  float src[2] = {1.0f, 2.0f};
  const int64_t two[1] = {2};
  H c;
  ASSERT_EQ(dvm_from_copy(src, two, 1, DVM_F32, c.out()), DVM_OK);
  src[0] = 9.0f;
  EXPECT_EQ(read_f32(c.t), (std::vector<float>{1.0f, 2.0f}));
  H full, ar;
  ASSERT_EQ(dvm_full(two, 1, 3.7, DVM_I32, full.out()), DVM_OK);
  int32_t fi[2];
  ASSERT_EQ(dvm_read(full.t, DVM_I32, fi, sizeof fi), DVM_OK);
  EXPECT_EQ(fi[0], 3);
  ASSERT_EQ(dvm_arange(0, 3, 1, DVM_U8, ar.out()), DVM_OK);
  EXPECT_EQ(read_f32(ar.t), (std::vector<float>{0.0f, 1.0f, 2.0f}));
}

TEST(CApi, BadInputIsAStatusAndAMessageNeverAnOutput) {
  H x;
  ASSERT_EQ(dvm_from_blob(kX.data(), kShape, 2, DVM_F32, x.out()), DVM_OK);
  dvm_tensor out = nullptr;
  EXPECT_EQ(dvm_matmul(x.t, x.t, &out), DVM_ERROR);
  EXPECT_EQ(out, nullptr);
  EXPECT_NE(std::string(dvm_last_error()).find("matmul"), std::string::npos) << dvm_last_error();
  EXPECT_NE(std::string(dvm_last_error()).find("[3, 4]"), std::string::npos) << dvm_last_error();
  EXPECT_EQ(dvm_unary(DVM_EXP, nullptr, &out), DVM_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dvm_last_error()).find("dvm_unary"), std::string::npos);
  EXPECT_EQ(dvm_unary(99, x.t, &out), DVM_INVALID_ARGUMENT);
  EXPECT_EQ(dvm_binary(-1, x.t, x.t, &out), DVM_INVALID_ARGUMENT);
  EXPECT_EQ(dvm_reduce(7, x.t, nullptr, 0, 0, &out), DVM_INVALID_ARGUMENT);
  EXPECT_EQ(dvm_unary(DVM_EXP, x.t, nullptr), DVM_INVALID_ARGUMENT);
  const int64_t big[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  EXPECT_EQ(dvm_from_blob(kX.data(), big, 9, DVM_F32, &out), DVM_INVALID_ARGUMENT);
  EXPECT_EQ(dvm_from_blob(kX.data(), kShape, 2, 12, &out), DVM_INVALID_ARGUMENT);
  // A null pointer is an invalid argument (EMBEDDING.md), where it would be read or written.
  EXPECT_EQ(dvm_from_blob(nullptr, kShape, 2, DVM_F32, &out), DVM_INVALID_ARGUMENT);  // 12 elements
  EXPECT_EQ(dvm_from_copy(nullptr, kShape, 2, DVM_F32, &out), DVM_INVALID_ARGUMENT);
  const int64_t none[1] = {0};
  H empty;
  EXPECT_EQ(dvm_from_blob(nullptr, none, 1, DVM_F32, empty.out()), DVM_OK);  // no element to read
  EXPECT_EQ(dvm_read(x.t, DVM_F32, nullptr, 48), DVM_INVALID_ARGUMENT);
  EXPECT_EQ(dvm_read_f32(x.t, nullptr, 12), DVM_INVALID_ARGUMENT);
  EXPECT_EQ(dvm_binary_scalar(DVM_ADD, x.t, 1.0f, 2, &out), DVM_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dvm_last_error()).find("scalar_first"), std::string::npos) << dvm_last_error();
  EXPECT_EQ(dvm_binary_scalar(DVM_ADD, x.t, 1.0f, -1, &out), DVM_INVALID_ARGUMENT);
  EXPECT_EQ(dvm_reduce(DVM_SUM, x.t, nullptr, 2, 0, &out), DVM_INVALID_ARGUMENT);
  // keepdim is 0 or 1, as every flag.
  EXPECT_EQ(dvm_reduce(DVM_SUM, x.t, nullptr, 0, 2, &out), DVM_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dvm_last_error()).find("keepdim"), std::string::npos) << dvm_last_error();
  EXPECT_EQ(dvm_argmax(x.t, 0, -1, &out), DVM_INVALID_ARGUMENT);
  EXPECT_EQ(dvm_var(x.t, nullptr, 0, 1, 3, &out), DVM_INVALID_ARGUMENT);
  const int bad_axis[1] = {5};
  EXPECT_EQ(dvm_reduce(DVM_SUM, x.t, bad_axis, 1, 0, &out), DVM_ERROR);
  EXPECT_EQ(out, nullptr);
  // Reads: the wrong type, too little room.
  int32_t small[12];
  EXPECT_EQ(dvm_read(x.t, DVM_I32, small, sizeof small), DVM_ERROR);
  EXPECT_NE(std::string(dvm_last_error()).find("float32[3, 4]"), std::string::npos);
  float few[3];
  EXPECT_EQ(dvm_read(x.t, DVM_F32, few, sizeof few), DVM_ERROR);
  EXPECT_EQ(dvm_read_f32(x.t, few, 3), DVM_ERROR);
  char isa[2];
  EXPECT_EQ(dvm_get_isa(isa, sizeof isa), DVM_ERROR);
  EXPECT_EQ(dvm_set_num_threads(-3), DVM_ERROR);
  EXPECT_EQ(dvm_set_isa("sse9"), DVM_ERROR);
  EXPECT_EQ(dvm_set_tier_mode(3), DVM_INVALID_ARGUMENT);
  dvm_release(nullptr);  // does nothing
}

// A failed allocation is DVM_OUT_OF_MEMORY, where it fails: past the memory
// limit at creation or in a flush (and the read of what that flush should
// have computed), or a size the system cannot give.
TEST(CApi, AFailedAllocationIsOutOfMemory) {
  const int64_t big[1] = {int64_t{1} << 22};  // 16 MiB of float32
  H x;
  ASSERT_EQ(dvm_set_memory_limit(int64_t{4} << 20), DVM_OK);
  dvm_tensor out = nullptr;
  EXPECT_EQ(dvm_full(big, 1, 1.0, DVM_I32, &out), DVM_OUT_OF_MEMORY);
  EXPECT_EQ(out, nullptr);
  EXPECT_NE(std::string(dvm_last_error()).find("memory limit"), std::string::npos) << dvm_last_error();
  ASSERT_EQ(dvm_full(big, 1, 1.0, DVM_F32, x.out()), DVM_OK);  // a constant: no buffer
  H y;
  ASSERT_EQ(dvm_unary(DVM_EXP, x.t, y.out()), DVM_OK);  // recorded; its flush needs 16 MiB
  std::vector<float> all(static_cast<size_t>(big[0]));
  EXPECT_EQ(dvm_read_f32(y.t, all.data(), all.size()), DVM_OUT_OF_MEMORY) << dvm_last_error();
  // Read again (the failed flush's error, kept by the tensor) and synced:
  // each message names the C call, not the C++ read behind it.
  EXPECT_EQ(dvm_read_f32(y.t, all.data(), all.size()), DVM_OUT_OF_MEMORY) << dvm_last_error();
  EXPECT_EQ(std::string(dvm_last_error()).rfind("dvm_read_f32: ", 0), 0u) << dvm_last_error();
  EXPECT_EQ(dvm_sync(y.t), DVM_OUT_OF_MEMORY) << dvm_last_error();
  EXPECT_EQ(std::string(dvm_last_error()).rfind("dvm_sync: ", 0), 0u) << dvm_last_error();
  ASSERT_EQ(dvm_set_memory_limit(0), DVM_OK);
#if !defined(__SANITIZE_ADDRESS__)  // (AddressSanitizer's allocator aborts on such a size instead of failing)
  const int64_t huge[2] = {int64_t{1} << 31, int64_t{1} << 20};  // 8 PiB of int32
  EXPECT_EQ(dvm_full(huge, 2, 1.0, DVM_I32, &out), DVM_OUT_OF_MEMORY) << dvm_last_error();
#endif
  const int bad_axis[1] = {3};
  EXPECT_EQ(dvm_reduce(DVM_SUM, x.t, bad_axis, 1, 0, &out), DVM_ERROR);  // other errors stay DVM_ERROR
}

TEST(CApi, LastErrorIsPerThread) {
  H x;
  ASSERT_EQ(dvm_from_blob(kX.data(), kShape, 2, DVM_F32, x.out()), DVM_OK);
  dvm_tensor out = nullptr;
  ASSERT_EQ(dvm_transpose(x.t, 0, 7, &out), DVM_ERROR);
  const std::string mine = dvm_last_error();
  std::string other;
  std::thread t([&] {
    dvm_tensor o = nullptr;
    (void)dvm_unary(DVM_EXP, nullptr, &o);
    other = dvm_last_error();
  });
  t.join();
  EXPECT_EQ(std::string(dvm_last_error()), mine);
  EXPECT_NE(other, mine);
  EXPECT_NE(other.find("dvm_unary"), std::string::npos);
}

TEST(CApi, SettingsAndStats) {
  char isa[16];
  ASSERT_EQ(dvm_get_isa(isa, sizeof isa), DVM_OK);
  EXPECT_EQ(std::string(isa), dvm::isa());
  ASSERT_EQ(dvm_reset_stats(), DVM_OK);
  H x, y;
  ASSERT_EQ(dvm_from_blob(kX.data(), kShape, 2, DVM_F32, x.out()), DVM_OK);
  ASSERT_EQ(dvm_unary(DVM_EXP, x.t, y.out()), DVM_OK);
  ASSERT_EQ(dvm_sync(y.t), DVM_OK);
  dvm_stats s;
  ASSERT_EQ(dvm_get_stats(&s), DVM_OK);
  EXPECT_GE(s.flushes, 1);
  EXPECT_GE(s.kernels_run, 1);
  EXPECT_EQ(s.flushes, dvm::stats().flushes);
  EXPECT_EQ(std::string(dvm_version()), dvm::version());
  ASSERT_EQ(dvm_flush(), DVM_OK);
  ASSERT_EQ(dvm_wait_for_jit(), DVM_OK);
  dvm_memory_stats m;
  ASSERT_EQ(dvm_get_memory_stats(&m), DVM_OK);
  EXPECT_EQ(m.live_bytes, dvm::memory_stats().live_bytes);
  {
    // A weight read by columns, twice by two-row products: its row-major
    // copy is made (docs/API.md, "Weights read by columns").
    const int64_t before = dvm::memory_stats().weight_copy_bytes;
    const Tensor w = Tensor::uniform({80, 96}, 3) * 0.5f;
    w.sync();
    const Tensor x = Tensor::uniform({2, 96}, 4);
    for (int i = 0; i < 2; ++i) (void)linear(x, w).to_vector();
    int64_t copies = -1;
    ASSERT_EQ(dvm_get_weight_copy_bytes(&copies), DVM_OK);
    EXPECT_EQ(copies, dvm::memory_stats().weight_copy_bytes);
    EXPECT_GT(copies, before) << "no copy was made";
    EXPECT_EQ(dvm_get_weight_copy_bytes(nullptr), DVM_INVALID_ARGUMENT);
  }
  EXPECT_EQ(dvm_set_memory_limit(-5), DVM_ERROR);
  ASSERT_EQ(dvm_set_memory_limit(0), DVM_OK);
  ASSERT_EQ(dvm_trim(), DVM_OK);
}

// Shape and values of got equal want's.
void expect_same(dvm_tensor got, const Tensor& want, const char* what) {
  int64_t shape[DVM_MAX_RANK];
  int rank = -1;
  ASSERT_EQ(dvm_shape(got, shape, &rank), DVM_OK) << what;
  EXPECT_EQ(Shape(std::vector<int64_t>(shape, shape + rank)).to_string(), want.shape().to_string()) << what;
  EXPECT_TRUE(same_bits(read_f32(got), want.to_vector())) << what;
}

// Integer scalars as in C++: torch's wrapped integer keeps an int32 tensor
// int32 and every digit of the value.
TEST(CApi, IntegerScalarsAreTheCppOnes) {
  const std::vector<int32_t> iv = {16777217, -4, 7};
  const int64_t shape[1] = {3};
  H x, y, z, w, s, m, f;
  ASSERT_EQ(dvm_from_blob(iv.data(), shape, 1, DVM_I32, x.out()), DVM_OK);
  ASSERT_EQ(dvm_binary_scalar_int(DVM_ADD, x.t, 1, 0, y.out()), DVM_OK) << dvm_last_error();
  expect_same(y.t, Tensor::from_blob(iv.data(), {3}) + 1, "i32 + 1");
  dvm_dtype dt;
  ASSERT_EQ(dvm_get_dtype(y.t, &dt), DVM_OK);
  EXPECT_EQ(dt, DVM_I32);
  ASSERT_EQ(dvm_binary_scalar_int(DVM_SUB, x.t, 10, 1, z.out()), DVM_OK);
  expect_same(z.t, 10 - Tensor::from_blob(iv.data(), {3}), "10 - i32");
  ASSERT_EQ(dvm_clamp_int(x.t, 0, 9, w.out()), DVM_OK);
  expect_same(w.t, clamp(Tensor::from_blob(iv.data(), {3}), 0, 9), "clamp");
  ASSERT_EQ(dvm_scalar_int(int64_t{1} << 40, s.out()), DVM_OK);
  ASSERT_EQ(dvm_get_dtype(s.t, &dt), DVM_OK);
  EXPECT_EQ(dt, DVM_I64);
  dvm_tensor out = nullptr;
  EXPECT_EQ(dvm_binary(DVM_MUL, x.t, s.t, &out), DVM_ERROR);  // 2^40 does not fit int32
  EXPECT_NE(std::string(dvm_last_error()).find("int32"), std::string::npos) << dvm_last_error();
  ASSERT_EQ(dvm_binary_scalar(DVM_GT, x.t, 0.0f, 0, m.out()), DVM_OK);
  ASSERT_EQ(dvm_masked_fill_int(x.t, m.t, 16777219, f.out()), DVM_OK);
  std::vector<int32_t> got(3);
  ASSERT_EQ(dvm_read(f.t, DVM_I32, got.data(), sizeof(int32_t) * 3), DVM_OK);
  EXPECT_EQ(got, (std::vector<int32_t>{16777219, -4, 16777219}));
  EXPECT_EQ(dvm_binary_scalar_int(99, x.t, 1, 0, &out), DVM_INVALID_ARGUMENT);
  EXPECT_EQ(dvm_binary_scalar_int(DVM_ADD, x.t, 1, 2, &out), DVM_INVALID_ARGUMENT);
}


// *out untouched, and a message naming op.
void expect_failed(dvm_status got, dvm_status want, dvm_tensor out, const char* op) {
  EXPECT_EQ(got, want) << op;
  EXPECT_EQ(out, nullptr) << op;
  EXPECT_NE(std::string(dvm_last_error()).find(op), std::string::npos) << dvm_last_error();
}

TEST(CApi, JoiningIndexingArgExtremaAndAttention) {
  const std::vector<float> yv = {1.0f, 2.0f, -1.0f, 0.5f, 3.0f, -2.0f, 0.25f, 4.0f, -0.5f, 1.5f, 2.5f, -3.5f};
  const std::vector<int64_t> iv = {2, 0, 2};
  const std::vector<int32_t> gv = {3, 0, 1, 2, 2, 1};
  const int64_t is[1] = {3}, gs[2] = {3, 2}, es[2] = {2, 2};
  const std::vector<int64_t> iv4 = {2, 0, 2, 0};
  H x, y, idx, gidx, ids4;
  ASSERT_EQ(dvm_from_blob(kX.data(), kShape, 2, DVM_F32, x.out()), DVM_OK);
  ASSERT_EQ(dvm_from_blob(yv.data(), kShape, 2, DVM_F32, y.out()), DVM_OK);
  ASSERT_EQ(dvm_from_blob(iv.data(), is, 1, DVM_I64, idx.out()), DVM_OK);
  ASSERT_EQ(dvm_from_blob(gv.data(), gs, 2, DVM_I32, gidx.out()), DVM_OK);
  ASSERT_EQ(dvm_from_blob(iv4.data(), es, 2, DVM_I64, ids4.out()), DVM_OK);
  const Tensor cx = Tensor::from_blob(kX.data(), {3, 4}), cy = Tensor::from_blob(yv.data(), {3, 4}),
               ci = Tensor::from_blob(iv.data(), {3}), cg = Tensor::from_blob(gv.data(), {3, 2}),
               cids = Tensor::from_blob(iv4.data(), {2, 2});
  const dvm_tensor both[2] = {x.t, y.t};
  struct Case {
    std::function<dvm_status(dvm_tensor*)> c;
    Tensor want;
    const char* what;
  };
  const Case cases[] = {
      {[&](dvm_tensor* o) { return dvm_cat(both, 2, 1, o); }, cat({cx, cy}, 1), "cat"},
      {[&](dvm_tensor* o) { return dvm_cat(both, 1, 0, o); }, cat({cx}, 0), "cat of one"},
      {[&](dvm_tensor* o) { return dvm_stack(both, 2, -1, o); }, stack({cx, cy}, -1), "stack"},
      {[&](dvm_tensor* o) { return dvm_index_select(x.t, 1, idx.t, o); }, index_select(cx, 1, ci), "index_select"},
      {[&](dvm_tensor* o) { return dvm_embedding(ids4.t, y.t, o); }, embedding(cids, cy), "embedding"},
      {[&](dvm_tensor* o) { return dvm_gather(x.t, 1, gidx.t, o); }, gather(cx, 1, cg), "gather"},
      {[&](dvm_tensor* o) { return dvm_argmax(x.t, 1, 0, o); }, cx.argmax(1), "argmax(1)"},
      {[&](dvm_tensor* o) { return dvm_argmin(x.t, 0, 1, o); }, cx.argmin(0, true), "argmin(0, true)"},
      {[&](dvm_tensor* o) { return dvm_argmax(x.t, DVM_ALL_AXES, 0, o); }, cx.argmax(), "argmax()"},
      {[&](dvm_tensor* o) { return dvm_argmin(x.t, DVM_ALL_AXES, 1, o); }, cx.argmin().reshape({1, 1}),
       "argmin() keepdim"},
  };
  for (const Case& c : cases) {
    H r;
    ASSERT_EQ(c.c(r.out()), DVM_OK) << c.what << ": " << dvm_last_error();
    expect_same(r.t, c.want, c.what);
  }
  dvm_dtype dt;
  H am;
  ASSERT_EQ(dvm_argmax(x.t, 0, 0, am.out()), DVM_OK);
  ASSERT_EQ(dvm_get_dtype(am.t, &dt), DVM_OK);
  EXPECT_EQ(dt, DVM_I64);

  // Attention over [2, 3, 4] queries, keys and values: no mask, causal, a
  // bool mask, an explicit scale.
  std::vector<float> qkv(24);
  for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = 0.125f * static_cast<float>((i * 7) % 11) - 0.5f;
  const std::vector<uint8_t> mv = {1, 0, 1, 1, 1, 0, 0, 1, 1};
  const int64_t qs[3] = {2, 3, 4}, ms[2] = {3, 3};
  H q, k, mask;
  ASSERT_EQ(dvm_from_blob(qkv.data(), qs, 3, DVM_F32, q.out()), DVM_OK);
  ASSERT_EQ(dvm_binary_scalar(DVM_MUL, q.t, -0.75f, 0, k.out()), DVM_OK);
  ASSERT_EQ(dvm_from_blob(mv.data(), ms, 2, DVM_BOOL, mask.out()), DVM_OK);
  const Tensor cq = Tensor::from_blob(qkv.data(), {2, 3, 4}), ck = cq * -0.75f,
               cm = Tensor::from_blob(mv.data(), {3, 3}, Dtype::Bool);
  H a0, a1, a2;
  ASSERT_EQ(dvm_scaled_dot_product_attention(q.t, k.t, q.t, nullptr, 0, 0.0f, a0.out()), DVM_OK) << dvm_last_error();
  expect_same(a0.t, scaled_dot_product_attention(cq, ck, cq), "sdpa");
  ASSERT_EQ(dvm_scaled_dot_product_attention(q.t, k.t, q.t, nullptr, 1, 0.3f, a1.out()), DVM_OK) << dvm_last_error();
  expect_same(a1.t, scaled_dot_product_attention(cq, ck, cq, Tensor(), true, 0.3f), "sdpa causal");
  ASSERT_EQ(dvm_scaled_dot_product_attention(q.t, k.t, q.t, mask.t, 0, 0.0f, a2.out()), DVM_OK) << dvm_last_error();
  expect_same(a2.t, scaled_dot_product_attention(cq, ck, cq, cm), "sdpa mask");
}

TEST(CApi, TransformerOpsBadInput) {
  H x, idx, bad_idx;
  ASSERT_EQ(dvm_from_blob(kX.data(), kShape, 2, DVM_F32, x.out()), DVM_OK);
  const int64_t iv[2] = {1, 4}, is[1] = {2};
  ASSERT_EQ(dvm_from_blob(iv, is, 1, DVM_I64, bad_idx.out()), DVM_OK);  // 4 is outside axis 1's [0, 4)
  ASSERT_EQ(dvm_from_blob(iv, is, 1, DVM_I64, idx.out()), DVM_OK);
  dvm_tensor out = nullptr;
  const dvm_tensor with_null[2] = {x.t, nullptr}, one[1] = {x.t};
  expect_failed(dvm_cat(one, 0, 0, &out), DVM_INVALID_ARGUMENT, out, "dvm_cat");
  expect_failed(dvm_cat(nullptr, 1, 0, &out), DVM_INVALID_ARGUMENT, out, "dvm_cat");
  expect_failed(dvm_stack(with_null, 2, 0, &out), DVM_INVALID_ARGUMENT, out, "tensors[1]");
  expect_failed(dvm_stack(one, -1, 0, &out), DVM_INVALID_ARGUMENT, out, "dvm_stack");
  expect_failed(dvm_cat(one, 1, 5, &out), DVM_ERROR, out, "cat");
  EXPECT_EQ(dvm_cat(one, 1, 0, nullptr), DVM_INVALID_ARGUMENT);
  expect_failed(dvm_index_select(x.t, 1, bad_idx.t, &out), DVM_ERROR, out, "index_select: index 4");
  expect_failed(dvm_index_select(x.t, 1, nullptr, &out), DVM_INVALID_ARGUMENT, out, "dvm_index_select");
  expect_failed(dvm_embedding(bad_idx.t, x.t, &out), DVM_ERROR, out, "embedding");
  expect_failed(dvm_embedding(nullptr, x.t, &out), DVM_INVALID_ARGUMENT, out, "dvm_embedding");
  expect_failed(dvm_gather(x.t, 0, idx.t, &out), DVM_ERROR, out, "gather");  // rank 1 index for a rank 2 x
  expect_failed(dvm_gather(nullptr, 0, idx.t, &out), DVM_INVALID_ARGUMENT, out, "dvm_gather");
  expect_failed(dvm_argmax(x.t, 2, 0, &out), DVM_ERROR, out, "argmax");
  expect_failed(dvm_argmin(nullptr, 0, 0, &out), DVM_INVALID_ARGUMENT, out, "dvm_argmin");
  expect_failed(dvm_scaled_dot_product_attention(x.t, idx.t, x.t, nullptr, 0, 0.0f, &out), DVM_ERROR, out,
                "scaled_dot_product_attention");
  expect_failed(dvm_scaled_dot_product_attention(x.t, x.t, nullptr, nullptr, 0, 0.0f, &out), DVM_INVALID_ARGUMENT, out,
                "dvm_scaled_dot_product_attention");
  expect_failed(dvm_scaled_dot_product_attention(x.t, x.t, x.t, nullptr, 2, 0.0f, &out), DVM_INVALID_ARGUMENT, out,
                "is_causal");
}

// A decode-like loop: one row, then two, then one, appended to a cache of
// [heads 2, capacity 5, dim 3] along axis 1; every result is cat of the rows.
TEST(CApi, KVCacheAppendsLikeCat) {
  const int64_t cap[3] = {2, 5, 3};
  dvm_kv_cache c = nullptr;
  ASSERT_EQ(dvm_kv_cache_create(cap, 3, 1, DVM_F32, &c), DVM_OK) << dvm_last_error();
  std::vector<Tensor> rows;
  const int64_t steps[3] = {1, 2, 1};
  for (int round = 0; round < 2; ++round) {  // the second after clear()
    rows.clear();
    for (const int64_t n : steps) {
      std::vector<float> v(static_cast<size_t>(2 * n * 3));
      for (size_t i = 0; i < v.size(); ++i)
        v[i] = 0.5f * static_cast<float>(i) - static_cast<float>(rows.size()) + static_cast<float>(round);
      const int64_t rs[3] = {2, n, 3};
      H r, all, vals;
      ASSERT_EQ(dvm_from_copy(v.data(), rs, 3, DVM_F32, r.out()), DVM_OK);
      rows.push_back(Tensor::from_vector(v, {2, n, 3}));
      ASSERT_EQ(dvm_kv_cache_append(c, r.t, all.out()), DVM_OK) << dvm_last_error();
      expect_same(all.t, cat(rows, 1), "append");
      ASSERT_EQ(dvm_kv_cache_values(c, vals.out()), DVM_OK);
      expect_same(vals.t, cat(rows, 1), "values");
    }
    int64_t size = -1;
    ASSERT_EQ(dvm_kv_cache_size(c, &size), DVM_OK);
    EXPECT_EQ(size, 4);
    // One more than the capacity left: an error, the cache unchanged.
    const int64_t two[3] = {2, 2, 3};
    H r2;
    dvm_tensor out = nullptr;
    ASSERT_EQ(dvm_full(two, 3, 1.0, DVM_F32, r2.out()), DVM_OK);
    expect_failed(dvm_kv_cache_append(c, r2.t, &out), DVM_ERROR, out, "KVCache::append");
    ASSERT_EQ(dvm_kv_cache_size(c, &size), DVM_OK);
    EXPECT_EQ(size, 4);
    ASSERT_EQ(dvm_kv_cache_clear(c), DVM_OK);
    ASSERT_EQ(dvm_kv_cache_size(c, &size), DVM_OK);
    EXPECT_EQ(size, 0);
  }
  dvm_tensor out = nullptr;
  int64_t size = 0;
  expect_failed(dvm_kv_cache_append(nullptr, nullptr, &out), DVM_INVALID_ARGUMENT, out, "dvm_kv_cache_append");
  expect_failed(dvm_kv_cache_append(c, nullptr, &out), DVM_INVALID_ARGUMENT, out, "dvm_kv_cache_append");
  expect_failed(dvm_kv_cache_values(nullptr, &out), DVM_INVALID_ARGUMENT, out, "dvm_kv_cache_values");
  EXPECT_EQ(dvm_kv_cache_size(nullptr, &size), DVM_INVALID_ARGUMENT);
  EXPECT_EQ(dvm_kv_cache_size(c, nullptr), DVM_INVALID_ARGUMENT);
  EXPECT_EQ(dvm_kv_cache_clear(nullptr), DVM_INVALID_ARGUMENT);
  // Rows appended after clear() outlive the cache.
  const std::vector<float> last = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
  const int64_t ls[3] = {2, 1, 3};
  H r, kept;
  ASSERT_EQ(dvm_from_blob(last.data(), ls, 3, DVM_F32, r.out()), DVM_OK);
  ASSERT_EQ(dvm_kv_cache_append(c, r.t, kept.out()), DVM_OK);
  dvm_kv_cache_destroy(c);
  expect_same(kept.t, Tensor::from_vector(last, {2, 1, 3}), "values after destroy");
  dvm_kv_cache_destroy(nullptr);  // does nothing
  dvm_kv_cache none = nullptr;
  EXPECT_EQ(dvm_kv_cache_create(cap, 0, 0, DVM_F32, &none), DVM_ERROR);  // no axis to grow along
  EXPECT_NE(std::string(dvm_last_error()).find("KVCache"), std::string::npos) << dvm_last_error();
  EXPECT_EQ(dvm_kv_cache_create(cap, 3, 1, 42, &none), DVM_INVALID_ARGUMENT);
  EXPECT_EQ(dvm_kv_cache_create(nullptr, 3, 1, DVM_F32, &none), DVM_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dvm_last_error()).find("dvm_kv_cache_create"), std::string::npos) << dvm_last_error();
  EXPECT_EQ(none, nullptr);
}

TEST(CApi, WeightsFileRoundTrip) {
  const std::string path = (std::filesystem::temp_directory_path() / "dvm_c_api_weights.bin").string();
  H a, b, b16;
  ASSERT_EQ(dvm_from_blob(kX.data(), kShape, 2, DVM_F32, a.out()), DVM_OK);
  const float bv[3] = {0.5f, -1.25f, 3.0f};
  const int64_t bs[1] = {3};
  ASSERT_EQ(dvm_from_blob(bv, bs, 1, DVM_F32, b.out()), DVM_OK);
  ASSERT_EQ(dvm_to(b.t, DVM_F16, b16.out()), DVM_OK);
  const char* names[2] = {"layer.weight", "layer.bias"};
  const dvm_tensor tensors[2] = {a.t, b16.t};
  ASSERT_EQ(dvm_save_weights(path.c_str(), names, tensors, 2), DVM_OK) << dvm_last_error();
  dvm_weights w = nullptr;
  ASSERT_EQ(dvm_load_weights(path.c_str(), &w), DVM_OK) << dvm_last_error();
  std::filesystem::remove(path);
  int64_t n = 0;
  ASSERT_EQ(dvm_weights_count(w, &n), DVM_OK);
  ASSERT_EQ(n, 2);
  const Tensor want[2] = {Tensor::from_blob(kX.data(), {3, 4}), Tensor::from_blob(bv, {3}).to(Dtype::F16)};
  for (int64_t i = 0; i < n; ++i) {
    const char* name = nullptr;
    ASSERT_EQ(dvm_weights_name(w, i, &name), DVM_OK);
    EXPECT_EQ(std::string(name), names[i]);
    H t, f;
    ASSERT_EQ(dvm_weights_tensor(w, i, t.out()), DVM_OK);
    expect_same(t.t, want[i], names[i]);
    ASSERT_EQ(dvm_weights_find(w, names[i], f.out()), DVM_OK);
    expect_same(f.t, want[i], names[i]);
  }
  H kept;
  ASSERT_EQ(dvm_weights_find(w, "layer.bias", kept.out()), DVM_OK);
  dvm_dtype dt;
  ASSERT_EQ(dvm_get_dtype(kept.t, &dt), DVM_OK);
  EXPECT_EQ(dt, DVM_F16);

  // Bad input: a missing name, an index out of range, null pointers.
  dvm_tensor out = nullptr;
  const char* name = nullptr;
  expect_failed(dvm_weights_find(w, "layer.scale", &out), DVM_INVALID_ARGUMENT, out, "layer.scale");
  expect_failed(dvm_weights_tensor(w, 2, &out), DVM_INVALID_ARGUMENT, out, "dvm_weights_tensor: index 2");
  expect_failed(dvm_weights_tensor(w, -1, &out), DVM_INVALID_ARGUMENT, out, "dvm_weights_tensor: index -1");
  EXPECT_EQ(dvm_weights_name(w, 5, &name), DVM_INVALID_ARGUMENT);
  EXPECT_EQ(name, nullptr);
  EXPECT_NE(std::string(dvm_last_error()).find("dvm_weights_name"), std::string::npos) << dvm_last_error();
  EXPECT_EQ(dvm_weights_count(nullptr, &n), DVM_INVALID_ARGUMENT);
  expect_failed(dvm_weights_find(nullptr, "x", &out), DVM_INVALID_ARGUMENT, out, "dvm_weights_find");
  expect_failed(dvm_weights_find(w, nullptr, &out), DVM_INVALID_ARGUMENT, out, "dvm_weights_find");
  dvm_weights_free(w);  // kept outlives it
  expect_same(kept.t, want[1], "a tensor after its weights handle is freed");
  dvm_weights_free(nullptr);  // does nothing

  const char* dup[2] = {"w", "w"};
  const char* with_null[2] = {"w", nullptr};
  EXPECT_EQ(dvm_save_weights(path.c_str(), dup, tensors, 2), DVM_ERROR);
  EXPECT_NE(std::string(dvm_last_error()).find("save_weights"), std::string::npos) << dvm_last_error();
  EXPECT_EQ(dvm_save_weights(path.c_str(), with_null, tensors, 2), DVM_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dvm_last_error()).find("names[1]"), std::string::npos) << dvm_last_error();
  EXPECT_EQ(dvm_save_weights(path.c_str(), names, tensors, -1), DVM_INVALID_ARGUMENT);
  EXPECT_EQ(dvm_save_weights(nullptr, names, tensors, 2), DVM_INVALID_ARGUMENT);
  EXPECT_FALSE(std::filesystem::exists(path));
  dvm_weights none = nullptr;
  EXPECT_EQ(dvm_load_weights(path.c_str(), &none), DVM_ERROR);  // no such file
  EXPECT_NE(std::string(dvm_last_error()).find("load_weights"), std::string::npos) << dvm_last_error();
  EXPECT_EQ(dvm_load_weights(nullptr, &none), DVM_INVALID_ARGUMENT);
  EXPECT_EQ(none, nullptr);
}

// The hooks and the profiler through C: each call reaches its C++
// counterpart, and bad input to each is a status with a message.
struct CLog {
  std::vector<std::pair<int, std::string>> got;
  static void log(void* self, int level, const char* text) { static_cast<CLog*>(self)->got.emplace_back(level, text); }
};

int c_frame(void* ctx) {
  auto* n = static_cast<int64_t*>(ctx);
  H x, y;
  const int64_t shape[1] = {*n};
  if (dvm_full(shape, 1, 0.5, DVM_F32, x.out()) != DVM_OK) return 1;
  if (dvm_unary(DVM_TANH, x.t, y.out()) != DVM_OK) return 2;
  std::vector<float> v(static_cast<size_t>(*n));
  if (dvm_read_f32(y.t, v.data(), v.size()) != DVM_OK) return 3;
  return std::fabs(v.back() - std::tanh(0.5)) < 1e-6 ? 0 : 4;
}
int c_failing_frame(void*) { return 7; }

TEST(CApi, HooksWarmUpAndProfiler) {
  int64_t n = 1000;
  dvm_warm_up_report r{};
  ASSERT_EQ(dvm_warm_up(c_frame, &n, &r), DVM_OK) << dvm_last_error();
  EXPECT_GE(r.kernels, 1);
  EXPECT_EQ(dvm_warm_up(c_failing_frame, nullptr, &r), DVM_ERROR);
  EXPECT_NE(std::string(dvm_last_error()).find("returned 7"), std::string::npos) << dvm_last_error();
  EXPECT_EQ(dvm_warm_up(nullptr, nullptr, &r), DVM_INVALID_ARGUMENT);
  EXPECT_EQ(dvm_precompile(), DVM_OK);
  int done = 0;
  ASSERT_EQ(dvm_wait_for_jit_timeout(1000.0, &done), DVM_OK);
  EXPECT_EQ(done, 1);
  EXPECT_EQ(dvm_wait_for_jit_timeout(-1.0, &done), DVM_ERROR);
  EXPECT_EQ(dvm_wait_for_jit_timeout(1.0, nullptr), DVM_INVALID_ARGUMENT);

  CLog log;
  ASSERT_EQ(dvm_set_log_callback(&CLog::log, &log), DVM_OK);
  ASSERT_EQ(dvm_set_log_callback(nullptr, nullptr), DVM_OK);
  EXPECT_EQ(dvm_set_perf_map(2), DVM_INVALID_ARGUMENT);
  EXPECT_EQ(dvm_set_allocator(nullptr, [](void*, void*, size_t) {}, nullptr), DVM_ERROR);
  EXPECT_EQ(dvm_set_compile_executor(nullptr, nullptr), DVM_OK);

  ASSERT_EQ(dvm_set_fusion_record(1), DVM_OK);
  EXPECT_EQ(dvm_set_fusion_record(5), DVM_INVALID_ARGUMENT);
  ASSERT_EQ(dvm_profile_begin(), DVM_OK);
  EXPECT_EQ(dvm_profile_begin(), DVM_ERROR);  // already on
  ASSERT_EQ(c_frame(&n), 0);
  const std::string dir = ::testing::TempDir();
  ASSERT_EQ(dvm_profile_end((dir + "c_api_trace.json").c_str()), DVM_OK) << dvm_last_error();
  ASSERT_EQ(dvm_dump_fusion((dir + "c_api_fusion.dot").c_str()), DVM_OK) << dvm_last_error();
  EXPECT_EQ(dvm_profile_end(nullptr), DVM_INVALID_ARGUMENT);
  EXPECT_EQ(dvm_dump_fusion("/nonexistent-dir/x.dot"), DVM_ERROR);
  ASSERT_EQ(dvm_set_fusion_record(0), DVM_OK);
  std::remove((dir + "c_api_trace.json").c_str());
  std::remove((dir + "c_api_fusion.dot").c_str());
}

}  // namespace
// A graph built and run through the C API gives the C++ lazy path's bits at
// every binding; bad arguments are statuses naming the function.
TEST(CApi, GraphsBuildAndRunAsInCpp) {
  dvm_graph g = nullptr;
  ASSERT_EQ(dvm_graph_new(&g), DVM_OK);
  int64_t n = 0;
  ASSERT_EQ(dvm_graph_symbol(g, "N", &n), DVM_OK);
  const int64_t shape[2] = {n, 4};
  H x, s, y;
  ASSERT_EQ(dvm_graph_input(g, "x", shape, 2, DVM_F32, x.out()), DVM_OK) << dvm_last_error();
  ASSERT_EQ(dvm_softmax(x.t, -1, s.out()), DVM_OK);
  ASSERT_EQ(dvm_binary_scalar(DVM_MUL, s.t, 3.0f, 0, y.out()), DVM_OK);
  ASSERT_EQ(dvm_graph_output(g, "y", y.t), DVM_OK);
  EXPECT_EQ(dvm_graph_input(g, "x", shape, 2, DVM_F32, x.out()), DVM_ERROR);
  EXPECT_NE(std::string(dvm_last_error()).find("already an input"), std::string::npos);
  dvm_executable e = nullptr;
  ASSERT_EQ(dvm_graph_compile(g, &e), DVM_OK) << dvm_last_error();
  dvm_graph_free(g);
  for (int64_t rows : {1, 3, 17}) {
    std::vector<float> in(static_cast<size_t>(rows * 4)), out(in.size(), -1.0f);
    for (size_t i = 0; i < in.size(); ++i) in[i] = std::sin(0.7f * static_cast<float>(i));
    const char* in_names[] = {"x"};
    const void* ins[] = {in.data()};
    const char* out_names[] = {"y"};
    void* outs[] = {out.data()};
    const char* syms[] = {"N"};
    const int64_t vals[] = {rows};
    ASSERT_EQ(dvm_executable_run(e, in_names, ins, 1, out_names, outs, 1, syms, vals, 1), DVM_OK) << dvm_last_error();
    const std::vector<float> want = (softmax(Tensor::from_blob(in.data(), {rows, 4}), -1) * 3.0f).to_vector();
    EXPECT_TRUE(same_bits(out, want)) << rows;
    int64_t got_shape[DVM_MAX_RANK];
    int rank = 0;
    ASSERT_EQ(dvm_executable_shape(e, "y", syms, vals, 1, got_shape, &rank), DVM_OK);
    EXPECT_EQ(rank, 2);
    EXPECT_EQ(got_shape[0], rows);
    // softmax and the product fuse into one kernel: no intermediate.
    int64_t bytes = -1;
    ASSERT_EQ(dvm_executable_memory(e, syms, vals, 1, &bytes), DVM_OK) << dvm_last_error();
    EXPECT_EQ(bytes, 0);
    EXPECT_EQ(dvm_executable_memory(e, syms, vals, 1, nullptr), DVM_INVALID_ARGUMENT);
    // Bad arguments.
    EXPECT_EQ(dvm_executable_run(e, in_names, ins, -1, out_names, outs, 1, syms, vals, 1), DVM_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dvm_last_error()).find("dvm_executable_run: inputs"), std::string::npos);
    const char* null_name[] = {nullptr};
    EXPECT_EQ(dvm_executable_run(e, in_names, ins, 1, out_names, outs, 1, null_name, vals, 1), DVM_INVALID_ARGUMENT);
    EXPECT_EQ(dvm_executable_run(e, in_names, ins, 1, out_names, outs, 1, syms, vals, 0), DVM_ERROR);
    EXPECT_NE(std::string(dvm_last_error()).find("symbol 'N' is not bound"), std::string::npos);
    const void* null_in[1] = {nullptr};
    void* null_out[1] = {nullptr};
    EXPECT_EQ(dvm_executable_run(e, in_names, null_in, 1, out_names, outs, 1, syms, vals, 1), DVM_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dvm_last_error()).find("a null pointer"), std::string::npos) << dvm_last_error();
    EXPECT_EQ(dvm_executable_run(e, in_names, ins, 1, out_names, null_out, 1, syms, vals, 1), DVM_INVALID_ARGUMENT);
  }
  EXPECT_EQ(dvm_executable_run(nullptr, nullptr, nullptr, 0, nullptr, nullptr, 0, nullptr, nullptr, 0),
            DVM_INVALID_ARGUMENT);
  EXPECT_EQ(dvm_graph_new(nullptr), DVM_INVALID_ARGUMENT);
  // Saved and loaded, it runs with the same bits.
  const std::string path = ::testing::TempDir() + "c_api_executable.dvmx";
  ASSERT_EQ(dvm_executable_save(e, path.c_str()), DVM_OK) << dvm_last_error();
  dvm_executable loaded = nullptr;
  ASSERT_EQ(dvm_executable_load(path.c_str(), &loaded), DVM_OK) << dvm_last_error();
  {
    std::vector<float> in(5 * 4), out(in.size(), -1.0f);
    for (size_t i = 0; i < in.size(); ++i) in[i] = std::cos(0.3f * static_cast<float>(i));
    const char* in_names[] = {"x"};
    const void* ins[] = {in.data()};
    const char* out_names[] = {"y"};
    void* outs[] = {out.data()};
    const char* syms[] = {"N"};
    const int64_t vals[] = {5};
    ASSERT_EQ(dvm_executable_run(loaded, in_names, ins, 1, out_names, outs, 1, syms, vals, 1), DVM_OK)
        << dvm_last_error();
    EXPECT_TRUE(same_bits(out, (softmax(Tensor::from_blob(in.data(), {5, 4}), -1) * 3.0f).to_vector()));
  }
  dvm_executable_free(loaded);
  EXPECT_EQ(dvm_executable_load((path + ".missing").c_str(), &loaded), DVM_ERROR);
  EXPECT_NE(std::string(dvm_last_error()).find(".missing"), std::string::npos);
  EXPECT_EQ(dvm_executable_load(path.c_str(), nullptr), DVM_INVALID_ARGUMENT);
  EXPECT_EQ(dvm_executable_save(e, nullptr), DVM_INVALID_ARGUMENT);
  std::remove(path.c_str());
  dvm_executable_free(e);
  dvm_executable_free(nullptr);
  dvm_graph_free(nullptr);
}

}  // namespace dvm
