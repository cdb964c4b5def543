// save_weights and load_weights: named tensors in the weights file format
// (docs/WEIGHTS.md). Values leave through to_vector<T> and come back
// through from_copy (the public Tensor API); a file is written beside its
// path and renamed into place (tracer/replace_file.h). Loading validates
// the whole file (every header, against the file's size) before it reads
// any data, so a corrupt header is an error, never an allocation.
#include "dvm/weights_file.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tracer/replace_file.h"

namespace dvm {

namespace {

constexpr char kMagic[4] = {'D', 'V', 'M', 'W'};
constexpr uint32_t kVersion = 1;
constexpr uint64_t kMaxNameBytes = 4096;
// Name length, dtype, rank and two reserved bytes: a tensor's fields
// before its name and extents.
constexpr uint64_t kTensorFieldBytes = 8;
// The smallest tensor (a one-byte name, no extents, no data) bounds the
// count a file of a given size can hold.
constexpr uint64_t kMinTensorBytes = kTensorFieldBytes + 1;

std::string str(uint64_t v) { return std::to_string(v); }


// Well-formed UTF-8 (RFC 3629): no overlong forms, surrogates or code
// points past U+10FFFF.
bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t more = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      more = 1, cp = c & 0x1Fu;
    } else if ((c & 0xF0) == 0xE0) {
      more = 2, cp = c & 0x0Fu;
    } else if (c >= 0xF0 && c <= 0xF4) {
      more = 3, cp = c & 0x07u;
    } else {
      return false;
    }
    if (s.size() - i <= more) return false;
    for (size_t k = 1; k <= more; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = cp << 6 | (d & 0x3Fu);
    }
    if ((more == 2 && cp < 0x800) || (more == 3 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += more + 1;
  }
  return true;
}

// Why name breaks the format's rules for names, or nullptr: save and load
// apply the same ones.
const char* name_problem(std::string_view name) {
  if (name.empty()) return "is empty";
  if (name.size() > kMaxNameBytes) return "is longer than 4096 bytes";
  if (name.find('\0') != std::string_view::npos) return "contains a NUL byte";
  if (!valid_utf8(name)) return "is not valid UTF-8";
  return nullptr;
}

std::string tensor_label(size_t index, const std::string* name) {
  std::string s = "tensor " + str(index);
  return name ? s + " (\"" + *name + "\")" : s;
}

// The file stores elements little-endian: a big-endian host swaps each
// element's bytes on the way out and back in.
void to_little_endian(char* bytes, size_t count, size_t element_size) {
  if constexpr (std::endian::native == std::endian::big) {
    for (size_t i = 0; i < count; ++i) std::reverse(bytes + i * element_size, bytes + (i + 1) * element_size);
  }
}

// ---------------------------------------------------------------------------
// Saving
// ---------------------------------------------------------------------------
// Integers are appended a byte at a time, low byte first, so the layout
// does not depend on the host.
void put(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>(v >> (8 * i) & 0xFF));
}

// The tensor's fields up to its data.
std::string tensor_header(const NamedTensor& t) {
  std::string h;
  put(h, t.name.size(), 4);
  h += t.name;
  put(h, static_cast<uint8_t>(t.tensor.dtype()), 1);
  const Shape& s = t.tensor.shape();
  put(h, static_cast<uint64_t>(s.rank()), 1);
  put(h, 0, 2);
  for (int64_t e : s) put(h, static_cast<uint64_t>(e), 8);
  return h;
}

// Computes t (if pending) and writes its elements contiguous, row-major.
template <class T>
void write_elements(std::ofstream& out, const Tensor& t) {
  std::vector<T> v = t.to_vector<T>();
  char* bytes = reinterpret_cast<char*>(v.data());
  to_little_endian(bytes, v.size(), sizeof(T));
  out.write(bytes, static_cast<std::streamsize>(v.size() * sizeof(T)));
}

// ---------------------------------------------------------------------------
// Loading
// ---------------------------------------------------------------------------
// Where a tensor's data lies, known once its header has been validated.
struct Entry {
  std::string name;
  Dtype dtype = Dtype::F32;
  Shape shape;
  uint64_t data_offset = 0;
  uint64_t data_bytes = 0;
};

// Reads the file's fields in order, checking each against the bytes left
// before reading it, so every error knows its offset and no field can ask
// for more than the file holds.
class Reader {
 public:
  explicit Reader(const std::string& path) : path_(path) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (status.type() == std::filesystem::file_type::not_found) fail_open("no such file");
    if (ec) fail_open(ec.message());
    if (!std::filesystem::is_regular_file(status)) fail_open("not a regular file");
    size_ = std::filesystem::file_size(path, ec);
    if (ec) fail_open(ec.message());
    in_.open(path, std::ios::binary);
    if (!in_) fail_open("it cannot be opened for reading");
  }

  uint64_t offset() const { return offset_; }
  uint64_t left() const { return size_ - offset_; }
  // Errors from here on name this tensor (tensor_label), or none when empty.
  void set_tensor(const std::string& label) { tensor_ = label.empty() ? label : label + ": "; }

  [[noreturn]] void fail(uint64_t at, const std::string& what) const {
    throw Error("load_weights: " + path_ + ": byte offset " + str(at) + ": " + tensor_ + what);
  }

  // A little-endian unsigned integer of `bytes` bytes.
  uint64_t uint(int bytes, const char* field) {
    char b[8];
    read(b, static_cast<uint64_t>(bytes), field);
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(b[i])) << (8 * i);
    return v;
  }

  std::string bytes(uint64_t n, const char* field) {
    std::string s(static_cast<size_t>(need(n, field)), '\0');
    read(s.data(), n, field);
    return s;
  }

  // Passes over n bytes (a tensor's data) without reading them.
  void skip(uint64_t n, const char* field) {
    need(n, field);
    offset_ += n;
    in_.seekg(static_cast<std::streamoff>(offset_));
  }

  // Goes back to a validated offset (the second pass).
  void seek(uint64_t at) {
    offset_ = at;
    in_.seekg(static_cast<std::streamoff>(at));
  }

  // n bytes at a validated offset (the second pass over the data).
  void read_at(uint64_t at, char* out, uint64_t n) {
    offset_ = at;
    in_.seekg(static_cast<std::streamoff>(at));
    read(out, n, "data");
  }

 private:
  [[noreturn]] void fail_open(const std::string& why) const {
    throw Error("load_weights: " + path_ + ": cannot read the file: " + why);
  }

  uint64_t need(uint64_t n, const char* field) const {
    if (n > left())
      fail(offset_, std::string("the file ends inside the ") + field + " (" + str(n) + " bytes needed, " +
                        str(left()) + " left)");
    return n;
  }

  void read(char* out, uint64_t n, const char* field) {
    need(n, field);
    if (n > 0 && !in_.read(out, static_cast<std::streamsize>(n)))
      fail(offset_, std::string("reading the ") + field + " failed (did the file change?)");
    offset_ += n;
  }

  std::string path_;
  std::ifstream in_;
  uint64_t size_ = 0;
  uint64_t offset_ = 0;
  std::string tensor_;
};

// One tensor's fields up to its data, validated; the data is skipped.
// `seen`: the names so far, checked for a duplicate (null: the file was
// validated already).
Entry read_header(Reader& r, size_t index, std::unordered_map<std::string, size_t>* seen) {
  Entry e;
  r.set_tensor(tensor_label(index, nullptr));
  uint64_t at = r.offset();
  const uint64_t name_bytes = r.uint(4, "name length");
  if (name_bytes == 0 || name_bytes > kMaxNameBytes)
    r.fail(at, "name length " + str(name_bytes) + " is outside 1..4096");
  at = r.offset();
  e.name = r.bytes(name_bytes, "name");
  if (const char* problem = name_problem(e.name)) r.fail(at, std::string("the name ") + problem);
  r.set_tensor(tensor_label(index, &e.name));
  if (seen)
    if (const auto [earlier, fresh] = seen->emplace(e.name, index); !fresh)
      r.fail(at, "the name is also " + tensor_label(earlier->second, nullptr) + "'s");

  at = r.offset();
  const uint64_t code = r.uint(1, "dtype code");
  e.dtype = static_cast<Dtype>(code);  // any byte is a value of Dtype's underlying uint8_t
  if (!is_floating(e.dtype))
    r.fail(at, "dtype code " + str(code) + " is not float32 (0), float16 (1) or bfloat16 (2)");
  at = r.offset();
  const uint64_t rank = r.uint(1, "rank");
  if (rank > static_cast<uint64_t>(kMaxRank)) r.fail(at, "rank " + str(rank) + " is over " + str(kMaxRank));
  at = r.offset();
  if (const uint64_t reserved = r.uint(2, "reserved bytes"); reserved != 0)
    r.fail(at, "the reserved bytes are " + str(reserved) + ", not 0");

  // As Shape requires: the product of the extents, size-0 ones counted as
  // 1, is at most kMaxElements, which keeps the byte count in range too.
  int64_t product = 1;
  for (uint64_t k = 0; k < rank; ++k) {
    at = r.offset();
    const auto extent = static_cast<int64_t>(r.uint(8, "extents"));
    if (extent < 0) r.fail(at, "extent " + std::to_string(extent) + " of axis " + str(k) + " is negative");
    if (extent > 1 && product > kMaxElements / extent)
      r.fail(at, "extent " + std::to_string(extent) + " of axis " + str(k) + " takes the element count past " +
                     std::to_string(kMaxElements));
    product *= std::max<int64_t>(extent, 1);
    e.shape.push_back(extent);
  }
  e.data_offset = r.offset();
  e.data_bytes = static_cast<uint64_t>(e.shape.numel()) * dtype_size(e.dtype);
  r.skip(e.data_bytes, "data");
  return e;
}

}  // namespace

void save_weights(const std::string& path, const std::vector<NamedTensor>& tensors) {
  auto fail = [&](const std::string& what) { throw Error("save_weights: " + path + ": " + what); };
  if (path.empty()) throw Error("save_weights: the path is empty (expected a file's path)");
  // Everything is checked before the file is opened, so a bad argument
  // leaves path as it was.
  std::unordered_map<std::string_view, size_t> seen;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const NamedTensor& t = tensors[i];
    if (const char* problem = name_problem(t.name)) fail(tensor_label(i, nullptr) + ": the name " + problem);
    const std::string tensor = tensor_label(i, &t.name) + ": ";
    if (const auto [earlier, fresh] = seen.emplace(t.name, i); !fresh)
      fail(tensor + "the name is also " + tensor_label(earlier->second, nullptr) + "'s");
    if (!t.tensor.defined()) fail(tensor + "the tensor is undefined");
    if (!is_floating(t.tensor.dtype()))
      fail(tensor + dtype_name(t.tensor.dtype()) + " is not float32, float16 or bfloat16");
  }

  detail::ReplaceFile file(path);  // path is replaced only once the file is complete
  std::ofstream& out = file.out();
  if (!out)
    fail(file.beside() ? "cannot open a file for writing beside it (" + file.written() + ")"
                       : "cannot open the file for writing");
  std::string header(kMagic, sizeof kMagic);
  put(header, kVersion, 4);
  put(header, tensors.size(), 8);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  for (size_t i = 0; i < tensors.size(); ++i) {
    const NamedTensor& t = tensors[i];
    const std::string h = tensor_header(t);
    out.write(h.data(), static_cast<std::streamsize>(h.size()));
    try {
      switch (t.tensor.dtype()) {
        case Dtype::F32: write_elements<float>(out, t.tensor); break;
        case Dtype::F16: write_elements<Half>(out, t.tensor); break;
        default: write_elements<BFloat16>(out, t.tensor); break;  // BF16: the others were refused above
      }
    } catch (const Error& e) {  // computing a pending tensor failed (a memory limit, say)
      fail(tensor_label(i, &t.name) + ": " + e.what());
    }
    if (!out) fail(tensor_label(i, &t.name) + ": writing the tensor failed (is the disk full?)");
  }
  if (!file.commit()) fail(std::string("writing the file failed: ") + std::strerror(errno));
}

namespace {

// The tensors of a file whose header Reader r has read up to the tensor
// count: the first pass validates every tensor's fields, keeping only the
// names (for duplicates), so a corrupt file is refused before anything
// in proportion to its tensor count is allocated; the second makes them.
std::vector<NamedTensor> read_tensors(Reader& r, const std::string& path, uint64_t count) {
  const uint64_t first = r.offset();
  {
    std::unordered_map<std::string, size_t> seen;
    for (uint64_t i = 0; i < count; ++i) (void)read_header(r, static_cast<size_t>(i), &seen);
  }
  r.set_tensor({});
  if (r.left() != 0) {
    const uint64_t at = r.offset();
    r.fail(at, str(r.left()) + " bytes follow the last tensor (the file must end there)");
  }

  std::vector<NamedTensor> out;
  out.reserve(static_cast<size_t>(count));
  std::vector<char> buffer;  // one tensor's data at a time, copied into its tensor
  r.seek(first);
  for (size_t i = 0; i < count; ++i) {
    Entry e = read_header(r, i, nullptr);
    buffer.resize(static_cast<size_t>(e.data_bytes));
    r.read_at(e.data_offset, buffer.data(), e.data_bytes);
    const size_t element_size = dtype_size(e.dtype);
    to_little_endian(buffer.data(), buffer.size() / element_size, element_size);
    Tensor t;
    try {
      t = Tensor::from_copy(buffer.data(), e.shape, e.dtype);
    } catch (const Error& err) {  // its buffer past the memory limit
      throw Error("load_weights: " + path + ": " + tensor_label(i, &e.name) + ": " + err.what());
    }
    out.push_back({std::move(e.name), std::move(t)});
  }
  return out;
}

}  // namespace

std::vector<NamedTensor> load_weights(const std::string& path) {
  Reader r(path);
  if (r.bytes(sizeof kMagic, "magic") != std::string_view(kMagic, sizeof kMagic))
    r.fail(0, "the magic is not \"DVMW\" (not a dvm weights file)");
  if (const uint64_t version = r.uint(4, "version"); version != kVersion)
    r.fail(4, "version " + str(version) + " is not " + str(kVersion));
  const uint64_t count = r.uint(8, "tensor count");
  if (count > r.left() / kMinTensorBytes)
    r.fail(8, "the tensor count " + str(count) + " cannot fit in the " + str(r.left()) + " bytes left (" +
                  str(kMinTensorBytes) + " at least per tensor)");
  try {
    return read_tensors(r, path, count);
  } catch (const std::bad_alloc&) {  // the host's allocator: only dvm::Error leaves the API
    r.fail(r.offset(), "out of memory: the host allocator refused the memory to read the file");
  }
}

}  // namespace dvm
