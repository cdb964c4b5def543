// The model of gpt_model.h evaluated in double precision with plain loops,
// the whole sequence at once (no cache): what the tests and the demo check
// dvm's logits against. Slow (every product a scalar loop): for the tiny
// configuration and short sequences.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpt_model.h"

namespace gpt {

// Logits [tokens.size(), vocab], row-major, for the tokens at positions
// 0, 1, ...
inline std::vector<double> reference_logits(const Config& c, const std::vector<dvm::NamedTensor>& weights,
                                            const std::vector<int32_t>& tokens) {
  std::unordered_map<std::string, std::vector<double>> w;
  for (const dvm::NamedTensor& t : weights) {
    const std::vector<float> f = t.tensor.to(dvm::Dtype::F32).to_vector();
    w[t.name] = std::vector<double>(f.begin(), f.end());
  }
  auto at = [&](const std::string& name) -> const std::vector<double>& {
    auto it = w.find(name);
    if (it == w.end()) throw dvm::Error("gpt::reference_logits: weight '" + name + "' is missing");
    return it->second;
  };
  const int64_t S = static_cast<int64_t>(tokens.size()), d = c.d_model, H = c.n_heads, hd = c.head_dim();
  using Rows = std::vector<std::vector<double>>;
  // y[i] = W x[i] + b for W [out, in] (torch.nn.Linear's layout).
  auto linear = [](const Rows& x, const std::vector<double>& W, const std::vector<double>* b, int64_t out) {
    Rows y(x.size(), std::vector<double>(static_cast<size_t>(out)));
    const size_t in = x.empty() ? 0 : x[0].size();
    for (size_t i = 0; i < x.size(); ++i)
      for (int64_t o = 0; o < out; ++o) {
        double acc = b ? (*b)[static_cast<size_t>(o)] : 0.0;
        for (size_t k = 0; k < in; ++k) acc += W[static_cast<size_t>(o) * in + k] * x[i][k];
        y[i][static_cast<size_t>(o)] = acc;
      }
    return y;
  };
  auto layer_norm = [](const Rows& x, const std::vector<double>& g, const std::vector<double>& b) {
    Rows y = x;
    for (std::vector<double>& r : y) {
      double mean = 0, var = 0;
      for (double v : r) mean += v;
      mean /= static_cast<double>(r.size());
      for (double v : r) var += (v - mean) * (v - mean);
      var /= static_cast<double>(r.size());
      for (size_t k = 0; k < r.size(); ++k) r[k] = (r[k] - mean) / std::sqrt(var + 1e-5) * g[k] + b[k];
    }
    return y;
  };
  Rows x(static_cast<size_t>(S), std::vector<double>(static_cast<size_t>(d)));
  for (int64_t i = 0; i < S; ++i)
    for (int64_t k = 0; k < d; ++k)
      x[static_cast<size_t>(i)][static_cast<size_t>(k)] = at("wte")[static_cast<size_t>(tokens[static_cast<size_t>(i)] * d + k)] +
                                                         at("wpe")[static_cast<size_t>(i * d + k)];
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    const Rows qkv = linear(layer_norm(x, at(p + "ln_1.weight"), at(p + "ln_1.bias")), at(p + "attn.qkv.weight"),
                            &at(p + "attn.qkv.bias"), 3 * d);
    Rows a(static_cast<size_t>(S), std::vector<double>(static_cast<size_t>(d), 0.0));
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < S; ++i) {
        std::vector<double> s(static_cast<size_t>(i + 1));
        double m = -INFINITY, z = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < hd; ++e)
            dot += qkv[static_cast<size_t>(i)][static_cast<size_t>(h * hd + e)] *
                   qkv[static_cast<size_t>(j)][static_cast<size_t>(d + h * hd + e)];
          s[static_cast<size_t>(j)] = dot * scale;
          m = std::max(m, dot * scale);
        }
        for (double& v : s) z += (v = std::exp(v - m));
        for (int64_t j = 0; j <= i; ++j)
          for (int64_t e = 0; e < hd; ++e)
            a[static_cast<size_t>(i)][static_cast<size_t>(h * hd + e)] +=
                s[static_cast<size_t>(j)] / z * qkv[static_cast<size_t>(j)][static_cast<size_t>(2 * d + h * hd + e)];
      }
    const Rows o = linear(a, at(p + "attn.proj.weight"), &at(p + "attn.proj.bias"), d);
    for (int64_t i = 0; i < S; ++i)
      for (int64_t k = 0; k < d; ++k) x[static_cast<size_t>(i)][static_cast<size_t>(k)] += o[static_cast<size_t>(i)][static_cast<size_t>(k)];
    Rows f = linear(layer_norm(x, at(p + "ln_2.weight"), at(p + "ln_2.bias")), at(p + "mlp.fc.weight"),
                    &at(p + "mlp.fc.bias"), 4 * d);
    for (std::vector<double>& r : f)
      for (double& v : r) v = 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    const Rows m = linear(f, at(p + "mlp.proj.weight"), &at(p + "mlp.proj.bias"), d);
    for (int64_t i = 0; i < S; ++i)
      for (int64_t k = 0; k < d; ++k) x[static_cast<size_t>(i)][static_cast<size_t>(k)] += m[static_cast<size_t>(i)][static_cast<size_t>(k)];
  }
  const Rows logits = linear(layer_norm(x, at("ln_f.weight"), at("ln_f.bias")), at("wte"), nullptr, c.vocab);
  std::vector<double> out;
  for (const std::vector<double>& r : logits) out.insert(out.end(), r.begin(), r.end());
  return out;
}

}  // namespace gpt
