// The GPT decoder of examples/gpt_model.h as static graphs: a prompt through
// prefill_graph() and the tokens after it through decode_graph(), with the
// caches in the caller's buffers, against the double-precision evaluation
// of the same weights (examples/gpt_reference.h), at lengths the graphs were
// never run at; new lengths compile nothing, and a saved decode graph
// continues the sequence with the same bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "examples/gpt_model.h"
#include "examples/gpt_reference.h"
#include "graph/program.h"

namespace dvm::testing {
namespace {

// The caches of one sequence, position-major ([context, d] per layer).
struct Caches {
  std::vector<std::vector<float>> k, v;
  Caches(const gpt::Config& c) {
    for (int64_t l = 0; l < c.n_layers; ++l) {
      k.emplace_back(static_cast<size_t>(c.context * c.d_model));
      v.emplace_back(static_cast<size_t>(c.context * c.d_model));
    }
  }
};

struct Step {
  std::vector<float> logits;
  int64_t next = -1;
};

Step prefill(const gpt::Model& m, const Executable& exe, const std::vector<int32_t>& tokens, Caches& cache) {
  const gpt::Config& c = m.config();
  const int64_t S = static_cast<int64_t>(tokens.size());
  std::vector<float> x(static_cast<size_t>(S * c.d_model));
  m.embed_rows(tokens, x.data());
  Step r;
  r.logits.resize(static_cast<size_t>(c.vocab));
  GraphOutputs out = {{"logits", r.logits.data()}, {"next", &r.next}};
  for (int64_t l = 0; l < c.n_layers; ++l) {
    out.emplace_back(gpt::Model::port("k", static_cast<size_t>(l)), cache.k[static_cast<size_t>(l)].data());
    out.emplace_back(gpt::Model::port("v", static_cast<size_t>(l)), cache.v[static_cast<size_t>(l)].data());
  }
  exe.run({{"x", x.data()}}, out, {{"S", S}});
  return r;
}

// Token `token` at position P: reads rows [0, P) of the caches, writes row P.
Step decode(const gpt::Model& m, const Executable& exe, int32_t token, int64_t P, Caches& cache) {
  const gpt::Config& c = m.config();
  std::vector<float> x(static_cast<size_t>(c.d_model));
  m.embed_rows({token}, x.data());
  Step r;
  r.logits.resize(static_cast<size_t>(c.vocab));
  GraphInputs in = {{"x", x.data()}};
  GraphOutputs out = {{"logits", r.logits.data()}, {"next", &r.next}};
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const auto L = static_cast<size_t>(l);
    float* k = cache.k[L].data();
    float* v = cache.v[L].data();
    in.emplace_back(gpt::Model::port("k", L), k);
    in.emplace_back(gpt::Model::port("v", L), v);
    out.emplace_back(gpt::Model::port("k", L, "_new"), k + P * c.d_model);
    out.emplace_back(gpt::Model::port("v", L, "_new"), v + P * c.d_model);
  }
  exe.run(in, out, {{"P", P}});
  return r;
}

// As tests/tracer/test_gpt_model.cpp: each row within 2e-5 of its largest
// |logit| (float32 sums of d and 4d terms through a few layers stay near
// 1e-6 of it; a wrong mask, position or cache row moves logits by 1e-2).
void expect_row(const Step& got, const std::vector<double>& want, int64_t row, int64_t vocab, const std::string& what) {
  double scale = 0;
  for (int64_t j = 0; j < vocab; ++j) scale = std::max(scale, std::abs(want[static_cast<size_t>(row * vocab + j)]));
  for (int64_t j = 0; j < vocab; ++j)
    ASSERT_NEAR(got.logits[static_cast<size_t>(j)], want[static_cast<size_t>(row * vocab + j)], 2e-5 * scale)
        << what << " logit " << j;
  const auto best = std::max_element(got.logits.begin(), got.logits.end()) - got.logits.begin();
  EXPECT_EQ(got.next, best) << what << ": next is not the logits' argmax";
}

TEST(GptGraph, PrefillThenDecodeMatchTheDoubleReference) {
  std::mt19937 rng(4);
  for (int iter = 0; iter < 4; ++iter) {
    gpt::Config c;
    c.name = "generated";
    c.n_heads = 1 + static_cast<int64_t>(rng() % 4);
    c.d_model = c.n_heads * (2 + static_cast<int64_t>(rng() % 10));
    c.n_layers = 1 + static_cast<int64_t>(rng() % 2);
    c.vocab = 2 + static_cast<int64_t>(rng() % 60);
    c.context = 12 + static_cast<int64_t>(rng() % 30);
    const auto w = gpt::random_weights(c, 300 + static_cast<uint64_t>(iter));
    const gpt::Model m(c, w);
    const Executable pre = m.prefill_graph(), dec = m.decode_graph();
    std::vector<int32_t> seq(static_cast<size_t>(c.context));
    for (int32_t& t : seq) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(c.vocab));
    const std::vector<double> want = gpt::reference_logits(c, w, seq);
    // Several prompts of the same sequence, each then decoded to the end.
    for (int64_t S : {int64_t{1}, int64_t{3}, c.context / 2}) {
      Caches cache(c);
      const std::string at = "config " + std::to_string(iter) + " prompt " + std::to_string(S);
      expect_row(prefill(m, pre, std::vector<int32_t>(seq.begin(), seq.begin() + S), cache), want, S - 1, c.vocab, at);
      for (int64_t P = S; P < c.context; ++P)
        expect_row(decode(m, dec, seq[static_cast<size_t>(P)], P, cache), want, P, c.vocab,
                   at + " decode at " + std::to_string(P));
    }
    // Past the context: wpe has no row for it, the run says so.
    Caches cache(c);
    EXPECT_THROW(decode(m, dec, 0, c.context, cache), Error);
  }
}

// Once a prompt and a few steps have run, prompts of other lengths and steps
// at other positions compile nothing and mostly replay their programs; a
// saved decode graph, loaded, gives the same bits.
TEST(GptGraph, NewLengthsCompileNothingAndSavedGraphsContinue) {
  const gpt::Config c{"g", 64, 4, 2, 97, 96};
  const gpt::Model m(c, gpt::random_weights(c, 9));
  const Executable pre = m.prefill_graph(), dec = m.decode_graph();
  std::mt19937 rng(2);
  auto tokens = [&](int64_t n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int32_t& v : t) v = static_cast<int32_t>(rng() % 97);
    return t;
  };
  {
    Caches cache(c);
    const Step first = prefill(m, pre, tokens(17), cache);
    (void)decode(m, dec, static_cast<int32_t>(first.next), 17, cache);
  }
  dvm::reset_stats();
  const int64_t rebuilds = graph::program_stats().rebuilds, replays = graph::program_stats().replays;
  const std::string path = ::testing::TempDir() + "dvm_gpt_decode.dvmx";
  dec.save(path);
  const Executable loaded = Executable::load(path);
  std::remove(path.c_str());
  for (int64_t len : {5, 33, 2, 60}) {
    Caches cache(c);
    int64_t next = prefill(m, pre, tokens(len), cache).next;
    for (int64_t P = len; P < len + 4; ++P) {
      Caches copy = cache;
      const Step a = decode(m, dec, static_cast<int32_t>(next), P, cache);
      const Step b = decode(m, loaded, static_cast<int32_t>(next), P, copy);
      EXPECT_EQ(a.logits, b.logits) << "length " << len << " position " << P;
      EXPECT_EQ(copy.k, cache.k);
      next = a.next;
    }
  }
  EXPECT_EQ(dvm::stats().kernels_compiled, 0);
  // Most runs replay; a length equal to a constant of the model (P = 4
  // heads) is a relation of its own, rebuilt once.
  EXPECT_GT(graph::program_stats().replays - replays, 3 * (graph::program_stats().rebuilds - rebuilds));
}

}  // namespace
}  // namespace dvm::testing
