// The profiler (dvm::profile_begin / profile_end) and the fusion dump
// (dvm::dump_fusion): the trace file is JSON that a small strict parser here
// accepts, with the trace-event fields and types chrome://tracing and Perfetto
// read; events of two threads carry two tids; a JIT compile and launches
// with their tier and bytes appear; misuse is a dvm::Error. The DOT file has
// one cluster per kernel of a known program, every edge between declared
// nodes.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

#include "backends/isa.h"
#include "dvm/dvm.h"
#include "fuser/plan_cache.h"
#include "tests/jit_built.h"
#include "vm/backend.h"
#include "vm/kernel_cache.h"
#include "vm/profile.h"

namespace dvm {
namespace {

// ---- A strict JSON parser (RFC 8259) ----------------------------------------

struct Json {
  enum Type { Null, Bool, Number, String, Array, Object } type = Null;
  bool b = false;
  double num = 0;
  bool integral = false;  // the number had no fraction or exponent
  std::string str;
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;

  const Json* get(const std::string& key) const {
    for (const auto& [k, v] : members)
      if (k == key) return &v;
    return nullptr;
  }
};

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}
  // The value, or an empty optional-like result with error() set.
  bool parse(Json* out) {
    ws();
    if (!value(out, 0)) return false;
    ws();
    if (p_ != s_.size()) return fail("trailing characters");
    return true;
  }
  const std::string& error() const { return error_; }

 private:
  bool fail(const std::string& what) {
    if (error_.empty()) error_ = what + " at offset " + std::to_string(p_);
    return false;
  }
  void ws() {
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\t' || s_[p_] == '\n' || s_[p_] == '\r')) ++p_;
  }
  bool literal(const char* word) {
    const std::string w(word);
    if (s_.compare(p_, w.size(), w) != 0) return fail("bad literal");
    p_ += w.size();
    return true;
  }
  bool value(Json* out, int depth) {
    if (depth > 64) return fail("too deep");
    if (p_ >= s_.size()) return fail("unexpected end");
    const char c = s_[p_];
    if (c == '{') return object(out, depth);
    if (c == '[') return array(out, depth);
    if (c == '"') {
      out->type = Json::String;
      return string(&out->str);
    }
    if (c == 't') {
      out->type = Json::Bool;
      out->b = true;
      return literal("true");
    }
    if (c == 'f') {
      out->type = Json::Bool;
      return literal("false");
    }
    if (c == 'n') return literal("null");
    return number(out);
  }
  bool object(Json* out, int depth) {
    out->type = Json::Object;
    ++p_;
    ws();
    if (p_ < s_.size() && s_[p_] == '}') return ++p_, true;
    for (;;) {
      ws();
      std::string key;
      if (p_ >= s_.size() || s_[p_] != '"') return fail("expected a key");
      if (!string(&key)) return false;
      ws();
      if (p_ >= s_.size() || s_[p_] != ':') return fail("expected ':'");
      ++p_;
      ws();
      Json v;
      if (!value(&v, depth + 1)) return false;
      out->members.emplace_back(std::move(key), std::move(v));
      ws();
      if (p_ < s_.size() && s_[p_] == ',') {
        ++p_;
        continue;
      }
      if (p_ < s_.size() && s_[p_] == '}') return ++p_, true;
      return fail("expected ',' or '}'");
    }
  }
  bool array(Json* out, int depth) {
    out->type = Json::Array;
    ++p_;
    ws();
    if (p_ < s_.size() && s_[p_] == ']') return ++p_, true;
    for (;;) {
      ws();
      Json v;
      if (!value(&v, depth + 1)) return false;
      out->items.push_back(std::move(v));
      ws();
      if (p_ < s_.size() && s_[p_] == ',') {
        ++p_;
        continue;
      }
      if (p_ < s_.size() && s_[p_] == ']') return ++p_, true;
      return fail("expected ',' or ']'");
    }
  }
  bool string(std::string* out) {
    ++p_;  // the opening quote
    while (p_ < s_.size()) {
      const unsigned char c = static_cast<unsigned char>(s_[p_++]);
      if (c == '"') return true;
      if (c < 0x20) return fail("control character in a string");
      if (c != '\\') {
        *out += static_cast<char>(c);
        continue;
      }
      if (p_ >= s_.size()) break;
      const char e = s_[p_++];
      switch (e) {
        case '"': *out += '"'; break;
        case '\\': *out += '\\'; break;
        case '/': *out += '/'; break;
        case 'b': *out += '\b'; break;
        case 'f': *out += '\f'; break;
        case 'n': *out += '\n'; break;
        case 'r': *out += '\r'; break;
        case 't': *out += '\t'; break;
        case 'u': {
          if (p_ + 4 > s_.size()) return fail("short \\u escape");
          for (int i = 0; i < 4; ++i)
            if (!std::isxdigit(static_cast<unsigned char>(s_[p_ + static_cast<size_t>(i)])))
              return fail("bad \\u escape");
          const long code = std::strtol(s_.substr(p_, 4).c_str(), nullptr, 16);
          p_ += 4;
          *out += code < 0x80 ? static_cast<char>(code) : '?';
          break;
        }
        default: return fail("bad escape");
      }
    }
    return fail("unterminated string");
  }
  bool number(Json* out) {
    const size_t start = p_;
    if (p_ < s_.size() && s_[p_] == '-') ++p_;
    if (p_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[p_]))) return fail("bad value");
    if (s_[p_] == '0') {
      ++p_;
    } else {
      while (p_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p_]))) ++p_;
    }
    bool integral = true;
    if (p_ < s_.size() && s_[p_] == '.') {
      integral = false;
      ++p_;
      if (p_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[p_]))) return fail("bad fraction");
      while (p_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p_]))) ++p_;
    }
    if (p_ < s_.size() && (s_[p_] == 'e' || s_[p_] == 'E')) {
      integral = false;
      ++p_;
      if (p_ < s_.size() && (s_[p_] == '+' || s_[p_] == '-')) ++p_;
      if (p_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[p_]))) return fail("bad exponent");
      while (p_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p_]))) ++p_;
    }
    out->type = Json::Number;
    out->integral = integral;
    out->num = std::strtod(s_.substr(start, p_ - start).c_str(), nullptr);
    return true;
  }

  const std::string& s_;
  size_t p_ = 0;
  std::string error_;
};

TEST(JsonParser, AcceptsJsonAndRejectsTheRest) {
  Json j;
  EXPECT_TRUE(Parser(R"({"a":[1,-2.5e3,true,false,null,"x\"\u0041"],"b":{}})").parse(&j));
  ASSERT_EQ(j.type, Json::Object);
  EXPECT_EQ(j.get("a")->items[5].str, "x\"A");
  for (const char* bad : {"{", "[1,]", "{\"a\" 1}", "01", "1.", "\"a\nb\"", "nan", "{} x", "{'a':1}"}) {
    Json k;
    EXPECT_FALSE(Parser(bad).parse(&k)) << bad;
  }
}

// ---- Helpers ----------------------------------------------------------------

std::string temp_path(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/dvm_" + std::to_string(getpid()) + "_" + name;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A trace file parsed and checked against the trace-event format: every
// complete event has ph, name, cat (strings), ts, dur (numbers, dur >= 0),
// pid, tid (integers) and args (an object); metadata events name threads.
struct TraceFile {
  Json root;
  std::vector<const Json*> complete;       // "ph":"X"
  std::map<int64_t, std::string> threads;  // tid -> thread_name

  std::vector<const Json*> named(const std::string& name_or_cat) const {
    std::vector<const Json*> out;
    for (const Json* e : complete)
      if (e->get("name")->str == name_or_cat || e->get("cat")->str == name_or_cat) out.push_back(e);
    return out;
  }
};

void load_trace(const std::string& path, TraceFile* t) {
  const std::string text = read_file(path);
  ASSERT_FALSE(text.empty()) << path;
  Parser p(text);
  ASSERT_TRUE(p.parse(&t->root)) << p.error();
  ASSERT_EQ(t->root.type, Json::Object);
  const Json* unit = t->root.get("displayTimeUnit");
  ASSERT_NE(unit, nullptr);
  EXPECT_EQ(unit->str, "ns");
  const Json* events = t->root.get("traceEvents");
  ASSERT_NE(events, nullptr);
  ASSERT_EQ(events->type, Json::Array);
  for (const Json& e : events->items) {
    ASSERT_EQ(e.type, Json::Object);
    const Json* ph = e.get("ph");
    ASSERT_TRUE(ph && ph->type == Json::String);
    for (const char* key : {"pid", "tid"}) {
      const Json* v = e.get(key);
      ASSERT_TRUE(v && v->type == Json::Number && v->integral) << key;
    }
    ASSERT_TRUE(e.get("name") && e.get("name")->type == Json::String);
    const Json* args = e.get("args");
    ASSERT_TRUE(args && args->type == Json::Object);
    if (ph->str == "M") {
      if (e.get("name")->str == "thread_name")
        t->threads[static_cast<int64_t>(e.get("tid")->num)] = args->get("name")->str;
      continue;
    }
    ASSERT_EQ(ph->str, "X");
    ASSERT_TRUE(e.get("cat") && e.get("cat")->type == Json::String);
    for (const char* key : {"ts", "dur"}) {
      const Json* v = e.get(key);
      ASSERT_TRUE(v && v->type == Json::Number) << key;
      EXPECT_GE(v->num, 0.0) << key;
    }
    t->complete.push_back(&e);
  }
}

const Json& arg(const Json* event, const char* key) {
  static const Json none;
  const Json* a = event->get("args")->get(key);
  return a ? *a : none;
}

// softmax(relu(x)) + a @ b, observed: three kernels, the contraction (a @ b),
// a row reduction (relu and softmax's seven ops) and an elementwise add.
std::vector<float> known_program(int64_t n) {
  Tensor x = Tensor::uniform({n, n}, 1, -1.0f, 1.0f);
  Tensor a = Tensor::uniform({n, n}, 2, -1.0f, 1.0f);
  Tensor b = Tensor::uniform({n, n}, 3, -1.0f, 1.0f);
  // Three kernels of three forms: the product (its epilogue takes the add,
  // reading softmax's stored result), relu + softmax's row kernel, and the
  // scale, which reads the sum through a transpose.
  Tensor y = (softmax(relu(x), 1) + matmul(a, b)).transpose(0, 1) * 2.0f;
  return y.to_vector();
}

// Every test starts from a fresh kernel and plan cache (so encodes and
// compiles happen), with the tier settings it changes restored after.
class Profiler : public ::testing::Test {
 protected:
  void SetUp() override {
    mode_ = tier_mode();
    threshold_ = jit_threshold();
    fuser::PlanCache::current().clear();
    vm::KernelCache::global().clear();
  }
  void TearDown() override {
    if (profiling()) profile_end(temp_path("teardown.json"));
    std::remove(temp_path("teardown.json").c_str());
    set_tier_mode(mode_);
    set_jit_threshold(threshold_);
  }
  TierMode mode_ = TierMode::Auto;
  int64_t threshold_ = 4;
};

// ---- The trace file ---------------------------------------------------------

TEST_F(Profiler, TraceIsChromeTraceEventJson) {
  set_tier_mode(TierMode::Off);
  const std::string path = temp_path("trace.json");
  profile_begin();
  EXPECT_TRUE(profiling());
  EXPECT_TRUE(vm::profile::on());
  known_program(48);
  known_program(48);  // the same structure again: a plan-cache hit
  profile_end(path);
  EXPECT_FALSE(profiling());
  EXPECT_FALSE(vm::profile::on());

  TraceFile t;
  load_trace(path, &t);
  const auto flushes = t.named("flush");
  ASSERT_EQ(flushes.size(), 2u);
  EXPECT_EQ(arg(flushes[0], "plan_cache").str, "miss");
  EXPECT_EQ(arg(flushes[1], "plan_cache").str, "hit");
  for (const Json* f : flushes) {
    EXPECT_TRUE(arg(f, "nodes").integral && arg(f, "nodes").num >= 4);
    EXPECT_GE(arg(f, "computed").num, 1);
  }
  // The new structure is partitioned and its kernels encoded once.
  const auto parts = t.named("partition");
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(arg(parts[0], "groups").num, 3);
  const auto encodes = t.named("encode");
  ASSERT_EQ(encodes.size(), 3u);
  std::set<std::string> forms;
  for (const Json* e : encodes) {
    forms.insert(arg(e, "form").str);
    EXPECT_EQ(arg(e, "new_kernel").type, Json::Bool);
    EXPECT_TRUE(arg(e, "new_kernel").b);
    EXPECT_GT(arg(e, "bytecode_bytes").num, 0);
    EXPECT_EQ(arg(e, "hash").str.size(), 16u);
  }
  EXPECT_EQ(forms, (std::set<std::string>{"row_reduce", "contraction", "elementwise"}));
  // Partition and encodes lie inside the first flush.
  const double f0 = flushes[0]->get("ts")->num, f1 = f0 + flushes[0]->get("dur")->num;
  for (const Json* e : t.named("fuser")) {
    EXPECT_GE(e->get("ts")->num, f0);
    EXPECT_LE(e->get("ts")->num + e->get("dur")->num, f1 + 1e-3);
  }
  EXPECT_EQ(t.named("launch").size(), 6u);  // three kernels, twice
  std::remove(path.c_str());
}

TEST_F(Profiler, LaunchEventsCarryFormTierOpsBytesAndBandwidth) {
  set_tier_mode(TierMode::Off);
  const std::string path = temp_path("launch.json");
  Tensor x = Tensor::uniform({1000}, 7);
  profile_begin();
  Tensor y = relu(x * 2.0f);
  y.to_vector();  // one elementwise kernel: reads 1000 floats, writes 1000
  profile_end(path);
  TraceFile t;
  load_trace(path, &t);
  const auto launches = t.named("launch");
  ASSERT_EQ(launches.size(), 1u);
  const Json* l = launches[0];
  EXPECT_EQ(l->get("name")->str.rfind("elementwise ", 0), 0u) << l->get("name")->str;
  EXPECT_EQ(arg(l, "form").str, "elementwise");
  EXPECT_EQ(arg(l, "tier").str, "interp");
  EXPECT_EQ(arg(l, "ops").num, 2);
  EXPECT_EQ(arg(l, "bytes").num, 8000);
  EXPECT_EQ(arg(l, "GB/s").type, Json::Number);
  EXPECT_GE(arg(l, "GB/s").num, 0);
  std::remove(path.c_str());
}

TEST_F(Profiler, ThreadsGetTheirOwnTids) {
  set_tier_mode(TierMode::Off);
  const std::string path = temp_path("threads.json");
  profile_begin();
  auto work = [] {
    for (int i = 0; i < 3; ++i) known_program(16 + i);
  };
  std::thread a(work), b(work);
  a.join();
  b.join();
  work();
  profile_end(path);
  TraceFile t;
  load_trace(path, &t);
  std::map<int64_t, int> flushes_by_tid;
  for (const Json* f : t.named("flush")) ++flushes_by_tid[static_cast<int64_t>(f->get("tid")->num)];
  ASSERT_EQ(flushes_by_tid.size(), 3u);  // two threads (ended by now) and this one
  for (const auto& [tid, n] : flushes_by_tid) {
    EXPECT_EQ(n, 3) << "tid " << tid;
    EXPECT_EQ(t.threads.count(tid), 1u) << "tid " << tid << " has no thread_name";
  }
  std::remove(path.c_str());
}

// Profiles start and end while other threads flush: each file parses and
// holds only whole events (scripts/ci_tsan.sh-style runs check the races).
TEST_F(Profiler, BeginAndEndWhileOtherThreadsFlush) {
  set_tier_mode(TierMode::Off);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> steps{0};
  auto work = [&] {
    Tensor x = Tensor::uniform({64}, 4);
    while (!stop.load()) {
      exp(x * 2.0f).to_vector();
      steps.fetch_add(1);
    }
  };
  std::thread a(work), b(work);
  const std::string path = temp_path("busy.json");
  // Slow machines (qemu, sanitizers, a loaded CI host) may start the
  // workers late or flush rarely: wait for them, and keep opening windows
  // until one caught a flush (a deadline keeps a broken profiler failing).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (steps.load() < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  size_t flushes = 0;
  for (int round = 0; round < 20 || (flushes == 0 && std::chrono::steady_clock::now() < deadline); ++round) {
    profile_begin();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    profile_end(path);
    TraceFile t;
    load_trace(path, &t);
    for (const Json* f : t.named("flush")) EXPECT_EQ(arg(f, "nodes").num, 2);
    flushes += t.named("flush").size();
  }
  EXPECT_GT(flushes, 0u);
  stop = true;
  a.join();
  b.join();
  std::remove(path.c_str());
}

bool has_machine_code() {
  return static_cast<bool>(vm::machine_code_for(backends::active_isa()));
}

TEST_F(Profiler, EagerJitCompileAppearsInsideTheLaunch) {
  DVM_SKIP_WITHOUT_JIT();
  if (!has_machine_code()) GTEST_SKIP() << "no machine-code backend for " << isa();
  set_tier_mode(TierMode::Eager);
  const std::string path = temp_path("eager.json");
  Tensor x = Tensor::uniform({4096}, 9);
  profile_begin();
  sigmoid(x + 1.0f).to_vector();
  profile_end(path);
  TraceFile t;
  load_trace(path, &t);
  const auto compiles = t.named("jit compile");
  ASSERT_EQ(compiles.size(), 1u);
  const Json* c = compiles[0];
  EXPECT_EQ(c->get("cat")->str, "jit");
  EXPECT_TRUE(arg(c, "ok").b);
  EXPECT_EQ(arg(c, "form").str, "elementwise");
  EXPECT_EQ(arg(c, "backend").str.rfind("jit-", 0), 0u) << arg(c, "backend").str;
  const auto launches = t.named("launch");
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(arg(launches[0], "tier").str, "jit");
  EXPECT_EQ(arg(launches[0], "hash").str, arg(c, "hash").str);
  // Eager compiles on the launching thread, within the launch.
  EXPECT_EQ(c->get("tid")->num, launches[0]->get("tid")->num);
  const double l0 = launches[0]->get("ts")->num, l1 = l0 + launches[0]->get("dur")->num;
  EXPECT_GE(c->get("ts")->num, l0);
  EXPECT_LE(c->get("ts")->num + c->get("dur")->num, l1 + 1e-3);
  std::remove(path.c_str());
}

TEST_F(Profiler, BackgroundCompileIsOnTheCompileThread) {
  DVM_SKIP_WITHOUT_JIT();
  if (!has_machine_code()) GTEST_SKIP() << "no machine-code backend for " << isa();
  set_tier_mode(TierMode::Auto);
  set_jit_threshold(1);
  const std::string path = temp_path("auto.json");
  Tensor x = Tensor::uniform({4096}, 9);
  profile_begin();
  tanh(x * 3.0f).to_vector();
  wait_for_jit();
  tanh(x * 3.0f).to_vector();
  profile_end(path);
  TraceFile t;
  load_trace(path, &t);
  const auto compiles = t.named("jit compile");
  ASSERT_EQ(compiles.size(), 1u);
  const auto launches = t.named("launch");
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(arg(launches[0], "tier").str, "interp");
  EXPECT_EQ(arg(launches[1], "tier").str, "jit");
  const auto tid = static_cast<int64_t>(compiles[0]->get("tid")->num);
  EXPECT_NE(tid, static_cast<int64_t>(launches[0]->get("tid")->num));
  EXPECT_EQ(t.threads[tid], "dvm jit compiler");
  std::remove(path.c_str());
}

TEST_F(Profiler, ASecondProfileHoldsOnlyItsOwnEvents) {
  set_tier_mode(TierMode::Off);
  const std::string path = temp_path("second.json");
  Tensor x = Tensor::uniform({100}, 5);
  profile_begin();
  for (int i = 0; i < 5; ++i) exp(x).to_vector();
  profile_end(path);
  exp(x).to_vector();  // not recorded
  profile_begin();
  neg(x).to_vector();
  profile_end(path);
  TraceFile t;
  load_trace(path, &t);
  EXPECT_EQ(t.named("flush").size(), 1u);
  EXPECT_EQ(t.named("launch").size(), 1u);
  std::remove(path.c_str());
}

// ---- Errors -----------------------------------------------------------------

template <class F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no dvm::Error thrown";
  } catch (const Error& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST_F(Profiler, EndWithoutBeginThrows) {
  ASSERT_FALSE(profiling());
  expect_error([] { profile_end("/tmp/never.json"); }, {"/tmp/never.json", "no profile is being recorded"});
}

TEST_F(Profiler, BeginTwiceThrows) {
  profile_begin();
  expect_error([] { profile_begin(); }, {"already being recorded"});
  EXPECT_TRUE(profiling());
}

TEST_F(Profiler, UnwritablePathThrowsAndTheProfileStaysOn) {
  set_tier_mode(TierMode::Off);
  profile_begin();
  exp(Tensor::uniform({64}, 1)).to_vector();
  const std::string bad = "/nonexistent-dvm-dir/trace.json";
  expect_error([&] { profile_end(bad); }, {bad, "No such file or directory"});
  expect_error([] { profile_end("/"); }, {"\"/\"", "Is a directory"});
  if (std::FILE* full = std::fopen("/dev/full", "w")) {  // opens, and every write fails
    std::fclose(full);
    expect_error([] { profile_end("/dev/full"); }, {"/dev/full", "No space left on device"});
  }
  EXPECT_TRUE(profiling());
  const std::string path = temp_path("retry.json");
  profile_end(path);
  TraceFile t;
  load_trace(path, &t);
  EXPECT_EQ(t.named("flush").size(), 1u);
  std::remove(path.c_str());
}

// ---- The fusion dump ----------------------------------------------------------

struct Dot {
  std::vector<std::string> clusters;      // cluster names, in order
  std::vector<std::string> cluster_labels;
  std::map<std::string, std::string> node_cluster;  // node -> cluster ("" outside)
  std::map<std::string, std::string> node_shape;
  std::vector<std::pair<std::string, std::string>> edges;
};

// Parsing helpers for the DOT (plain string checks: <regex> trips GCC 12's
// -Wmaybe-uninitialized in the sanitizer build, which builds with -Werror).
bool is_id(const std::string& s) {  // op<digits> or leaf<digits>
  const size_t p = s.rfind("op", 0) == 0 ? 2 : s.rfind("leaf", 0) == 0 ? 4 : 0;
  if (p == 0 || p == s.size()) return false;
  for (size_t i = p; i < s.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  return true;
}
bool starts(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }
bool ends(const std::string& s, const std::string& e) {
  return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
}

// Reads the DOT dump_fusion writes: one statement per line, braces balanced.
void parse_dot(const std::string& text, Dot* d) {
  std::istringstream in(text);
  std::string raw;
  std::string cluster;
  int depth = 0;
  bool first = true;
  while (std::getline(in, raw)) {
    if (first) {
      ASSERT_EQ(raw, "digraph fusion {");
      first = false;
      ++depth;
      continue;
    }
    const std::string line = raw.substr(std::min(raw.find_first_not_of(' '), raw.size()));
    if (starts(line, "subgraph cluster_k") && ends(line, " {")) {
      ASSERT_EQ(depth, 1);
      cluster = line.substr(9, line.size() - 9 - 2);
      d->clusters.push_back(cluster);
      ++depth;
    } else if (starts(line, "label=\"") && ends(line, "\";") && depth == 2) {
      d->cluster_labels.push_back(line.substr(7, line.size() - 7 - 2));
    } else if (line.find(" [shape=") != std::string::npos && ends(line, "\"];")) {
      const std::string id = line.substr(0, line.find(' '));
      ASSERT_TRUE(is_id(id)) << line;
      const size_t sh = line.find(" [shape=") + 8;
      const std::string shape = line.substr(sh, line.find(',', sh) - sh);
      ASSERT_NE(line.find("label=\""), std::string::npos) << line;
      ASSERT_EQ(d->node_cluster.count(id), 0u) << "node declared twice: " << line;
      d->node_cluster[id] = depth == 2 ? cluster : "";
      d->node_shape[id] = shape;
    } else if (line.find(" -> ") != std::string::npos && ends(line, ";")) {
      const size_t arrow = line.find(" -> ");
      const std::string from = line.substr(0, arrow), to = line.substr(arrow + 4, line.size() - arrow - 5);
      ASSERT_TRUE(is_id(from) && is_id(to)) << line;
      d->edges.emplace_back(from, to);
    } else if (raw == "  }" || raw == "}") {
      --depth;
    }
  }
  EXPECT_EQ(depth, 0) << "unbalanced braces";
}

// "k<digit>: <form> <16 hex digits>": the form, or "" when it is not one.
std::string cluster_form(const std::string& l) {
  if (l.size() < 4 || l[0] != 'k' || !std::isdigit(static_cast<unsigned char>(l[1])) || l.compare(2, 2, ": ") != 0)
    return "";
  const size_t sp = l.find(' ', 4);
  if (sp == std::string::npos || l.size() - sp - 1 != 16) return "";
  for (size_t i = sp + 1; i < l.size(); ++i)
    if (!std::isxdigit(static_cast<unsigned char>(l[i])) || std::isupper(static_cast<unsigned char>(l[i]))) return "";
  const std::string form = l.substr(4, sp - 4);
  return form == "row_reduce" || form == "contraction" || form == "elementwise" ? form : "";
}

TEST_F(Profiler, FusionDumpHasOneClusterPerKernel) {
  set_tier_mode(TierMode::Off);
  const std::string path = temp_path("fusion.dot");
  set_fusion_record(true);
  EXPECT_TRUE(fusion_record());
  const Stats before = stats();
  known_program(32);
  const int64_t kernels = stats().kernels_run - before.kernels_run;
  set_fusion_record(false);
  known_program(33);  // not recorded: the dump shows the flush above
  dump_fusion(path);
  Dot d;
  parse_dot(read_file(path), &d);
  // The matmul with the add, relu + softmax's row kernel, and the scale.
  EXPECT_EQ(kernels, 3);
  ASSERT_EQ(static_cast<int64_t>(d.clusters.size()), kernels);
  EXPECT_EQ(d.clusters, (std::vector<std::string>{"cluster_k0", "cluster_k1", "cluster_k2"}));
  ASSERT_EQ(d.cluster_labels.size(), 3u);
  std::set<std::string> forms;
  for (const std::string& l : d.cluster_labels) {
    const std::string form = cluster_form(l);
    ASSERT_NE(form, "") << l;
    forms.insert(form);
  }
  EXPECT_EQ(forms, (std::set<std::string>{"row_reduce", "contraction", "elementwise"}));
  // Ops (ellipses) sit in clusters, leaves (boxes: x, a, b, the view) outside.
  int ops = 0, leaves = 0;
  for (const auto& [n, c] : d.node_cluster) {
    if (n.rfind("op", 0) == 0) {
      ++ops;
      EXPECT_NE(c, "") << n;
      EXPECT_EQ(d.node_shape[n], "ellipse");
    } else {
      ++leaves;
      EXPECT_EQ(c, "") << n;
      EXPECT_EQ(d.node_shape[n], "box");
    }
  }
  EXPECT_EQ(ops, 10);  // matmul, add; relu, max, sub, exp, sum, reciprocal, mul; mul
  EXPECT_EQ(leaves, 4);  // x, a, b and the transpose the scale reads
  // Every edge joins declared nodes; the add reads the other kernels' outputs.
  bool across = false;
  for (const auto& [from, to] : d.edges) {
    ASSERT_EQ(d.node_cluster.count(from), 1u) << from;
    ASSERT_EQ(d.node_cluster.count(to), 1u) << to;
    across |= !d.node_cluster[from].empty() && d.node_cluster[from] != d.node_cluster[to];
  }
  EXPECT_TRUE(across);
  const std::string text = read_file(path);
  EXPECT_NE(text.find("relu\\nfloat32[32, 32]"), std::string::npos) << text;
  EXPECT_NE(text.find("matmul"), std::string::npos) << text;
  std::remove(path.c_str());
}

TEST_F(Profiler, FusionDumpErrors) {
  // The record is per thread: a thread that recorded nothing has none.
  std::thread([] {
    expect_error([] { dump_fusion("/tmp/x.dot"); }, {"/tmp/x.dot", "no flush has been recorded"});
  }).join();
  set_fusion_record(true);
  exp(Tensor::uniform({8}, 1)).to_vector();
  set_fusion_record(false);
  expect_error([] { dump_fusion("/nonexistent-dvm-dir/f.dot"); },
               {"/nonexistent-dvm-dir/f.dot", "No such file or directory"});
}

}  // namespace
}  // namespace dvm
