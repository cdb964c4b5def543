// Parallel launches: results are bit-identical for every thread count, a
// host's task_arena bounds dvm, and small launches stay on the caller.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include <tbb/task_arena.h>

#include "dvm/dvm.h"
#include "vm/parallel.h"

namespace dvm {
namespace {

std::vector<float> ramp(int64_t n, float k) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(k * static_cast<float>(i)) * 3.0f;
  return v;
}

// Every workload shape in one program: elementwise, row softmax, row sum,
// column mean.
std::vector<std::vector<float>> run_all(const std::vector<float>& xv) {
  const int64_t rows = static_cast<int64_t>(xv.size()) / 1024;
  Tensor x = Tensor::from_blob(xv.data(), {rows, 1024});
  Tensor w1 = relu(x * 1.5f + 0.25f) * 0.5f + x;
  Tensor w3 = softmax(x, -1);
  Tensor w6 = x.sum(-1);
  Tensor col = x.mean(0);
  return {w1.to_vector(), w3.to_vector(), w6.to_vector(), col.to_vector()};
}

TEST(Parallel, BitIdenticalForEveryThreadCount) {
  const std::vector<float> xv = ramp(300 * 1024, 0.001f);
  set_num_threads(1);
  const auto ref = run_all(xv);
  for (int threads : {2, 3, 7}) {
    set_num_threads(threads);
    EXPECT_EQ(num_threads(), threads);
    const auto got = run_all(xv);
    for (size_t k = 0; k < ref.size(); ++k) {
      ASSERT_EQ(got[k].size(), ref[k].size());
      EXPECT_EQ(std::memcmp(got[k].data(), ref[k].data(), ref[k].size() * sizeof(float)), 0)
          << "result " << k << " differs with " << threads << " threads";
    }
  }
  set_num_threads(0);
}

TEST(Parallel, HostArenaBoundsDvm) {
  set_num_threads(0);  // run in the caller's arena
  tbb::task_arena host(1);
  int seen = 0;
  host.execute([&] { seen = num_threads(); });
  EXPECT_EQ(seen, 1);
  // And work submitted from inside it still computes the right values.
  const std::vector<float> xv = ramp(128 * 1024, 0.002f);
  std::vector<float> got;
  host.execute([&] {
    Tensor x = Tensor::from_blob(xv.data(), {static_cast<int64_t>(xv.size())});
    got = (x * 2.0f).to_vector();
  });
  for (size_t i = 0; i < xv.size(); i += 1013) EXPECT_EQ(got[i], xv[i] * 2.0f);
}

TEST(Parallel, SmallLaunchesRunOnTheCaller) {
  set_num_threads(2);
  // A 4K launch must not leave the calling thread.
  std::thread::id caller = std::this_thread::get_id();
  std::vector<std::thread::id> seen;
  vm::parallel_items(4, 1024, [&](int64_t, int64_t) { seen.push_back(std::this_thread::get_id()); });
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], caller);
  set_num_threads(0);
}

TEST(Parallel, NegativeThreadCountIsAnError) {
  EXPECT_THROW(set_num_threads(-1), Error);
}

}  // namespace
}  // namespace dvm
