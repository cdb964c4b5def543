// The cube GEMM's entry points and its portable micro-kernels (4 x 8 scalar
// tile, multiply then add: this file, like the library, is compiled with
// -ffp-contract=off, so the two are never fused).
#include "backends/cube/gemm.h"

#include <atomic>
#include <string>

#include "backends/convert.h"
#include "backends/cube/gemm_driver.h"
#include "backends/cube/xbyak/tile_gen.h"
#include "dvm/error.h"

namespace dvm::backends::cube {
namespace detail {
#if defined(__x86_64__)
extern const Impl kImplAvx2;
extern const Impl kImplAvx512;
#endif

namespace {

struct VScalar {
  using T = float;
  static constexpr int kLanes = 1;
  static T zero() { return 0.0f; }
  static T load(const float* p) { return *p; }
  static void store(float* p, T x) { *p = x; }
  static T bcast(const float* p) { return *p; }
  static T load_n(const float* p, int64_t) { return *p; }  // one lane: never called
  static void store_n(float* p, T x, int64_t) { *p = x; }
  static T madd(T a, T b, T acc) { return acc + a * b; }
  static T load_bf16(const uint16_t* p) { return bf16_to_f32(*p); }
  static T load_f16(const uint16_t* p) { return f16_to_f32(*p); }
};

struct Params {
  using V = VScalar;
  // One scalar step of V::madd (the same rounding: never fused).
  static float madd1(float a, float b, float acc) { return acc + a * b; }
  static constexpr int MR = 4;
  static constexpr int NV = 8;
  static constexpr int64_t KC = 256;
  static constexpr int64_t MB = 64;
  static constexpr int64_t NB = 128;
  static constexpr int64_t kSmallM = 16;
  static constexpr int64_t kSmallKC = 256;
  static constexpr int64_t kSmallPackedKC = 256;
  static constexpr int64_t kSmallNB = 128;
  static constexpr int kSmallMR = 4;
  static constexpr int kSmallNV = 8;
};

constexpr Impl kImplPortable = Driver<Params>::kImpl;

}  // namespace
}  // namespace detail

namespace {

const detail::Impl& impl_for(Isa isa) {
  if (!isa_supported(isa))
    throw Error(std::string("cube::gemm: ISA ") + isa_name(isa) +
                " is not supported by this CPU (expected one isa_supported() accepts)");
  switch (isa) {
#if defined(__x86_64__)
    case Isa::Avx2: return detail::kImplAvx2;
    case Isa::Avx512: return detail::kImplAvx512;
#else
    case Isa::Avx2:
    case Isa::Avx512: break;
#endif
    case Isa::Portable: break;
  }
  return detail::kImplPortable;
}

// A generated partial tile: the masked variant for nc columns.
TileFn generated_edge(Isa isa, int nv, bool pf, int rows, int nc) {
  return gen::tile({isa, rows, nv, pf, nc}, gen::Exec::Allowed);
}

detail::TileSet build_generated(Isa isa, const detail::Impl& im) {
  detail::TileSet t;
  t.isa = isa;
  t.edge = &generated_edge;
  auto need = [&](int rows, int nv, bool pf) {
    std::string why;
    const TileFn f = gen::tile({isa, rows, nv, pf, 0}, gen::Exec::Allowed, &why);
    if (!f)
      throw Error(std::string("cube::gemm: generating the ") + isa_name(isa) + " micro-kernel " +
                  std::to_string(rows) + " x " + std::to_string(nv * gen::lanes(isa)) +
                  " failed: " + why);
    return f;
  };
  for (int r = 1; r <= im.mr; ++r) t.full[0][0][r] = need(r, im.nv, false);
  for (int r = 1; r <= im.small_mr; ++r) {
    t.full[1][0][r] = need(r, im.small_nv, false);
    t.full[1][1][r] = need(r, im.small_nv, true);
  }
  return t;
}

// The micro-kernels g asks for on `isa` (generated ones on first use, once).
const detail::TileSet& tiles_for(const Gemm& g, Isa isa, const detail::Impl& im) {
  if (g.kernels == Kernels::Precompiled) return *im.precompiled;
  std::string why;
  if (!gen::available(isa, &why))
    throw Error("cube::gemm: generated micro-kernels unavailable: " + why +
                " (expected Kernels::Precompiled there)");
  if (isa == Isa::Avx512) {
    static const detail::TileSet t = build_generated(Isa::Avx512, im);
    return t;
  }
  static const detail::TileSet t = build_generated(Isa::Avx2, im);
  return t;
}

}  // namespace

int64_t items(const Gemm& g, Isa isa) { return impl_for(isa).items(g); }

bool one_row_reads_columns(Isa isa) { return impl_for(isa).one_row_by_columns; }

Block item_block(const Gemm& g, Isa isa, int64_t item) { return impl_for(isa).block(g, item); }

TileShape tile_shape(Isa isa, int shape) {
  const detail::Impl& im = impl_for(isa);
  const int lanes = isa == Isa::Avx512 ? 16 : isa == Isa::Avx2 ? 8 : 1;
  return shape == 0 ? TileShape{im.mr, im.nv, lanes} : TileShape{im.small_mr, im.small_nv, lanes};
}

TileFn precompiled_tile(Isa isa, int shape, int rows, bool pf) {
  const detail::Impl& im = impl_for(isa);
  const int s = shape == 0 ? 0 : 1;
  if (rows < 1 || rows > (s == 0 ? im.mr : im.small_mr)) return nullptr;
  return im.precompiled->full[s][pf ? 1 : 0][rows];
}

namespace {
void check_b16(const Gemm& g, Isa isa) {
  if (!g.b16) return;
  if (g.b16_type != Dtype::BF16 && g.b16_type != Dtype::F16)
    throw Error(std::string("cube::gemm: a 16-bit B must be bfloat16 or float16, not ") + dtype_name(g.b16_type));
  const bool by_columns = g.b.rs == 1 && one_row_reads_columns(isa);
  if (g.M > 1 || (g.b.cs != 1 && !by_columns))
    throw Error("cube::gemm: a 16-bit B needs one row of A and B's rows contiguous" +
                std::string(one_row_reads_columns(isa) ? " or its columns contiguous" : "") + " (M = " +
                std::to_string(g.M) + ", B's strides " + std::to_string(g.b.rs) + " and " + std::to_string(g.b.cs) +
                ", " + isa_name(isa) + ")");
}
}  // namespace

void run(const Gemm& g, Isa isa, int64_t begin, int64_t end) {
  check_b16(g, isa);
  const detail::Impl& im = impl_for(isa);
  im.run(g, begin, end, tiles_for(g, isa, im));
}

void gemm(const Gemm& g, Isa isa) {
  check_b16(g, isa);
  const detail::Impl& im = impl_for(isa);
  im.run(g, 0, im.items(g), tiles_for(g, isa, im));
}

namespace {
std::atomic<int64_t> g_tiny_products{0};
}  // namespace

bool tiny(const Gemm& g) {
  return g.M <= kTinyDim && g.N <= kTinyDim && g.K <= kTinyDim && (g.b.cs == 1 || g.N <= 1) && !g.hook &&
         !g.b16 && !g.accumulate;
}

void tiny_batch(const Gemm& g, Isa isa, int64_t count, int64_t sa, int64_t sb, int64_t sc) {
  if (!tiny(g))
    throw Error("cube::tiny_batch: a product of " + std::to_string(g.M) + " x " + std::to_string(g.K) + " times " +
                std::to_string(g.K) + " x " + std::to_string(g.N) + " is not tiny (expected M, N, K <= " +
                std::to_string(kTinyDim) + ", B's rows contiguous, no hook, 16-bit B or accumulate)");
  impl_for(isa).tiny_batch(g, count, sa, sb, sc);
  g_tiny_products.fetch_add(count, std::memory_order_relaxed);
}

int64_t tiny_products() { return g_tiny_products.load(std::memory_order_relaxed); }

void transpose_to_rows(Isa isa, const float* src, int64_t cs, int64_t K, int64_t N, float* dst,
                       int64_t ld) {
  impl_for(isa).transpose(src, cs, K, N, dst, ld);
}

bool prepare_generated(Isa isa, std::string* why) {
  if (!gen::available(isa, why)) return false;
  try {
    Gemm g{};
    g.kernels = Kernels::Generated;
    tiles_for(g, isa, impl_for(isa));
    return true;
  } catch (const Error& e) {
    *why = e.what();
    return false;
  }
}

}  // namespace dvm::backends::cube
