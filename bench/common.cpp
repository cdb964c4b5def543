// Shared pieces of bench_dvm: inputs, workloads as a user records them,
// reference math, checks and the systems' settings.
#include "bench/common.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>

namespace bench {

// ---- inputs -----------------------------------------------------------------

uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

float uniform01(uint64_t* state) {
  return static_cast<float>(splitmix64(state) >> 40) * (1.0f / 16777216.0f);  // 24 bits
}

namespace {
void fill(Floats& v, size_t n, uint64_t seed, float lo, float hi) {
  v.resize(n);
  uint64_t s = seed;
  for (size_t i = 0; i < n; ++i) v[i] = lo + (hi - lo) * uniform01(&s);
}
}  // namespace

const Pools& pools() {
  static const Pools p = [] {
    Pools q;
    fill(q.x, static_cast<size_t>(kLarge), 0x5eed0001, -1.0f, 1.0f);
    fill(q.a, static_cast<size_t>(kLarge), 0x5eed0002, -1.0f, 1.0f);
    fill(q.b, static_cast<size_t>(kLarge), 0x5eed0003, -0.5f, 0.5f);
    fill(q.w, static_cast<size_t>(kRowWidth), 0x5eed0004, 0.5f, 1.5f);
    fill(q.bias, static_cast<size_t>(kRowWidth), 0x5eed0005, -0.5f, 0.5f);
    return q;
  }();
  return p;
}

float* scratch(const char* key, int64_t n) {
  static std::mutex mu;
  static std::map<std::pair<std::string, int64_t>, Floats> buffers;
  std::lock_guard<std::mutex> lock(mu);
  Floats& v = buffers[{key, n}];
  if (v.size() != static_cast<size_t>(n)) v.assign(static_cast<size_t>(n), 0.0f);
  return v.data();
}

// ---- workloads ----------------------------------------------------------------

const char* w_id(W w) {
  static const char* const ids[] = {"W1", "W2", "W3", "W4", "W5", "W6"};
  return ids[static_cast<int>(w)];
}

const char* w_name(W w) {
  static const char* const names[] = {"W1_chain",     "W2_gelu",      "W3_softmax",
                                      "W4_layernorm", "W5_bias_tanh", "W6_rowsum"};
  return names[static_cast<int>(w)];
}

bool w_rows(W w) { return w != W::W1 && w != W::W2; }

int64_t w_out_elems(W w, int64_t n) { return w == W::W6 ? n / kRowWidth : n; }

double w_bytes(W w, int64_t n) {
  const double f = sizeof(float);
  const double rows = static_cast<double>(n / kRowWidth);
  const double e = static_cast<double>(n);
  switch (w) {
    case W::W1: return f * 4 * e;                                 // x, a, b in; y out
    case W::W2: return f * 2 * e;                                 // x in; y out
    case W::W3: return f * 2 * e;                                 // x in; y out
    case W::W4: return f * (2 * e + 2 * kRowWidth);               // x, w, b in; y out
    case W::W5: return f * (2 * e + kRowWidth);                   // x, bias in; y out
    case W::W6: return f * (e + rows);                            // x in; row sums out
  }
  return 0;
}

dvm::Tensor w_record(W w, int64_t n) {
  const Pools& p = pools();
  const dvm::Shape flat{n};
  const dvm::Shape rows{n / kRowWidth, kRowWidth};
  const dvm::Shape row{kRowWidth};
  switch (w) {
    case W::W1: {
      dvm::Tensor x = dvm::Tensor::from_blob(p.x.data(), flat);
      dvm::Tensor a = dvm::Tensor::from_blob(p.a.data(), flat);
      dvm::Tensor b = dvm::Tensor::from_blob(p.b.data(), flat);
      return dvm::relu(x * a + b) * 0.5f + x;
    }
    case W::W2:
      // What a user writes for this math: the tanh-approximated GELU.
      return dvm::gelu(dvm::Tensor::from_blob(p.x.data(), flat), dvm::GeluApprox::Tanh);
    case W::W3:
      return dvm::softmax(dvm::Tensor::from_blob(p.x.data(), rows), -1);
    case W::W4:
      return dvm::layer_norm(dvm::Tensor::from_blob(p.x.data(), rows), row,
                             dvm::Tensor::from_blob(p.w.data(), row),
                             dvm::Tensor::from_blob(p.bias.data(), row), 1e-5f);
    case W::W5:
      return dvm::tanh(dvm::Tensor::from_blob(p.x.data(), rows) +
                       dvm::Tensor::from_blob(p.bias.data(), row));
    case W::W6:
      return dvm::Tensor::from_blob(p.x.data(), rows).sum(-1);
  }
  std::abort();
}

namespace {

void loop_serial(const RefLoops& l, W w, int64_t n, float* y) {
  const Pools& p = pools();
  const int64_t r = n / kRowWidth;
  switch (w) {
    case W::W1: l.w1_chain(p.x.data(), p.a.data(), p.b.data(), y, n); return;
    case W::W2: l.w2_gelu(p.x.data(), y, n); return;
    case W::W3: l.w3_softmax(p.x.data(), y, r, kRowWidth); return;
    case W::W4: l.w4_layernorm(p.x.data(), p.w.data(), p.bias.data(), 1e-5f, y, r, kRowWidth); return;
    case W::W5: l.w5_bias_tanh(p.x.data(), p.bias.data(), y, r, kRowWidth); return;
    case W::W6: l.w6_rowsum(p.x.data(), y, r, kRowWidth); return;
  }
}

}  // namespace

void w_fused(W w, int64_t n, float* y, int threads) { w_loop(fused_loops(), w, n, y, threads); }

void w_loop(const RefLoops& l, W w, int64_t n, float* y, int threads) {
  if (threads <= 1) {
    loop_serial(l, w, n, y);
    return;
  }
  // The same loops over pieces: flat workloads cut at multiples of 16 floats
  // (a cache line), row workloads at row boundaries.
  const Pools& p = pools();
  const float* x = p.x.data();
  const float* a = p.a.data();
  const float* b = p.b.data();
  const float* wt = p.w.data();
  const float* bias = p.bias.data();
  const int64_t c = kRowWidth, rows = n / kRowWidth, row_grain = kGrainElems / kRowWidth;
  switch (w) {
    case W::W1:
      parallel_pieces(threads, n, kGrainElems, 16, [=, &l](int64_t lo, int64_t hi) {
        l.w1_chain(x + lo, a + lo, b + lo, y + lo, hi - lo);
      });
      return;
    case W::W2:
      parallel_pieces(threads, n, kGrainElems, 16,
                      [=, &l](int64_t lo, int64_t hi) { l.w2_gelu(x + lo, y + lo, hi - lo); });
      return;
    case W::W3:
      parallel_pieces(threads, rows, row_grain, 1, [=, &l](int64_t lo, int64_t hi) {
        l.w3_softmax(x + lo * c, y + lo * c, hi - lo, c);
      });
      return;
    case W::W4:
      parallel_pieces(threads, rows, row_grain, 1, [=, &l](int64_t lo, int64_t hi) {
        l.w4_layernorm(x + lo * c, wt, bias, 1e-5f, y + lo * c, hi - lo, c);
      });
      return;
    case W::W5:
      parallel_pieces(threads, rows, row_grain, 1, [=, &l](int64_t lo, int64_t hi) {
        l.w5_bias_tanh(x + lo * c, bias, y + lo * c, hi - lo, c);
      });
      return;
    case W::W6:
      parallel_pieces(threads, rows, row_grain, 1,
                      [=, &l](int64_t lo, int64_t hi) { l.w6_rowsum(x + lo * c, y + lo, hi - lo, c); });
      return;
  }
}

void w_reference_double(W w, int64_t n, double* y) {
  const Pools& p = pools();
  const float* x = p.x.data();
  const int64_t rows = n / kRowWidth, c = kRowWidth;
  switch (w) {
    case W::W1:
      for (int64_t i = 0; i < n; ++i) {
        const double t = static_cast<double>(x[i]) * p.a[i] + p.b[i];
        y[i] = (t > 0 ? t : 0.0) * 0.5 + x[i];
      }
      return;
    case W::W2:
      for (int64_t i = 0; i < n; ++i) {
        const double v = x[i];
        y[i] = 0.5 * v * (1.0 + std::tanh(0.7978845608 * (v + 0.044715 * v * v * v)));
      }
      return;
    case W::W3:
      for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * c;
        double m = xr[0], s = 0;
        for (int64_t j = 0; j < c; ++j) m = std::max(m, static_cast<double>(xr[j]));
        for (int64_t j = 0; j < c; ++j) s += std::exp(xr[j] - m);
        for (int64_t j = 0; j < c; ++j) y[r * c + j] = std::exp(xr[j] - m) / s;
      }
      return;
    case W::W4:
      for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * c;
        double mean = 0, var = 0;
        for (int64_t j = 0; j < c; ++j) mean += xr[j];
        mean /= static_cast<double>(c);
        for (int64_t j = 0; j < c; ++j) var += (xr[j] - mean) * (xr[j] - mean);
        var /= static_cast<double>(c);
        const double rstd = 1.0 / std::sqrt(var + 1e-5);
        for (int64_t j = 0; j < c; ++j)
          y[r * c + j] = (xr[j] - mean) * rstd * p.w[j] + p.bias[j];
      }
      return;
    case W::W5:
      for (int64_t i = 0; i < n; ++i)
        y[i] = std::tanh(static_cast<double>(x[i]) + p.bias[i % c]);
      return;
    case W::W6:
      for (int64_t r = 0; r < rows; ++r) {
        double s = 0;
        for (int64_t j = 0; j < c; ++j) s += x[r * c + j];
        y[r] = s;
      }
      return;
  }
}

void w_reference(W w, int64_t n, float* y) {
  std::vector<double> d(static_cast<size_t>(w_out_elems(w, n)));
  w_reference_double(w, n, d.data());
  for (size_t i = 0; i < d.size(); ++i) y[i] = static_cast<float>(d[i]);
}

// ---- checks -----------------------------------------------------------------

void check_close(const std::string& what, const float* got, const float* want, int64_t n,
                 double rtol) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(want[i]) * want[i];
  const double rms = n > 0 ? std::sqrt(ss / static_cast<double>(n)) : 0.0;
  double worst = 0;
  int64_t worst_i = -1;
  for (int64_t i = 0; i < n; ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]) / (std::fabs(want[i]) + rms);
    if (!(err <= worst)) {  // NaN counts as the worst
      worst = std::isnan(err) ? INFINITY : err;
      worst_i = i;
    }
  }
  if (worst_i >= 0 && !(worst <= rtol)) {
    std::fprintf(stderr,
                 "bench_dvm: WRONG RESULT in %s: element %lld is %.9g, expected %.9g "
                 "(relative error %.3g > %.1g; reference rms %.3g over %lld values)\n",
                 what.c_str(), static_cast<long long>(worst_i), static_cast<double>(got[worst_i]),
                 static_cast<double>(want[worst_i]), worst, rtol, rms, static_cast<long long>(n));
    std::abort();
  }
}

bool first_time(const std::string& key) {
  static std::mutex mu;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(mu);
  return seen.insert(key).second;
}

// ---- counters -----------------------------------------------------------------

void set_bandwidth_counters(benchmark::State& state, double bytes, int threads) {
  // Rates are over the time Google Benchmark measures (the calling thread's
  // CPU time, the library's default; all single-thread work runs there).
  // `bytes` and `triad_bytes_per_second` let a reader redo them over the
  // wall-clock time (scripts/render_perf.py does).
  const double total = bytes * static_cast<double>(state.iterations());
  const double triad = triad_bytes_per_second(threads);
  state.counters["bytes_per_second"] = benchmark::Counter(total, benchmark::Counter::kIsRate);
  state.counters["pct_bw"] = benchmark::Counter(100.0 * total / triad, benchmark::Counter::kIsRate);
  state.counters["bytes"] = bytes;
  state.counters["triad_bytes_per_second"] = triad;
}

void set_ns_per_item_counter(benchmark::State& state, const char* name, double items_per_iter) {
  // kIsRate divides by the seconds measured, kInvert turns items/s into
  // s/item; the 1e-9 makes that ns/item.
  const double items = items_per_iter * static_cast<double>(state.iterations());
  state.counters[name] =
      benchmark::Counter(items * 1e-9, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// ---- systems ----------------------------------------------------------------

const RefLoops* ref_loops(const System& s) {
  switch (s.ref) {
    case Ref::Fused: return &fused_loops();
    case Ref::Sleef: return sleef_loops();
    case Ref::Eigen: return eigen_loops();
    case Ref::None: break;
  }
  return nullptr;
}

void apply_system(const System& s, int threads) {
  // The tier the process started with (DVM_TIER or the library default):
  // only this function changes it, so the first call still sees it.
  static const dvm::TierMode default_tier = dvm::tier_mode();
  switch (s.tier) {
    case Tier::Default: dvm::set_tier_mode(default_tier); break;
    case Tier::Eager: dvm::set_tier_mode(dvm::TierMode::Eager); break;
    case Tier::Off: dvm::set_tier_mode(dvm::TierMode::Off); break;
    case Tier::NotDvm: break;
    case Tier::Libtorch: break;
  }
  // Launches of 64K elements and more split over dvm's own threads.
  dvm::set_num_threads(threads);
#ifdef DVM_BENCH_HAVE_LIBTORCH
  if (s.tier == Tier::Libtorch) libtorch_set_num_threads(threads);
#endif
}

}  // namespace bench
