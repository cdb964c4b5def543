// A random static graph over x [B, S, 16] and e [S, 16], built from a seed
// alone, so that the graph (B and S Dims) and the lazy path (numbers) record
// the same ops: the graph tests' generator of programs.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "dvm/dvm.h"

namespace dvm::testing::random_graph {

constexpr int64_t kC = 16;  // the constant inner extent of the random graphs

inline std::vector<float> values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-2.0f, 2.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// Output i's name ("o0", "o1", ...).
inline std::string port(size_t i) {
  std::string s = "o";
  s += std::to_string(i);
  return s;
}

struct Params {
  Tensor w = Tensor::normal({kC, kC}, 11, 0.0f, 0.3f), lw = Tensor::normal({kC}, 12, 1.0f, 0.1f),
         lb = Tensor::normal({kC}, 13), row = Tensor::normal({kC}, 14);
  Tensor pos = Tensor::normal({5000, kC}, 15);  // rows per position: S <= 5000
  Params() {
    for (const Tensor* t : {&w, &lw, &lb, &row, &pos}) t->sync();
  }
};

// A random graph over x [B, S, 16] and e [S, 16]: the same ops for the graph
// (B and S are Dims) and the lazy path (numbers), from the seed alone.
inline std::vector<Tensor> random_model(uint32_t seed, const Params& p, const Tensor& x, const Tensor& e, int64_t B,
                                 int64_t S) {
  std::mt19937 rng(seed);
  std::vector<Tensor> pool = {x, x * e};
  auto pick = [&] { return pool[rng() % pool.size()]; };
  const int steps = 4 + static_cast<int>(rng() % 8);
  for (int i = 0; i < steps; ++i) {
    const Tensor t = pick();
    Tensor r;
    switch (rng() % 13) {
      case 0: r = tanh(t); break;
      case 1: r = relu(t) + pick(); break;
      case 2: r = t * 0.75f - e; break;
      case 3: r = softmax(t, -1); break;
      case 4: r = layer_norm(t, {kC}, p.lw, p.lb); break;
      case 5: r = t - t.mean({2}, true); break;
      case 6: r = (t.transpose(0, 1) * 2.0f + p.row).transpose(0, 1); break;
      case 7: r = matmul(t, p.w); break;
      case 8: r = t + t.mean({1}, true); break;  // over the symbolic axis S
      case 9: r = t + p.pos.narrow(0, 0, S); break;  // a constant's view of symbolic extent
      case 10:  // arange of a symbolic length
        r = t * (Tensor::arange(0.0, static_cast<double>(S), 1.0, Dtype::F32) * 0.001f).reshape({1, S, 1}) + t;
        break;
      case 11: r = t + t.argmax(1, true).to(Dtype::F32) * 0.01f; break;  // indices along S
      default: r = t.reshape({B * S, kC}).narrow(1, 4, 8).sum({1}).reshape({B, S, 1}) * t; break;
    }
    pool.push_back(r);
  }
  return {pool.back(), pool[pool.size() - 2].sum({1}), pool[pool.size() / 2].reshape({B * S * kC})};
}

inline Executable capture_random(uint32_t seed, const Params& p) {
  Graph g;
  const Dim B = g.symbol("B"), S = g.symbol("S");
  const Tensor x = g.input("x", {B, S, kC}), e = g.input("e", {S, kC});
  const std::vector<Tensor> outs = random_model(seed, p, x, e, B, S);
  for (size_t i = 0; i < outs.size(); ++i) g.output(port(i), outs[i]);
  return g.compile();
}

}  // namespace dvm::testing::random_graph
