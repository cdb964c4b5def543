// Partition and lowering: which ops become one kernel, which forms and
// access patterns they get, and that the values stay right when fusion is
// refused (cycles, views of pending values, mismatched spaces).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "dvm/dvm.h"
#include "fuser/lower.h"
#include "fuser/partition.h"
#include "tracer/trace.h"
#include "vm/disasm.h"

namespace dvm {
namespace {

using detail::Node;

// Partitions what is pending now (as a flush would) and returns the plan.
fuser::Plan plan_pending() {
  const std::vector<Node*>& nodes = detail::Trace::current().pending_nodes();
  std::vector<Node*> needed = detail::mark_needed(nodes);
  for (Node* n : nodes) n->needed = false;
  return fuser::partition(needed);
}

std::vector<const fuser::Group*> live(const fuser::Plan& p) {
  std::vector<const fuser::Group*> out;
  for (int g : p.order) out.push_back(&p.groups[static_cast<size_t>(g)]);
  return out;
}

class Partition : public ::testing::Test {
 protected:
  void SetUp() override { flush(); }
  void TearDown() override { flush(); }
};

TEST_F(Partition, SoftmaxLastAxisIsOneMultiPhaseRowKernel) {
  Tensor x = Tensor::uniform({8, 64}, 1);
  Tensor y = softmax(x, -1);
  fuser::Plan plan = plan_pending();
  auto groups = live(plan);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0]->form, vm::Form::RowReduce);
  fuser::Lowered low = fuser::lower(*groups[0], plan.placement);
  std::string text = vm::disassemble(low.bytecode);
  EXPECT_NE(text.find("rmax"), std::string::npos) << text;
  EXPECT_NE(text.find("rsum"), std::string::npos) << text;
  // x is read once per pass from one argument; only y is stored.
  int inputs = 0, outputs = 0;
  for (const auto& a : low.args) (a.output ? outputs : inputs)++;
  EXPECT_EQ(inputs, 1);
  EXPECT_EQ(outputs, 1);
}

TEST_F(Partition, SoftmaxOverOuterAxisSplitsAndStaysCorrect) {
  std::vector<float> xv(6 * 5);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = std::sin(0.7f * static_cast<float>(i));
  Tensor x = Tensor::from_vector(xv, {6, 5});
  Tensor y = softmax(x, 0);
  fuser::Plan plan = plan_pending();
  auto groups = live(plan);
  EXPECT_GE(groups.size(), 2u);  // a column max cannot broadcast back in one pass
  for (const auto* g : groups) EXPECT_NE(g->form, vm::Form::RowReduce);
  std::vector<float> got = y.to_vector();
  for (int c = 0; c < 5; ++c) {
    double m = -INFINITY, s = 0;
    for (int r = 0; r < 6; ++r) m = std::max<double>(m, xv[static_cast<size_t>(r * 5 + c)]);
    for (int r = 0; r < 6; ++r) s += std::exp(xv[static_cast<size_t>(r * 5 + c)] - m);
    for (int r = 0; r < 6; ++r)
      EXPECT_NEAR(got[static_cast<size_t>(r * 5 + c)], std::exp(xv[static_cast<size_t>(r * 5 + c)] - m) / s, 1e-6);
  }
}

TEST_F(Partition, IndependentChainsOfOneShapeMerge) {
  Tensor a = Tensor::uniform({100}, 1), b = Tensor::uniform({100}, 2);
  Tensor y = (a * 2.0f) + (b * 3.0f);
  fuser::Plan plan = plan_pending();
  auto groups = live(plan);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0]->members.size(), 3u);
}

TEST_F(Partition, ReadingAPendingViewOfTheSameGroupDoesNotCycle) {
  std::vector<float> xv(12);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i);
  Tensor x = Tensor::from_vector(xv, {3, 4});
  Tensor y = x * 2.0f;
  Tensor z = y.transpose(0, 1).contiguous().transpose(0, 1) + y;
  fuser::Plan plan = plan_pending();
  auto groups = live(plan);
  EXPECT_GE(groups.size(), 2u);
  std::vector<float> got = z.to_vector();
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_EQ(got[i], 4.0f * xv[i]);
}

TEST_F(Partition, ElementwiseCollapsesToOneLongRow) {
  Tensor x = Tensor::uniform({4, 8, 16}, 1);
  Tensor y = exp(x) + 1.0f;
  fuser::Plan plan = plan_pending();
  auto groups = live(plan);
  ASSERT_EQ(groups.size(), 1u);
  fuser::Lowered low = fuser::lower(*groups[0], plan.placement);
  EXPECT_EQ(low.space.extent(2), 4 * 8 * 16);
  EXPECT_EQ(low.space.extent(0) * low.space.extent(1), 1);
  for (const auto& a : low.args) EXPECT_EQ(a.access, a.output ? vm::Op::ST : vm::Op::LD);
}

TEST_F(Partition, BroadcastPatternsPickTheirLoads) {
  Tensor x = Tensor::uniform({32, 64}, 1);
  Tensor row = Tensor::uniform({64}, 2);     // same vector on every row: ld, rs = 0
  Tensor col = Tensor::uniform({32, 1}, 3);  // one value per row: ldb
  Tensor xt = Tensor::uniform({64, 32}, 4).transpose(0, 1);  // strided along C: lds
  Tensor y = x * row + col + xt;
  fuser::Plan plan = plan_pending();
  auto groups = live(plan);
  ASSERT_EQ(groups.size(), 1u);
  fuser::Lowered low = fuser::lower(*groups[0], plan.placement);
  int ld = 0, ldb = 0, lds = 0;
  for (const auto& a : low.args) {
    ld += a.access == vm::Op::LD;
    ldb += a.access == vm::Op::LDB;
    lds += a.access == vm::Op::LDS;
  }
  EXPECT_EQ(ld, 2);
  EXPECT_EQ(ldb, 1);
  EXPECT_EQ(lds, 1);
}

// A conversion to float32 joins the ops that read it (its value in
// registers is the one its store would keep); one to a 16-bit float stays a
// kernel of its own, stored (rounded) before its readers. Generated [R, C]
// (1 and odd extents), every source type: one group, and the values are the
// float loop's on the converted elements, in both tiers.
TEST_F(Partition, ConversionToFloat32JoinsItsReaders) {
  std::mt19937 g(17);
  const TierMode before = tier_mode();
  for (Dtype t : {Dtype::U8, Dtype::I32, Dtype::F16, Dtype::BF16, Dtype::Bool, Dtype::I64}) {
    for (int iter = 0; iter < 4; ++iter) {
      const int64_t R = iter == 0 ? 1 : std::uniform_int_distribution<int64_t>(1, 9)(g);
      const int64_t C = iter == 1 ? 1 : std::uniform_int_distribution<int64_t>(1, 40)(g);
      const std::string what = std::string(dtype_name(t)) + " R=" + std::to_string(R) + " C=" + std::to_string(C);
      std::vector<float> xs(static_cast<size_t>(R * C)), bs(static_cast<size_t>(C));
      std::uniform_real_distribution<float> d(-300.0f, 300.0f);
      for (float& v : xs) v = t == Dtype::U8 ? std::fabs(d(g)) * 0.8f : d(g);
      for (float& v : bs) v = d(g);
      Tensor x = Tensor::from_vector(xs, {R, C}).to(t);
      x.sync();
      const std::vector<float> conv = x.to_vector();  // the elements as float32
      Tensor b = Tensor::from_vector(bs, {C});
      Tensor y = x.to(Dtype::F32) - b;
      fuser::Plan plan = plan_pending();
      ASSERT_EQ(live(plan).size(), 1u) << what;
      for (TierMode mode : {TierMode::Off, TierMode::Eager}) {
        set_tier_mode(mode);
        const std::vector<float> got = (x.to(Dtype::F32) - b).to_vector();
        ASSERT_EQ(got.size(), conv.size()) << what;
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_EQ(got[i], conv[i] - bs[i % static_cast<size_t>(C)]) << what << " at " << i;
      }
      set_tier_mode(before);
      flush();
    }
  }
  Tensor x = Tensor::uniform({5, 7}, 3);
  Tensor y = x.to(Dtype::F16) * 3.0f;
  fuser::Plan plan = plan_pending();
  EXPECT_EQ(live(plan).size(), 2u) << "a conversion to float16 is stored before its readers";
}

// stack along a new last axis: one group stores every piece, each write
// strided along C (STS) over the piece's elements (one long C), not one
// element per row. Generated piece shapes with 1s and odd extents, 2 to 6
// pieces.
TEST_F(Partition, StackAlongANewLastAxisStoresStridedAlongC) {
  std::mt19937 g(29);
  for (int iter = 0; iter < 20; ++iter) {
    const int rank = 1 + static_cast<int>(g() % 3);
    Shape s;
    for (int k = 0; k < rank; ++k) s.push_back(1 + static_cast<int64_t>(g() % 9));
    const int n = 2 + static_cast<int>(g() % 5);
    std::vector<Tensor> ts;
    for (int p = 0; p < n; ++p) ts.push_back(Tensor::uniform(s, static_cast<uint64_t>(p + 1)));
    for (Tensor& t : ts) t.sync();
    Tensor y = dvm::stack(ts, rank);
    fuser::Plan plan = plan_pending();
    auto groups = live(plan);
    ASSERT_EQ(groups.size(), 1u) << s.to_string();
    fuser::Lowered low = fuser::lower(*groups[0], plan.placement);
    const std::string text = vm::disassemble(low.bytecode);
    const bool one = s.numel() == 1;  // a single element: C is trivial, a plain store
    EXPECT_EQ(low.space.extent(2), s.numel()) << s.to_string() << "\n" << text;
    int outputs = 0;
    for (const auto& a : low.args)
      if (a.output) {
        ++outputs;
        EXPECT_EQ(a.access, one ? vm::Op::ST : vm::Op::STS) << s.to_string() << "\n" << text;
      }
    EXPECT_EQ(outputs, n) << s.to_string() << "\n" << text;
    flush();
  }
}

// A reduction whose kept axes after the reduced ones are all 1s reduces
// each row's elements in order: a row reduction (one group: softmax's two
// reductions and its epilogue), not a column reduction one column wide.
// Generated [A, N, 1...] with 1 to 2 trailing 1s, reduced over N: the
// softmax and a sum against a double reference; with a trailing extent
// above 1 it stays a column reduction.
TEST_F(Partition, TrailingOnesMakeARowReduction) {
  std::mt19937 g(41);
  for (int iter = 0; iter < 24; ++iter) {
    const int64_t A = 1 + static_cast<int64_t>(g() % 5), N = 1 + static_cast<int64_t>(g() % 3000);
    const int ones = 1 + iter % 2;
    const int64_t last = iter % 6 == 5 ? 2 : 1;  // a trailing 2: a column reduction
    std::vector<int64_t> dims = {A, N};
    for (int k = 0; k < ones; ++k) dims.push_back(k + 1 == ones ? last : 1);
    const Shape s(dims);
    const Tensor x = Tensor::uniform(s, static_cast<uint64_t>(iter + 1), -3.0f, 3.0f);
    x.sync();
    const std::string what = s.to_string();
    Tensor y = softmax(x, 1);
    fuser::Plan plan = plan_pending();
    auto groups = live(plan);
    if (last == 1) {
      ASSERT_EQ(groups.size(), 1u) << what;
      EXPECT_EQ(groups[0]->form, vm::Form::RowReduce) << what;
    } else {
      EXPECT_EQ(groups[0]->form, vm::Form::ColReduce) << what;
    }
    const std::vector<float> xv = x.to_vector(), got = y.to_vector();
    const Tensor t = x.sum(1, iter % 4 < 2);
    const std::vector<float> sums = t.to_vector();
    const int64_t inner = last;
    for (int64_t a = 0; a < A; ++a)
      for (int64_t j = 0; j < inner; ++j) {
        double mx = -INFINITY, sum = 0, plain = 0;
        for (int64_t r = 0; r < N; ++r) mx = std::max(mx, static_cast<double>(xv[static_cast<size_t>((a * N + r) * inner + j)]));
        for (int64_t r = 0; r < N; ++r) {
          const double v = xv[static_cast<size_t>((a * N + r) * inner + j)];
          sum += std::exp(v - mx);
          plain += v;
        }
        for (int64_t r = 0; r < N; ++r) {
          const size_t at = static_cast<size_t>((a * N + r) * inner + j);
          const double want = std::exp(xv[at] - mx) / sum;
          ASSERT_NEAR(got[at], want, 1e-5 * want + 1e-12) << what << " row " << r;
        }
        // |error| of a float sum of N values of magnitude <= 3: N ulps of 3N at most.
        ASSERT_NEAR(sums[static_cast<size_t>(a * inner + j)], plain, 3.0 * N * N * 0x1p-24 + 1e-6) << what;
      }
    flush();
  }
}

TEST_F(Partition, ReductionEpilogueJoinsAndColumnReductionFuses) {
  Tensor x = Tensor::uniform({16, 8, 32}, 1);
  Tensor m = x.mean({1}) * 2.0f;  // middle axis: a column reduction with epilogue
  fuser::Plan plan = plan_pending();
  auto groups = live(plan);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0]->form, vm::Form::ColReduce);
  std::vector<float> xv = x.to_vector(), got = m.to_vector();
  for (int p = 0; p < 16; ++p)
    for (int c = 0; c < 32; ++c) {
      double s = 0;
      for (int r = 0; r < 8; ++r) s += xv[static_cast<size_t>(p * 256 + r * 32 + c)];
      EXPECT_NEAR(got[static_cast<size_t>(p * 32 + c)], s / 8 * 2, 1e-5);
    }
}

// An operand gathered (broadcast inside the C part) into the epilogue of a
// column reduction over an empty axis: the launch binds the operand's R part
// with extent 0, which is no dim of the gather (it held a 0-size dim, and
// the launch check refused it). Every tier and ISA gives x + 0.
TEST_F(Partition, EmptyColumnReductionWithAGatheredEpilogueOperand) {
  const std::string isa = dvm::isa();
  const TierMode tier = dvm::tier_mode();
  for (const char* name : {"portable", "avx2", "avx512"}) {
    dvm::set_isa(name);
    if (dvm::isa() != name) continue;
    for (TierMode mode : {TierMode::Off, TierMode::Eager}) {
      dvm::set_tier_mode(mode);
      Tensor x = Tensor::from_vector({3.0f, -2.0f}, {2});
      Tensor e = Tensor::full({0, 2, 2}, 100.0f).sum({0});  // [2, 2] zeros
      Tensor d = Tensor::from_vector({3.0f, -2.0f}, {1, 2}) / (e + 1.0f);
      std::vector<float> got, got_d;
      try {
        got = (x + e).to_vector();
        got_d = d.to_vector();
      } catch (const Error& err) {
        ADD_FAILURE() << name << ": " << err.what();
        continue;
      }
      EXPECT_EQ(got, (std::vector<float>{3.0f, -2.0f, 3.0f, -2.0f})) << name;
      EXPECT_EQ(got_d, (std::vector<float>{3.0f, -2.0f, 3.0f, -2.0f})) << name;
    }
  }
  dvm::wait_for_jit();
  dvm::set_isa(isa);
  dvm::set_tier_mode(tier);
}

}  // namespace
}  // namespace dvm
