// libtorch (PyTorch eager, C++ API) as a comparison system: W1..W6 and the W7
// op stream written the way a PyTorch user writes them, on tensors wrapping
// the same input pools (torch::from_blob), under c10::InferenceMode (what
// PyTorch recommends for inference: no autograd bookkeeping per op), with
// torch::set_num_threads(threads). Each op allocates its output, as eager
// PyTorch does (from a caching allocator: see below). Built only where
// Debian's libtorch-dev is installed (DVM_BENCH_HAVE_LIBTORCH,
// bench/CMakeLists.txt); the torch headers are system includes there, so the
// project's -Werror -Wpedantic leave them be.
//
// The benchmarks are registered with the other systems (workloads.cpp), so
// a workload's systems run together; this file provides their bodies.
#ifdef DVM_BENCH_HAVE_LIBTORCH

// The two light umbrella headers (torch/torch.h also pulls in every nn
// module and costs half as much compile time again).
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/InferenceMode.h>
#include <torch/types.h>
#include <torch/utils.h>
#include <torch/version.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench/common.h"

namespace bench {
namespace {

// ---- allocator ------------------------------------------------------------------
// libtorch's default CPU allocator takes every op's output from malloc and
// returns it on free; glibc hands blocks of this size back to the kernel, so
// each op faults its output in again, page by page. On the VM these figures
// come from a page fault costs ~10 µs (W1 at 1M: 5,120 faults per call, 54 ms
// instead of 1 ms), which would measure the VM, not libtorch. So the
// benchmark gives libtorch a caching allocator, as PyTorch's CPU performance
// guides recommend (jemalloc or tcmalloc): freed blocks wait on a free list
// per size and are reused. dvm pools its buffers itself. Environment
// DVM_BENCH_TORCH_ALLOCATOR=default keeps libtorch's own allocator.
class CachingAllocator final : public c10::Allocator {
 public:
  static constexpr size_t kAlign = 64;

  c10::DataPtr allocate(size_t n) const override {
    void* p = n == 0 ? nullptr : take(round_up(n));
    return {p, p, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }

 private:
  // A block is kAlign bytes of header (its size) and then the data.
  static size_t round_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

  // Never destroyed: tensors freed during exit still find them.
  static std::mutex& mu() {
    static auto* m = new std::mutex();
    return *m;
  }
  static std::unordered_map<size_t, std::vector<void*>>& free_lists() {
    static auto* lists = new std::unordered_map<size_t, std::vector<void*>>();
    return *lists;
  }

  static void* take(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu());
      std::vector<void*>& list = free_lists()[bytes];
      if (!list.empty()) {
        void* p = list.back();
        list.pop_back();
        return p;
      }
    }
    auto* base = static_cast<char*>(std::aligned_alloc(kAlign, kAlign + bytes));
    if (!base) throw std::bad_alloc();
    *reinterpret_cast<size_t*>(base) = bytes;
    return base + kAlign;
  }

  static void release(void* p) {
    if (!p) return;
    const size_t bytes = *reinterpret_cast<const size_t*>(static_cast<char*>(p) - kAlign);
    std::lock_guard<std::mutex> lock(mu());
    free_lists()[bytes].push_back(p);
  }
};

bool caching_allocator_wanted() {
  const char* e = std::getenv("DVM_BENCH_TORCH_ALLOCATOR");
  return !(e && std::string(e) == "default");
}

// Installs the caching allocator once, at the first use of libtorch here
// (before any tensor of a benchmark); true when it is in use.
bool caching_allocator() {
  static const bool installed = [] {
    if (!caching_allocator_wanted()) return false;
    static CachingAllocator alloc;
    c10::SetCPUAllocator(&alloc, /*priority=*/100);
    return true;
  }();
  return installed;
}

// A tensor over pool memory; libtorch never writes its inputs here.
torch::Tensor wrap(const float* p, torch::IntArrayRef shape) {
  return torch::from_blob(const_cast<float*>(p), shape, torch::TensorOptions().dtype(torch::kFloat));
}

torch::Tensor torch_record(W w, int64_t n) {
  const Pools& p = pools();
  const int64_t rows = n / kRowWidth;
  switch (w) {
    case W::W1: {
      const torch::Tensor x = wrap(p.x.data(), {n}), a = wrap(p.a.data(), {n}), b = wrap(p.b.data(), {n});
      return torch::relu(x * a + b) * 0.5 + x;
    }
    case W::W2:
      // What a PyTorch user writes for the tanh GELU (one fused ATen kernel).
      return torch::gelu(wrap(p.x.data(), {n}), "tanh");
    case W::W3:
      return torch::softmax(wrap(p.x.data(), {rows, kRowWidth}), -1);
    case W::W4:
      return torch::layer_norm(wrap(p.x.data(), {rows, kRowWidth}), {kRowWidth}, wrap(p.w.data(), {kRowWidth}),
                               wrap(p.bias.data(), {kRowWidth}), 1e-5);
    case W::W5:
      return torch::tanh(wrap(p.x.data(), {rows, kRowWidth}) + wrap(p.bias.data(), {kRowWidth}));
    case W::W6:
      return wrap(p.x.data(), {rows, kRowWidth}).sum(-1);
  }
  std::abort();
}

// Checks y (any layout) against want, and its element count.
void check_torch(const std::string& name, const torch::Tensor& y, const float* want, int64_t n) {
  const torch::Tensor c = y.contiguous();
  if (c.scalar_type() != torch::kFloat || c.numel() != n) {
    std::fprintf(stderr, "bench_dvm: WRONG RESULT in %s: %lld values of %s, expected %lld floats\n",
                 name.c_str(), static_cast<long long>(c.numel()), std::string(c.dtype().name()).c_str(),
                 static_cast<long long>(n));
    std::abort();
  }
  check_close(name, c.data_ptr<float>(), want, n);
}

// The value after `key` on its line of `text`, or "?".
std::string config_value(const std::string& text, const std::string& key) {
  const size_t at = text.find(key);
  if (at == std::string::npos) return "?";
  const size_t begin = at + key.size(), end = text.find('\n', begin);
  return text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

}  // namespace

void libtorch_set_num_threads(int threads) {
  caching_allocator();
  torch::set_num_threads(threads);
  // libtorch's products run in the system BLAS, whose own thread pool
  // torch::set_num_threads leaves alone: OpenBLAS would start one thread per
  // core. Looked up in the process, as libtorch loaded it.
  using SetThreads = void (*)(int);
  if (const auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set(threads);
}

void libtorch_workload(benchmark::State& state, const std::string& name, W w, int64_t n, int threads) {
  const c10::InferenceMode inference;
  if (torch::get_num_threads() != threads) {
    std::fprintf(stderr, "bench_dvm: %s: libtorch runs %d threads, expected %d\n", name.c_str(),
                 torch::get_num_threads(), threads);
    std::abort();
  }
  const int64_t out = w_out_elems(w, n);
  if (first_time(name)) {
    std::vector<float> ref(static_cast<size_t>(out));
    w_fused(w, n, ref.data());
    check_torch(name, torch_record(w, n), ref.data(), out);
  }
  // Warm: OpenMP threads started, the allocator's free lists filled.
  for (int i = 0; i < 3; ++i) torch_record(w, n);
  const LoopStats loop_stats;
  for (auto _ : state) {
    torch::Tensor y = torch_record(w, n);
    benchmark::DoNotOptimize(y.data_ptr<float>());
  }
  loop_stats.set_counters(state);
}

void libtorch_op_stream(benchmark::State& state) {
  apply_system(System{"libtorch", Tier::Libtorch}, 1);
  const c10::InferenceMode inference;
  const torch::Tensor x = wrap(pools().x.data(), {kStreamElems});
  const torch::Tensor z = wrap(pools().w.data(), {kStreamElems});  // in [0.5, 1.5], as for dvm
  if (first_time("W7_op_stream/libtorch/64")) {
    std::vector<float> ref(static_cast<size_t>(kStreamElems));
    fused_w7_op_stream(pools().x.data(), pools().w.data(), kStreamScalars, ref.data(), kStreamElems, kStreamOps);
    check_torch("W7_op_stream/libtorch/64", record_stream<torch::Tensor>(x, z, kStreamOps), ref.data(), kStreamElems);
  }
  const LoopStats loop_stats;
  for (auto _ : state) {
    torch::Tensor y = record_stream<torch::Tensor>(x, z, kStreamOps);
    benchmark::DoNotOptimize(y.data_ptr<float>());
  }
  loop_stats.set_counters(state);
  set_ns_per_item_counter(state, "ns_per_op", kStreamOps);
}

std::string libtorch_description() {
  return std::string(TORCH_VERSION) + " (PyTorch eager, C++ API; CPU capability " +
         config_value(at::show_config(), "CPU capability usage: ") + "; parallel backend " +
         config_value(at::get_parallel_info(), "ATen parallel backend: ") +
         ", torch::set_num_threads per benchmark; c10::InferenceMode; " +
         (caching_allocator() ? "caching CPU allocator" : "libtorch's default CPU allocator") + ")";
}

}  // namespace bench

#endif  // DVM_BENCH_HAVE_LIBTORCH
