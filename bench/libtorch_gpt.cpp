// The GPT decoder of examples/gpt_model.h in PyTorch eager (C++ API), for
// model/gpt_<cfg>/.../libtorch: the same weights, the same layer order, as a
// PyTorch user writes a cached decoder: preallocated key and value caches
// written in place through narrow().copy_(), a causal mask sliced from a
// buffer made once (as Hugging Face's GPT-2 does), one fused qkv linear,
// tanh gelu; under c10::InferenceMode with torch::set_num_threads(N).
#ifdef DVM_BENCH_HAVE_LIBTORCH

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <torch/types.h>

#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/common.h"
#include "bench/model_gpt.h"

namespace bench {
namespace {

using Clock = std::chrono::steady_clock;

class TorchGpt {
 public:
  explicit TorchGpt(const gpt::Config& c) : c_(c) {
    const c10::InferenceMode inference;
    {
      // The same seeded weights as dvm's model, copied; the dvm tensors are
      // dropped and dvm's cached blocks given back before anything is timed.
      std::map<std::string, torch::Tensor> w;
      for (const dvm::NamedTensor& t : gpt::random_weights(c, kGptSeed)) {
        std::vector<int64_t> shape;
        for (int i = 0; i < t.tensor.shape().rank(); ++i) shape.push_back(t.tensor.shape()[i]);
        const std::vector<float> v = t.tensor.to_vector();
        w[t.name] = torch::from_blob(const_cast<float*>(v.data()), shape, torch::kFloat).clone();
      }
      wte_ = w.at("wte"), wpe_ = w.at("wpe"), lnf_w_ = w.at("ln_f.weight"), lnf_b_ = w.at("ln_f.bias");
      for (int64_t l = 0; l < c.n_layers; ++l) {
        const std::string p = "h." + std::to_string(l) + ".";
        blocks_.push_back({w.at(p + "ln_1.weight"), w.at(p + "ln_1.bias"), w.at(p + "attn.qkv.weight"),
                           w.at(p + "attn.qkv.bias"), w.at(p + "attn.proj.weight"), w.at(p + "attn.proj.bias"),
                           w.at(p + "ln_2.weight"), w.at(p + "ln_2.bias"), w.at(p + "mlp.fc.weight"),
                           w.at(p + "mlp.fc.bias"), w.at(p + "mlp.proj.weight"), w.at(p + "mlp.proj.bias")});
      }
    }
    dvm::trim();
    future_ = torch::ones({c.context, c.context}, torch::kBool).triu(1);
  }

  struct Cache {
    std::vector<torch::Tensor> k, v;
    int64_t position = 0;
  };
  Cache new_cache() const {
    Cache cache;
    for (int64_t l = 0; l < c_.n_layers; ++l) {
      cache.k.push_back(torch::zeros({c_.n_heads, c_.context, c_.head_dim()}));
      cache.v.push_back(torch::zeros({c_.n_heads, c_.context, c_.head_dim()}));
    }
    return cache;
  }

  // The last token's logits [1, vocab].
  torch::Tensor forward(Cache& cache, const std::vector<int32_t>& tokens) const {
    const int64_t S = static_cast<int64_t>(tokens.size()), pos = cache.position, T = pos + S;
    const int64_t d = c_.d_model, H = c_.n_heads, hd = c_.head_dim();
    const torch::Tensor ids = torch::tensor(std::vector<int64_t>(tokens.begin(), tokens.end()), torch::kLong);
    torch::Tensor x = wte_.index_select(0, ids) + wpe_.narrow(0, pos, S);
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    for (size_t l = 0; l < blocks_.size(); ++l) {
      const Block& b = blocks_[l];
      const torch::Tensor h = torch::layer_norm(x, {d}, b.ln1_w, b.ln1_b, 1e-5);
      const torch::Tensor qkv = torch::linear(h, b.qkv_w, b.qkv_b).view({S, 3, H, hd}).permute({1, 2, 0, 3});
      cache.k[l].narrow(1, pos, S).copy_(qkv[1]);
      cache.v[l].narrow(1, pos, S).copy_(qkv[2]);
      const torch::Tensor k = cache.k[l].narrow(1, 0, T), v = cache.v[l].narrow(1, 0, T);
      torch::Tensor scores = torch::matmul(qkv[0], k.transpose(-2, -1)) * scale;
      if (S > 1) scores = scores.masked_fill(future_.narrow(0, pos, S).narrow(1, 0, T), -INFINITY);
      const torch::Tensor a = torch::matmul(torch::softmax(scores, -1), v);
      x = x + torch::linear(a.permute({1, 0, 2}).reshape({S, d}), b.proj_w, b.proj_b);
      const torch::Tensor m = torch::layer_norm(x, {d}, b.ln2_w, b.ln2_b, 1e-5);
      x = x + torch::linear(torch::gelu(torch::linear(m, b.fc_w, b.fc_b), "tanh"), b.out_w, b.out_b);
    }
    cache.position = T;
    return torch::linear(torch::layer_norm(x.narrow(0, S - 1, 1), {d}, lnf_w_, lnf_b_, 1e-5), wte_);
  }

  int32_t step(Cache& cache, int32_t token) const {
    return static_cast<int32_t>(forward(cache, {token}).argmax(-1).item<int64_t>());
  }

 private:
  struct Block {
    torch::Tensor ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, out_w, out_b;
  };
  gpt::Config c_;
  torch::Tensor wte_, wpe_, lnf_w_, lnf_b_, future_;
  std::vector<Block> blocks_;
};

const TorchGpt& torch_model(const gpt::Config& c) {
  static auto& made = *new std::map<std::string, std::unique_ptr<TorchGpt>>();  // never destroyed
  auto& m = made[c.name];
  if (!m) m = std::make_unique<TorchGpt>(c);
  return *m;
}

}  // namespace

std::vector<float> libtorch_gpt_logits(const gpt::Config& c, const std::vector<int32_t>& tokens) {
  const c10::InferenceMode inference;
  const TorchGpt& m = torch_model(c);
  TorchGpt::Cache cache = m.new_cache();
  const torch::Tensor y = m.forward(cache, tokens).contiguous();
  return std::vector<float>(y.data_ptr<float>(), y.data_ptr<float>() + y.numel());
}

void libtorch_gpt_prefill(benchmark::State& state, const gpt::Config& c, int64_t S) {
  const c10::InferenceMode inference;
  const TorchGpt& m = torch_model(c);
  TorchGpt::Cache cache = m.new_cache();
  const std::vector<int32_t> prompt = gpt_prompt(S, c.vocab, 1);
  auto run = [&] {
    cache.position = 0;
    const torch::Tensor y = m.forward(cache, prompt);
    benchmark::DoNotOptimize(y.data_ptr<float>());
  };
  for (int i = 0; i < 3; ++i) run();
  const LoopStats loop_stats;
  for (auto _ : state) run();
  loop_stats.set_counters(state);
  state.SetItemsProcessed(state.iterations() * S);
}

void libtorch_gpt_decode(benchmark::State& state, const gpt::Config& c, int64_t ctx) {
  const c10::InferenceMode inference;
  const TorchGpt& m = torch_model(c);
  TorchGpt::Cache cache = m.new_cache();
  const std::vector<int32_t> prompt = gpt_prompt(ctx, c.vocab, 2);
  auto run = [&] {
    cache.position = 0;
    int32_t t = static_cast<int32_t>(m.forward(cache, prompt).argmax(-1).item<int64_t>());
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < kGptDecodeSteps; ++i) t = m.step(cache, t);
    return std::chrono::duration<double>(Clock::now() - t0).count() / static_cast<double>(kGptDecodeSteps);
  };
  for (int i = 0; i < 3; ++i) run();
  for (auto _ : state) state.SetIterationTime(run());
  state.SetItemsProcessed(state.iterations());
}

void libtorch_gpt_dynamic(benchmark::State& state, const gpt::Config& c) {
  const c10::InferenceMode inference;
  const double baseline = rss_mb();
  const TorchGpt& m = torch_model(c);
  reset_peak_rss();  // after the weights are made: their generation is not the model's
  const std::vector<int64_t> lengths = gpt_dynamic_lengths();
  TorchGpt::Cache cache = m.new_cache();
  int64_t tokens = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < lengths.size(); ++i) {
      cache.position = 0;
      int32_t t = static_cast<int32_t>(m.forward(cache, gpt_prompt(lengths[i], c.vocab, 100 + i)).argmax(-1).item<int64_t>());
      for (int64_t k = 1; k < kGptDynamicSteps; ++k) t = m.step(cache, t);
      benchmark::DoNotOptimize(t);
      tokens += lengths[i] + kGptDynamicSteps;
    }
  }
  set_memory_counters(state, baseline);
  state.SetItemsProcessed(tokens);
}

}  // namespace bench

#endif  // DVM_BENCH_HAVE_LIBTORCH
