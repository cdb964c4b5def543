// Writes the fuzzer's seed corpus: records typical programs through the
// public API, flushes them, and writes every kernel the fuser made (the
// kernel cache's contents) as seeds, each behind a few launch-parameter
// prefixes (fuzz/fuzz_harness.h). Every seed is run through the harness
// first, so a seed that fails a check is reported here, not by the fuzzer.
//
//   make_corpus OUTPUT_DIR      (scripts/fuzz.sh --corpus runs it)
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <dvm/dvm.h>

#include "fuzz/fuzz_harness.h"
#include "vm/encoder.h"
#include "vm/kernel_cache.h"

namespace {

using dvm::Tensor;

// The programs: every op family, each kernel form, broadcasts and views.
void record_programs() {
  const Tensor x = Tensor::uniform({4, 6, 8}, 1, -2.0f, 2.0f);
  const Tensor y = Tensor::uniform({6, 8}, 2, 0.5f, 2.0f);
  const Tensor b = Tensor::uniform({8}, 3, -1.0f, 1.0f);
  const Tensor m = Tensor::uniform({4, 6, 1}, 4, -1.0f, 1.0f);
  std::vector<Tensor> keep;
  // Elementwise: unary, binary, ternary, scalars, broadcasts.
  keep.push_back(dvm::exp(x) + dvm::log(y) * b);
  keep.push_back(dvm::tanh(x) - dvm::sigmoid(x) / (dvm::abs(x) + 1.0f));
  keep.push_back(dvm::sqrt(y) * dvm::rsqrt(y) + dvm::reciprocal(y));
  keep.push_back(dvm::relu(x) + dvm::gelu(x) + dvm::gelu(x, dvm::GeluApprox::Tanh));
  keep.push_back(dvm::erf(x) * dvm::sin(x) + dvm::cos(x));
  keep.push_back(dvm::floor(x) + dvm::ceil(x) - dvm::round(x));
  keep.push_back(dvm::maximum(x, y) - dvm::minimum(x, m) + dvm::pow(y, 1.5f) + dvm::pow(y, x));
  keep.push_back(dvm::where(dvm::gt(x, m), x, y) + dvm::where(dvm::le(x, b), 1.0f, -x));
  keep.push_back(dvm::eq(x, b) + dvm::ne(x, y) + dvm::lt(x, m) + dvm::ge(y, b));
  keep.push_back(-x * 3.0f + 2.0f);
  // Views: transposes, slices (strided loads), expands.
  keep.push_back(x.transpose(1, 2).contiguous() * 2.0f);
  keep.push_back(x.slice(2, 1, 8, 2) + 1.0f);
  keep.push_back(x.permute({2, 0, 1}) * x.permute({2, 0, 1}));
  keep.push_back(b.expand({6, 8}) * y);
  // RowReduce: single and multi-phase.
  keep.push_back(x.sum(2));
  keep.push_back(x.max(-1, true) - x.min(-1, true));
  keep.push_back(x.mean(2) + m.reshape({4, 6}));
  keep.push_back(dvm::softmax(x, -1));
  keep.push_back(dvm::log_softmax(x, 2));
  keep.push_back(dvm::layer_norm(x, {8}, b, b));
  // ColReduce: leading-axis reductions with epilogues.
  keep.push_back(x.sum(0) * y);
  keep.push_back(x.max(1) + b);
  keep.push_back(x.mean(0, true) / (x.min(0, true) + 3.0f));
  keep.push_back(dvm::softmax(x, 0));
  keep.push_back(x.sum({0, 1}));
  keep.push_back(x.sum());
  // Contraction: products with and without epilogues, transposed operands.
  keep.push_back(dvm::matmul(x, y.transpose(0, 1)));
  keep.push_back(dvm::gelu(dvm::linear(x, y, Tensor::uniform({6}, 5, -1.0f, 1.0f)), dvm::GeluApprox::Tanh) * 0.5f);
  keep.push_back(dvm::relu(dvm::matmul(b, y.transpose(0, 1))) + 1.0f);
  // Operand prologues: a scale and a widening cast on a, an activation on b.
  keep.push_back(dvm::matmul(x * 0.5f - m, dvm::tanh(y.transpose(0, 1) * b.reshape({8, 1}))));
  keep.push_back(dvm::matmul(x.to(dvm::Dtype::F16).to(dvm::Dtype::F32), y.transpose(0, 1)) * 2.0f);
  // Element types: 16-bit floats in and out, one-byte masks stored and
  // read, uint8 and int32 inputs, every conversion's store.
  const Tensor h = x.to(dvm::Dtype::F16), bf = x.to(dvm::Dtype::BF16);
  keep.push_back(dvm::tanh(h * 1.5f + 0.25f));
  keep.push_back(dvm::relu(bf + b.to(dvm::Dtype::BF16)));
  keep.push_back(dvm::softmax(h, -1));
  keep.push_back(h.sum(0));
  const Tensor mask = dvm::gt(x, m);
  keep.push_back(mask);
  keep.push_back(dvm::where(mask, h, x));
  keep.push_back((x * 40.0f).to(dvm::Dtype::U8).to(dvm::Dtype::F32) * (1.0f / 255.0f) + b);
  keep.push_back((x * 1e5f).to(dvm::Dtype::I32).to(dvm::Dtype::F32) - x);
  keep.push_back(x.to(dvm::Dtype::I64));
  // int32 lanes: int32 and uint8 arithmetic, comparisons, where, conversions.
  const Tensor xi = (x * 1e5f).to(dvm::Dtype::I32), ui = (x * 40.0f).to(dvm::Dtype::U8);
  keep.push_back(dvm::maximum(xi * xi - xi, -dvm::abs(xi)) + dvm::lt(xi, ui).to(dvm::Dtype::I32));
  keep.push_back(dvm::where(dvm::lt(xi, ui), ui * ui + ui, xi.to(dvm::Dtype::U8)));
  keep.push_back(dvm::relu(xi - ui) * 0.5f + x);
  keep.push_back(x.to(dvm::Dtype::Bool));
  // int64 lanes: int64 arithmetic with int32 and bool operands, comparisons,
  // where, Python division, conversions to int32 and f32.
  const Tensor li = (x * 1e6f).to(dvm::Dtype::I64);
  keep.push_back(dvm::floor_divide(li * li - xi, li + mask) + dvm::remainder(li, xi));
  keep.push_back(dvm::where(dvm::lt(li, xi), dvm::abs(li) & li, ~li).to(dvm::Dtype::I32));
  keep.push_back(dvm::maximum(li, -li).to(dvm::Dtype::F32) * 0.5f + dvm::ge(li, (b * 100.0f).to(dvm::Dtype::I64)));
  keep.push_back((li * xi).sum(2) + 1.0f);            // int64 row sums, an f32 epilogue
  keep.push_back(xi.max(0) - ui.to(dvm::Dtype::I32).min(0));  // int64 folds narrowed to int32, over rows
  for (Tensor& t : keep) t.sync();
}

// Kernels the fuser does not make but the contract allows, built by hand:
// strided, gathered and per-row loads, per-row stores, values stored
// straight into an output and read again, prologue constants in a
// ColReduce epilogue.
std::vector<dvm::vm::Bytecode> contract_kernels() {
  using namespace dvm::vm;
  std::vector<Bytecode> out;
  {  // One argument byte from storing an output twice (issue 14, item 12).
    Encoder e(Form::Elementwise);
    const int x = e.add_arg(ArgRole::Input), o1 = e.add_arg(ArgRole::Output), o2 = e.add_arg(ArgRole::Output),
              o3 = e.add_arg(ArgRole::Output);
    const auto v = e.load(Op::LD, x), n = e.unary(Op::NEG, v);
    e.store(Op::ST, o1, n);
    e.store(Op::ST, o2, e.unary(Op::EXP, v));
    e.store(Op::ST, o3, n);
    out.push_back(e.finish());
  }
  {  // Every load kind, a ternary and a row value broadcast.
    Encoder e(Form::Elementwise);
    const int a = e.add_arg(ArgRole::Input), b = e.add_arg(ArgRole::Input), c = e.add_arg(ArgRole::Input),
              d = e.add_arg(ArgRole::Input), o = e.add_arg(ArgRole::Output);
    const auto s = e.load(Op::LDS, a), g = e.load(Op::LDG, b), r = e.load(Op::LDB, c), l = e.load(Op::LD, d);
    e.store(Op::ST, o, e.ternary(Op::SELECT, e.binary(Op::GT, s, r), e.ternary(Op::FMA, g, l, r), s));
    out.push_back(e.finish());
  }
  {  // Two reduction levels, a per-row store and a vec store.
    Encoder e(Form::RowReduce);
    const int x = e.add_arg(ArgRole::Input), o = e.add_arg(ArgRole::Output), m = e.add_arg(ArgRole::Output);
    const auto v = e.load(Op::LD, x), mx = e.reduce(Op::RMAX, v);
    const auto ex = e.unary(Op::EXP, e.binary(Op::SUB, v, mx));
    const auto sum = e.reduce(Op::RSUM, ex);
    e.store(Op::ST, o, e.binary(Op::DIV, ex, sum));
    e.store(Op::STB, m, e.binary(Op::ADD, mx, e.unary(Op::LOG, sum)));
    out.push_back(e.finish());
  }
  {  // A ColReduce whose epilogue reads a prologue constant, a row
     // reduction and an epilogue load.
    Encoder e(Form::ColReduce);
    const int x = e.add_arg(ArgRole::Input), w = e.add_arg(ArgRole::Input), b = e.add_arg(ArgRole::Input),
              o = e.add_arg(ArgRole::Output);
    const auto two = e.constant(2.0f);
    const auto v = e.binary(Op::MUL, e.load(Op::LD, x), two), r = e.load(Op::LDB, w);
    const auto s = e.reduce(Op::RSUM, v), mn = e.reduce(Op::RMIN, r);  // one block
    e.store(Op::ST, o, e.binary(Op::ADD, e.binary(Op::ADD, s, two), e.binary(Op::MUL, mn, e.load(Op::LD, b))));
    out.push_back(e.finish());
  }
  {  // A Contraction: the product, an epilogue with a bias, a parameter and
     // a per-row load, and a second output.
    Encoder e(Form::Contraction);
    const int a = e.add_arg(ArgRole::Input), b = e.add_arg(ArgRole::Input), bias = e.add_arg(ArgRole::Input),
              r = e.add_arg(ArgRole::Input), o = e.add_arg(ArgRole::Output), o2 = e.add_arg(ArgRole::Output);
    const auto t = e.binary(Op::ADD, e.mma(a, b), e.load(Op::LD, bias));
    e.store(Op::ST, o, e.unary(Op::GELU_TANH, e.binary(Op::MUL, t, e.param())));
    e.store(Op::ST, o2, e.binary(Op::MUL, t, e.load(Op::LDB, r)));
    out.push_back(e.finish());
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().rfind("seed-", 0) == 0) std::filesystem::remove(e.path());
  record_programs();
  // Launch prefixes: a small shape, a ragged one, long rows, an empty axis,
  // a split launch.
  const uint8_t prefixes[][dvm::fuzz::kParamBytes] = {
      // P, R, C, flags (fuzz_harness.cpp: run_one), data seed
      {0xc2, 3, 17, 0x95, 1, 0, 0, 0},
      {0x41, 5, 33, 0x2c, 2, 0, 0, 0},
      {0x83, 1, 250, 0x8d, 3, 0, 0, 0},  // C from the long list (tile edges)
      {0x01, 0, 9, 0x01, 4, 0, 0, 0},    // R = 0
      {0x01, 4, 255, 0x85, 5, 0, 0, 0},  // reductions: a split launch
  };
  int written = 0, failed = 0;
  std::set<std::vector<uint8_t>> seen;
  std::vector<dvm::vm::Bytecode> kernels = contract_kernels();
  for (const auto& k : dvm::vm::KernelCache::global().snapshot()) kernels.push_back(k->bytecode());
  for (const dvm::vm::Bytecode& k : kernels) {
    const std::vector<uint8_t>& bc = k.bytes;
    if (!seen.insert(bc).second) continue;
    for (size_t v = 0; v < std::size(prefixes); ++v) {
      std::vector<uint8_t> seed(prefixes[v], prefixes[v] + dvm::fuzz::kParamBytes);
      seed.insert(seed.end(), bc.begin(), bc.end());
      std::string failure;
      dvm::fuzz::Outcome o;
      if (!dvm::fuzz::run_one(seed.data(), seed.size(), &o, &failure)) {
        std::fprintf(stderr, "seed fails a check: %s\n", failure.c_str());
        ++failed;
      } else if (!o.accepted) {
        std::fprintf(stderr, "seed rejected by the verifier (a kernel built here is malformed)\n");
        ++failed;
      }
      char name[64];
      std::snprintf(name, sizeof name, "seed-%016llx-%zu", static_cast<unsigned long long>(k.hash()), v);
      std::ofstream(dir / name, std::ios::binary).write(reinterpret_cast<const char*>(seed.data()),
                                                          static_cast<std::streamsize>(seed.size()));
      ++written;
    }
  }
  std::printf("%d seeds from %zu kernels in %s\n", written, seen.size(), dir.c_str());
  return failed ? 1 : 0;
}
