// dvm profile example: records a profile of a small MLP step (linear, gelu,
// layer_norm, softmax) run for a few batch sizes on two threads, with the
// JIT tiering up in the background, and dumps the fusion of its last flush.
//
//   dvm_profile [trace.json] [fusion.dot]
//
// Open trace.json in https://ui.perfetto.dev or chrome://tracing; render
// fusion.dot with `dot -Tpng fusion.dot -o fusion.png` (docs/EMBEDDING.md,
// "Profiling").
#include <dvm/dvm.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int64_t kIn = 256, kOut = 256;

// One step: y = softmax(layer_norm(gelu(x @ w^T + b)) * 0.5), observed.
float step(const dvm::Tensor& w, const dvm::Tensor& b, const dvm::Tensor& gamma, const dvm::Tensor& beta,
           int64_t rows, uint64_t seed) {
  dvm::Tensor x = dvm::Tensor::uniform({rows, kIn}, seed, -1.0f, 1.0f);
  dvm::Tensor h = dvm::gelu(dvm::linear(x, w, b));
  dvm::Tensor y = dvm::softmax(dvm::layer_norm(h, {kOut}, gamma, beta) * 0.5f, 1);
  return y.to_vector()[0];
}

}  // namespace

int main(int argc, char** argv) {
  const std::string trace_path = argc > 1 ? argv[1] : "trace.json";
  const std::string dot_path = argc > 2 ? argv[2] : "fusion.dot";
  dvm::set_tier_mode(dvm::TierMode::Auto);
  dvm::set_jit_threshold(2);  // compile after two calls, on the compile thread

  const dvm::Tensor w = dvm::Tensor::uniform({kOut, kIn}, 1, -0.1f, 0.1f);
  const dvm::Tensor b = dvm::Tensor::uniform({kOut}, 2, -0.1f, 0.1f);
  const dvm::Tensor gamma = dvm::Tensor::ones({kOut});
  const dvm::Tensor beta = dvm::Tensor::zeros({kOut});

  dvm::profile_begin();
  float sum = 0;
  std::thread other([&] {
    float s = 0;
    for (int i = 0; i < 4; ++i) s += step(w, b, gamma, beta, 32, 100 + static_cast<uint64_t>(i));
    std::printf("other thread: %g\n", static_cast<double>(s));
  });
  const int64_t rows[] = {64, 64, 128, 96, 128, 200};
  for (int i = 0; i < 6; ++i) {
    if (i == 5) dvm::set_fusion_record(true);  // keep the last flush's groups
    sum += step(w, b, gamma, beta, rows[i], static_cast<uint64_t>(i));
  }
  dvm::set_fusion_record(false);
  other.join();
  dvm::wait_for_jit();
  dvm::profile_end(trace_path);
  dvm::dump_fusion(dot_path);
  std::printf("main thread: %g\nwrote %s and %s\n", static_cast<double>(sum), trace_path.c_str(), dot_path.c_str());
  return 0;
}
