// Profiling hooks: the events the layers under runtime/ report while a
// profile is being recorded (dvm::profile_begin()). runtime/profiler.cpp
// installs the sink, a function pointer that keeps the events in per-thread
// buffers; vm/ and fuser/ only build an Event and hand it over, so they
// include nothing from runtime/ (scripts/check_layering.sh).
//
// Off, the cost at a call site is one relaxed load and one branch:
//
//   if (vm::profile::on()) [[unlikely]] { ... build an Event, emit(e) ... }
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace dvm::vm::profile {

// One argument of an event: a key (a string literal) and a value.
struct Arg {
  enum Kind : uint8_t { None, Int, Float, Str, Hash, Bool, Text };
  const char* key = nullptr;
  Kind kind = None;
  union {
    int64_t i;
    double f;
    const char* s;  // Str: a string that lives as long as the process
    uint64_t h;     // Hash: written as 16 hex digits
    bool b;
  };
  Arg() : i(0) {}
};

// A complete event ("ph":"X" in the trace file): [begin_ns, end_ns) on the
// steady clock, on the thread that emits it. Plain data, copied as is into
// the thread's buffer; nothing in it is allocated.
struct Event {
  static constexpr int kMaxArgs = 8;
  const char* name = "";   // a string literal, unless label is set
  const char* cat = "";    // a string literal
  char label[48] = {};     // a name made at run time ("row_reduce 1a2b3c4d")
  char text[120] = {};     // the value of the one Text argument
  int64_t begin_ns = 0, end_ns = 0;
  int nargs = 0;
  Arg args[kMaxArgs];

  Event(const char* n, const char* c, int64_t b, int64_t e) : name(n), cat(c), begin_ns(b), end_ns(e) {}
  Arg* add(const char* key, Arg::Kind kind) {
    if (nargs == kMaxArgs) return nullptr;
    Arg& a = args[nargs++];
    a.key = key;
    a.kind = kind;
    return &a;
  }
  Event& i(const char* key, int64_t v) {
    if (Arg* a = add(key, Arg::Int)) a->i = v;
    return *this;
  }
  Event& f(const char* key, double v) {
    if (Arg* a = add(key, Arg::Float)) a->f = v;
    return *this;
  }
  Event& s(const char* key, const char* v) {
    if (Arg* a = add(key, Arg::Str)) a->s = v;
    return *this;
  }
  Event& hash(const char* key, uint64_t v) {
    if (Arg* a = add(key, Arg::Hash)) a->h = v;
    return *this;
  }
  Event& b(const char* key, bool v) {
    if (Arg* a = add(key, Arg::Bool)) a->b = v;
    return *this;
  }
  // At most one per event; longer text is cut.
  Event& text_arg(const char* key, std::string_view v) {
    if (add(key, Arg::Text)) copy(text, sizeof text, v);
    return *this;
  }
  Event& set_label(std::string_view v) {
    copy(label, sizeof label, v);
    return *this;
  }

 private:
  static void copy(char* dst, size_t cap, std::string_view v) {
    const size_t n = std::min(v.size(), cap - 1);
    std::memcpy(dst, v.data(), n);
    dst[n] = '\0';
  }
};

using Sink = void (*)(const Event&);

// Set by runtime/ while a profile is on, null otherwise.
inline std::atomic<Sink> g_sink{nullptr};

inline bool on() { return g_sink.load(std::memory_order_relaxed) != nullptr; }
inline void set_sink(Sink s) { g_sink.store(s, std::memory_order_seq_cst); }
inline void emit(const Event& e) {
  if (Sink s = g_sink.load(std::memory_order_acquire)) s(e);
}
// The clock of every event.
inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A name for the calling thread in the trace (a string literal), e.g. the
// JIT's compile thread; unnamed threads are "thread N".
void set_thread_name(const char* name);
const char* thread_name();

}  // namespace dvm::vm::profile
