// A GPT-2-style decoder written on dvm's public API: token and position
// embeddings, pre-norm blocks (layer_norm, one fused qkv linear, causal
// multi-head attention over a KVCache, output projection, residual,
// layer_norm, gelu MLP, residual), a final layer_norm and an LM head tied to
// the token embedding; greedy decoding. Header-only: examples/gpt.cpp, the
// tests and the benchmarks share it. One sequence at a time (no batch axis).
#pragma once

#include <dvm/dvm.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace gpt {

struct Config {
  std::string name;
  int64_t d_model = 0, n_heads = 0, n_layers = 0, vocab = 0, context = 0;
  int64_t head_dim() const { return d_model / n_heads; }

  static Config tiny() { return {"tiny", 256, 4, 4, 4096, 512}; }
  static Config small() { return {"small", 768, 12, 2, 50257, 1024}; }
  // "tiny" or "small"; anything else is a dvm::Error.
  static Config by_name(const std::string& name) {
    if (name == "tiny") return tiny();
    if (name == "small") return small();
    throw dvm::Error("gpt::Config: unknown configuration '" + name + "' (expected tiny or small)");
  }
};

// The weights' names and shapes, in the order random_weights makes them
// (GPT-2's names, with the qkv and MLP weights as torch.nn.Linear stores
// them: [out_features, in_features]).
inline std::vector<std::pair<std::string, dvm::Shape>> weight_shapes(const Config& c) {
  const int64_t d = c.d_model;
  std::vector<std::pair<std::string, dvm::Shape>> s = {{"wte", {c.vocab, d}}, {"wpe", {c.context, d}}};
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    s.insert(s.end(), {{p + "ln_1.weight", {d}},
                       {p + "ln_1.bias", {d}},
                       {p + "attn.qkv.weight", {3 * d, d}},
                       {p + "attn.qkv.bias", {3 * d}},
                       {p + "attn.proj.weight", {d, d}},
                       {p + "attn.proj.bias", {d}},
                       {p + "ln_2.weight", {d}},
                       {p + "ln_2.bias", {d}},
                       {p + "mlp.fc.weight", {4 * d, d}},
                       {p + "mlp.fc.bias", {4 * d}},
                       {p + "mlp.proj.weight", {d, 4 * d}},
                       {p + "mlp.proj.bias", {d}}});
  }
  s.insert(s.end(), {{"ln_f.weight", {d}}, {"ln_f.bias", {d}}});
  return s;
}

// A pseudo-random prompt of `length` tokens below vocab, the same for a seed
// on every platform.
inline std::vector<int32_t> prompt_tokens(int64_t length, int64_t vocab, uint64_t seed) {
  std::vector<int32_t> t(static_cast<size_t>(length));
  uint64_t s = seed;
  for (int32_t& v : t) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    v = static_cast<int32_t>((s >> 33) % static_cast<uint64_t>(vocab));
  }
  return t;
}

// Seeded random weights (GPT-2's initialization scale: matrices N(0, 0.02),
// layer_norm gains near 1), nothing downloaded. The same seed gives the same
// values on every platform.
inline std::vector<dvm::NamedTensor> random_weights(const Config& c, uint64_t seed) {
  std::vector<dvm::NamedTensor> w;
  uint64_t k = 0;
  for (const auto& [name, shape] : weight_shapes(c)) {
    const uint64_t s = seed * 1000003u + k++;
    const bool gain = name.find("ln_") != std::string::npos && name.find(".weight") != std::string::npos;
    const bool bias = name.find(".bias") != std::string::npos;
    w.push_back({name, gain ? dvm::Tensor::normal(shape, s, 1.0f, 0.1f)
                            : dvm::Tensor::normal(shape, s, 0.0f, bias ? 0.01f : 0.02f)});
  }
  return w;
}

class Model {
 public:
  // The weights by name (weight_shapes(config)); float32, float16 or
  // bfloat16, converted once here to `dtype` (float32, float16 or bfloat16),
  // the type the model then holds its weights, caches and activations in
  // (dvm computes each kernel in float32 and rounds what it stores). A
  // missing weight or a wrong shape is a dvm::Error naming it.
  Model(Config config, const std::vector<dvm::NamedTensor>& weights, dvm::Dtype dtype = dvm::Dtype::F32)
      : c_(std::move(config)), dtype_(dtype) {
    if (!dvm::is_floating(dtype_))
      throw dvm::Error(std::string("gpt::Model: the model's type is ") + dvm::dtype_name(dtype_) +
                       ", expected float32, float16 or bfloat16");
    if (c_.d_model <= 0 || c_.n_heads <= 0 || c_.d_model % c_.n_heads != 0 || c_.n_layers <= 0 || c_.vocab <= 0 ||
        c_.context <= 0)
      throw dvm::Error("gpt::Model: configuration '" + c_.name + "' is not valid (d_model a positive multiple of " +
                       "n_heads, and every size positive)");
    std::unordered_map<std::string, dvm::Tensor> by_name;
    for (const dvm::NamedTensor& t : weights) by_name[t.name] = t.tensor;
    auto take = [&](const std::string& name, const dvm::Shape& shape) {
      auto it = by_name.find(name);
      if (it == by_name.end()) throw dvm::Error("gpt::Model: weight '" + name + "' is missing");
      if (it->second.shape() != shape)
        throw dvm::Error("gpt::Model: weight '" + name + "' is " + it->second.shape().to_string() + ", expected " +
                         shape.to_string());
      if (!dvm::is_floating(it->second.dtype()))
        throw dvm::Error("gpt::Model: weight '" + name + "' is " + dvm::dtype_name(it->second.dtype()) +
                         ", expected a floating type");
      dvm::Tensor t = it->second.to(dtype_).contiguous();
      t.sync();
      return t;
    };
    const auto shapes = weight_shapes(c_);
    size_t i = 0;
    auto next = [&] {
      const auto& [name, shape] = shapes[i++];
      return take(name, shape);
    };
    wte_ = next();
    wpe_ = next();
    for (int64_t l = 0; l < c_.n_layers; ++l) {
      Block b;
      b.ln1_w = next(), b.ln1_b = next(), b.qkv_w = next(), b.qkv_b = next(), b.proj_w = next(), b.proj_b = next();
      b.ln2_w = next(), b.ln2_b = next(), b.fc_w = next(), b.fc_b = next(), b.out_w = next(), b.out_b = next();
      blocks_.push_back(std::move(b));
    }
    lnf_w_ = next();
    lnf_b_ = next();
  }

  const Config& config() const { return c_; }
  dvm::Dtype dtype() const { return dtype_; }

  // One sequence being decoded: every layer's key and value cache
  // ([heads, context, head_dim], growing along axis 1) and the position of
  // its next token.
  class Session {
   public:
    explicit Session(const Model& m) {
      const Config& c = m.config();
      for (int64_t l = 0; l < c.n_layers; ++l) {
        keys_.emplace_back(dvm::Shape{c.n_heads, c.context, c.head_dim()}, 1, m.dtype());
        values_.emplace_back(dvm::Shape{c.n_heads, c.context, c.head_dim()}, 1, m.dtype());
      }
    }
    int64_t position() const { return position_; }
    // Starts a new sequence (the caches' buffers are reused where nothing
    // still reads them).
    void reset() {
      for (dvm::KVCache& k : keys_) k.clear();
      for (dvm::KVCache& v : values_) v.clear();
      position_ = 0;
    }

   private:
    friend class Model;
    std::vector<dvm::KVCache> keys_, values_;
    int64_t position_ = 0;
  };

  // Runs tokens at positions session.position() onward, appending their keys
  // and values to the session, and returns the logits: [tokens, vocab], or
  // [1, vocab] for the last token only when all_logits is false (what
  // generation needs), in the model's type. Pending: the caller's read computes them.
  dvm::Tensor forward(Session& s, const std::vector<int32_t>& tokens, bool all_logits = false) const {
    const int64_t S = static_cast<int64_t>(tokens.size()), pos = s.position_;
    if (S == 0) throw dvm::Error("gpt::Model::forward: no tokens");
    if (pos + S > c_.context)
      throw dvm::Error("gpt::Model::forward: " + std::to_string(pos) + " tokens so far and " + std::to_string(S) +
                       " more exceed the context of " + std::to_string(c_.context));
    for (int32_t t : tokens)
      if (t < 0 || t >= c_.vocab)
        throw dvm::Error("gpt::Model::forward: token " + std::to_string(t) + " is outside the vocabulary [0, " +
                         std::to_string(c_.vocab) + ")");
    const int64_t d = c_.d_model, H = c_.n_heads, hd = c_.head_dim();
    // Positions pos .. pos + S - 1 are consecutive rows of wpe: a view.
    dvm::Tensor x = dvm::embedding(dvm::Tensor::from_vector(tokens, dvm::Shape{S}), wte_) + wpe_.narrow(0, pos, S);
    // Query i sees keys 0 .. pos + i. At pos 0 that is torch's is_causal;
    // later (a prompt continued) it takes a mask; one query sees every key.
    const bool causal = pos == 0 && S > 1;
    dvm::Tensor mask;
    if (pos > 0 && S > 1) {
      std::vector<bool> keep(static_cast<size_t>(S * (pos + S)));
      for (int64_t i = 0; i < S; ++i)
        for (int64_t j = 0; j < pos + S; ++j) keep[static_cast<size_t>(i * (pos + S) + j)] = j <= pos + i;
      mask = dvm::Tensor::from_vector(keep, dvm::Shape{S, pos + S});
    }
    for (size_t l = 0; l < blocks_.size(); ++l) {
      const Block& b = blocks_[l];
      const dvm::Tensor h = dvm::layer_norm(x, {d}, b.ln1_w, b.ln1_b);
      // [S, 3d] -> [3, H, S, hd]: q, k and v with the heads as a batch axis.
      const dvm::Tensor qkv = dvm::linear(h, b.qkv_w, b.qkv_b).reshape({S, 3, H, hd}).permute({1, 2, 0, 3});
      const dvm::Tensor q = qkv.narrow(0, 0, 1).squeeze(0);
      const dvm::Tensor k = s.keys_[l].append(qkv.narrow(0, 1, 1).squeeze(0));
      const dvm::Tensor v = s.values_[l].append(qkv.narrow(0, 2, 1).squeeze(0));
      const dvm::Tensor a = dvm::scaled_dot_product_attention(q, k, v, mask, causal);
      x = block_rest(x, a, b, S);
    }
    s.position_ = pos + S;
    if (!all_logits) x = x.narrow(0, S - 1, 1);
    return head(x);
  }

  // The prefill of a prompt from position 0 as a static graph (dvm::Graph)
  // with its length a symbol S. Input "x" [S, d]: the prompt's rows of wte
  // (embed_rows). Outputs "logits" [1, vocab] (the last token's), "next"
  // [1] (their argmax, int64), and per layer "k<l>", "v<l>" [S, d]: the
  // keys and values, position-major (head h at columns h * head_dim), for
  // decode_graph. The same blocks as forward(), its q, k and v computed by
  // three products (each stores its rows straight into the caller's buffer).
  dvm::Executable prefill_graph() const {
    const int64_t d = c_.d_model, H = c_.n_heads, hd = c_.head_dim();
    dvm::Graph g;
    const dvm::Dim S = g.symbol("S");
    dvm::Tensor x = g.input("x", {S, d}, dtype_) + wpe_.narrow(0, 0, S);
    for (size_t l = 0; l < blocks_.size(); ++l) {
      const Block& b = blocks_[l];
      const dvm::Tensor h = dvm::layer_norm(x, {d}, b.ln1_w, b.ln1_b);
      const dvm::Tensor q = project(h, b, 0), k = project(h, b, 1), v = project(h, b, 2);
      g.output(port("k", l), k);
      g.output(port("v", l), v);
      auto heads = [&](const dvm::Tensor& t) { return t.reshape({S, H, hd}).permute({1, 0, 2}); };
      const dvm::Tensor a = dvm::scaled_dot_product_attention(heads(q), heads(k), heads(v), dvm::Tensor(), true);
      x = block_rest(x, a, b, S);
    }
    // The last row, S - 1, is no product of symbols: a one-hot sum picks it
    // (every other term +0, so the row's values are kept exactly).
    const dvm::Tensor pos = dvm::Tensor::arange(0.0, static_cast<double>(S), 1.0, dvm::Dtype::I32);
    const dvm::Tensor last = dvm::eq(pos, pos.max()).reshape({S, 1});
    const dvm::Tensor logits = head(dvm::where(last, x, dvm::Tensor::full({}, 0.0, dtype_)).sum({0}, true));
    g.output("logits", logits);
    g.output("next", logits.argmax(-1));
    return g.compile();
  }

  // One decode step as a static graph, at position P (a symbol, >= 1: a
  // prompt came first). Input "x" [1, d]: the token's row of wte; per layer
  // "k<l>", "v<l>" [P, d]: the keys and values so far, position-major (the
  // first P rows of the caches prefill_graph and earlier steps filled).
  // Outputs "logits" [1, vocab], "next" [1] and per layer "k<l>_new",
  // "v<l>_new" [1, d]: the token's key and value (row P of the caches).
  // Attention over the P cached keys and the new one takes the softmax in
  // two parts (a shared maximum, the sums added), so nothing is copied
  // into a sequence of P + 1.
  dvm::Executable decode_graph() const {
    const int64_t d = c_.d_model, H = c_.n_heads, hd = c_.head_dim();
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
    dvm::Graph g;
    const dvm::Dim P = g.symbol("P");
    dvm::Tensor x = g.input("x", {1, d}, dtype_) + wpe_.narrow(0, P, 1);
    for (size_t l = 0; l < blocks_.size(); ++l) {
      const Block& b = blocks_[l];
      const dvm::Tensor kp = g.input(port("k", l), {P, d}, dtype_).reshape({P, H, hd}).permute({1, 0, 2});
      const dvm::Tensor vp = g.input(port("v", l), {P, d}, dtype_).reshape({P, H, hd}).permute({1, 0, 2});
      const dvm::Tensor h = dvm::layer_norm(x, {d}, b.ln1_w, b.ln1_b);
      // One product for q, k and v (one row: the weights are read once in
      // one pass); the key and value rows are copied out of it.
      const dvm::Tensor qkv = dvm::linear(h, b.qkv_w, b.qkv_b);
      const dvm::Tensor q = qkv.narrow(1, 0, d), k = qkv.narrow(1, d, d), v = qkv.narrow(1, 2 * d, d);
      g.output(port("k", l, "_new"), k);
      g.output(port("v", l, "_new"), v);
      const dvm::Tensor qh = q.reshape({H, 1, hd}), kh = k.reshape({H, 1, hd}), vh = v.reshape({H, 1, hd});
      const dvm::Tensor sp = dvm::matmul(qh, kp.transpose(-2, -1)) * scale;  // [H, 1, P]
      const dvm::Tensor sn = (qh * kh).sum({-1}, true) * scale;                // [H, 1, 1]
      const dvm::Tensor mx = dvm::maximum(sp.max({-1}, true), sn);
      const dvm::Tensor ep = dvm::exp(sp - mx), en = dvm::exp(sn - mx);
      const dvm::Tensor a = (dvm::matmul(ep, vp) + en * vh) / (ep.sum({-1}, true) + en);
      x = block_rest(x, a, b, 1);
    }
    const dvm::Tensor logits = head(x);
    g.output("logits", logits);
    g.output("next", logits.argmax(-1));
    return g.compile();
  }

  // A graph's port of layer l: port("k", 3) is "k3", port("v", 3, "_new")
  // is "v3_new".
  static std::string port(const char* kind, size_t l, const char* suffix = "") {
    std::string s = kind;
    s += std::to_string(l);
    s += suffix;
    return s;
  }

  // The rows of wte for `tokens`, in the model's type, into out ([tokens, d]
  // contiguous): the graphs' input x. A token outside the vocabulary is a
  // dvm::Error.
  void embed_rows(const std::vector<int32_t>& tokens, void* out) const {
    const size_t row = static_cast<size_t>(c_.d_model) * dvm::dtype_size(dtype_);
    const char* table = dtype_ == dvm::Dtype::F32    ? reinterpret_cast<const char*>(wte_.data())
                        : dtype_ == dvm::Dtype::F16 ? reinterpret_cast<const char*>(wte_.data<dvm::Half>())
                                                     : reinterpret_cast<const char*>(wte_.data<dvm::BFloat16>());
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] < 0 || tokens[i] >= c_.vocab)
        throw dvm::Error("gpt::Model::embed_rows: token " + std::to_string(tokens[i]) +
                         " is outside the vocabulary [0, " + std::to_string(c_.vocab) + ")");
      std::memcpy(static_cast<char*>(out) + i * row, table + static_cast<size_t>(tokens[i]) * row, row);
    }
  }

  // Greedy decoding: the prompt, then n_new tokens each the argmax of the
  // previous step's logits. Returns the new tokens.
  std::vector<int32_t> generate(Session& s, const std::vector<int32_t>& prompt, int64_t n_new) const {
    std::vector<int32_t> out;
    std::vector<int32_t> step = prompt;
    for (int64_t i = 0; i < n_new; ++i) {
      const dvm::Tensor next = forward(s, step).argmax(-1);
      step = {static_cast<int32_t>(next.to_vector<int64_t>()[0])};
      out.push_back(step[0]);
    }
    return out;
  }

 private:
  struct Block {
    dvm::Tensor ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, out_w, out_b;
  };

  // q (part 0), k (1) or v (2) of h [S, d], by the part's rows of the qkv
  // weights: [S, d].
  dvm::Tensor project(const dvm::Tensor& h, const Block& b, int part) const {
    const int64_t d = c_.d_model;
    return dvm::linear(h, b.qkv_w.narrow(0, part * d, d), b.qkv_b.narrow(0, part * d, d));
  }

  // What follows attention in a block: a [H, S, head_dim] is projected and
  // added to x [S, d], then the MLP's output is added.
  dvm::Tensor block_rest(const dvm::Tensor& x, const dvm::Tensor& a, const Block& b, int64_t S) const {
    const int64_t d = c_.d_model;
    const dvm::Tensor y = x + dvm::linear(a.permute({1, 0, 2}).reshape({S, d}), b.proj_w, b.proj_b);
    const dvm::Tensor m = dvm::layer_norm(y, {d}, b.ln2_w, b.ln2_b);
    return y + dvm::linear(dvm::gelu(dvm::linear(m, b.fc_w, b.fc_b), dvm::GeluApprox::Tanh), b.out_w, b.out_b);
  }

  // The final layer_norm and the LM head tied to wte.
  dvm::Tensor head(const dvm::Tensor& x) const {
    return dvm::linear(dvm::layer_norm(x, {c_.d_model}, lnf_w_, lnf_b_), wte_);
  }
  Config c_;
  dvm::Dtype dtype_ = dvm::Dtype::F32;
  dvm::Tensor wte_, wpe_, lnf_w_, lnf_b_;
  std::vector<Block> blocks_;
};

}  // namespace gpt
