// The bytecode fuzzer's seed corpus (fuzz/corpus/, kernels the fuser made)
// through the fuzzer's harness in the ordinary build: every seed must still
// verify (a bytecode format change needs `scripts/fuzz.sh --corpus`) and pass
// every check on every backend: guards and inputs untouched, each JIT
// bit-identical to its ISA's interpreter.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/fuzz_harness.h"

namespace dvm {
namespace {

TEST(FuzzCorpus, EverySeedVerifiesAndPassesOnEveryBackend) {
  const std::filesystem::path dir = std::filesystem::path(DVM_SOURCE_DIR) / "fuzz" / "corpus";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  int seeds = 0, runs = 0, split_runs = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(e.path(), std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    fuzz::Outcome o;
    std::string failure;
    EXPECT_TRUE(fuzz::run_one(bytes.data(), bytes.size(), &o, &failure)) << e.path().filename() << ": " << failure;
    EXPECT_TRUE(o.accepted) << e.path().filename()
                            << ": the verifier rejects this seed; regenerate the corpus (scripts/fuzz.sh --corpus)";
    runs += o.runs;
    split_runs += o.split_runs;
    ++seeds;
  }
  EXPECT_GE(seeds, 40);
  EXPECT_GE(runs, seeds);
  EXPECT_GT(split_runs, 0);  // the split-launch seeds still split
}

}  // namespace
}  // namespace dvm
