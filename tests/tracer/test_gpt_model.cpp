// The GPT decoder of examples/gpt_model.h against its double-precision
// evaluation (examples/gpt_reference.h): the tiny configuration, generated
// small configurations, prompts continued through the KV caches, greedy
// decoding, new lengths compiling nothing, and bad input.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include <unistd.h>
#include <random>
#include <string>
#include <vector>

#include "examples/gpt_model.h"
#include "examples/gpt_reference.h"
#include "tests/tracer/tracer_testing.h"

namespace dvm::testing {
namespace {

class GptModel : public IsaTest {};

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, std::mt19937& rng) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t& v : t) v = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return t;
}

// got: logits [rows, vocab]; want: the reference's rows [first, first + rows)
// of its [*, vocab]. Each row's error is measured against its largest
// |logit|: float32 sums of d and 4d terms through a few layers, each term
// rounded once, stay near 1e-6 of that; 2e-5 leaves room for the longest
// sums (4d = 1024) without hiding a wrong mask, position or weight (those
// move logits by 1e-2 and more).
void expect_logits(const std::vector<float>& got, const std::vector<double>& want, int64_t first, int64_t vocab,
                   const std::string& what) {
  ASSERT_EQ(got.size() % static_cast<size_t>(vocab), 0u) << what;
  const int64_t rows = static_cast<int64_t>(got.size()) / vocab;
  ASSERT_LE((first + rows) * vocab, static_cast<int64_t>(want.size())) << what;
  for (int64_t r = 0; r < rows; ++r) {
    double scale = 0;
    for (int64_t j = 0; j < vocab; ++j) scale = std::max(scale, std::abs(want[static_cast<size_t>((first + r) * vocab + j)]));
    for (int64_t j = 0; j < vocab; ++j) {
      const double w = want[static_cast<size_t>((first + r) * vocab + j)];
      ASSERT_NEAR(got[static_cast<size_t>(r * vocab + j)], w, 2e-5 * scale) << what << " row " << r << " logit " << j;
    }
  }
}

TEST_P(GptModel, TinyLogitsMatchADoubleReference) {
  const gpt::Config c = gpt::Config::tiny();
  const auto w = gpt::random_weights(c, 7);
  const gpt::Model m(c, w);
  gpt::Model::Session s(m);
  std::mt19937 rng(3);
  const std::vector<int32_t> tokens = random_tokens(6, c.vocab, rng);
  const std::vector<double> want = gpt::reference_logits(c, w, tokens);
  expect_logits(m.forward(s, tokens, /*all_logits=*/true).to_vector(), want, 0, c.vocab, "all positions");
  EXPECT_EQ(s.position(), 6);
  s.reset();
  expect_logits(m.forward(s, tokens).to_vector(), want, 5, c.vocab, "last position");
}

// Random small configurations; each sequence is fed in pieces (a prompt,
// continuations of several tokens, single steps), so every path of the
// attention mask runs: causal from 0, a mask after a cached prefix, none.
TEST_P(GptModel, GeneratedConfigsFedInPiecesMatchTheReference) {
  std::mt19937 rng(11);
  for (int iter = 0; iter < 6; ++iter) {
    gpt::Config c;
    c.name = "generated";
    c.n_heads = 1 + static_cast<int64_t>(rng() % 4);
    c.d_model = c.n_heads * (1 + static_cast<int64_t>(rng() % 12));
    c.n_layers = 1 + static_cast<int64_t>(rng() % 2);
    c.vocab = 2 + static_cast<int64_t>(rng() % 60);
    c.context = 8 + static_cast<int64_t>(rng() % 40);
    const auto w = gpt::random_weights(c, 100 + static_cast<uint64_t>(iter));
    const gpt::Model m(c, w);
    gpt::Model::Session s(m);
    const std::vector<int32_t> seq = random_tokens(c.context, c.vocab, rng);
    const std::vector<double> want = gpt::reference_logits(c, w, seq);
    int64_t at = 0;
    while (at < c.context) {
      const int64_t n = std::min<int64_t>(c.context - at, rng() % 3 == 0 ? 1 : 1 + static_cast<int64_t>(rng() % 9));
      const std::vector<int32_t> piece(seq.begin() + at, seq.begin() + at + n);
      const std::string what = "config " + std::to_string(iter) + " (d " + std::to_string(c.d_model) + ", heads " +
                               std::to_string(c.n_heads) + ") tokens " + std::to_string(at) + "+" + std::to_string(n);
      expect_logits(m.forward(s, piece, true).to_vector(), want, at, c.vocab, what);
      at += n;
    }
    EXPECT_EQ(s.position(), c.context);
  }
}

TEST_P(GptModel, GreedyDecodingFollowsTheReferenceArgmax) {
  gpt::Config c{"g", 32, 2, 2, 50, 40};
  const auto w = gpt::random_weights(c, 5);
  const gpt::Model m(c, w);
  gpt::Model::Session s(m);
  std::vector<int32_t> seq = {3, 1, 4, 1, 5};
  const std::vector<int32_t> got = m.generate(s, seq, 8);
  ASSERT_EQ(got.size(), 8u);
  // Each new token is the reference's argmax after the tokens before it
  // (ties are not expected with random weights; the margin is checked).
  for (int32_t next : got) {
    const std::vector<double> logits = gpt::reference_logits(c, w, seq);
    const auto last = logits.end() - c.vocab;
    const int32_t best = static_cast<int32_t>(std::max_element(last, logits.end()) - last);
    std::vector<double> sorted(last, logits.end());
    std::sort(sorted.rbegin(), sorted.rend());
    if (sorted[0] - sorted[1] > 1e-4) {
      EXPECT_EQ(next, best) << "after " << seq.size() << " tokens";
    }
    seq.push_back(next);
  }
}

// Kernels are cached by bytecode: once a prompt and its decode steps have
// run, prompts of other lengths and decode steps at other positions reuse
// them (bytecode and plans alike).
TEST_P(GptModel, NewPromptLengthsCompileNothing) {
  gpt::Config c{"g", 64, 4, 2, 97, 128};
  const gpt::Model m(c, gpt::random_weights(c, 9));
  gpt::Model::Session s(m);
  std::mt19937 rng(2);
  (void)m.generate(s, random_tokens(17, c.vocab, rng), 4);
  dvm::reset_stats();
  for (int64_t len : {5, 33, 2, 60}) {
    s.reset();
    (void)m.generate(s, random_tokens(len, c.vocab, rng), 4);
  }
  EXPECT_EQ(dvm::stats().kernels_compiled, 0);
}

// Weights saved to a file and loaded back give the same model: float32
// bit for bit, float16 as the reference computes from the rounded weights.
TEST(GptModelWeights, LoadedFromAFileTheModelComputesTheSame) {
  gpt::Config c{"g", 32, 4, 2, 40, 16};
  const auto w = gpt::random_weights(c, 12);
  const std::string path =
      (std::filesystem::temp_directory_path() / ("dvm_gpt_weights_" + std::to_string(::getpid()) + ".bin")).string();
  const std::vector<int32_t> tokens = {1, 22, 3, 39, 0};
  const gpt::Model m(c, w);
  gpt::Model::Session s(m);
  const std::vector<float> want = m.forward(s, tokens, true).to_vector();

  save_weights(path, w);
  const std::vector<NamedTensor> loaded = load_weights(path);
  ASSERT_EQ(loaded.size(), w.size());
  const gpt::Model from_file(c, loaded);
  gpt::Model::Session s2(from_file);
  EXPECT_EQ(from_file.forward(s2, tokens, true).to_vector(), want);

  std::vector<NamedTensor> half;
  for (const NamedTensor& t : w) half.push_back({t.name, t.tensor.to(Dtype::F16)});
  save_weights(path, half);
  const std::vector<NamedTensor> loaded_half = load_weights(path);
  std::filesystem::remove(path);
  EXPECT_EQ(loaded_half[0].tensor.dtype(), Dtype::F16);
  const gpt::Model from_half(c, loaded_half);
  gpt::Model::Session s3(from_half);
  expect_logits(from_half.forward(s3, tokens, true).to_vector(), gpt::reference_logits(c, loaded_half, tokens), 0,
                c.vocab, "float16 weights");
}

TEST(GptModelErrors, BadInputNamesWhatIsWrong) {
  gpt::Config c{"g", 16, 2, 1, 10, 8};
  auto w = gpt::random_weights(c, 1);
  for (const auto& t : w) t.tensor.sync();
  const gpt::Model m(c, w);
  gpt::Model::Session s(m);
  expect_error("token outside the vocabulary", [&] { (void)m.forward(s, {1, 10}); }, {"token 10", "[0, 10)"});
  expect_error("no tokens", [&] { (void)m.forward(s, {}); }, {"no tokens"});
  expect_error("past the context", [&] { (void)m.forward(s, std::vector<int32_t>(9, 1)); }, {"context of 8"});
  EXPECT_EQ(s.position(), 0);  // a refused call leaves the session as it was
  expect_error("unknown configuration", [] { (void)gpt::Config::by_name("huge"); }, {"huge", "tiny"});

  auto missing = w;
  missing.erase(missing.begin() + 3);
  expect_error("missing weight", [&] { gpt::Model bad(c, missing); }, {"h.0.ln_1.bias", "missing"});
  auto wrong = w;
  wrong[2].tensor = Tensor::zeros(Shape{16, 3});
  wrong[2].tensor.sync();
  expect_error("wrong shape", [&] { gpt::Model bad(c, wrong); }, {"h.0.ln_1.weight", "[16, 3]", "[16]"});
  gpt::Config odd{"odd", 10, 3, 1, 10, 8};
  expect_error("heads not dividing d", [&] { gpt::Model bad(odd, w); }, {"odd", "n_heads"});
}

INSTANTIATE_TEST_SUITE_P(Target, GptModel, ::testing::ValuesIn(kTargets), target_name);

}  // namespace
}  // namespace dvm::testing
