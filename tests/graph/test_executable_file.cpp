// Executable::save and Executable::load (docs/EXECUTABLES.md): a saved
// executable, loaded, replays its programs with the lazy path's bits and
// rebuilds nothing; a file that is not one this build wrote (missing,
// truncated, corrupt, another version) is a dvm::Error naming the path, and
// a file whose checksum holds but whose payload was changed is refused or
// runs inside its arguments: never a crash, never a write outside the
// outputs (the ASan job runs this file too).
#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include <bit>
#include <cstdio>
#include <cstring>
#include <cmath>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "dvm/dvm.h"
#include "graph/program.h"
#include "tests/error_testing.h"
#include "tests/graph/random_graph.h"

namespace dvm::testing {
namespace {

using namespace random_graph;

// The file's layout around its payload (docs/EXECUTABLES.md).
constexpr size_t kHeader = 8 + 4 + 8, kTrailer = 8;

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "dvm_exe_" + name + "_" + std::to_string(::getpid()) + ".dvmx";
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The checksum the format defines (64-bit FNV-1a over the payload), written
// here from its definition so that payload changes can be made to pass it.
uint64_t fnv1a(const std::string& s, size_t begin, size_t end) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = begin; i < end; ++i) h = (h ^ static_cast<uint8_t>(s[i])) * 0x100000001b3ull;
  return h;
}

void reseal(std::string* file) {
  const uint64_t sum = fnv1a(*file, kHeader, file->size() - kTrailer);
  std::memcpy(file->data() + file->size() - kTrailer, &sum, sizeof sum);
}

const std::vector<std::pair<int64_t, int64_t>> kBindings = {{2, 5}, {3, 7}, {1, 9},  {4, 1},
                                                            {3, 3}, {2, 16}, {1, 1}, {3, 700}};

struct RunResult {
  std::vector<std::vector<float>> out;
};

// Runs exe at (B, S) on the seeded inputs, each output with guards after it.
constexpr float kGuard = -777.0f;
RunResult run_at(const Executable& exe, size_t nout, const std::vector<size_t>& sizes, int64_t B, int64_t S) {
  const std::vector<float> xv = values(B * S * kC, static_cast<uint32_t>(B * 131 + S)),
                           ev = values(S * kC, static_cast<uint32_t>(S * 7 + 1));
  RunResult r;
  GraphOutputs out;
  for (size_t o = 0; o < nout; ++o) {
    r.out.emplace_back(sizes[o] + 3, kGuard);
    out.emplace_back(port(o), r.out.back().data());
  }
  exe.run({{"x", xv.data()}, {"e", ev.data()}}, out, {{"B", B}, {"S", S}});
  return r;
}

std::vector<std::vector<float>> lazy_at(uint32_t seed, const Params& p, int64_t B, int64_t S) {
  const std::vector<float> xv = values(B * S * kC, static_cast<uint32_t>(B * 131 + S)),
                           ev = values(S * kC, static_cast<uint32_t>(S * 7 + 1));
  const Tensor x = Tensor::from_blob(xv.data(), {B, S, kC}), e = Tensor::from_blob(ev.data(), {S, kC});
  std::vector<std::vector<float>> want;
  for (const Tensor& t : random_model(seed, p, x, e, B, S)) want.push_back(t.to_vector());
  return want;
}

// An executable saved after runs at every binding of kBindings, loaded,
// replays each with the lazy path's bits, and rebuilds nothing.
TEST(ExecutableFile, LoadedExecutablesReplayTheLazyPathsBits) {
  const Params p;
  for (uint32_t seed = 0; seed < 12; ++seed) {
    const std::string path = temp_path("bits" + std::to_string(seed));
    {
      const Executable exe = capture_random(seed, p);
      for (const auto& [B, S] : kBindings) {
        std::vector<size_t> sizes;
        for (const std::string& o : exe.outputs()) sizes.push_back(static_cast<size_t>(exe.shape(o, {{"B", B}, {"S", S}}).numel()));
        run_at(exe, sizes.size(), sizes, B, S);
      }
      exe.save(path);
    }
    const Executable loaded = Executable::load(path);
    EXPECT_EQ(loaded.symbols(), (std::vector<std::string>{"B", "S"}));
    EXPECT_EQ(loaded.inputs(), (std::vector<std::string>{"x", "e"}));
    for (const auto& [B, S] : kBindings) {
      const std::string at = "seed " + std::to_string(seed) + " B " + std::to_string(B) + " S " + std::to_string(S);
      const std::vector<std::vector<float>> want = lazy_at(seed, p, B, S);
      std::vector<size_t> sizes;
      for (const auto& w : want) sizes.push_back(w.size());
      const graph::ProgramStats before = graph::program_stats();
      const RunResult got = run_at(loaded, want.size(), sizes, B, S);
      EXPECT_EQ(graph::program_stats().replays, before.replays + 1) << at;
      EXPECT_EQ(graph::program_stats().rebuilds, before.rebuilds) << at << ": a loaded executable rebuilt ops";
      for (size_t o = 0; o < want.size(); ++o) {
        for (size_t i = 0; i < want[o].size(); ++i)
          ASSERT_EQ(std::bit_cast<uint32_t>(got.out[o][i]), std::bit_cast<uint32_t>(want[o][i]))
              << at << " output " << o << " element " << i;
        for (size_t i = want[o].size(); i < got.out[o].size(); ++i) ASSERT_EQ(got.out[o][i], kGuard) << at;
      }
    }
    // Saving the loaded executable writes the same bytes.
    const std::string again = temp_path("again" + std::to_string(seed));
    loaded.save(again);
    EXPECT_EQ(read_file(again), read_file(path)) << "seed " << seed;
    std::remove(path.c_str());
    std::remove(again.c_str());
  }
}

// Saved right after compile(), an executable holds only the program of
// distinct extents; loaded, it runs that program at every binding (extents
// of 1, equal extents): the lazy path may choose other kernels there, so
// the values are compared with a bound. At bindings under the relations it
// was made for, the bits are the lazy path's.
TEST(ExecutableFile, TheProgramOfDistinctExtentsComputesAnyBinding) {
  const Params p;
  for (uint32_t seed = 0; seed < 12; ++seed) {
    const std::string path = temp_path("generic" + std::to_string(seed));
    capture_random(seed, p).save(path);
    const Executable loaded = Executable::load(path);
    std::remove(path.c_str());
    for (const auto& [B, S] : kBindings) {
      const std::string at = "seed " + std::to_string(seed) + " B " + std::to_string(B) + " S " + std::to_string(S);
      const std::vector<std::vector<float>> want = lazy_at(seed, p, B, S);
      std::vector<size_t> sizes;
      for (const auto& w : want) sizes.push_back(w.size());
      const RunResult got = run_at(loaded, want.size(), sizes, B, S);
      const bool generic = B != 1 && S != 1 && B != S && S != kC;
      for (size_t o = 0; o < want.size(); ++o) {
        float scale = 1.0f;
        for (float w : want[o]) scale = std::max(scale, std::fabs(w));
        for (size_t i = 0; i < want[o].size(); ++i) {
          if (generic) {
            ASSERT_EQ(std::bit_cast<uint32_t>(got.out[o][i]), std::bit_cast<uint32_t>(want[o][i]))
                << at << " output " << o << " element " << i;
          } else {
            // Other kernels sum in another order: float32 sums of at most
            // S * 16 terms of the graph's magnitude differ by a few eps *
            // their count, far below 1e-4 of the output's scale here.
            ASSERT_NEAR(got.out[o][i], want[o][i], 1e-4f * scale) << at << " output " << o << " element " << i;
          }
        }
        for (size_t i = want[o].size(); i < got.out[o].size(); ++i) ASSERT_EQ(got.out[o][i], kGuard) << at;
      }
    }
  }
}

Executable small_executable() {
  const Tensor w = Tensor::normal({8, 8}, 5);
  w.sync();
  Graph g;
  const Dim N = g.symbol("N");
  const Tensor x = g.input("x", {N, 8});
  // A product, a range (argmax's indices along N) and broadcasting.
  g.output("y", tanh(matmul(x, w)) * 0.5f + x.argmax(0).to(Dtype::F32));
  return g.compile();
}

// Constants of no elements (a sum over an empty tensor made before the
// graph, an empty slice of a weight) save and load, and the loaded
// executable gives the lazy path's bits.
TEST(ExecutableFile, EmptyConstantsRoundTrip) {
  const Tensor empty = Tensor::zeros({0});
  const Tensor w = Tensor::uniform({3, 0}, 7);
  Executable exe;
  {
    Graph g;
    const Dim N = g.symbol("N");
    const Tensor x = g.input("x", {N});
    g.output("y", x + empty.sum() + w.sum());
    exe = g.compile();
  }
  const std::string path = temp_path("empty_constant");
  exe.save(path);
  const Executable loaded = Executable::load(path);
  std::remove(path.c_str());
  for (int64_t n : {1, 5}) {
    std::vector<float> x(static_cast<size_t>(n), 1.5f), y(static_cast<size_t>(n), -1.0f);
    loaded.run({{"x", x.data()}}, {{"y", y.data()}}, {{"N", n}});
    EXPECT_EQ(y, std::vector<float>(static_cast<size_t>(n), 1.5f)) << "N " << n;
  }
}

TEST(ExecutableFile, FilesThatAreNotExecutablesAreErrors) {
  const std::string path = temp_path("bad");
  small_executable().save(path);
  const std::string good = read_file(path);
  ASSERT_GT(good.size(), kHeader + kTrailer);

  expect_error_message("no file", [&] { Executable::load(path + ".missing"); }, {"cannot open", ".missing"});
  const std::string dir = path + ".dir";
  std::filesystem::create_directory(dir);
  expect_error_message("a directory", [&] { Executable::load(dir); }, {"cannot open", dir, "not a regular file"});
  std::filesystem::remove(dir);
  write_file(path, "");
  expect_error_message("empty", [&] { Executable::load(path); }, {path, "not a dvm executable"});
  std::string other = good;
  other[0] = 'X';
  write_file(path, other);
  expect_error_message("magic", [&] { Executable::load(path); }, {path, "not a dvm executable"});
  other = good;
  other[8] = 99;  // the version's low byte
  write_file(path, other);
  expect_error_message("version", [&] { Executable::load(path); }, {path, "version 99", "reads versions 1 to 3"});
  // Cut anywhere, the file is refused; cut after its magic, as truncated.
  for (size_t n = 0; n < good.size(); n += 1 + n / 64) {
    write_file(path, good.substr(0, n));
    std::vector<std::string> parts = {path};
    if (n >= 8) parts.push_back(n < kHeader + 8 ? "truncated" : "payload bytes");
    expect_error_message("truncated at " + std::to_string(n), [&] { Executable::load(path); }, parts);
  }
  write_file(path, good + "tail");
  expect_error_message("extended", [&] { Executable::load(path); }, {path, "payload bytes"});
  // Any byte of the payload or the checksum changed fails the checksum.
  std::mt19937 rng(3);
  for (int k = 0; k < 200; ++k) {
    other = good;
    const size_t at = kHeader + rng() % (good.size() - kHeader);
    other[at] = static_cast<char>(other[at] ^ (1 + rng() % 255));
    write_file(path, other);
    expect_error_message("byte " + std::to_string(at), [&] { Executable::load(path); }, {path, "checksum"});
  }
  // A name with bytes that are not text (checksum made to match) is quoted
  // with them escaped: the message stays printable.
  {
    Graph g;
    const Dim d = g.symbol("Zq_sym");
    g.output("y", g.input("x", {d}) * 2.0f);
    g.compile().save(path);
    std::string named = read_file(path);
    const size_t at = named.find("Zq_sym");
    ASSERT_NE(at, std::string::npos);
    named[at + 2] = static_cast<char>(0xff);
    reseal(&named);
    write_file(path, named);
    try {
      (void)Executable::load(path);
      ADD_FAILURE() << "a symbol name with byte 0xff loaded";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("'Zq\\xff"), std::string::npos) << m;
      for (char c : m) ASSERT_TRUE(c >= 0x20 && c < 0x7f) << m;
    }
  }
  expect_error_message("save where no file can be", [&] { small_executable().save("/nonexistent-dir/x.dvmx"); },
                       {"cannot open", "/nonexistent-dir/x.dvmx"});
  std::remove(path.c_str());
}

// Files of earlier versions still load and replay the lazy path's bits:
// tests/graph/data/v1_small.dvmx (written by the build before sums of
// monomials, run at N = 1, 3 and 40 before its save) and v2_small.dvmx
// (the build before slices' bounds, run at N = 3), both of
// y = tanh(x @ w) * 0.5 + x[:, 2:3] * 2 with w = normal({8, 8}, 5).
TEST(ExecutableFile, VersionOneAndTwoFilesStillLoad) {
  for (const char* file : {"v1_small.dvmx", "v2_small.dvmx"}) {
  SCOPED_TRACE(file);
  const Executable exe = Executable::load(std::string(DVM_SOURCE_DIR) + "/tests/graph/data/" + file);
  const Tensor w = Tensor::normal({8, 8}, 5);
  for (int64_t n : {1, 3, 40}) {
    std::vector<float> xv(static_cast<size_t>(n * 8)), y(static_cast<size_t>(n * 8) + 4, kGuard);
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i % 13) * 0.25f - 1.5f;
    exe.run({{"x", xv.data()}}, {{"y", y.data()}}, {{"N", n}});
    const Tensor x = Tensor::from_blob(xv.data(), {n, 8});
    const std::vector<float> want = (tanh(matmul(x, w)) * 0.5f + x.slice(1, 2, 3) * 2.0f).to_vector();
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(y[i]), std::bit_cast<uint32_t>(want[i])) << "N " << n << " element " << i;
    for (size_t i = want.size(); i < y.size(); ++i) ASSERT_EQ(y[i], kGuard);
  }
  }
}

// A save replaces a regular file only once complete (written beside it and
// renamed) and leaves nothing beside it; a symbolic link stays a link, the
// file it names rewritten (tracer/replace_file.h).
TEST(ExecutableFile, ASaveReplacesTheFileWholeAndKeepsALink) {
  namespace fs = std::filesystem;
  const fs::path dir = temp_path("replace_dir");
  fs::create_directories(dir);
  const std::string path = (dir / "exe.dvmx").string();
  write_file(path, std::string(100000, 'x'));  // longer than the executable: a truncating rewrite would show
  const Executable exe = small_executable();
  exe.save(path);
  const std::string saved = read_file(path);
  EXPECT_NO_THROW((void)Executable::load(path));
  int entries = 0;
  for ([[maybe_unused]] const fs::directory_entry& e : fs::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1) << "a partial file was left beside " << path;
  const std::string link = (dir / "link.dvmx").string();
  fs::create_symlink(path, link);
  write_file(path, "stale");
  exe.save(link);
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(read_file(path), saved);
  fs::remove_all(dir);
}

// The checksum guards against accidents, not against a changed file that
// carries a valid one: the loader checks every index, type and kernel, and
// each run checks where its arguments reach. Payloads with random bytes
// changed and the checksum made to match are either refused with a
// dvm::Error or run without writing outside their outputs.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizer = true;
#else
constexpr bool kSanitizer = false;
#endif

TEST(ExecutableFile, ChangedPayloadsAreRefusedOrRunInsideTheirArguments) {
  const std::string path = temp_path("fuzz");
  {
    const Executable exe = small_executable();
    std::vector<float> x(40 * 8, 0.5f), y(40 * 8);
    for (int64_t n : {1, 40}) exe.run({{"x", x.data()}}, {{"y", y.data()}}, {{"N", n}});
    exe.save(path);
  }
  const std::string good = read_file(path);
  std::mt19937 rng(11);
  int refused = 0, ran = 0;
  for (int k = 0; k < 1500; ++k) {
    std::string bad = good;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int f = 0; f < flips; ++f) {
      const size_t at = kHeader + rng() % (good.size() - kHeader - kTrailer);
      // Small numbers are where indices live: set a byte, or change its bits.
      bad[at] = rng() % 2 ? static_cast<char>(rng() % 256) : static_cast<char>(bad[at] ^ (1 << (rng() % 8)));
    }
    reseal(&bad);
    write_file(path, bad);
    try {
      const Executable exe = Executable::load(path);
      for (int64_t n : {1, 3, 40}) {
        // Buffers as the loaded file describes them (the caller's contract),
        // with guard bytes after each.
        const Bindings bind = {{"N", n}};
        int64_t xn = 0, yn = 0, arena = 0;
        size_t xs = 0, ys = 0;
        try {
          xn = exe.shape("x", bind).numel();
          yn = exe.shape("y", bind).numel();
          xs = dtype_size(exe.dtype("x"));
          ys = dtype_size(exe.dtype("y"));
          arena = exe.memory(bind);
        } catch (const Error&) {
          ++refused;
          continue;
        }
        // A changed file may ask for any arena, and its launches for any
        // work and scratch: runs whose arena passes 1 GiB are left out, and
        // the sanitizer builds (whose allocators abort on a request the
        // system refuses, where malloc fails and dvm raises an Error) only
        // load and size the files.
        if (kSanitizer || xn > (1 << 20) || yn > (1 << 20) || arena > (int64_t{1} << 30)) continue;
        constexpr size_t kPad = 64;
        const std::vector<char> x0(static_cast<size_t>(xn) * xs + kPad, 0x3e);
        std::vector<char> x = x0, y(static_cast<size_t>(yn) * ys + kPad, 0x5a);
        try {
          exe.run({{"x", x.data()}}, {{"y", y.data()}}, bind);
          ++ran;
        } catch (const Error&) {
          ++refused;
        }
        ASSERT_EQ(x, x0) << "change " << k << ": an input was written";
        for (size_t i = y.size() - kPad; i < y.size(); ++i) ASSERT_EQ(y[i], 0x5a) << "change " << k << ": past y's end";
      }
    } catch (const Error&) {
      ++refused;
    }
  }
  EXPECT_GT(refused, 100);
  if (!kSanitizer) {
    EXPECT_GT(ran, 10);
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace dvm::testing
