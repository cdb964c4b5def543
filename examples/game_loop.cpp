// A game loop on dvm: a particle system whose particle count and time step
// change every frame. Each frame integrates velocities and positions,
// bounces particles off the floor, and computes the kinetic energy and a
// per-particle color, as an engine would (record, then read the results).
//
// Because kernels are cached by their bytecode, never by sizes, and the time
// step is a scalar parameter, not an immediate, no kernel compiles once the
// loop's few kernels exist: dvm::warm_up() compiles them to machine code
// before the first frame, and the program checks that nothing compiles in
// any timed frame and that one frame matches a scalar reference, and prints
// the frame times (p50, p99, max).
//
//   game_loop [frames]      (default 600; exit status 0 when the checks pass)
#include <dvm/dvm.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr int64_t kMinParticles = 9000, kMaxParticles = 11000;
constexpr float kGravity = -9.81f, kDamping = 0.995f, kRestitution = 0.8f;

struct Particles {
  std::vector<float> y, vy, x, vx;  // kMaxParticles each; the first n are live
};

// The particle count of frame f: between 9,000 and 11,000, a new value every
// frame (pseudo-random, the same every run), as particles spawn and die.
int64_t count_of(int f) {
  return kMinParticles + static_cast<int64_t>((static_cast<uint64_t>(f) * 2654435761u) %
                                              static_cast<uint64_t>(kMaxParticles - kMinParticles + 1));
}
// The time step of frame f: about 1/60 s with jitter, as a real frame clock.
float dt_of(int f) { return 1.0f / 60.0f + 0.002f * std::sin(0.7f * static_cast<float>(f)); }

struct FrameOut {
  float energy = 0;
  std::vector<float> color;
};

// One frame on the first n particles: dvm records the ops; reading the
// results computes them (a few fused kernels).
FrameOut frame(Particles& p, int64_t n, float dt, bool want_color) {
  using dvm::Tensor;
  Tensor y = Tensor::from_blob(p.y.data(), {n}), vy = Tensor::from_blob(p.vy.data(), {n});
  Tensor x = Tensor::from_blob(p.x.data(), {n}), vx = Tensor::from_blob(p.vx.data(), {n});
  Tensor nvy = (vy + kGravity * dt) * kDamping;
  Tensor ny = y + nvy * dt;
  Tensor below = dvm::lt(ny, 0.0f);
  ny = dvm::where(below, -ny, ny);
  nvy = dvm::where(below, -nvy * kRestitution, nvy);
  Tensor nx = x + vx * dt;
  Tensor energy = (0.5f * (nvy * nvy + vx * vx)).sum();
  Tensor speed = dvm::sqrt(nvy * nvy + vx * vx);
  Tensor color = dvm::sigmoid(speed - 5.0f);
  FrameOut out;
  // Read back into the engine's own arrays (the next frame's inputs): the
  // first data() computes every pending result in one flush.
  for (auto [t, dst] : {std::pair{&ny, &p.y}, std::pair{&nvy, &p.vy}, std::pair{&nx, &p.x}}) {
    const float* v = t->data();
    std::copy(v, v + n, dst->begin());
  }
  out.energy = energy.item();
  if (want_color) out.color = color.to_vector();
  else (void)color.data();
  return out;
}

// The same frame in scalar double precision, for the check.
FrameOut frame_reference(const Particles& p, int64_t n, float dt, std::vector<double>* y_out) {
  FrameOut out;
  double e = 0;
  y_out->resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double vy = (p.vy[i] + static_cast<double>(kGravity) * dt) * kDamping;
    double y = p.y[i] + vy * dt;
    if (y < 0) {
      y = -y;
      vy = -vy * kRestitution;
    }
    e += 0.5 * (vy * vy + static_cast<double>(p.vx[i]) * p.vx[i]);
    (*y_out)[static_cast<size_t>(i)] = y;
    const double speed = std::sqrt(vy * vy + static_cast<double>(p.vx[i]) * p.vx[i]);
    out.color.push_back(static_cast<float>(1.0 / (1.0 + std::exp(-(speed - 5.0)))));
  }
  out.energy = static_cast<float>(e);
  return out;
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  const int frames = argc > 1 ? std::atoi(argv[1]) : 600;
  if (frames < 20) {
    std::fprintf(stderr, "game_loop: expected at least 20 frames\n");
    return 2;
  }
  Particles p;
  for (auto* v : {&p.y, &p.vy, &p.x, &p.vx}) v->resize(kMaxParticles);
  for (int64_t i = 0; i < kMaxParticles; ++i) {
    p.y[i] = 1.0f + static_cast<float>(i % 97) * 0.05f;
    p.vy[i] = static_cast<float>(i % 13) - 6.0f;
    p.x[i] = static_cast<float>(i % 101);
    p.vx[i] = 0.01f * static_cast<float>(i % 29) - 0.14f;
  }

  // The check: one frame against the scalar reference.
  {
    Particles q = p;
    const int64_t n = 4097;
    std::vector<double> y_ref;
    const FrameOut want = frame_reference(q, n, dt_of(0), &y_ref);
    const FrameOut got = frame(q, n, dt_of(0), true);
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      worst = std::max(worst, std::fabs(q.y[i] - y_ref[static_cast<size_t>(i)]) / (std::fabs(y_ref[static_cast<size_t>(i)]) + 1));
      worst = std::max(worst, static_cast<double>(std::fabs(got.color[static_cast<size_t>(i)] - want.color[static_cast<size_t>(i)])));
    }
    const double e_err = std::fabs(got.energy - want.energy) / std::max(1.0f, std::fabs(want.energy));
    if (worst > 1e-5 || e_err > 1e-4) {
      std::fprintf(stderr, "game_loop: frame mismatch: max error %g, energy %g vs %g\n", worst, got.energy, want.energy);
      return 1;
    }
  }

  // Warm-up before the first frame: frames at the smallest and the largest
  // count the loop will see, their kernels compiled to machine code before
  // they run. The two counts also leave buffers in every size class of the
  // pool the frames will ask for, so no timed frame waits for the system's
  // allocator or its page faults.
  const dvm::WarmUpReport warm = dvm::warm_up([&] {
    Particles scratch = p;
    frame(scratch, kMinParticles, dt_of(1000), false);
    frame(scratch, kMaxParticles, dt_of(1001), false);
  });
  std::printf("game_loop: warm-up: %lld kernels, %lld compiled to machine code, in %.1f ms\n",
              static_cast<long long>(warm.kernels), static_cast<long long>(warm.compiled), warm.ms);

  std::vector<double> ms;
  // New kernels (bytecode) and machine-code compiles.
  const int64_t compiled_before = dvm::stats().kernels_compiled + dvm::stats().jit_compiles;
  float energy = 0;
  for (int f = 0; f < frames; ++f) {
    const auto t0 = std::chrono::steady_clock::now();
    energy = frame(p, count_of(f), dt_of(f), false).energy;
    const auto t1 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  const int64_t compiled_after = dvm::stats().kernels_compiled + dvm::stats().jit_compiles - compiled_before;
  const double p50 = percentile(ms, 0.5), p99 = percentile(ms, 0.99);
  const double mx = *std::max_element(ms.begin(), ms.end());
  std::printf("game_loop: %d frames, 9,000-11,000 particles and a new dt every frame (ISA %s)\n", frames,
              dvm::isa().c_str());
  std::printf("game_loop: frame time p50 %.3f ms, p99 %.3f ms (%.2fx p50), max %.3f ms; final energy %.1f\n", p50, p99,
              p99 / p50, mx, static_cast<double>(energy));
  std::printf("game_loop: kernels compiled after the warm-up: %lld\n", static_cast<long long>(compiled_after));
  if (compiled_after != 0) {
    std::fprintf(stderr, "game_loop: %lld kernels compiled after the warm-up (expected none: sizes and dt only changed)\n",
                 static_cast<long long>(compiled_after));
    return 1;
  }
  return 0;
}
