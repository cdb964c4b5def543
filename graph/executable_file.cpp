// Executable::save and Executable::load (docs/EXECUTABLES.md has the format):
// the symbols, ports, relations, views' bounds, constants and launch
// programs of an executable, with a version and a checksum. A loaded
// executable replays its programs; nothing in it is trusted before it is
// checked: every index, type and term is validated here, every kernel's
// bytecode by the verifier, and every run checks where its arguments reach.
#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "dvm/graph.h"
#include "graph/executable_state.h"
#include "graph/program.h"
#include "tracer/node.h"
#include "tracer/replace_file.h"
#include "vm/kernel_cache.h"

namespace dvm {

using detail::ExecutableState;
using detail::Port;
using graph::Monomial;
using graph::Program;
using graph::ProgramArg;
using graph::Source;

namespace {

static_assert(std::endian::native == std::endian::little, "executable files are little-endian");

constexpr char kMagic[8] = {'D', 'V', 'M', 'E', 'X', 'E', 'C', '\0'};
// Version 2 added sums of monomials (views' offsets, a program's sums),
// version 3 the extents' bounds (slices, squeezes); earlier files, which have none, are still
// read.
constexpr uint32_t kVersion = 3;
constexpr uint32_t kOldestVersion = 1;

uint64_t fnv1a(const char* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<uint8_t>(p[i])) * 0x100000001b3ull;
  return h;
}

// ---- writing -----------------------------------------------------------------

struct Writer {
  std::string out;
  template <class T>
  void put(T v) {
    out.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void count(size_t n) { put(static_cast<uint32_t>(n)); }
  void str(const std::string& s) {
    count(s.size());
    out += s;
  }
  void mono(const Monomial& m) {
    put(m.coeff);
    out.append(reinterpret_cast<const char*>(m.exp.data()), m.exp.size());
  }
  void monos(const std::vector<Monomial>& ms) {
    count(ms.size());
    for (const Monomial& m : ms) mono(m);
  }
  void ints(const std::vector<int32_t>& v) {
    count(v.size());
    for (int32_t i : v) put(i);
  }
  void arg(const ProgramArg& a) {
    put(static_cast<uint8_t>(a.source));
    put(a.index);
    put(static_cast<uint8_t>(a.output));
    put(static_cast<uint8_t>(a.access));
    put(static_cast<uint8_t>(a.dtype));
    put(a.offset);
    for (int p = 0; p < vm::kMaxParts; ++p) put(a.stride[p]);
    for (int p = 0; p < vm::kMaxParts; ++p) put(a.ndims[p]);
    for (int p = 0; p < vm::kMaxParts; ++p)
      for (int d = 0; d < kMaxRank; ++d) put(a.dim_size[p][d]);
    for (int p = 0; p < vm::kMaxParts; ++p)
      for (int d = 0; d < kMaxRank; ++d) put(a.dim_stride[p][d]);
  }
  void ports(const std::vector<Port>& ps) {
    count(ps.size());
    for (const Port& p : ps) {
      str(p.name);
      put(static_cast<uint8_t>(p.dtype));
      monos(p.shape);
    }
  }
  void program(const Program& p) {
    ints(p.key);
    monos(p.terms);
    count(p.sums.size());
    for (const std::vector<int32_t>& sum : p.sums) ints(sum);
    count(p.launches.size());
    for (const graph::ProgramLaunch& l : p.launches) {
      const vm::Bytecode& bc = l.kernel->bytecode();
      count(bc.bytes.size());
      out.append(reinterpret_cast<const char*>(bc.bytes.data()), bc.bytes.size());
      for (int32_t e : l.extent) put(e);
      count(l.args.size());
      for (const ProgramArg& a : l.args) arg(a);
      count(l.scalars.size());
      for (float f : l.scalars) put(f);
      put(l.product_b);
      ints(l.reads);
    }
    count(p.buffers.size());
    for (const graph::ProgramBuffer& b : p.buffers) {
      put(b.numel);
      put(static_cast<uint8_t>(b.dtype));
      put(b.first);
      put(b.last);
    }
    count(p.copies.size());
    for (const Program::Copy& c : p.copies) {
      put(c.to);
      put(c.from);
      put(c.numel);
      put(static_cast<uint8_t>(c.dtype));
    }
    count(p.gathers.size());
    for (const Program::Gather& g : p.gathers) {
      put(g.to);
      arg(g.from);
      ints(g.shape);
      ints(g.strides);
    }
  }
};

// ---- reading -----------------------------------------------------------------

// A name read from a file as an error message quotes it: bytes outside
// printable ASCII as \xNN (the message stays valid text), at most 64.
std::string quoted_name(const std::string& name) {
  static const char hex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < name.size() && i < 64; ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      out += "\\x";
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  if (name.size() > 64) out += "...";
  return out;
}

class Reader {
 public:
  Reader(const std::string& path, const char* data, size_t size, uint32_t version)
      : version(version), path_(path), p_(data), n_(size) {}
  const uint32_t version;

  [[noreturn]] void fail(const std::string& what) const {
    throw Error("dvm::Executable::load '" + path_ + "': " + what + " (payload byte " + std::to_string(at_) + ")");
  }
  template <class T>
  T get(const char* what) {
    T v;
    if (n_ - at_ < sizeof v) fail(std::string("the file ends inside ") + what + " (truncated?)");
    std::memcpy(&v, p_ + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  // A count of items at least `min_bytes` each, which the rest must hold.
  size_t count(const char* what, size_t min_bytes) {
    const uint32_t n = get<uint32_t>(what);
    if (min_bytes > 0 && n > (n_ - at_) / min_bytes) fail(std::string("a count of ") + what + " past the file's end");
    return n;
  }
  std::string str(const char* what) {
    const size_t n = count(what, 1);
    std::string s(p_ + at_, n);
    at_ += n;
    return s;
  }
  Dtype dtype(const char* what) {
    const uint8_t t = get<uint8_t>(what);
    if (t >= kNumDtypes) fail(std::string(what) + " has no element type " + std::to_string(t));
    return static_cast<Dtype>(t);
  }
  Monomial mono(const char* what, int symbols) {
    Monomial m;
    m.coeff = get<int64_t>(what);
    for (size_t i = 0; i < m.exp.size(); ++i) {
      m.exp[i] = get<uint8_t>(what);
      if (m.exp[i] && static_cast<int>(i) >= symbols) fail(std::string(what) + " names a symbol the file has not");
    }
    return m;
  }
  std::vector<Monomial> monos(const char* what, int symbols, size_t max = SIZE_MAX) {
    const size_t n = count(what, 24);
    if (n > max) fail(std::string(what) + " has " + std::to_string(n) + " entries (at most " + std::to_string(max) + ")");
    std::vector<Monomial> v;
    for (size_t i = 0; i < n; ++i) v.push_back(mono(what, symbols));
    return v;
  }
  std::vector<int32_t> ints(const char* what, size_t max = SIZE_MAX) {
    const size_t n = count(what, 4);
    if (n > max) fail(std::string(what) + " has " + std::to_string(n) + " entries (at most " + std::to_string(max) + ")");
    std::vector<int32_t> v;
    for (size_t i = 0; i < n; ++i) v.push_back(get<int32_t>(what));
    return v;
  }
  const char* take(size_t bytes, const char* what) {
    if (n_ - at_ < bytes) fail(std::string("the file ends inside ") + what + " (truncated?)");
    const char* q = p_ + at_;
    at_ += bytes;
    return q;
  }
  bool done() const { return at_ == n_; }

 private:
  std::string path_;
  const char* p_;
  size_t n_, at_ = 0;
};

bool valid_name(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

void read_ports(Reader& r, int symbols, std::vector<Port>* ports, std::set<std::string>* names) {
  const size_t n = r.count("ports", 6);
  for (size_t i = 0; i < n; ++i) {
    Port p;
    p.name = r.str("a port's name");
    if (!valid_name(p.name) || !names->insert(p.name).second) r.fail("a port named '" + quoted_name(p.name) + "' (invalid or twice)");
    p.dtype = r.dtype("a port");
    p.shape = r.monos("a port's shape", symbols, kMaxRank);
    p.numel = graph::constant(1);
    for (const Monomial& e : p.shape)
      if (e.coeff < 0 || !graph::multiply(p.numel, e, &p.numel)) r.fail("port '" + quoted_name(p.name) + "' has a bad extent");
    ports->push_back(std::move(p));
  }
}

// The term index `t` of a program of n terms.
int32_t term(Reader& r, int32_t t, size_t n) {
  if (t < 0 || static_cast<size_t>(t) >= n) r.fail("a term index out of range");
  return t;
}

ProgramArg read_arg(Reader& r, const ExecutableState& x, size_t terms, size_t buffers) {
  ProgramArg a;
  const uint8_t source = r.get<uint8_t>("an argument");
  if (source > static_cast<uint8_t>(Source::Range)) r.fail("an argument of no known place");
  a.source = static_cast<Source>(source);
  a.index = r.get<int32_t>("an argument");
  const size_t limit = a.source == Source::Input      ? x.inputs.size()
                       : a.source == Source::Output   ? x.outputs.size()
                       : a.source == Source::Constant ? x.constants.size()
                       : a.source == Source::Buffer   ? buffers
                       : a.source == Source::Size     ? x.sizes.size()
                                                      : x.ranges.size();
  if (a.index < 0 || static_cast<size_t>(a.index) >= limit) r.fail("an argument's place out of range");
  a.output = r.get<uint8_t>("an argument") != 0;
  const uint8_t access = r.get<uint8_t>("an argument");
  if (access >= vm::kNumOps) r.fail("an argument's access is no opcode");
  a.access = static_cast<vm::Op>(access);
  a.dtype = r.dtype("an argument");
  a.offset = term(r, r.get<int32_t>("an argument"), terms);
  for (int p = 0; p < vm::kMaxParts; ++p) a.stride[p] = term(r, r.get<int32_t>("an argument"), terms);
  for (int p = 0; p < vm::kMaxParts; ++p) {
    a.ndims[p] = r.get<uint8_t>("an argument");
    if (a.ndims[p] > kMaxRank) r.fail("an argument gathers too many dims");
  }
  for (int p = 0; p < vm::kMaxParts; ++p)
    for (int d = 0; d < kMaxRank; ++d) a.dim_size[p][d] = term(r, r.get<int32_t>("an argument"), terms);
  for (int p = 0; p < vm::kMaxParts; ++p)
    for (int d = 0; d < kMaxRank; ++d) a.dim_stride[p][d] = term(r, r.get<int32_t>("an argument"), terms);
  return a;
}

std::shared_ptr<Program> read_program(Reader& r, const ExecutableState& x) {
  auto p = std::make_shared<Program>();
  const int symbols = static_cast<int>(x.symbols.size());
  p->key = r.ints("a program's relations");
  if (p->key.size() != x.relations.size()) r.fail("a program made for other relations");
  p->terms = r.monos("a program's terms", symbols);
  if (p->terms.size() < 2 || !(p->terms[0] == graph::constant(0)) || !(p->terms[1] == graph::constant(1)))
    r.fail("a program's terms do not start with 0 and 1");
  if (r.version >= 2) {
    const size_t nsums = r.count("a program's sums", 8);
    for (size_t k = 0; k < nsums; ++k) {
      std::vector<int32_t> sum = r.ints("a sum's terms");
      if (sum.size() < 2) r.fail("a sum of fewer than two terms");
      for (int32_t& t : sum) t = term(r, t, p->terms.size());
      p->sums.push_back(std::move(sum));
    }
  }
  const size_t nterms = p->term_count();
  const size_t nlaunches = r.count("launches", 40);
  // Buffers come after the launches that name them: read the launches'
  // arguments against the count that follows, checked once it is read.
  struct Pending {
    size_t launch, arg;
  };
  std::vector<Pending> buffer_args;
  for (size_t i = 0; i < nlaunches; ++i) {
    graph::ProgramLaunch l;
    vm::Bytecode bc;
    const size_t nbytes = r.count("a kernel's bytecode", 1);
    const char* bytes = r.take(nbytes, "a kernel's bytecode");
    bc.bytes.assign(bytes, bytes + nbytes);
    try {
      l.kernel = vm::KernelCache::global().get(bc);
    } catch (const Error& e) {
      r.fail("the kernel of launch " + std::to_string(i) + " fails verification: " + e.what());
    }
    for (int32_t& e : l.extent) e = term(r, r.get<int32_t>("a launch's extent"), nterms);
    const size_t nargs = r.count("a launch's arguments", 30);
    const vm::Program& kp = l.kernel->program();
    if (nargs != kp.roles.size()) r.fail("launch " + std::to_string(i) + " binds another number of arguments than its kernel takes");
    for (size_t a = 0; a < nargs; ++a) {
      l.args.push_back(read_arg(r, x, nterms, SIZE_MAX));
      const ProgramArg& arg = l.args.back();
      const bool out = kp.roles[a] == vm::ArgRole::Output;
      // A kernel writes only the caller's outputs and the arena.
      if (arg.output != out || (out && arg.source != Source::Output && arg.source != Source::Buffer))
        r.fail("launch " + std::to_string(i) + " argument " + std::to_string(a) + " writes where it may not");
      if (arg.source == Source::Buffer) buffer_args.push_back({i, a});
    }
    const size_t nscalars = r.count("a launch's scalars", 4);
    for (size_t k = 0; k < nscalars; ++k) l.scalars.push_back(r.get<float>("a launch's scalars"));
    l.product_b = r.get<int32_t>("a launch");
    if (l.product_b < -1 || l.product_b >= static_cast<int32_t>(nargs)) r.fail("a product's operand out of range");
    l.reads = r.ints("a launch's reads");
    for (int32_t k : l.reads)
      if (k < 0 || static_cast<size_t>(k) >= i) r.fail("a launch reads a later launch");
    p->launches.push_back(std::move(l));
  }
  const size_t nbuffers = r.count("buffers", 13);
  for (size_t b = 0; b < nbuffers; ++b) {
    graph::ProgramBuffer buf;
    buf.numel = term(r, r.get<int32_t>("a buffer"), nterms);
    buf.dtype = r.dtype("a buffer");
    buf.first = r.get<int32_t>("a buffer");
    buf.last = r.get<int32_t>("a buffer");
    if (buf.first < 0 || buf.last < buf.first || static_cast<size_t>(buf.last) >= nlaunches)
      r.fail("a buffer lives outside the launches");
    p->buffers.push_back(buf);
  }
  for (const Pending& b : buffer_args) {
    const ProgramArg& a = p->launches[b.launch].args[b.arg];
    if (static_cast<size_t>(a.index) >= nbuffers) r.fail("an argument's buffer out of range");
  }
  const size_t ncopies = r.count("copies", 13);
  for (size_t c = 0; c < ncopies; ++c) {
    Program::Copy copy{r.get<int32_t>("a copy"), r.get<int32_t>("a copy"), 0, Dtype::F32};
    copy.numel = term(r, r.get<int32_t>("a copy"), nterms);
    copy.dtype = r.dtype("a copy");
    const auto n = static_cast<int32_t>(x.outputs.size());
    if (copy.to < 0 || copy.to >= n || copy.from < 0 || copy.from >= n || copy.to == copy.from)
      r.fail("a copy between outputs out of range");
    p->copies.push_back(copy);
  }
  const size_t ngathers = r.count("gathers", 30);
  for (size_t k = 0; k < ngathers; ++k) {
    Program::Gather g;
    g.to = r.get<int32_t>("a gather");
    if (g.to < 0 || static_cast<size_t>(g.to) >= x.outputs.size()) r.fail("a gather into no output");
    g.from = read_arg(r, x, nterms, nbuffers);
    if (g.from.output) r.fail("a gather from an output it writes");
    g.shape = r.ints("a gather's shape", kMaxRank);
    g.strides = r.ints("a gather's strides", kMaxRank);
    if (g.shape.size() != g.strides.size()) r.fail("a gather's shape and strides differ in rank");
    for (int32_t& t : g.shape) t = term(r, t, nterms);
    for (int32_t& t : g.strides) t = term(r, t, nterms);
    p->gathers.push_back(std::move(g));
  }
  return p;
}

}  // namespace

void Executable::save(const std::string& path) const {
  if (!s_) throw Error("dvm::Executable::save: an empty executable (moved from, or never compiled)");
  if (path.empty()) throw Error("dvm::Executable::save: the path is empty (expected a file's path)");
  const ExecutableState& x = *s_;
  Writer w;
  w.put(x.recorded_ops);
  w.count(x.symbols.size());
  for (const std::string& s : x.symbols) w.str(s);
  w.ports(x.inputs);
  w.ports(x.outputs);
  w.count(x.sizes.size());
  for (const detail::SizeScalar& s : x.sizes) {
    w.mono(s.count);
    w.put(static_cast<uint8_t>(s.reciprocal));
  }
  w.count(x.ranges.size());
  for (const detail::RangeLeaf& r : x.ranges) {
    w.mono(r.count);
    w.put(r.start);
    w.put(r.step);
    w.put(static_cast<uint8_t>(r.dtype));
  }
  w.monos(x.relations);
  w.count(x.views.size());
  for (const detail::ViewCheck& v : x.views) {
    w.monos(v.shape);
    w.monos(v.strides);
    w.monos(v.operand);
    w.monos(v.offset.terms);
  }
  w.count(x.bounds.size());
  for (const detail::ExtentBound& b : x.bounds) {
    w.mono(b.start);
    w.mono(b.span);
    w.mono(b.extent);
    w.put(b.axis);
    w.put(static_cast<uint8_t>(b.op));
  }
  w.count(x.constants.size());
  for (const Tensor& c : x.constants) {
    const detail::Node* n = c.node();
    w.put(static_cast<uint8_t>(n->dtype));
    w.count(static_cast<size_t>(n->shape.rank()));
    for (int d = 0; d < n->shape.rank(); ++d) w.put(n->shape[d]);
    for (int d = 0; d < n->shape.rank(); ++d) w.put(n->strides[d]);
    w.put(n->offset);
    // An empty constant's buffer still holds one element (Storage::bytes),
    // which the file keeps: a storage of no elements is no valid file.
    const int64_t elems = std::max<int64_t>(n->storage->elems, 1);
    w.put(static_cast<uint64_t>(elems));
    w.out.append(static_cast<const char*>(n->storage->data), static_cast<size_t>(elems) * dtype_size(n->dtype));
  }
  {
    std::lock_guard<std::mutex> lock(x.mu);
    int32_t generic = -1;
    for (size_t i = 0; i < x.programs.size(); ++i)
      if (x.programs[i]->key == x.generic_key) generic = static_cast<int32_t>(i);
    if (generic < 0)
      throw Error("dvm::Executable::save '" + path + "': the executable has no program for distinct extents (its " +
                  "compile() could not run the graph at such sizes), which a loaded executable needs");
    w.put(generic);
    w.count(x.programs.size());
    for (const auto& p : x.programs) w.program(*p);
  }
  detail::ReplaceFile file(path);  // path is replaced only once the file is complete
  std::ofstream& f = file.out();
  if (!f)
    throw Error("dvm::Executable::save: cannot open '" + path + "' for writing" +
                (file.beside() ? " (a file beside it, '" + file.written() + "')" : "") + ": " + std::strerror(errno));
  f.write(kMagic, sizeof kMagic);
  const uint32_t version = kVersion;
  const uint64_t bytes = w.out.size(), sum = fnv1a(w.out.data(), w.out.size());
  f.write(reinterpret_cast<const char*>(&version), sizeof version);
  f.write(reinterpret_cast<const char*>(&bytes), sizeof bytes);
  f.write(w.out.data(), static_cast<std::streamsize>(w.out.size()));
  f.write(reinterpret_cast<const char*>(&sum), sizeof sum);
  if (!f || !file.commit())
    throw Error("dvm::Executable::save: writing '" + path + "' failed: " + std::strerror(errno));
}

Executable Executable::load(const std::string& path) {
  const std::string where = "dvm::Executable::load '" + path + "': ";
  const std::string cannot_open = "dvm::Executable::load: cannot open '" + path + "': ";
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (status.type() == std::filesystem::file_type::not_found) throw Error(cannot_open + "no such file");
  if (ec) throw Error(cannot_open + ec.message());
  // A directory opens as a stream and fails only when read.
  if (!std::filesystem::is_regular_file(status)) throw Error(cannot_open + "not a regular file");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(cannot_open + std::strerror(errno));
  std::string file;
  try {
    file.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  } catch (const std::ios_base::failure& e) {
    throw Error(where + "reading it failed: " + e.what());
  }
  if (f.bad()) throw Error(where + "reading it failed: " + std::strerror(errno));
  constexpr size_t kHeader = sizeof kMagic + 4 + 8;
  if (file.size() < sizeof kMagic || std::memcmp(file.data(), kMagic, sizeof kMagic) != 0)
    throw Error(where + "not a dvm executable file (no DVMEXEC header)");
  if (file.size() < kHeader + 8)
    throw Error(where + "truncated: " + std::to_string(file.size()) + " bytes, fewer than the " +
                std::to_string(kHeader + 8) + " of the header and checksum");
  uint32_t version = 0;
  uint64_t bytes = 0, sum = 0;
  std::memcpy(&version, file.data() + sizeof kMagic, 4);
  std::memcpy(&bytes, file.data() + sizeof kMagic + 4, 8);
  if (version < kOldestVersion || version > kVersion)
    throw Error(where + "format version " + std::to_string(version) + "; this build reads versions " +
                std::to_string(kOldestVersion) + " to " + std::to_string(kVersion));
  if (bytes != file.size() - kHeader - 8)
    throw Error(where + "the header says " + std::to_string(bytes) + " payload bytes, the file holds " +
                std::to_string(file.size() - kHeader - 8) + " (truncated or extended?)");
  std::memcpy(&sum, file.data() + kHeader + bytes, 8);
  if (fnv1a(file.data() + kHeader, bytes) != sum) throw Error(where + "checksum mismatch (the file is corrupt)");

  Reader r(path, file.data() + kHeader, bytes, version);
  Executable exe;
  exe.s_ = std::make_unique<ExecutableState>();
  ExecutableState& x = *exe.s_;
  x.loaded = true;
  x.recorded_ops = r.get<int64_t>("the op count");
  const size_t nsym = r.count("symbols", 5);
  if (nsym > static_cast<size_t>(graph::kMaxSymbols)) r.fail("more symbols than a graph may have");
  std::set<std::string> names;
  for (size_t i = 0; i < nsym; ++i) {
    x.symbols.push_back(r.str("a symbol"));
    if (!valid_name(x.symbols.back()) || !names.insert(x.symbols.back()).second)
      r.fail("a symbol named '" + quoted_name(x.symbols.back()) + "' (invalid or twice)");
  }
  const int symbols = static_cast<int>(nsym);
  names.clear();
  read_ports(r, symbols, &x.inputs, &names);
  read_ports(r, symbols, &x.outputs, &names);
  const size_t nsizes = r.count("size scalars", 25);
  for (size_t i = 0; i < nsizes; ++i) {
    detail::SizeScalar s;
    s.count = r.mono("a size scalar", symbols);
    s.reciprocal = r.get<uint8_t>("a size scalar") != 0;
    x.sizes.push_back(s);
  }
  const size_t nranges = r.count("ranges", 41);
  for (size_t i = 0; i < nranges; ++i) {
    detail::RangeLeaf g;
    g.count = r.mono("a range", symbols);
    g.start = r.get<double>("a range");
    g.step = r.get<double>("a range");
    g.dtype = r.dtype("a range");
    if (g.count.coeff < 1 || !std::isfinite(g.start) || !std::isfinite(g.step) || g.step == 0.0)
      r.fail("a range of no length, or with a start or step that is not a finite number");
    x.ranges.push_back(g);
  }
  x.relations = r.monos("relations", symbols);
  const size_t nviews = r.count("views", 28);
  for (size_t i = 0; i < nviews; ++i) {
    detail::ViewCheck v;
    v.shape = r.monos("a view's shape", symbols, kMaxRank);
    v.strides = r.monos("a view's strides", symbols, kMaxRank);
    v.operand = r.monos("a view's operand", symbols, kMaxRank);
    if (r.version >= 2) v.offset.terms = r.monos("a view's offset", symbols, kMaxRank);
    else v.offset = graph::sum_of(r.mono("a view's offset", symbols));
    if (v.strides.size() != v.shape.size()) r.fail("a view's strides and shape differ in rank");
    x.views.push_back(std::move(v));
  }
  const size_t nbounds = r.version >= 3 ? r.count("extent bounds", 77) : 0;
  for (size_t i = 0; i < nbounds; ++i) {
    detail::ExtentBound b;
    b.start = r.mono("an extent bound's start", symbols);
    b.span = r.mono("an extent bound's length", symbols);
    b.extent = r.mono("an extent bound's extent", symbols);
    b.axis = r.get<int32_t>("an extent bound's axis");
    const uint8_t op = r.get<uint8_t>("an extent bound's op");
    if (b.axis < 0 || b.axis >= kMaxRank) r.fail("an extent bound of an axis past the largest rank");
    if (op > detail::ExtentBound::kFloatCount) r.fail("an extent bound of an unknown op");
    b.op = static_cast<detail::ExtentBound::Op>(op);
    x.bounds.push_back(b);
  }
  const size_t nconst = r.count("constants", 17);
  for (size_t i = 0; i < nconst; ++i) {
    const Dtype dt = r.dtype("a constant");
    const size_t rank = r.count("a constant's extents", 16);
    if (rank > static_cast<size_t>(kMaxRank)) r.fail("a constant of too many extents");
    Shape shape;
    int64_t strides[kMaxRank] = {};
    for (size_t d = 0; d < rank; ++d) shape.push_back(r.get<int64_t>("a constant's shape"));
    for (size_t d = 0; d < rank; ++d) strides[d] = r.get<int64_t>("a constant's strides");
    const int64_t offset = r.get<int64_t>("a constant's offset");
    const uint64_t elems = r.get<uint64_t>("a constant's size");
    if (elems == 0 || elems > static_cast<uint64_t>(kMaxElements)) r.fail("a constant of no elements");
    const char* data = r.take(static_cast<size_t>(elems) * dtype_size(dt), "a constant's values");
    for (size_t d = 0; d < rank; ++d)
      if (shape[static_cast<int>(d)] < 0) r.fail("a constant of a negative extent");
    detail::Node* n = detail::new_node(detail::NodeKind::Leaf, detail::OpKind::None, dt, shape);
    Tensor t(n);
    n->storage = detail::Storage::allocate(static_cast<int64_t>(elems), dt);
    std::copy(strides, strides + rank, n->strides);
    n->offset = offset;
    if (!graph::layout_inside(n)) r.fail("a constant's layout reaches outside its values");
    std::memcpy(n->storage->data, data, static_cast<size_t>(elems) * dtype_size(dt));
    x.constants.push_back(std::move(t));
  }
  const int32_t generic = r.get<int32_t>("the program of distinct extents");
  const size_t nprograms = r.count("programs", 16);
  if (generic < 0 || static_cast<size_t>(generic) >= nprograms) r.fail("no program of distinct extents");
  for (size_t i = 0; i < nprograms; ++i) x.programs.push_back(read_program(r, x));
  x.generic_key = x.programs[static_cast<size_t>(generic)]->key;
  if (!r.done()) r.fail("bytes after the last program");
  return exe;
}

}  // namespace dvm
