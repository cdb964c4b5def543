// Stacking fusion: small kernels of one flush share one launch (independent
// ones side by side, dependent ones as later stages), large ones launch
// alone, and values are unchanged either way.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "dvm/dvm.h"

namespace dvm {
namespace {

TEST(Stacking, ManySmallIndependentResultsLaunchOnce) {
  flush();
  std::vector<std::vector<float>> data;
  std::vector<Tensor> results;
  for (int i = 0; i < 20; ++i) {
    // Different lengths and different ops: twenty separate kernels.
    std::vector<float> v(static_cast<size_t>(10 + i));
    for (size_t j = 0; j < v.size(); ++j) v[j] = 0.1f * static_cast<float>(j) - 0.3f * static_cast<float>(i);
    data.push_back(v);
  }
  for (int i = 0; i < 20; ++i) {
    Tensor x = Tensor::from_vector(data[static_cast<size_t>(i)]);
    results.push_back(i % 2 ? exp(x) * static_cast<float>(i) : x.sum() + static_cast<float>(i));
  }
  reset_stats();
  flush();
  Stats s = stats();
  EXPECT_EQ(s.kernels_launched, 1);
  EXPECT_EQ(s.kernels_run, 20);
  for (int i = 0; i < 20; ++i) {
    const auto& v = data[static_cast<size_t>(i)];
    std::vector<float> got = results[static_cast<size_t>(i)].to_vector();
    if (i % 2) {
      ASSERT_EQ(got.size(), v.size());
      for (size_t j = 0; j < v.size(); ++j)
        EXPECT_NEAR(got[j], std::exp(static_cast<double>(v[j])) * i, 4e-7 * std::exp(static_cast<double>(v[j])) * i);
    } else {
      double sum = 0, mag = 0;
      for (float x : v) {
        sum += x;
        mag += std::fabs(x);
      }
      ASSERT_EQ(got.size(), 1u);
      EXPECT_NEAR(got[0], sum + i, (static_cast<double>(v.size()) + 2) * 0x1p-24 * (mag + i));
    }
  }
}

TEST(Stacking, DependentSmallKernelsAreStagesOfOneLaunch) {
  flush();
  std::vector<float> v(6 * 5);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.9f * static_cast<float>(i));
  Tensor x = Tensor::from_vector(v, {6, 5});
  Tensor y = softmax(x, 0);  // column max, then exp, column sum, divide: several kernels
  reset_stats();
  std::vector<float> got = y.to_vector();
  Stats s = stats();
  EXPECT_EQ(s.kernels_launched, 1);
  EXPECT_GE(s.kernels_run, 2);
  for (int c = 0; c < 5; ++c) {
    double m = -INFINITY, sum = 0;
    for (int r = 0; r < 6; ++r) m = std::max<double>(m, v[static_cast<size_t>(r * 5 + c)]);
    for (int r = 0; r < 6; ++r) sum += std::exp(v[static_cast<size_t>(r * 5 + c)] - m);
    for (int r = 0; r < 6; ++r)
      EXPECT_NEAR(got[static_cast<size_t>(r * 5 + c)], std::exp(v[static_cast<size_t>(r * 5 + c)] - m) / sum, 1e-6);
  }
}

TEST(Stacking, LargeKernelsLaunchAlone) {
  flush();
  Tensor a = Tensor::uniform({1 << 18}, 1), b = Tensor::uniform({1 << 18}, 2);
  Tensor x = a * 2.0f, y = b.sum();
  reset_stats();
  flush();
  Stats s = stats();
  EXPECT_EQ(s.kernels_run, 2);
  EXPECT_EQ(s.kernels_launched, 2);
  std::vector<float> av = a.to_vector(), xv = x.to_vector();
  for (size_t i = 0; i < av.size(); i += 997) EXPECT_EQ(xv[i], av[i] * 2.0f);
}

}  // namespace
}  // namespace dvm
