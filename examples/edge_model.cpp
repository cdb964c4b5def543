// An edge model on dvm: the tiny GPT decoder of gpt_model.h as a device would
// ship it, its weights a float16 file (dvm's weights format, docs/WEIGHTS.md)
// at half the bytes of float32, loaded and run in float16: weights, KV caches
// and activations (dvm computes each kernel in f32 and rounds its stores
// once). Prompts of different lengths arrive one after another, as typed
// text would; each is prefilled and then decoded greedily.
//
// It checks the first prompt's logits against a double-precision evaluation
// of the same float16 weights, that no kernel compiles after the first
// prompt, and with --interp that nothing is compiled to machine code (an
// engine that forbids executable memory: TierMode::Off). It prints the
// weights' size, tokens/s and per-token latency.
//
//   edge_model [--interp] [prompts]     (default 6; exit status 0 when the checks pass)
#include <dvm/dvm.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "gpt_model.h"
#include "gpt_reference.h"

namespace {

constexpr int64_t kDecodeTokens = 16;

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

int64_t compiles() { return dvm::stats().kernels_compiled + dvm::stats().jit_compiles; }

}  // namespace

int main(int argc, char** argv) {
  bool interp = false;
  int prompts = 6;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--interp") == 0) interp = true;
    else prompts = std::atoi(argv[i]);
  }
  if (prompts < 2) {
    std::fprintf(stderr, "edge_model: expected at least 2 prompts\n");
    return 2;
  }
  if (interp) dvm::set_tier_mode(dvm::TierMode::Off);
  const gpt::Config config = gpt::Config::tiny();

  // What ships: the weights rounded to float16 in a weights file.
  const std::string path =
      (std::filesystem::temp_directory_path() / ("dvm_edge_model_" + std::to_string(getpid()) + ".dvmw")).string();
  {
    std::vector<dvm::NamedTensor> f16;
    for (const dvm::NamedTensor& w : gpt::random_weights(config, 2026))
      f16.push_back({w.name, w.tensor.to(dvm::Dtype::F16)});
    dvm::save_weights(path, f16);
  }
  const auto file_bytes = std::filesystem::file_size(path);
  const std::vector<dvm::NamedTensor> weights = dvm::load_weights(path);
  std::filesystem::remove(path);
  const gpt::Model model(config, weights, dvm::Dtype::F16);

  // The check: the logits of a prompt against the double-precision model on
  // the same float16 weights, relative to the largest logit. Every kernel
  // rounds what it stores to float16 (2^-11 relative); a token's path through
  // the 4 layers stores about 30 intermediates, and layer_norm keeps each
  // perturbation at the scale of the activations, so the logits stay within
  // 30 * 2^-11 = 1.5e-2 of their scale (measured: about 1e-3).
  double rel_error = 0;
  {
    const std::vector<int32_t> probe = gpt::prompt_tokens(9, config.vocab, 7);
    gpt::Model::Session s(model);
    const std::vector<float> got = model.forward(s, probe, true).to(dvm::Dtype::F32).to_vector();
    const std::vector<double> want = gpt::reference_logits(config, weights, probe);
    double scale = 0;
    for (double w : want) scale = std::max(scale, std::fabs(w));
    for (size_t i = 0; i < want.size(); ++i) rel_error = std::max(rel_error, std::fabs(got[i] - want[i]) / scale);
  }
  if (!(rel_error <= 1.5e-2)) {
    std::fprintf(stderr, "edge_model: logits differ from the double-precision model by %g of their scale\n",
                 rel_error);
    return 1;
  }

  gpt::Model::Session session(model);
  std::vector<double> token_us;
  int64_t compiled_after_first = 0, compiled_at_first = 0, decoded = 0;
  double decode_s = 0;
  for (int p = 0; p < prompts; ++p) {
    const int64_t length = 1 + (static_cast<int64_t>(p) * 37 + 11) % 64;  // 12, 49, 22, ...: 1 to 64 tokens
    session.reset();
    std::vector<int32_t> step = gpt::prompt_tokens(length, config.vocab, static_cast<uint64_t>(p) + 1);
    auto next_token = [&] {
      step = {static_cast<int32_t>(model.forward(session, step).argmax(-1).to_vector<int64_t>()[0])};
    };
    if (p == 0) {
      // At load time, with every kernel compiled before it runs: the first
      // prompt and a decode step, and a prompt of one token. That one is a
      // structure of its own: attention over a single key reduces rows of
      // length 1, and kernels are keyed by which extents are 1 (what
      // broadcasts), never by the other sizes.
      dvm::warm_up([&] {
        next_token();
        next_token();
        gpt::Model::Session one(model);
        (void)model.forward(one, {step[0]}).argmax(-1).to_vector<int64_t>();
      });
      compiled_at_first = compiles();
    } else {
      next_token();
    }
    for (int64_t t = 0; t < kDecodeTokens; ++t) {
      const auto t0 = std::chrono::steady_clock::now();
      next_token();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      token_us.push_back(s * 1e6);
      decode_s += s;
      ++decoded;
    }
    if (p > 0) compiled_after_first = compiles() - compiled_at_first;
  }
  std::printf("edge_model: gpt tiny (d %lld, %lld layers, vocab %lld), float16 weights, caches and activations, %s "
              "(ISA %s)\n",
              static_cast<long long>(config.d_model), static_cast<long long>(config.n_layers),
              static_cast<long long>(config.vocab),
              interp ? "interpreter only (tier off)" : "interpreter, then machine code", dvm::isa().c_str());
  std::printf("edge_model: weights file %.1f MB (float32: %.1f MB); logits within %.1e of the double-precision "
              "model\n",
              static_cast<double>(file_bytes) / 1e6, static_cast<double>(file_bytes) * 2 / 1e6, rel_error);
  std::printf("edge_model: %d prompts of 1-64 tokens, %lld decoded tokens: %.0f tokens/s, per token p50 %.0f us, "
              "p99 %.0f us\n",
              prompts, static_cast<long long>(decoded), static_cast<double>(decoded) / decode_s,
              percentile(token_us, 0.5), percentile(token_us, 0.99));
  std::printf("edge_model: kernels compiled after the first prompt: %lld\n",
              static_cast<long long>(compiled_after_first));
  if (interp && dvm::stats().jit_compiles != 0) {
    std::fprintf(stderr, "edge_model: %lld machine-code compiles with the tier off\n",
                 static_cast<long long>(dvm::stats().jit_compiles));
    return 1;
  }
  if (compiled_after_first != 0) {
    std::fprintf(stderr,
                 "edge_model: %lld kernels compiled after the first prompt (expected none: only lengths changed)\n",
                 static_cast<long long>(compiled_after_first));
    return 1;
  }
  return 0;
}
