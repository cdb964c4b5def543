// The profiler (dvm::profile_begin / profile_end) and the fusion dump
// (dvm::dump_fusion).
//
// Events come through the sink of vm/profile.h, on whatever thread reports
// them, into that thread's buffer: chunks of events allocated once and kept
// from one profile to the next, a count the owner publishes with a release
// store, no lock. profile_end() stops the sink, reads every buffer up to its
// published count, and writes the Chrome trace-event JSON file ("JSON Object
// Format": traceEvents, displayTimeUnit; complete events "ph":"X" with ts and
// dur in microseconds).
#include "runtime/profiler.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

#include "backends/isa.h"
#include "dvm/error.h"
#include "dvm/runtime.h"
#include "dvm/version.h"
#include "fuser/executor.h"
#include "fuser/plan_cache.h"
#include "runtime/environment.h"
#include "vm/profile.h"

namespace dvm {
namespace {
using vm::profile::Arg;
using vm::profile::Event;

constexpr uint64_t kChunk = 1024;      // events per chunk
constexpr uint64_t kMaxChunks = 1024;  // per thread and profile: ~1M events, then dropped
constexpr int kCountBits = 40;
constexpr uint64_t kCountMask = (uint64_t{1} << kCountBits) - 1;

// One thread's events. Only the owner writes `state`, `chunks` and
// `dropped`; profile_end() reads them (acquire) after the owner published.
struct ThreadBuffer {
  // The profile the events belong to (high bits) and how many there are.
  std::atomic<uint64_t> state{0};
  std::atomic<Event*> chunks[kMaxChunks] = {};
  std::atomic<int64_t> dropped{0};
  std::atomic<const char*> name{nullptr};
  std::atomic<bool> exited{false};  // the thread has ended: nothing writes any more
  int tid = 0;
  ~ThreadBuffer() {
    for (auto& c : chunks) ::operator delete(c.load(std::memory_order_relaxed));
  }
};

struct Registry {
  std::mutex mu;  // buffers, active, t0_ns
  std::vector<ThreadBuffer*> buffers;
  int next_tid = 1;
  bool active = false;
  int64_t t0_ns = 0;
  std::atomic<uint64_t> session{0};  // the profile's number (low bits)
};
// Never destroyed: threads that outlive static destruction (the JIT's
// compile thread) may still mark their buffers.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

thread_local bool t_dead = false;  // trivially destructible: valid to the end
struct Local {
  ThreadBuffer* buf = nullptr;
  ~Local() {
    t_dead = true;
    if (buf) buf->exited.store(true, std::memory_order_release);
    buf = nullptr;
  }
};
thread_local Local t_local;

// The calling thread's buffer, made on its first event; null when memory
// runs out (the event is dropped: a sink never throws).
ThreadBuffer* register_thread() {
  Registry& r = registry();
  auto* b = new (std::nothrow) ThreadBuffer;
  if (!b) return nullptr;
  std::lock_guard<std::mutex> lock(r.mu);
  try {
    r.buffers.push_back(b);
  } catch (...) {
    delete b;
    return nullptr;
  }
  b->tid = r.next_tid++;
  t_local.buf = b;
  return b;
}

void sink(const Event& e) {
  if (t_dead) return;  // a thread-exit destructor: the buffer is gone
  ThreadBuffer* b = t_local.buf;
  if (!b && !(b = register_thread())) return;
  const uint64_t session = registry().session.load(std::memory_order_relaxed) & (~uint64_t{0} >> kCountBits);
  const uint64_t word = b->state.load(std::memory_order_relaxed);
  uint64_t n = word & kCountMask;
  if ((word >> kCountBits) != session) {  // first event of this profile: start over
    n = 0;
    b->dropped.store(0, std::memory_order_relaxed);
  }
  if (const char* name = vm::profile::thread_name(); name != b->name.load(std::memory_order_relaxed))
    b->name.store(name, std::memory_order_relaxed);
  if (n >= kChunk * kMaxChunks) {
    b->dropped.fetch_add(1, std::memory_order_relaxed);
  } else {
    Event* chunk = b->chunks[n / kChunk].load(std::memory_order_relaxed);
    if (!chunk) {
      chunk = static_cast<Event*>(::operator new(sizeof(Event) * kChunk, std::nothrow));
      if (chunk) b->chunks[n / kChunk].store(chunk, std::memory_order_release);
    }
    if (chunk) {
      new (&chunk[n % kChunk]) Event(e);
      ++n;
    } else {
      b->dropped.fetch_add(1, std::memory_order_relaxed);
    }
  }
  b->state.store((session << kCountBits) | n, std::memory_order_release);
}

// ---- JSON ------------------------------------------------------------------

void append_escaped(std::string& out, const char* s) {
  out += '"';
  for (; *s; ++s) {
    const unsigned char c = static_cast<unsigned char>(*s);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char u[8];
      std::snprintf(u, sizeof u, "\\u%04x", c);
      out += u;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
}

void append_number(std::string& out, double v, const char* fmt) {
  if (!std::isfinite(v)) v = 0;  // JSON has no NaN or infinity
  char buf[40];
  std::snprintf(buf, sizeof buf, fmt, v);
  out += buf;
}

void append_arg(std::string& out, const Event& e, const Arg& a) {
  append_escaped(out, a.key);
  out += ':';
  switch (a.kind) {
    case Arg::Int: out += std::to_string(a.i); break;
    case Arg::Float: append_number(out, a.f, "%.6g"); break;
    case Arg::Str: append_escaped(out, a.s ? a.s : ""); break;
    case Arg::Hash: {
      char h[24];
      std::snprintf(h, sizeof h, "%016llx", static_cast<unsigned long long>(a.h));
      append_escaped(out, h);
      break;
    }
    case Arg::Bool: out += a.b ? "true" : "false"; break;
    case Arg::Text: append_escaped(out, e.text); break;
    case Arg::None: out += "null"; break;
  }
}

void append_event(std::string& out, const Event& e, int pid, int tid, int64_t t0, int64_t t_end) {
  const int64_t begin = std::max(e.begin_ns, t0);  // started before profile_begin()
  const int64_t end = std::min(std::max(e.end_ns, begin), std::max(t_end, begin));
  out += ",\n{\"ph\":\"X\",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid) + ",\"name\":";
  append_escaped(out, e.label[0] ? e.label : e.name);
  out += ",\"cat\":";
  append_escaped(out, e.cat);
  out += ",\"ts\":";
  append_number(out, static_cast<double>(begin - t0) / 1e3, "%.3f");
  out += ",\"dur\":";
  append_number(out, static_cast<double>(end - begin) / 1e3, "%.3f");
  out += ",\"args\":{";
  for (int i = 0; i < e.nargs; ++i) {
    if (i) out += ',';
    append_arg(out, e, e.args[i]);
  }
  out += "}}";
}

void append_metadata(std::string& out, int pid, int tid, const char* what, const std::string& name) {
  out += ",\n{\"ph\":\"M\",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid) + ",\"name\":\"" +
         what + "\",\"args\":{\"name\":";
  append_escaped(out, name.c_str());
  out += "}}";
}

int process_id() {
#if defined(__unix__) || defined(__APPLE__)
  return static_cast<int>(getpid());
#else
  return 1;
#endif
}

const char* tier_mode_name(TierMode m) {
  switch (m) {
    case TierMode::Off: return "off";
    case TierMode::Auto: return "auto";
    case TierMode::Eager: return "eager";
  }
  return "?";
}

// Opens path for writing, or throws naming it and the reason.
std::FILE* open_for_writing(const char* who, const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw Error(std::string(who) + ": cannot write \"" + path + "\": " + std::strerror(errno));
  return f;
}

void write_and_close(const char* who, const std::string& path, std::FILE* f, const std::string& text) {
  errno = 0;
  const bool wrote = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const int err = errno;
  const bool closed = std::fclose(f) == 0;
  if (!wrote || !closed)
    throw Error(std::string(who) + ": writing \"" + path + "\" failed: " +
                std::strerror(err ? err : (errno ? errno : EIO)));
}

}  // namespace

namespace runtime {

int64_t profiled_flush(const std::vector<detail::Node*>& needed) {
  const int64_t misses = fuser::PlanCache::current().misses;
  const int64_t begin = vm::profile::now_ns();
  int64_t computed = 0;
  bool failed = true;
  struct Emit {  // also when the flush throws
    const std::vector<detail::Node*>& needed;
    const int64_t& computed;
    const bool& failed;
    int64_t begin, misses;
    ~Emit() {
      Event e("flush", "flush", begin, vm::profile::now_ns());
      e.i("nodes", static_cast<int64_t>(needed.size())).i("computed", computed);
      e.s("plan_cache", fuser::PlanCache::current().misses != misses ? "miss" : "hit");
      if (failed) e.b("failed", true);
      vm::profile::emit(e);
    }
  } emit{needed, computed, failed, begin, misses};
  computed = fuser::execute(needed);
  failed = false;
  return computed;
}

}  // namespace runtime

void profile_begin() {
  runtime::apply_environment();
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.active) throw Error("profile_begin: a profile is already being recorded (call dvm::profile_end(path) first)");
  r.session.fetch_add(1, std::memory_order_relaxed);
  r.t0_ns = vm::profile::now_ns();
  r.active = true;
  vm::profile::set_sink(&sink);
}

bool profiling() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.active;
}

void profile_end(const std::string& path) {
  runtime::apply_environment();
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.active)
    throw Error("profile_end(\"" + path + "\"): no profile is being recorded (call dvm::profile_begin() first)");
  std::FILE* f = open_for_writing("profile_end", path);  // throws; the profile stays on
  vm::profile::set_sink(nullptr);
  r.active = false;
  const int64_t t_end = vm::profile::now_ns();
  const uint64_t session = r.session.load(std::memory_order_relaxed) & (~uint64_t{0} >> kCountBits);
  const int pid = process_id();

  std::string out;
  int64_t dropped = 0;
  out += "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"library\":\"dvm ";
  out += version();
  out += "\",\"isa\":";
  append_escaped(out, backends::isa_name(backends::active_isa()));
  out += ",\"tier_mode\":";
  append_escaped(out, tier_mode_name(tier_mode()));
  out += "},\n\"traceEvents\":[\n";
  out += "{\"ph\":\"M\",\"pid\":" + std::to_string(pid) + ",\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":\"dvm\"}}";
  for (ThreadBuffer* b : r.buffers) {
    const uint64_t word = b->state.load(std::memory_order_acquire);
    if ((word >> kCountBits) != session) continue;  // no event in this profile
    const uint64_t n = word & kCountMask;
    const char* name = b->name.load(std::memory_order_relaxed);
    append_metadata(out, pid, b->tid, "thread_name", name ? name : "thread " + std::to_string(b->tid));
    for (uint64_t i = 0; i < n; ++i) {
      const Event* chunk = b->chunks[i / kChunk].load(std::memory_order_acquire);
      append_event(out, chunk[i % kChunk], pid, b->tid, r.t0_ns, t_end);
    }
    dropped += b->dropped.load(std::memory_order_relaxed);
  }
  out += "\n]";
  if (dropped) out += ",\"droppedEvents\":" + std::to_string(dropped);
  out += "}\n";
  try {
    write_and_close("profile_end", path, f, out);
  } catch (...) {  // a write that fails keeps the profile on, as an open that fails does
    r.active = true;
    vm::profile::set_sink(&sink);
    throw;
  }
  // Buffers of threads that have ended are freed; the others keep their
  // chunks for the next profile.
  std::erase_if(r.buffers, [](ThreadBuffer* b) {
    if (!b->exited.load(std::memory_order_acquire)) return false;
    delete b;
    return true;
  });
}

// ---- The fusion dump -------------------------------------------------------

void set_fusion_record(bool on) {
  runtime::apply_environment();
  fuser::set_fusion_record(on);
}

bool fusion_record() { return fuser::fusion_record(); }

namespace {

std::string dot_escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

const char* form_color(const std::string& form) {
  if (form == "elementwise") return "#e8f0fc";
  if (form == "row_reduce") return "#e6f4e6";
  if (form == "col_reduce") return "#fdf0e0";
  return "#f1e8f8";  // contraction and any later form
}

std::string input_id(int v) { return v >= 0 ? "op" + std::to_string(v) : "leaf" + std::to_string(-1 - v); }

}  // namespace

void dump_fusion(const std::string& path) {
  runtime::apply_environment();
  const fuser::FusionRecord& rec = fuser::last_fusion();
  if (!rec.filled)
    throw Error("dump_fusion(\"" + path +
                "\"): no flush has been recorded on this thread (call dvm::set_fusion_record(true) before it)");
  std::string out = "digraph fusion {\n";
  out += "  graph [fontname=\"Helvetica\", fontsize=11, rankdir=TB, label=\"dvm: last flush, " +
         std::to_string(rec.ops.size()) + " ops in " + std::to_string(rec.kernels.size()) +
         " kernels\", labelloc=t];\n";
  out += "  node [fontname=\"Helvetica\", fontsize=10];\n  edge [color=\"#555555\"];\n";
  for (size_t k = 0; k < rec.kernels.size(); ++k) {
    const auto& kr = rec.kernels[k];
    char hash[24];
    std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(kr.hash));
    out += "  subgraph cluster_k" + std::to_string(k) + " {\n";
    out += "    label=\"k" + std::to_string(k) + ": " + dot_escaped(kr.form) + " " + hash + "\";\n";
    out += "    style=\"rounded,filled\"; fillcolor=\"" + std::string(form_color(kr.form)) + "\"; color=\"#7a8699\";\n";
    for (size_t i = 0; i < rec.ops.size(); ++i)
      if (rec.ops[i].kernel == static_cast<int>(k))
        out += "    op" + std::to_string(i) + " [shape=ellipse, style=filled, fillcolor=white, label=\"" +
               dot_escaped(rec.ops[i].name) + "\\n" + dot_escaped(rec.ops[i].type) + "\"];\n";
    out += "  }\n";
  }
  for (size_t l = 0; l < rec.leaves.size(); ++l)
    out += "  leaf" + std::to_string(l) + " [shape=box, style=filled, fillcolor=\"#eeeeee\", label=\"" +
           dot_escaped(rec.leaves[l].name) + "\\n" + dot_escaped(rec.leaves[l].type) + "\"];\n";
  for (size_t l = 0; l < rec.leaves.size(); ++l)
    if (rec.leaves[l].has_input) out += "  " + input_id(rec.leaves[l].input) + " -> leaf" + std::to_string(l) + ";\n";
  for (size_t i = 0; i < rec.ops.size(); ++i)
    for (int v : rec.ops[i].inputs) out += "  " + input_id(v) + " -> op" + std::to_string(i) + ";\n";
  out += "}\n";
  write_and_close("dump_fusion", path, open_for_writing("dump_fusion", path), out);
}

}  // namespace dvm
