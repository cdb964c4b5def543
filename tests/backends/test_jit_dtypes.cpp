// The JIT's loads and stores of every element type against the interpreter:
// for every type x access pattern (LD, LDB, LDS, ST, STB; contiguous tails,
// ColReduce row pointers, RowReduce passes) x ISA (AVX2, AVX-512), the output
// BYTES must be identical (memcmp), with guard bytes after every output
// untouched, over special values (NaN, +-inf, -0, f16 subnormals and
// overflow, values near the int32 range, negatives for uint8, bool bytes
// other than 0 and 1).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/isa.h"
#include "backends/jit/jit.h"
#include "backends/jit/lower.h"
#include "backends/math/vmath.h"
#include "backends/microkernels.h"
#include "backends/simd/vec_scalar.h"
#include "dvm/dvm.h"
#include "vm/encoder.h"
#include "vm/interpreter.h"
#include "vm/kernel.h"
#include "vm/verifier.h"

#include "tests/backends/jit_isas.h"
#include "tests/jit_built.h"

namespace dvm::backends::jit {
namespace {

using vm::ArgRole;
using vm::Encoder;
using vm::Form;
using vm::Op;

constexpr Dtype kTypes[] = {Dtype::F32, Dtype::F16, Dtype::BF16, Dtype::I32, Dtype::Bool, Dtype::I64, Dtype::U8};
constexpr uint8_t kGuardByte = 0xA5;
constexpr int64_t kGuardBytes = 64;

using testing::make_kernel;

// The ISAs to test, each with a message when the CPU lacks it.
std::vector<Isa> isas_or_skip_message() {
  std::vector<Isa> out = testing::jit_isas();
  if (!microkernels_for(Isa::Avx512))
    std::printf("[ note     ] this CPU has no AVX-512: typed JIT loads and stores tested on AVX2 only\n");
  return out;
}

struct Layout {
  int64_t ps = 0, rs = 0, cs = 0;
};
Layout dense(int64_t R, int64_t C) { return {R * C, C, 1}; }
Layout padded(int64_t R, int64_t C) { return {(R + 1) * C + 5, C, 1}; }
Layout per_row(int64_t R) { return {R, 1, 0}; }
Layout strided(int64_t R, int64_t C, int64_t k) {
  const int64_t a = std::max<int64_t>(1, std::abs(k));
  return {R * C * a, C * a, k};
}
Layout epilogue(int64_t C) { return {C, 0, 1}; }

// What values an input holds.
enum class Values { Special, Finite };

// Raw bytes of n elements of type t.
std::vector<uint8_t> make_values(Dtype t, int64_t n, uint32_t seed, Values v) {
  std::mt19937 rng(seed);
  const size_t es = dtype_size(t);
  std::vector<uint8_t> out(static_cast<size_t>(n) * es);
  auto put = [&](int64_t i, const void* p) { std::memcpy(out.data() + static_cast<size_t>(i) * es, p, es); };
  std::uniform_real_distribution<float> fin(-40.0f, 40.0f);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t r = rng();
    switch (t) {
      case Dtype::F32: {
        float f = fin(rng);
        if (v == Values::Special) {
          static const uint32_t sp[] = {
              0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u,
              0x477fe000u, 0x477ff000u, 0x477fefffu, 0xc77ff000u,             // f16 max and overflow
              0x33000000u, 0x33000001u, 0x337fffffu, 0x38800000u, 0x387fc000u,  // f16 subnormals
              0x3f808000u, 0x3f818000u, 0x3f808001u, 0x7f7fffffu, 0xff7fffffu,  // bf16 ties, max
              0x4effffffu, 0x4f000000u, 0xcf000000u, 0xcf000001u,              // near the int32 range
              0x5effffffu, 0x5f000000u, 0xdf000000u, 0xdf000001u,              // near the int64 range
              0xbfc00000u, 0xbf800000u, 0x437f8000u, 0x43800000u, 0x43960000u, 0x3f000000u, 0xbf000000u,
              0x00000001u, 0x80400000u, 0x4b800001u};
          const size_t k = static_cast<size_t>(i) % (2 * std::size(sp));
          if (k < std::size(sp)) f = std::bit_cast<float>(sp[k]);
          else if (r % 3 == 0) f = std::bit_cast<float>(static_cast<uint32_t>(rng()));
        }
        put(i, &f);
        break;
      }
      case Dtype::F16:
      case Dtype::BF16: {
        uint16_t h = static_cast<uint16_t>(r);
        if (v == Values::Finite) h &= t == Dtype::F16 ? 0xbbffu : 0xbfffu;  // exponent below the top
        if (v == Values::Special && i % 5 == 0) {
          static const uint16_t sp[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7d01, 0xfe55, 0x0001, 0x83ff,
                                        0x7f80, 0xff80, 0x7fc0, 0x7f81, 0x3c00, 0x0400};
          h = sp[static_cast<size_t>(i / 5) % std::size(sp)];
        }
        put(i, &h);
        break;
      }
      case Dtype::I32: {
        int32_t x = static_cast<int32_t>(r);
        if (v == Values::Finite) x >>= 12;
        if (v == Values::Special && i % 4 == 0) {
          static const int32_t sp[] = {0, 1, -1, INT32_MIN, INT32_MAX, 16777217, -16777217, 2147483583, 255, 256};
          x = sp[static_cast<size_t>(i / 4) % std::size(sp)];
        }
        put(i, &x);
        break;
      }
      case Dtype::I64: {
        int64_t x = static_cast<int64_t>((static_cast<uint64_t>(r) << 32) | rng());
        if (v == Values::Finite) x >>= 44;
        if (v == Values::Special && i % 4 == 0) {
          static const int64_t sp[] = {0, 1, -1, INT64_MIN, INT64_MAX, (int64_t{1} << 53) + 1, -(int64_t{1} << 24) - 1,
                                       (int64_t{1} << 40) + (int64_t{1} << 16) + 1, 4294967296};
          x = sp[static_cast<size_t>(i / 4) % std::size(sp)];
        }
        put(i, &x);
        break;
      }
      case Dtype::U8:
      case Dtype::Bool: {
        uint8_t b = static_cast<uint8_t>(r);
        if (r % 3 == 0) b = 0;
        if (t == Dtype::Bool && r % 5 == 1) b = 1;
        put(i, &b);
        break;
      }
    }
  }
  return out;
}

int64_t extent_of(const Layout& l, int64_t P, int64_t R, int64_t C, int64_t* origin) {
  int64_t lo = 0, hi = 0;
  auto span = [&](int64_t n, int64_t s) {
    if (n <= 0) return;
    const int64_t o = (n - 1) * s;
    if (o < 0) lo += o;
    else hi += o;
  };
  span(P, l.ps);
  span(R, l.rs);
  span(C, l.cs);
  *origin = -lo;
  return hi - lo + 1;
}

// With this set, differential() places the first element of every output
// on a 64-byte boundary (streaming stores need aligned outputs).
bool g_align_outputs = false;

// Runs k (its arguments' types from the program) on the interpreter and the
// JIT for every ISA; every output's bytes, guard bytes included, must match.
void differential(const vm::Kernel& k, const std::vector<Layout>& layouts, int64_t P, int64_t R, int64_t C,
                  uint32_t seed, const std::string& what, Values values = Values::Special) {
  const auto& roles = k.program().roles;
  const auto& types = k.program().types;
  ASSERT_EQ(roles.size(), layouts.size());
  for (Isa isa : testing::jit_isas()) {
    std::string reason;
    auto code = compile(k.verified(), isa, &reason);
    ASSERT_TRUE(code) << what << " " << isa_name(isa) << ": " << reason;
    const size_t na = roles.size();
    std::vector<std::vector<uint8_t>> in(na), buf_i(na), buf_j(na);
    std::vector<int64_t> extent(na);
    // Each output's bytes, guards included, as views into buf_i / buf_j
    // (which have 64 bytes of slack in front for g_align_outputs).
    std::vector<uint8_t*> out_i(na), out_j(na);
    std::vector<size_t> out_size(na);
    vm::Launch li;
    li.extent[vm::kP] = P;
    li.extent[vm::kR] = R;
    li.extent[vm::kC] = C;
    li.args.resize(na);
    for (size_t a = 0; a < na; ++a) {
      const Layout& ly = layouts[a];
      int64_t origin = 0;
      extent[a] = extent_of(ly, P, R, C, &origin);
      const size_t es = dtype_size(types[a]);
      vm::ArgBinding bind;
      bind.stride[vm::kP] = ly.ps;
      bind.stride[vm::kR] = ly.rs;
      bind.stride[vm::kC] = ly.cs;
      li.args[a] = bind;
      if (roles[a] == ArgRole::Input) {
        in[a] = make_values(types[a], extent[a], seed * 31 + static_cast<uint32_t>(a), values);
        li.args[a].in = in[a].data() + static_cast<size_t>(origin) * es;
      } else {
        out_size[a] = static_cast<size_t>(extent[a]) * es + kGuardBytes;
        const size_t first = static_cast<size_t>(origin) * es;
        auto place = [&](std::vector<uint8_t>& buf) {
          buf.assign(out_size[a] + 64, kGuardByte);
          size_t front = 0;
          while (g_align_outputs && reinterpret_cast<uintptr_t>(buf.data() + front + first) % 64 != 0) ++front;
          return buf.data() + front;
        };
        out_i[a] = place(buf_i[a]);
        out_j[a] = place(buf_j[a]);
        li.args[a].out = out_i[a] + first;
      }
    }
    vm::Launch lj = li;
    for (size_t a = 0; a < na; ++a)
      if (roles[a] == ArgRole::Output) lj.args[a].out = out_j[a] + (static_cast<uint8_t*>(li.args[a].out) - out_i[a]);
    const int64_t items = vm::work_items(k, li);
    vm::interpret(k, li, 0, items, *microkernels_for(isa));
    const int64_t cut1 = std::min<int64_t>(items, 1), cut2 = std::max(cut1, items - 1);
    run_items(*code, k.verified(), lj, 0, cut1);
    run_items(*code, k.verified(), lj, cut1, cut2);
    run_items(*code, k.verified(), lj, cut2, items);
    for (size_t a = 0; a < na; ++a) {
      if (roles[a] != ArgRole::Output) continue;
      const std::vector<uint8_t> x(out_i[a], out_i[a] + out_size[a]), y(out_j[a], out_j[a] + out_size[a]);
      const size_t es = dtype_size(types[a]);
      for (size_t g = static_cast<size_t>(extent[a]) * es; g < y.size(); ++g)
        ASSERT_EQ(y[g], kGuardByte) << what << " " << isa_name(isa) << " C=" << C << ": JIT wrote past output "
                                    << a << " (" << dtype_name(types[a]) << ")";
      if (x == y) continue;
      for (size_t e = 0; e < x.size() / es; ++e) {
        if (std::memcmp(&x[e * es], &y[e * es], es) == 0) continue;
        uint64_t bx = 0, by = 0;
        std::memcpy(&bx, &x[e * es], es);
        std::memcpy(&by, &y[e * es], es);
        // test_jit.cpp's one tolerated difference, for f32 results of
        // arithmetic only: which NaN comes out when two NaNs of different
        // sign meet in a commutative op. Converted stores match exactly.
        if (types[a] == Dtype::F32 && std::isnan(std::bit_cast<float>(static_cast<uint32_t>(bx))) &&
            std::isnan(std::bit_cast<float>(static_cast<uint32_t>(by))))
          continue;
        ADD_FAILURE() << what << " " << isa_name(isa) << " P=" << P << " R=" << R << " C=" << C << ": output "
                      << a << " (" << dtype_name(types[a]) << ") byte offset " << e * es << " interpreter 0x"
                      << std::hex << bx << " jit 0x" << by << std::dec;
        return;
      }
    }
  }
}

// Lengths around every vector boundary of both ISAs (0, 1, lanes - 1, lanes,
// lanes + 1, ...), odd tails and a 1000-scale run.
std::vector<int64_t> lengths() {
  std::vector<int64_t> n;
  for (int64_t i = 0; i <= 35; ++i) n.push_back(i);
  for (int64_t i : {47, 48, 49, 63, 64, 65, 67, 127, 129, 1000, 1003, 4099}) n.push_back(i);
  return n;
}

std::string tname(Dtype t) { return dtype_name(t); }

// ---------------------------------------------------------------------------
// Contiguous loads and stores (LD, ST), the masked tail included: the load
// conversion seen as f32, the store conversion of f32 values, and a typed
// round trip.
// ---------------------------------------------------------------------------
TEST(JitDtypes, ContiguousLoadsAndStores) {
  if (isas_or_skip_message().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  for (Dtype t : kTypes) {
    Encoder e(Form::Elementwise);
    const int ax = e.add_arg(ArgRole::Input, t), af = e.add_arg(ArgRole::Input);
    const int ay = e.add_arg(ArgRole::Output), az = e.add_arg(ArgRole::Output, t), aw = e.add_arg(ArgRole::Output, t);
    auto x = e.load(Op::LD, ax);
    e.store(Op::ST, ay, x);                           // load conversion
    e.store(Op::ST, az, e.load(Op::LD, af));          // store conversion
    e.store(Op::ST, aw, e.binary(Op::ADD, x, e.constant(0.5f)));  // both, with an op between
    auto k = make_kernel(e);
    for (int64_t C : lengths()) {
      const int64_t P = 2, R = 3;
      differential(*k, {padded(R, C), dense(R, C), dense(R, C), padded(R, C), dense(R, C)}, P, R, C,
                   static_cast<uint32_t>(C) + 11, "ld/st " + tname(t));
    }
  }
}

// Elementwise kernels unrolled (copies at i + k * lanes), and more than one
// work item per row (a chunk starting inside the row).
TEST(JitDtypes, ContiguousUnrolledAndLongRows) {
  if (isas_or_skip_message().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  struct TuningScope {
    Tuning saved = tuning();
    ~TuningScope() { tuning() = saved; }
  } scope;
  for (int unroll : {0, 2, 4}) {
    tuning().unroll = unroll;
    tuning().interleave = unroll == 4 ? 1 : 0;
    for (Dtype t : kTypes) {
      Encoder e(Form::Elementwise);
      const int ax = e.add_arg(ArgRole::Input, t), ay = e.add_arg(ArgRole::Output, t);
      e.store(Op::ST, ay, e.binary(Op::MUL, e.load(Op::LD, ax), e.constant(3.0f)));
      auto k = make_kernel(e);
      std::vector<int64_t> lens = {0, 1, 15, 16, 17, 63, 64, 65, 127, 129, 200, 20001};
      for (int64_t C : lens)
        differential(*k, {dense(2, C), dense(2, C)}, 1, 2, C, static_cast<uint32_t>(C) + 5,
                     "unroll " + std::to_string(unroll) + " " + tname(t));
    }
  }
}

// LDB (one value per row, broadcast) and a row value stored over the row.
TEST(JitDtypes, BroadcastLoadsAndRowValueStores) {
  if (isas_or_skip_message().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  for (Dtype t : kTypes) {
    Encoder e(Form::Elementwise);
    const int as = e.add_arg(ArgRole::Input, t), ax = e.add_arg(ArgRole::Input);
    const int ay = e.add_arg(ArgRole::Output), az = e.add_arg(ArgRole::Output, t);
    auto s = e.load(Op::LDB, as);
    e.store(Op::ST, ay, e.binary(Op::ADD, e.load(Op::LD, ax), s));
    e.store(Op::ST, az, s);  // a row value (converted) over the whole row
    auto k = make_kernel(e);
    for (int64_t C : {0, 1, 7, 8, 9, 16, 17, 33, 1000}) {
      const int64_t P = 2, R = 13;
      differential(*k, {per_row(R), dense(R, C), dense(R, C), dense(R, C)}, P, R, C, static_cast<uint32_t>(C) + 3,
                   "ldb " + tname(t));
    }
  }
}

// LDS: strided gathers (negative and zero strides too), full vectors and
// the masked tail, in every form.
TEST(JitDtypes, StridedGathers) {
  if (isas_or_skip_message().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  for (Dtype t : kTypes) {
    for (int64_t cs : {3, -2, 0, 1}) {
      Encoder e(Form::Elementwise);
      const int aa = e.add_arg(ArgRole::Input, t), ay = e.add_arg(ArgRole::Output), az = e.add_arg(ArgRole::Output, t);
      auto a = e.load(Op::LDS, aa);
      e.store(Op::ST, ay, a);
      e.store(Op::ST, az, e.binary(Op::SUB, a, e.constant(1.0f)));
      auto k = make_kernel(e);
      for (int64_t C : lengths()) {
        const int64_t P = 2, R = 3;
        differential(*k, {strided(R, C, cs), dense(R, C), dense(R, C)}, P, R, C, static_cast<uint32_t>(C) + 7,
                     "lds cs=" + std::to_string(cs) + " " + tname(t));
      }
    }
    {  // RowReduce over a strided row
      Encoder e(Form::RowReduce);
      const int aa = e.add_arg(ArgRole::Input, t), o = e.add_arg(ArgRole::Output, t);
      e.store(Op::STB, o, e.reduce(Op::RMAX, e.load(Op::LDS, aa)));
      auto k = make_kernel(e);
      for (int64_t C : lengths())
        differential(*k, {strided(2, C, -3), per_row(2)}, 1, 2, C, 5, "row lds " + tname(t), Values::Finite);
    }
    {  // ColReduce: strided prologue and epilogue loads
      Encoder e(Form::ColReduce);
      const int aa = e.add_arg(ArgRole::Input, t), ab = e.add_arg(ArgRole::Input, t),
                o = e.add_arg(ArgRole::Output, t);
      auto r = e.reduce(Op::RMAX, e.load(Op::LDS, aa));
      e.store(Op::ST, o, e.binary(Op::SUB, r, e.load(Op::LDS, ab)));
      auto k = make_kernel(e);
      for (int64_t C : lengths()) {
        const Layout pro = {5 * C * 3, C * 3, 3}, epi = {2 * C, 0, 2};
        differential(*k, {pro, epi, epilogue(C)}, 2, 5, C, 6, "col lds " + tname(t), Values::Finite);
      }
    }
  }
}

// STS: strided stores (a slice one element wide along its buffer's inner
// axis, as stack along a new last axis writes it), full vectors and the
// masked tail, unrolled copies, a row value, and integer lanes: the bytes
// between the elements stay as they were.
TEST(JitDtypes, StridedStores) {
  if (isas_or_skip_message().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  struct TuningScope {
    Tuning saved = tuning();
    ~TuningScope() { tuning() = saved; }
  } scope;
  for (Dtype t : kTypes) {
    for (int64_t cs : {4, 3, -2}) {
      for (int unroll : {1, 4}) {
        tuning().unroll = unroll;
        Encoder e(Form::Elementwise);
        const int ax = e.add_arg(ArgRole::Input, t), ay = e.add_arg(ArgRole::Output, t),
                  az = e.add_arg(ArgRole::Output), ar = e.add_arg(ArgRole::Output, t);
        auto x = e.load(Op::LD, ax);
        e.store(Op::STS, ay, x);                                     // a copy: stack's writes
        e.store(Op::STS, az, e.binary(Op::MUL, x, e.constant(3.0f)));  // f32, computed
        e.store(Op::STS, ar, e.constant(2.0f));                      // a row value
        auto k = make_kernel(e);
        for (int64_t C : lengths()) {
          const int64_t P = 2, R = 3;
          differential(*k, {dense(R, C), strided(R, C, cs), strided(R, C, cs), strided(R, C, -cs)}, P, R, C,
                       static_cast<uint32_t>(C) + 13,
                       "sts cs=" + std::to_string(cs) + " unroll " + std::to_string(unroll) + " " + tname(t));
          if (::testing::Test::HasFailure()) return;
        }
      }
    }
  }
  tuning().unroll = 1;
  for (Dtype t : {Dtype::I32, Dtype::U8, Dtype::Bool}) {  // integer lanes, stored as they are
    Encoder e(Form::Elementwise);
    const int ax = e.add_arg(ArgRole::Input, t, true), ay = e.add_arg(ArgRole::Output, t, true);
    e.store(Op::STS, ay, e.binary(Op::IADD, e.load(Op::LD, ax), e.load(Op::LD, ax)));
    auto k = make_kernel(e);
    for (int64_t C : lengths())
      differential(*k, {dense(2, C), strided(2, C, 5)}, 1, 2, C, static_cast<uint32_t>(C) + 17, "sts ints " + tname(t));
  }
}

// RowReduce: typed loads in folding passes (four copies and their masked
// remainders), STB of the finished reductions and ST in the last pass; the
// split folding pass (a large body kept in scratch rows) too.
TEST(JitDtypes, RowReductions) {
  if (isas_or_skip_message().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  for (Dtype t : kTypes) {
    Encoder e(Form::RowReduce);
    const int ax = e.add_arg(ArgRole::Input, t), ob = e.add_arg(ArgRole::Output, t),
              oc = e.add_arg(ArgRole::Output), oy = e.add_arg(ArgRole::Output, t);
    auto x = e.load(Op::LD, ax);
    auto m = e.reduce(Op::RMAX, x);
    auto s = e.reduce(Op::RSUM, e.unary(Op::EXP, e.binary(Op::SUB, x, m)));
    e.store(Op::STB, ob, s);
    e.store(Op::STB, oc, m);
    e.store(Op::ST, oy, e.binary(Op::MUL, e.binary(Op::SUB, x, m), e.constant(7.0f)));
    auto k = make_kernel(e);
    for (int64_t C : lengths()) {
      const int64_t P = 2, R = 3;
      differential(*k, {padded(R, C), per_row(R), per_row(R), padded(R, C)}, P, R, C, static_cast<uint32_t>(C),
                   "row reduce " + tname(t), Values::Finite);
    }
  }
}

// ColReduce: typed prologue loads through row pointers (advanced by the
// row stride in the argument's element size), LDB per row, the masked
// column block, typed epilogue loads and stores.
TEST(JitDtypes, ColReductions) {
  if (isas_or_skip_message().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  for (Dtype t : kTypes) {
    Encoder e(Form::ColReduce);
    const int ax = e.add_arg(ArgRole::Input, t), as = e.add_arg(ArgRole::Input, t), ab = e.add_arg(ArgRole::Input, t);
    const int o1 = e.add_arg(ArgRole::Output, t), o2 = e.add_arg(ArgRole::Output);
    auto x = e.load(Op::LD, ax);
    auto s = e.load(Op::LDB, as);
    auto rx = e.reduce(Op::RSUM, e.binary(Op::MUL, x, s));
    auto rm = e.reduce(Op::RMAX, x);
    e.store(Op::ST, o1, e.binary(Op::ADD, rx, e.load(Op::LD, ab)));
    e.store(Op::ST, o2, rm);
    auto k = make_kernel(e);
    std::vector<int64_t> lens = lengths();
    lens.push_back(511);
    for (int64_t C : lens)
      for (int64_t R : {0, 1, 7}) {
        const int64_t P = 2;
        differential(*k, {dense(R, C), per_row(R), epilogue(C), epilogue(C), epilogue(C)}, P, R, C,
                     static_cast<uint32_t>(C * 10 + R), "col reduce " + tname(t), Values::Finite);
      }
  }
}

// Every pair of types in one kernel: a load of one converted and stored as
// the other.
// float32 to bfloat16 stores: where the CPU has AVX512_BF16 the JIT converts
// a vector in one instruction unless a lane is a NaN or a denormal; both that
// path and the formula's agree with an independent scalar rounding (to
// nearest even, every NaN 0x7fc0) over RNE ties, near-ties, overflow to
// infinity, and vectors holding one special lane at each position.
uint16_t bf16_reference(uint32_t u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  const uint32_t keep = u >> 16, rest = u & 0xffffu;
  const bool up = rest > 0x8000u || (rest == 0x8000u && (keep & 1u));
  return static_cast<uint16_t>(keep + (up ? 1u : 0u));
}

// A launch of one row of n elements: input `in`, output `out`.
vm::Launch one_row(const void* in, void* out, int64_t n) {
  vm::Launch l;
  l.extent[vm::kP] = 1;
  l.extent[vm::kR] = 1;
  l.extent[vm::kC] = n;
  l.args.resize(2);
  l.args[0].stride[vm::kC] = 1;
  l.args[0].in = in;
  l.args[1].stride[vm::kC] = 1;
  l.args[1].out = out;
  return l;
}

TEST(JitDtypes, Bfloat16StoresMatchRoundingToNearestEven) {
  if (!microkernels_for(Isa::Avx512)) GTEST_SKIP() << "no AVX-512";
  Encoder e(Form::Elementwise);
  const int ax = e.add_arg(ArgRole::Input), ay = e.add_arg(ArgRole::Output, Dtype::BF16);
  e.store(Op::ST, ay, e.load(Op::LD, ax));
  auto k = make_kernel(e);
  ASSERT_TRUE(k);
  std::mt19937 rng(8);
  constexpr int64_t kN = 16 * 512;
  std::vector<uint32_t> x(kN);
  for (int64_t i = 0; i < kN; ++i) {
    const uint32_t exp = 1 + rng() % 254, sign = rng() % 2;  // normal numbers
    uint32_t low = rng() & 0xffffu;
    if (i % 3 == 0) low = 0x8000u;                 // a tie
    else if (i % 3 == 1) low = 0x8000u + (rng() % 3) - 1;  // next to one
    x[static_cast<size_t>(i)] = (sign << 31) | (exp << 23) | ((rng() & 0x7fu) << 16) | low;
  }
  const uint32_t edge[] = {0x7f7fffffu, 0xff7fffffu, 0x7f7f8000u, 0x7f800000u, 0xff800000u,
                           0x00000000u, 0x80000000u, 0x00800000u, 0x007fffffu, 0x807fffffu};
  for (size_t i = 0; i < std::size(edge); ++i) x[i] = edge[i];
  // From vector 64 on, every other vector holds one special lane, at lane v % 16.
  const uint32_t special[] = {0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x00000001u, 0x80400000u, 0x00008000u};
  for (int64_t v = 64; v < kN / 16; v += 2)
    x[static_cast<size_t>(v * 16 + v % 16)] = special[static_cast<size_t>(v) % std::size(special)];
  std::vector<uint16_t> want(kN);
  for (int64_t i = 0; i < kN; ++i) want[static_cast<size_t>(i)] = bf16_reference(x[static_cast<size_t>(i)]);
  for (bool native : {true, false}) {
    set_bf16_instructions(native);
    std::string reason;
    auto code = compile(k->verified(), Isa::Avx512, &reason);
    ASSERT_TRUE(code) << reason;
    for (int64_t n : {int64_t{kN}, int64_t{kN - 5}, int64_t{37}}) {
      std::vector<uint16_t> y(static_cast<size_t>(n) + 8, 0xa5a5);
      const vm::Launch l = one_row(x.data(), y.data(), n);
      run_items(*code, k->verified(), l, 0, vm::work_items(*k, l));
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(y[static_cast<size_t>(i)], want[static_cast<size_t>(i)])
            << (native ? "with" : "without") << " the CPU's instruction, n " << n << ", element " << i << " 0x"
            << std::hex << x[static_cast<size_t>(i)];
      for (size_t i = static_cast<size_t>(n); i < y.size(); ++i) ASSERT_EQ(y[i], 0xa5a5) << "written past the end";
    }
  }
  set_bf16_instructions(true);
  if (!cpu_has_avx512_bf16()) std::printf("[ note     ] this CPU has no AVX512_BF16: the formula ran both times\n");
}

// tanh read only by bfloat16 stores runs the one-divide candidate and tanh
// itself in vectors with an unsure lane (lower.cpp, tanh_for_bf16); the
// bfloat16 written must be the interpreter's. Inputs: one unsure lane in
// every other vector (at lane v % 16), whole vectors of unsure lanes,
// specials (NaNs with payloads, infinities, zeros, subnormals, the clamp at
// 9) and random values, on both ISAs, with and without the CPU's bfloat16
// instruction; then the W5 form from bfloat16 inputs through differential().
TEST(JitDtypes, TanhStoredAsBfloat16IsTheInterpretersBits) {
  if (isas_or_skip_message().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  using VS = simd::VecScalar;
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> wide(-12.0f, 12.0f);
  std::vector<float> unsure;
  while (unsure.size() < 256) {
    const float x = wide(rng);
    if (math::tanh_bf16_unsure(math::tanh_bf16_candidate(VS{x})).m) unsure.push_back(x);
  }
  constexpr int64_t kN = 16 * 96;
  std::vector<float> x(kN);
  for (float& v : x) v = wide(rng);
  const uint32_t special[] = {0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7f800000u, 0xff800000u, 0x00000000u,
                              0x80000000u, 0x00000001u, 0x807fffffu, 0x00800000u, 0x41100000u, 0x410fffffu,
                              0x41100001u, 0xc1100000u, 0x7f7fffffu, 0x3f000000u};
  for (size_t i = 0; i < std::size(special); ++i) x[i] = std::bit_cast<float>(special[i]);
  size_t next = 0;
  for (int64_t v = 2; v < 64; v += 2) x[static_cast<size_t>(v * 16 + v % 16)] = unsure[next++ % unsure.size()];
  for (int64_t i = 64 * 16; i < 68 * 16; ++i) x[static_cast<size_t>(i)] = unsure[next++ % unsure.size()];
  Encoder e(Form::Elementwise);
  const int ax = e.add_arg(ArgRole::Input), ay = e.add_arg(ArgRole::Output, Dtype::BF16);
  e.store(Op::ST, ay, e.unary(Op::TANH, e.load(Op::LD, ax)));
  auto k = make_kernel(e);
  ASSERT_TRUE(k);
  for (Isa isa : testing::jit_isas())
    for (bool native : {true, false}) {
      set_bf16_instructions(native);
      std::string reason;
      auto code = compile(k->verified(), isa, &reason);
      ASSERT_TRUE(code) << reason;
      for (int64_t n : {kN, kN - 5, int64_t{37}}) {
        std::vector<uint16_t> want(static_cast<size_t>(n) + 8, 0xa5a5), got(want);
        vm::Launch l = one_row(x.data(), want.data(), n);
        vm::interpret(*k, l, 0, vm::work_items(*k, l), *microkernels_for(isa));
        l.args[1].out = got.data();
        run_items(*code, k->verified(), l, 0, vm::work_items(*k, l));
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_EQ(got[i], want[i]) << isa_name(isa) << (native ? " with" : " without")
                                     << " the CPU's bfloat16 instruction, n " << n << ", element " << i
                                     << ", x = " << (i < x.size() ? x[i] : 0.0f);
      }
    }
  set_bf16_instructions(true);
  // W5: tanh(x + bias), bfloat16 in and out.
  Encoder w(Form::Elementwise);
  const int wx = w.add_arg(ArgRole::Input, Dtype::BF16), wb = w.add_arg(ArgRole::Input, Dtype::BF16);
  const int wy = w.add_arg(ArgRole::Output, Dtype::BF16);
  w.store(Op::ST, wy, w.unary(Op::TANH, w.binary(Op::ADD, w.load(Op::LD, wx), w.load(Op::LD, wb))));
  auto kw = make_kernel(w);
  ASSERT_TRUE(kw);
  for (int64_t C : lengths())
    differential(*kw, {dense(3, C), epilogue(C), dense(3, C)}, 1, 3, C, static_cast<uint32_t>(C) + 5, "w5 bf16",
                 Values::Finite);
}

TEST(JitDtypes, EveryTypeToEveryType) {
  if (isas_or_skip_message().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  for (Dtype a : kTypes)
    for (Dtype b : kTypes) {
      Encoder e(Form::Elementwise);
      const int ax = e.add_arg(ArgRole::Input, a), ay = e.add_arg(ArgRole::Output, b);
      e.store(Op::ST, ay, e.load(Op::LD, ax));
      auto k = make_kernel(e);
      for (int64_t C : {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 1000})
        differential(*k, {dense(1, C), dense(1, C)}, 1, 1, C, static_cast<uint32_t>(C) + 1,
                     tname(a) + " -> " + tname(b));
    }
}

// int64 arguments compile on AVX2 too (one vcvtsi2ss / vcvttss2si per
// element); the differential tests above compare their bits.
TEST(JitDtypes, Int64ArgumentsCompileOnAvx2) {
  if (!microkernels_for(Isa::Avx2)) GTEST_SKIP() << "no AVX2";
  Encoder e(Form::Elementwise);
  const int ax = e.add_arg(ArgRole::Input, Dtype::I64), ay = e.add_arg(ArgRole::Output, Dtype::I64);
  e.store(Op::ST, ay, e.load(Op::LD, ax));
  auto k = make_kernel(e);
  std::string reason;
  EXPECT_NE(compile(k->verified(), Isa::Avx2, &reason), nullptr) << reason;
}

// Streaming stores of every element type (the threshold at 0: every launch
// whose outputs are aligned at every row streams): outputs on a 64-byte
// boundary, and off it, with row lengths that keep or break the alignment.
// The bits and the guards are the interpreter's; a misaligned streaming
// store would fault.
TEST(JitDtypes, StreamingStoresOfEveryType) {
  if (isas_or_skip_message().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  struct Scope {
    Scope() { set_stream_min_bytes(0); }
    ~Scope() {
      set_stream_min_bytes(-1);
      g_align_outputs = false;
    }
  } scope;
  const int64_t compiled_before = streaming_variants_compiled();
  for (Dtype t : kTypes) {
    Encoder ew(Form::Elementwise);
    {
      const int ax = ew.add_arg(ArgRole::Input), ab = ew.add_arg(ArgRole::Input, t);
      const int ay = ew.add_arg(ArgRole::Output, t), az = ew.add_arg(ArgRole::Output);
      auto b = ew.load(Op::LD, ab);  // one NaN source per typed store: its bits are defined
      ew.store(Op::ST, ay, ew.binary(Op::MUL, b, ew.constant(3.0f)));
      ew.store(Op::ST, az, ew.binary(Op::ADD, ew.load(Op::LD, ax), b));
    }
    Encoder rr(Form::RowReduce);
    {
      const int ax = rr.add_arg(ArgRole::Input, t), ay = rr.add_arg(ArgRole::Output, t);
      auto x = rr.load(Op::LD, ax);
      rr.store(Op::ST, ay, rr.binary(Op::SUB, x, rr.reduce(Op::RMAX, x)));
    }
    auto kew = make_kernel(ew), krr = make_kernel(rr);
    for (bool aligned : {true, false}) {
      g_align_outputs = aligned;
      for (int64_t C : {1, 16, 17, 64, 128, 200, 1024, 4099}) {
        const std::string what = "streaming " + tname(t) + (aligned ? " aligned" : " unaligned");
        differential(*kew, {dense(3, C), dense(3, C), dense(3, C), dense(3, C)}, 2, 3, C,
                     static_cast<uint32_t>(C) + 3, what);
        differential(*krr, {dense(3, C), dense(3, C)}, 1, 3, C, static_cast<uint32_t>(C) + 4, what + " row");
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
  EXPECT_GT(streaming_variants_compiled(), compiled_before) << "no launch ran the streaming variant";
}

// Through the public API: a hot kernel with float16 inputs and output runs
// on machine code (tier "jit"), and its bits are the interpreter's.
TEST(JitDtypes, HotFloat16KernelRunsAsJit) {
  DVM_SKIP_WITHOUT_JIT();
  if (testing::jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  // The active ISA (DVM_ISA may lower it) must have a JIT.
  if (dvm::isa() == "portable") GTEST_SKIP() << "the active ISA (portable) has no JIT";
  const TierMode saved_tier = dvm::tier_mode();
  const int saved_threads = dvm::num_threads();
  const int64_t n = 4099;
  std::vector<Half> xs(n), bs(n);
  for (int64_t i = 0; i < n; ++i) {
    xs[static_cast<size_t>(i)] = to_half(static_cast<float>(i % 97) * 0.37f - 11.0f);
    bs[static_cast<size_t>(i)] = to_half(static_cast<float>(i % 13) * -0.25f);
  }
  auto run = [&] {
    Tensor x = Tensor::from_blob(xs.data(), {n});
    Tensor b = Tensor::from_blob(bs.data(), {n});
    return dvm::relu(x * 1.5f + b).to_vector<Half>();
  };
  dvm::set_num_threads(1);
  dvm::set_tier_mode(TierMode::Off);
  const std::vector<Half> want = run();
  std::vector<std::pair<uint64_t, int64_t>> before;
  for (const KernelStats& s : dvm::kernel_stats()) before.emplace_back(s.hash, s.calls);
  dvm::set_tier_mode(TierMode::Eager);
  std::vector<Half> got;
  for (int k = 0; k < 3; ++k) got = run();
  dvm::wait_for_jit();
  got = run();
  bool found = false;
  for (const KernelStats& s : dvm::kernel_stats()) {
    int64_t calls = s.calls;
    for (auto [h, c] : before)
      if (h == s.hash) calls -= c;
    if (calls < 4) continue;
    found = true;
    EXPECT_EQ(s.tier, "jit") << s.jit_failure;
  }
  EXPECT_TRUE(found);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i].bits, want[i].bits) << i;
  dvm::set_tier_mode(saved_tier);
  dvm::set_num_threads(saved_threads);
}

}  // namespace
}  // namespace dvm::backends::jit
