// A flush that fails midway: every tensor it should have computed either
// holds its correct values (its kernel ran) or raises dvm::Error naming the
// failure; inputs are untouched; buffers go back to the pool; the trace keeps
// working. Failures are injected deterministically (fuser::inject_fault,
// detail::pool_fail_after) at every group and every allocation of a flush.
#include <gtest/gtest.h>

#include <cmath>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "dvm/dvm.h"
#include "fuser/executor.h"
#include "fuser/plan_cache.h"
#include "tracer/buffer_pool.h"

namespace dvm {
namespace {

using fuser::Fault;

constexpr double kU = 0x1.0p-24;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// One result of the program and its double-precision reference with a
// per-element error bound.
struct Expect {
  Tensor t;
  std::vector<double> ref;
  std::vector<double> tol;
};

// A program of several kernels of every kind the executor runs: stacked
// small ones (elementwise, row and column reductions, one reading another's
// output in a later stage), one large enough to launch alone, and a view of a
// group output.
struct Program {
  std::vector<float> xv, wv, bigv;
  Tensor x, w, big;
  std::vector<Expect> results;

  Program() {
    for (int i = 0; i < 30; ++i) xv.push_back(std::cos(0.9f * static_cast<float>(i)));
    for (int j = 0; j < 5; ++j) wv.push_back(0.1f * static_cast<float>(j) - 0.2f);
    for (int i = 0; i < 300 * 256; ++i) bigv.push_back(std::sin(0.37f * static_cast<float>(i)));
    x = Tensor::from_vector(xv, {6, 5});
    w = Tensor::from_vector(wv, {5});
    big = Tensor::from_vector(bigv, {300, 256});
  }

  // Records the ops (pending until the next flush).
  void record() {
    results.clear();
    Tensor r0 = exp(x) * 2.0f;
    Tensor r1 = (x + w).sum(1);
    Tensor r2 = x.max(0);
    Tensor r3 = big * 0.5f + 1.0f;
    Tensor r5 = r0.reshape({30});
    Tensor r6 = r1.reshape({6, 1}) * x;
    Tensor r7 = abs(x - 1.0f);
    Expect e0{r0, {}, {}}, e1{r1, {}, {}}, e2{r2, {}, {}}, e3{r3, {}, {}}, e5{r5, {}, {}}, e6{r6, {}, {}},
        e7{r7, {}, {}};
    std::vector<double> row(6, 0.0), mag(6, 0.0);
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 5; ++j) {
        const double v = static_cast<double>(xv[i * 5 + j]) + wv[j];
        row[i] += v;
        mag[i] += std::fabs(v);
      }
    for (int i = 0; i < 30; ++i) {
      const double ex = std::exp(static_cast<double>(xv[i])) * 2.0;
      e0.ref.push_back(ex);
      e0.tol.push_back(4 * kU * ex);  // exp within 2 ulps, then an exact doubling
      e5.ref.push_back(ex);
      e5.tol.push_back(4 * kU * ex);
      const double p = row[i / 5] * xv[i];
      e6.ref.push_back(p);
      e6.tol.push_back((8 * kU) * mag[i / 5] * std::fabs(xv[i]) + 2 * kU * std::fabs(p));
      const double a = std::fabs(static_cast<double>(xv[i]) - 1.0);
      e7.ref.push_back(a);
      e7.tol.push_back(kU * a);
    }
    for (int i = 0; i < 6; ++i) {
      e1.ref.push_back(row[i]);
      e1.tol.push_back(8 * kU * mag[i]);  // 5 terms plus the adds of w
    }
    for (int j = 0; j < 5; ++j) {
      double m = -INFINITY;
      for (int i = 0; i < 6; ++i) m = std::max(m, static_cast<double>(xv[i * 5 + j]));
      e2.ref.push_back(m);
      e2.tol.push_back(0.0);
    }
    for (float b : bigv) {
      const double r = static_cast<double>(b) * 0.5 + 1.0;
      e3.ref.push_back(r);
      e3.tol.push_back(kU * std::fabs(r));
    }
    results = {e0, e1, e2, e3, e5, e6, e7};
  }

  // Every result either equals its reference or raises dvm::Error whose
  // message holds `why`. Returns how many were correct.
  int check(const std::string& why) const {
    int correct = 0;
    for (size_t r = 0; r < results.size(); ++r) {
      const Expect& e = results[r];
      try {
        std::vector<float> got = e.t.to_vector();
        EXPECT_EQ(got.size(), e.ref.size()) << "result " << r;
        if (got.size() != e.ref.size()) continue;
        int bad = 0;
        for (size_t i = 0; i < got.size() && bad < 3; ++i)
          if (!(std::fabs(got[i] - e.ref[i]) <= e.tol[i])) {
            ADD_FAILURE() << "result " << r << " element " << i << ": got " << got[i] << ", want " << e.ref[i];
            ++bad;
          }
        ++correct;
      } catch (const Error& err) {
        EXPECT_TRUE(contains(err.what(), why)) << "result " << r << ": " << err.what();
        EXPECT_TRUE(contains(err.what(), "has no value")) << err.what();
        // Every way of reading it raises the same error.
        EXPECT_THROW(e.t.item(), Error);
        EXPECT_THROW(e.t.data(), Error);
        // As an operand (or through a view) too, naming the original failure.
        try {
          Tensor u = e.t + 1.0f;
          ADD_FAILURE() << "result " << r << " used as an input did not throw";
        } catch (const Error& use) {
          EXPECT_TRUE(contains(use.what(), why)) << use.what();
        }
        EXPECT_THROW(e.t.reshape({-1}), Error);
        EXPECT_EQ(e.t.shape().numel(), static_cast<int64_t>(e.ref.size()));  // its shape is still known
      } catch (const std::exception& other) {
        ADD_FAILURE() << "result " << r << " threw a non-dvm exception: " << other.what();
      }
    }
    return correct;
  }

  // The inputs are as they were, and the trace computes new work.
  void check_still_usable() {
    EXPECT_EQ(x.to_vector(), xv);
    EXPECT_EQ(w.to_vector(), wv);
    EXPECT_EQ(big.to_vector(), bigv);
    Tensor z = x * 3.0f + w;
    std::vector<float> got = z.to_vector();
    ASSERT_EQ(got.size(), 30u);
    for (int i = 0; i < 30; ++i) {
      const double want = 3.0 * xv[i] + wv[i % 5];
      EXPECT_NEAR(got[i], want, 2 * kU * (3.0 * std::fabs(xv[i]) + std::fabs(wv[i % 5])));
    }
  }
};

// Runs the program with `arm(k)` arming a failure at step k, for k = 0, 1,
// ... until a flush succeeds. Returns the number of failing steps.
int sweep(const std::function<void(int)>& arm, const std::string& why, bool cold_plans, int* partial) {
  Program p;
  int k = 0;
  for (; k < 64; ++k) {
    flush();
    if (cold_plans) fuser::PlanCache::current().clear();
    p.record();
    arm(k);
    bool failed = false;
    try {
      flush();
    } catch (const Error& e) {
      failed = true;
      EXPECT_TRUE(contains(e.what(), why)) << "step " << k << ": " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "step " << k << ": a non-dvm exception left the flush: " << e.what();
      failed = true;
    }
    fuser::inject_fault(Fault::None, 0);
    detail::pool_fail_after(-1);
    const int correct = p.check(why);
    if (!failed) {
      EXPECT_EQ(correct, static_cast<int>(p.results.size()));
      break;
    }
    if (correct > 0 && correct < static_cast<int>(p.results.size())) ++*partial;
    p.results.clear();
    p.check_still_usable();
  }
  EXPECT_LT(k, 64);
  return k;
}

TEST(FlushFailures, LaunchCheckFailureAtEveryGroup) {
  for (bool cold : {true, false}) {
    int partial = 0;
    const int groups = sweep([](int k) { fuser::inject_fault(Fault::LaunchCheck, k); },
                             "failed its checks", cold, &partial);
    EXPECT_GE(groups, 4);
    EXPECT_GE(partial, 1);  // some failures come after other kernels ran
  }
}

TEST(FlushFailures, AllocationFailureAtEveryGroup) {
  for (bool cold : {true, false}) {
    int partial = 0;
    const int groups =
        sweep([](int k) { fuser::inject_fault(Fault::BadAlloc, k); }, "out of memory", cold, &partial);
    EXPECT_GE(groups, 4);
    EXPECT_GE(partial, 1);
  }
}

TEST(FlushFailures, VerificationFailureAtEveryGroup) {
  int partial = 0;
  const int groups =
      sweep([](int k) { fuser::inject_fault(Fault::Verify, k); }, "failed verification", true, &partial);
  EXPECT_GE(groups, 4);
}

TEST(FlushFailures, BufferPoolExhaustedAtEveryAllocation) {
  for (bool cold : {true, false}) {
    int partial = 0;
    const int allocs = sweep([](int k) { detail::pool_fail_after(k); }, "out of memory", cold, &partial);
    EXPECT_GE(allocs, 4);
    EXPECT_GE(partial, 1);
  }
}

// Buffers of kernels that never ran go back to the pool: repeating a failing
// flush asks the system for no new memory.
TEST(FlushFailures, FailedFlushesReturnTheirBuffers) {
  Program p;
  auto fail_at = [&](int k) {
    p.record();
    fuser::inject_fault(Fault::LaunchCheck, k);
    EXPECT_THROW(flush(), Error);
    p.results.clear();  // drops every handle of the failed flush
  };
  for (int k = 0; k < 4; ++k) fail_at(k);  // warm the pool's size classes
  const int64_t before = detail::pool_stats().system_allocs;
  for (int round = 0; round < 3; ++round)
    for (int k = 0; k < 4; ++k) fail_at(k);
  EXPECT_EQ(detail::pool_stats().system_allocs, before);
}

// An internal error names the group's ops and shapes, not only bytecode.
TEST(FlushFailures, InternalErrorsNameTheGroupsOpsAndShapes) {
  std::vector<float> xv(12), wv(4);
  for (int i = 0; i < 12; ++i) xv[static_cast<size_t>(i)] = 0.5f * static_cast<float>(i) - 2.0f;
  for (int j = 0; j < 4; ++j) wv[static_cast<size_t>(j)] = 1.0f + static_cast<float>(j);
  Tensor x = Tensor::from_vector(xv, {3, 4});
  Tensor w = Tensor::from_vector(wv, {4});
  const std::string ops = "[mul float32[3, 4], sum(axis=1) float32[3, 4]->[3]]";

  fuser::PlanCache::current().clear();
  Tensor y = (x * w).sum(1);
  fuser::inject_fault(Fault::Verify, 0);
  try {
    flush();
    ADD_FAILURE() << "the injected verification failure did not fire";
  } catch (const Error& e) {
    const std::string want = "internal: kernel for ops " + ops + " failed verification: injected verifier failure";
    EXPECT_EQ(std::string(e.what()).substr(0, want.size()), want) << e.what();
    EXPECT_TRUE(contains(e.what(), "kernel ")) << "the bytecode follows: " << e.what();
  }
  EXPECT_THROW(y.item(), Error);

  Tensor y2 = (x * w).sum(1);
  fuser::inject_fault(Fault::LaunchCheck, 0);
  try {
    flush();
    ADD_FAILURE() << "the injected launch failure did not fire";
  } catch (const Error& e) {
    const std::string want = "internal: launch of the kernel for ops " + ops + " failed its checks: ";
    EXPECT_EQ(std::string(e.what()).substr(0, want.size()), want) << e.what();
    EXPECT_TRUE(contains(e.what(), "has no pointer")) << e.what();
  }
  try {
    (void)y2.to_vector();
    ADD_FAILURE() << "a tensor of the failed flush was readable";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), ops)) << e.what();
  }

  // Unfaulted, the same program computes.
  Tensor y3 = (x * w).sum(1);
  std::vector<float> got = y3.to_vector();
  ASSERT_EQ(got.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    double s = 0, m = 0;
    for (int j = 0; j < 4; ++j) {
      s += static_cast<double>(xv[static_cast<size_t>(i * 4 + j)]) * wv[static_cast<size_t>(j)];
      m += std::fabs(static_cast<double>(xv[static_cast<size_t>(i * 4 + j)]) * wv[static_cast<size_t>(j)]);
    }
    EXPECT_NEAR(got[static_cast<size_t>(i)], s, 6 * kU * m);
  }
}

// A flush the trace limit starts inside an op fails that op with the
// flush's error; the tensors of that flush fail or hold their values, and
// recording goes on.
TEST(FlushFailures, AFailedAutomaticFlushFailsTheOpThatStartedIt) {
  flush();
  const int64_t limit = trace_limit();
  Tensor x = Tensor::from_vector({1.0f, 2.0f, 3.0f});
  set_trace_limit(3);
  Tensor a = x * 2.0f;
  Tensor b = a + 1.0f;
  fuser::inject_fault(Fault::LaunchCheck, 0);
  try {
    Tensor c = exp(x);  // the third pending node: the trace flushes
    ADD_FAILURE() << "the injected launch failure did not fire";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "failed its checks")) << e.what();
  }
  set_trace_limit(limit);
  fuser::inject_fault(Fault::None, 0);
  for (const Tensor* t : {&a, &b}) {
    try {
      std::vector<float> got = t->to_vector();
      ADD_FAILURE() << "a tensor of the failed flush was readable";
    } catch (const Error& e) {
      EXPECT_TRUE(contains(e.what(), "failed its checks")) << e.what();
    }
  }
  EXPECT_EQ((x * 2.0f + 1.0f).to_vector(), (std::vector<float>{3.0f, 5.0f, 7.0f}));
}

// An allocation failure outside a flush (creating a tensor) is a dvm::Error
// too, and leaves nothing behind.
TEST(FlushFailures, AllocationFailureCreatingATensorIsADvmError) {
  detail::pool_fail_after(0);
  try {
    Tensor t = Tensor::from_vector(std::vector<float>(100, 1.0f));
    ADD_FAILURE() << "the injected allocation failure did not fire";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "out of memory")) << e.what();
  }
  detail::pool_fail_after(-1);
  Tensor t = Tensor::from_vector(std::vector<float>(100, 1.0f));
  EXPECT_EQ(t.sum().item(), 100.0f);
}

}  // namespace
}  // namespace dvm
