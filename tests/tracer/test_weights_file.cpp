// save_weights and load_weights: generated tensors (every floating dtype,
// ranks 0..4, empty extents, views and pending results) round-trip bit for
// bit; the bytes written match the layout built here from docs/WEIGHTS.md
// and the example dump printed there; every prefix, field corruption and
// random byte flip of a valid file is a dvm::Error, never a crash.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "dvm/weights_file.h"
#include "tests/tracer/tracer_testing.h"

namespace dvm::testing {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
class WeightsFile : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / cat("dvm_weights_", info->name(), "_", std::random_device{}());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& file) const { return (dir_ / file).string(); }

  fs::path dir_;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

// A tensor's elements, row-major, as raw bytes in its own type.
template <class T>
std::string bytes_of(const std::vector<T>& v) {
  std::string s(v.size() * sizeof(T), '\0');
  if (!v.empty()) std::memcpy(s.data(), v.data(), s.size());
  return s;
}
std::string raw(const Tensor& t) {
  switch (t.dtype()) {
    case Dtype::F32: return bytes_of(t.to_vector<float>());
    case Dtype::F16: return bytes_of(t.to_vector<Half>());
    case Dtype::BF16: return bytes_of(t.to_vector<BFloat16>());
    default: ADD_FAILURE() << "raw: " << dtype_name(t.dtype()); return {};
  }
}

// ---------------------------------------------------------------------------
// The layout, built from docs/WEIGHTS.md field by field
// ---------------------------------------------------------------------------
struct Builder {
  std::string bytes;
  // A little-endian integer of n bytes; returns its offset.
  size_t le(uint64_t v, int n) {
    const size_t at = bytes.size();
    for (int i = 0; i < n; ++i) bytes.push_back(static_cast<char>(v >> (8 * i) & 0xFF));
    return at;
  }
  size_t raw(const std::string& s) {
    const size_t at = bytes.size();
    bytes += s;
    return at;
  }
};

// Where each field of one tensor lies.
struct Fields {
  size_t name_length, name, dtype, rank, reserved, extents, data;
};

// The example of docs/WEIGHTS.md: "a" float32 [2] = {1, -2}; "é" bfloat16
// 0-d = 1.5; "h" float16 [2, 0].
struct SmallFile {
  std::string bytes;
  size_t count;
  Fields t[3];
};

SmallFile small_file() {
  Builder b;
  SmallFile f{};
  b.raw("DVMW");
  b.le(1, 4);  // version
  f.count = b.le(3, 8);
  auto tensor = [&](const std::string& name, uint64_t code, std::vector<int64_t> extents, const std::string& data) {
    Fields x{};
    x.name_length = b.le(name.size(), 4);
    x.name = b.raw(name);
    x.dtype = b.le(code, 1);
    x.rank = b.le(extents.size(), 1);
    x.reserved = b.le(0, 2);
    x.extents = b.bytes.size();
    for (int64_t e : extents) b.le(static_cast<uint64_t>(e), 8);
    x.data = b.raw(data);
    return x;
  };
  f.t[0] = tensor("a", 0, {2}, std::string("\x00\x00\x80\x3f\x00\x00\x00\xc0", 8));  // 1.0f, -2.0f
  f.t[1] = tensor("\xc3\xa9", 2, {}, std::string("\xc0\x3f", 2));                     // bf16 0x3fc0 = 1.5
  f.t[2] = tensor("h", 1, {2, 0}, "");
  f.bytes = b.bytes;
  return f;
}

std::vector<NamedTensor> small_tensors() {
  return {{"a", Tensor::from_vector(std::vector<float>{1.0f, -2.0f}, Shape{2})},
          {"\xc3\xa9", Tensor::from_vector(std::vector<BFloat16>{BFloat16{0x3fc0}}, Shape{})},
          {"h", Tensor::from_vector(std::vector<Half>{}, Shape{2, 0})}};
}

// The bytes of the dump in docs/WEIGHTS.md: the fenced block after the
// marker line, one field a line as "offset | hex bytes | meaning", offsets
// in decimal and checked as the dump is read.
std::string documented_example() {
  std::ifstream in(std::string(DVM_SOURCE_DIR) + "/docs/WEIGHTS.md");
  std::string line, bytes;
  bool marker = false, inside = false;
  while (std::getline(in, line)) {
    if (!marker) {
      marker = line.find("<!-- example dump") != std::string::npos;
      continue;
    }
    if (line.rfind("```", 0) == 0) {
      if (inside) return bytes;
      inside = true;
      continue;
    }
    if (!inside) continue;
    const size_t bar1 = line.find('|'), bar2 = line.find('|', bar1 + 1);
    if (bar1 == std::string::npos || bar2 == std::string::npos) {
      ADD_FAILURE() << "docs/WEIGHTS.md: dump line without two '|': " << line;
      return bytes;
    }
    const size_t offset = std::stoul(line.substr(0, bar1));
    EXPECT_EQ(offset, bytes.size()) << "docs/WEIGHTS.md: " << line;
    std::istringstream hex(line.substr(bar1 + 1, bar2 - bar1 - 1));
    std::string byte;
    while (hex >> byte) {
      EXPECT_EQ(byte.size(), 2u) << "docs/WEIGHTS.md: " << line;
      bytes.push_back(static_cast<char>(std::stoul(byte, nullptr, 16)));
    }
  }
  ADD_FAILURE() << "docs/WEIGHTS.md: no example dump found";
  return bytes;
}

std::string hex(const std::string& s) {
  std::string out;
  for (unsigned char c : s) out += cat(std::hex, c < 16 ? "0" : "", static_cast<int>(c), " ");
  return out;
}

TEST_F(WeightsFile, SaveWritesTheDocumentedLayout) {
  const SmallFile f = small_file();
  EXPECT_EQ(f.bytes.size(), 78u);
  const std::string file = path("small.dvmw");
  save_weights(file, small_tensors());
  const std::string written = read_file(file);
  EXPECT_EQ(hex(written), hex(f.bytes)) << "save_weights against the layout built from the spec";
  EXPECT_EQ(hex(documented_example()), hex(f.bytes)) << "docs/WEIGHTS.md's example dump against the spec";

  const std::vector<NamedTensor> back = load_weights(file);
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back[0].name, "a");
  EXPECT_EQ(back[0].tensor.to_vector(), (std::vector<float>{1.0f, -2.0f}));
  EXPECT_EQ(back[1].name, "\xc3\xa9");
  EXPECT_EQ(back[1].tensor.dtype(), Dtype::BF16);
  EXPECT_EQ(back[1].tensor.shape(), Shape{});
  EXPECT_EQ(back[1].tensor.item(), 1.5f);
  EXPECT_EQ(back[2].tensor.dtype(), Dtype::F16);
  EXPECT_EQ(back[2].tensor.shape(), (Shape{2, 0}));
}

TEST_F(WeightsFile, NoTensorsIsTheHeaderAlone) {
  const std::string file = path("empty.dvmw");
  save_weights(file, {});
  EXPECT_EQ(hex(read_file(file)), hex(std::string("DVMW\x01\0\0\0\0\0\0\0\0\0\0\0", 16)));
  EXPECT_TRUE(load_weights(file).empty());
}

// ---------------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------------
// A tensor of dtype t and shape s with random bits (NaNs and infinities
// included), made one of several ways: stored, a transposed view, a
// broadcast view, or pending (a * 2 + 1).
Tensor generated(Dtype t, const Shape& s, std::mt19937& rng, int how) {
  auto stored = [&](const Shape& shape) {
    const size_t n = static_cast<size_t>(shape.numel());
    if (t == Dtype::F32) {
      std::vector<float> v(n);
      for (float& x : v) {
        const uint32_t bits = static_cast<uint32_t>(rng());
        std::memcpy(&x, &bits, 4);
      }
      return Tensor::from_vector(v, shape);
    }
    std::vector<uint16_t> v(n);
    for (uint16_t& x : v) x = static_cast<uint16_t>(rng());
    return Tensor::from_copy(v.data(), shape, t);
  };
  const int r = s.rank();
  if (how == 1 && r >= 2) {
    Shape ts = s;
    std::swap(ts[r - 1], ts[r - 2]);
    return stored(ts).transpose(r - 1, r - 2);
  }
  if (how == 2 && r >= 1) {
    Shape one = s;
    one[r - 1] = 1;
    return stored(one).expand(s);
  }
  if (how == 3) return stored(s) * 2.0f + 1.0f;
  return stored(s);
}

TEST_F(WeightsFile, GeneratedTensorsRoundTripBitForBit) {
  std::mt19937 rng(11);
  const Dtype types[] = {Dtype::F32, Dtype::F16, Dtype::BF16};
  for (int iter = 0; iter < 60; ++iter) {
    std::vector<NamedTensor> tensors;
    const int count = static_cast<int>(rng() % 7);
    for (int i = 0; i < count; ++i) {
      Shape s;
      const int rank = static_cast<int>(rng() % 5);
      for (int k = 0; k < rank; ++k) s.push_back(static_cast<int64_t>(rng() % 6));  // 0 included
      const Dtype t = types[rng() % 3];
      const std::string name = i % 3 == 2 ? cat("bloc_\xc3\xa9t\xc3\xa9.", i) : cat("layers.", i, ".weight");
      tensors.push_back({name, generated(t, s, rng, static_cast<int>(rng() % 4))});
    }
    const std::string file = path(cat("round_trip_", iter, ".dvmw"));
    save_weights(file, tensors);
    const std::vector<NamedTensor> back = load_weights(file);
    ASSERT_EQ(back.size(), tensors.size()) << "iteration " << iter;
    for (size_t i = 0; i < back.size(); ++i) {
      const Tensor& want = tensors[i].tensor;
      const Tensor& got = back[i].tensor;
      const std::string ctx = cat("iteration ", iter, " tensor ", i, " ", want.shape().to_string(), " ",
                                  dtype_name(want.dtype()));
      EXPECT_EQ(back[i].name, tensors[i].name) << ctx;
      EXPECT_EQ(got.dtype(), want.dtype()) << ctx;
      EXPECT_EQ(got.shape(), want.shape()) << ctx;
      EXPECT_EQ(hex(raw(got)), hex(raw(want))) << ctx;
    }
  }
}

TEST_F(WeightsFile, ALargeTensorRoundTrips) {
  const std::string file = path("large.dvmw");
  const Tensor x = Tensor::uniform(Shape{300, 517}, 5).to(Dtype::BF16);
  save_weights(file, {{"big", x}, {"big.t", x.transpose(0, 1)}});
  EXPECT_EQ(fs::file_size(file), 16u + 2 * (4 + 3 + 4 + 16 + 300u * 517 * 2) + 2);
  const std::vector<NamedTensor> back = load_weights(file);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_TRUE(raw(back[0].tensor) == raw(x));
  EXPECT_TRUE(raw(back[1].tensor) == raw(x.transpose(0, 1)));
}

// ---------------------------------------------------------------------------
// Malformed files
// ---------------------------------------------------------------------------
// The small file with `bytes` written over it at `at`.
std::string patched(size_t at, const std::string& bytes) {
  std::string s = small_file().bytes;
  s.replace(at, bytes.size(), bytes);
  return s;
}
std::string le(uint64_t v, int n) {
  Builder b;
  b.le(v, n);
  return b.bytes;
}

TEST_F(WeightsFile, MissingAndUnreadableFilesAreErrors) {
  const std::string missing = path("missing.dvmw");
  expect_error("missing file", [&] { load_weights(missing); }, {"load_weights", missing, "no such file"});
  expect_error("a directory", [&] { load_weights(dir_.string()); }, {"load_weights", dir_.string(), "not a regular file"});
}

// The message of the dvm::Error f throws, or "" when it throws none.
template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_F(WeightsFile, EveryPrefixOfAValidFileIsAnError) {
  const SmallFile f = small_file();
  const std::string file = path("prefix.dvmw");
  for (size_t n = 0; n < f.bytes.size(); ++n) {
    write_file(file, f.bytes.substr(0, n));
    expect_error(cat("prefix of ", n, " bytes"), [&] { load_weights(file); }, {"load_weights", file, "byte offset"});
    // Truncation is what is reported: a field cut short, or a count the
    // bytes left cannot hold.
    const std::string msg = message_of([&] { load_weights(file); });
    EXPECT_TRUE(msg.find("the file ends inside the") != std::string::npos || msg.find("cannot fit") != std::string::npos)
        << msg;
  }
  write_file(file, f.bytes);
  EXPECT_EQ(load_weights(file).size(), 3u);
}

TEST_F(WeightsFile, CorruptFieldsAreErrorsNamingOffsetAndTensor) {
  const SmallFile f = small_file();
  const std::string file = path("corrupt.dvmw");
  struct Case {
    const char* what;
    std::string bytes;
    std::vector<std::string> parts;
  };
  const std::string t0 = "tensor 0 (\"a\")", t1 = "tensor 1 (\"\xc3\xa9\")", t2 = "tensor 2 (\"h\")";
  auto at = [](size_t offset) { return cat("byte offset ", offset, ":"); };
  const std::vector<Case> cases = {
      {"bad magic", patched(0, "DVMX"), {at(0), "magic"}},
      {"version 2", patched(4, le(2, 4)), {at(4), "version 2"}},
      {"version 0", patched(4, le(0, 4)), {at(4), "version 0"}},
      {"count 4", patched(f.count, le(4, 8)), {"tensor 3", "the file ends inside the name length"}},
      {"count 2", patched(f.count, le(2, 8)), {at(f.t[2].name_length), "bytes follow the last tensor"}},
      {"huge count", patched(f.count, le(UINT64_MAX, 8)), {at(8), "tensor count 18446744073709551615"}},
      {"count 2^40", patched(f.count, le(uint64_t{1} << 40, 8)), {at(8), "cannot fit"}},
      {"name length 0", patched(f.t[1].name_length, le(0, 4)), {at(f.t[1].name_length), "tensor 1:", "name length 0"}},
      {"name length 4097", patched(f.t[1].name_length, le(4097, 4)), {at(f.t[1].name_length), "name length 4097"}},
      {"huge name length", patched(f.t[0].name_length, le(UINT32_MAX, 4)), {at(16), "tensor 0:", "4294967295"}},
      {"name past the end", patched(f.t[2].name_length, le(4096, 4)), {at(f.t[2].name), "ends inside the name"}},
      {"NUL in a name", patched(f.t[1].name, std::string("\0", 1)), {at(f.t[1].name), "NUL"}},
      {"bad UTF-8 name", patched(f.t[1].name, "\xc3\x28"), {at(f.t[1].name), "not valid UTF-8"}},
      {"overlong UTF-8", patched(f.t[1].name, "\xc0\xa1"), {at(f.t[1].name), "not valid UTF-8"}},
      {"duplicate name", patched(f.t[2].name, "a"), {at(f.t[2].name), "tensor 2 (\"a\")", "also tensor 0's"}},
      {"dtype int32", patched(f.t[0].dtype, le(3, 1)), {at(f.t[0].dtype), t0, "dtype code 3"}},
      {"dtype 7", patched(f.t[1].dtype, le(7, 1)), {at(f.t[1].dtype), t1, "dtype code 7"}},
      {"dtype 255", patched(f.t[2].dtype, le(255, 1)), {at(f.t[2].dtype), t2, "dtype code 255"}},
      {"rank 9", patched(f.t[0].rank, le(9, 1)), {at(f.t[0].rank), t0, "rank 9"}},
      {"rank 255", patched(f.t[2].rank, le(255, 1)), {at(f.t[2].rank), t2, "rank 255"}},
      {"reserved", patched(f.t[1].reserved + 1, le(1, 1)), {at(f.t[1].reserved), t1, "reserved"}},
      {"negative extent", patched(f.t[2].extents + 8, le(static_cast<uint64_t>(-1), 8)), {at(f.t[2].extents + 8), t2, "negative"}},
      {"extent 2^62", patched(f.t[0].extents, le(uint64_t{1} << 62, 8)), {at(f.t[0].extents), t0, "element count"}},
      {"INT64_MAX extent", patched(f.t[2].extents, le(INT64_MAX, 8)), {at(f.t[2].extents), t2, "element count"}},
      {"extents overflowing together", patched(f.t[2].extents, le(uint64_t{1} << 40, 8) + le(uint64_t{1} << 40, 8)),
       {at(f.t[2].extents + 8), t2, "element count"}},
      {"zero times huge", patched(f.t[2].extents, le(0, 8) + le(INT64_MAX, 8)), {at(f.t[2].extents + 8), t2, "element count"}},
      {"data past the end", patched(f.t[0].extents, le(uint64_t{1} << 40, 8)), {at(f.t[0].data), t0, "ends inside the data"}},
      {"rank off by one", patched(f.t[0].rank, le(2, 1)), {t0}},
      {"trailing byte", f.bytes + "x", {at(78), "1 bytes follow the last tensor"}},
  };
  for (const Case& c : cases) {
    write_file(file, c.bytes);
    std::vector<std::string> parts = {"load_weights", file};
    parts.insert(parts.end(), c.parts.begin(), c.parts.end());
    expect_error(c.what, [&] { load_weights(file); }, parts);
  }
}

TEST_F(WeightsFile, HeaderOnlyFilesWithJunkAreErrors) {
  const std::string file = path("junk.dvmw");
  write_file(file, std::string("DVMW\x01\0\0\0\0\0\0\0\0\0\0\0", 16) + std::string(9, '\0'));
  expect_error("count 0 and 9 bytes", [&] { load_weights(file); }, {"load_weights", file, "byte offset 16", "9 bytes follow"});
  write_file(file, std::string("DVMW\x01\0\0\0\x01\0\0\0\0\0\0\0", 16) + std::string(9, '\0'));
  expect_error("count 1 and zeros", [&] { load_weights(file); }, {"load_weights", file, "byte offset 16", "name length 0"});
}

// Random corruption: each file either loads or is a dvm::Error.
TEST_F(WeightsFile, RandomByteFlipsLoadOrFailCleanly) {
  std::mt19937 rng(29);
  std::vector<NamedTensor> tensors = small_tensors();
  tensors.push_back({"w", Tensor::arange(12).reshape(Shape{3, 4}).to(Dtype::F16)});
  tensors.push_back({"v", Tensor::from_vector(std::vector<float>{1, 2, 3})});
  const std::string good = path("good.dvmw"), file = path("flipped.dvmw");
  save_weights(good, tensors);
  const std::string valid = read_file(good);
  int loaded = 0, failed = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    std::string bytes = valid;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      const size_t at = rng() % bytes.size();
      if (rng() % 2) bytes[at] = static_cast<char>(bytes[at] ^ (1 << (rng() % 8)));
      else bytes[at] = static_cast<char>(rng());
    }
    if (rng() % 8 == 0) bytes.resize(rng() % (bytes.size() + 8), '\0');  // shorter or longer too
    write_file(file, bytes);
    try {
      const std::vector<NamedTensor> back = load_weights(file);
      size_t data = 0;
      for (const NamedTensor& t : back) data += static_cast<size_t>(t.tensor.numel()) * dtype_size(t.tensor.dtype());
      EXPECT_LE(data, bytes.size()) << "iteration " << iter;
      ++loaded;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("load_weights: " + file), std::string::npos) << e.what();
      ++failed;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "iteration " << iter << ": not a dvm::Error: " << e.what();
    }
  }
  EXPECT_GT(loaded, 0);  // flips in the data
  EXPECT_GT(failed, 0);
}

// ---------------------------------------------------------------------------
// Saving errors
// ---------------------------------------------------------------------------
TEST_F(WeightsFile, BadTensorsAreRefusedBeforeTheFileIsOpened) {
  const std::string file = path("refused.dvmw");
  const Tensor f = Tensor::from_vector(std::vector<float>{1, 2});
  struct Case {
    const char* what;
    std::vector<NamedTensor> tensors;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {"int32", {{"a", f}, {"i", Tensor::from_vector(std::vector<int32_t>{1, 2}, Shape{2})}},
       {"tensor 1 (\"i\")", "int32 is not float32, float16 or bfloat16"}},
      {"bool", {{"b", Tensor::from_vector(std::vector<bool>{true}, Shape{1})}}, {"tensor 0 (\"b\")", "bool"}},
      {"int64", {{"n", Tensor::arange(0, 4, 1, Dtype::I64)}}, {"tensor 0 (\"n\")", "int64"}},
      {"pending int32", {{"a", f}, {"p", Tensor::arange(0, 4, 1, Dtype::I32) + Tensor::arange(0, 4, 1, Dtype::I32)}},
       {"tensor 1 (\"p\")", "int32"}},
      {"undefined", {{"u", Tensor()}}, {"tensor 0 (\"u\")", "undefined"}},
      {"empty name", {{"a", f}, {"", f}}, {"tensor 1:", "name is empty"}},
      {"long name", {{std::string(4097, 'x'), f}}, {"tensor 0:", "longer than 4096"}},
      {"NUL", {{std::string("a\0b", 3), f}}, {"tensor 0:", "NUL"}},
      {"bad UTF-8", {{"\xff", f}}, {"tensor 0:", "UTF-8"}},
      {"surrogate", {{"\xed\xa0\x80", f}}, {"tensor 0:", "UTF-8"}},
      {"duplicate", {{"a", f}, {"b", f}, {"a", f}}, {"tensor 2 (\"a\")", "also tensor 0's"}},
  };
  for (const Case& c : cases) {
    expect_error(c.what, [&] { save_weights(file, c.tensors); }, {"save_weights", file});
    expect_error(c.what, [&] { save_weights(file, c.tensors); }, c.parts);
    EXPECT_FALSE(fs::exists(file)) << c.what;
  }
  // The longest name is fine.
  save_weights(file, {{std::string(4096, 'x'), f}});
  EXPECT_EQ(load_weights(file)[0].name, std::string(4096, 'x'));
}

// A failure once writing has begun (here a tensor whose recording thread
// ended before computing it, the second of two) leaves an existing file as
// it was, and no partial file beside it.
TEST_F(WeightsFile, AFailedSaveLeavesTheExistingFileAsItWas) {
  const std::string file = path("kept.dvmw");
  save_weights(file, small_tensors());
  const std::string before = read_file(file);
  Tensor orphan;
  std::thread([&] { orphan = Tensor::uniform({8}, 3) * 2.0f; }).join();  // never computed
  expect_error("a tensor without values", [&] {
    save_weights(file, {{"first", Tensor::from_vector(std::vector<float>{1, 2, 3})}, {"orphan", orphan}});
  }, {"save_weights", file, "tensor 1 (\"orphan\")"});
  EXPECT_EQ(read_file(file), before);
  int entries = 0;
  for ([[maybe_unused]] const fs::directory_entry& e : fs::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 1) << "a partial file was left beside " << file;
  EXPECT_EQ(load_weights(file).size(), small_tensors().size());
}

// The file written beside path fits a file name's 255 bytes whatever
// path's name, and the file that replaces path keeps its permissions.
TEST_F(WeightsFile, LongNamesAndPermissionsSurviveASave) {
  for (const size_t length : {size_t{200}, size_t{230}, size_t{240}, size_t{255}}) {
    const std::string file = path(std::string(length - 5, 'n') + ".dvmw");
    save_weights(file, small_tensors());
    EXPECT_EQ(load_weights(file).size(), small_tensors().size()) << "a file name of " << length << " bytes";
    save_weights(file, small_tensors());  // over an existing file
    EXPECT_EQ(load_weights(file).size(), small_tensors().size()) << "a file name of " << length << " bytes";
  }
  const std::string file = path("private.dvmw");
  save_weights(file, small_tensors());
  for (const fs::perms mode : {fs::perms::owner_read | fs::perms::owner_write,
                               fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read}) {
    fs::permissions(file, mode);
    save_weights(file, small_tensors());
    EXPECT_EQ(fs::status(file).permissions(), mode) << "a save over the file changed its permissions";
  }
  int entries = 0;
  for ([[maybe_unused]] const fs::directory_entry& e : fs::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 5) << "a partial file was left";
}

TEST_F(WeightsFile, UnwritablePathsAreErrors) {
  const std::vector<NamedTensor> tensors = small_tensors();
  const std::string no_dir = path("no_such_dir/w.dvmw");
  expect_error("missing directory", [&] { save_weights(no_dir, tensors); }, {"save_weights", no_dir, "cannot open"});
  expect_error("a directory", [&] { save_weights(dir_.string(), tensors); }, {"save_weights", dir_.string(), "cannot open"});
  if (fs::exists("/dev/full")) {  // every write fails with ENOSPC
    try {
      save_weights("/dev/full", tensors);
      ADD_FAILURE() << "/dev/full: no dvm::Error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("save_weights: /dev/full"), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::strerror(ENOSPC)), std::string::npos) << msg;  // the system's reason
    }
  }
  expect_error("an empty path", [&] { save_weights("", tensors); }, {"save_weights", "the path is empty"});
}

}  // namespace
}  // namespace dvm::testing
