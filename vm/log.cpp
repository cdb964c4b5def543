// The message sink: one host callback (with its context) behind a mutex, so
// a callback is never called after set_callback() replaced it has returned.
// The mutex is recursive: the callback may call into dvm on its thread
// (set_callback included) while the sink is held.
#include "vm/log.h"

#include <cstdio>
#include <mutex>
#include <string>

namespace dvm::vm::log {
namespace {

struct Sink {
  std::recursive_mutex mu;
  LogFn fn = nullptr;
  void* ctx = nullptr;
};

Sink& sink() {
  static Sink* s = new Sink;  // never destroyed: messages may come during exit
  return *s;
}

// Set while this thread is inside the callback: a message the callback
// causes (it called into dvm) is dropped instead of deadlocking.
thread_local bool t_in_callback = false;

}  // namespace

bool wanted(LogLevel level) {
  if (level != LogLevel::Info) return true;
  Sink& s = sink();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  return s.fn != nullptr;
}

void write(LogLevel level, std::string_view message) {
  if (t_in_callback) return;
  Sink& s = sink();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (s.fn) {
    t_in_callback = true;
    try {
      const std::string text(message);
      s.fn(s.ctx, level, text.c_str());
    } catch (...) {
      // A message is never worth an exception in the caller (a compile, a flush).
    }
    t_in_callback = false;
    return;
  }
  if (level == LogLevel::Info) return;
  std::fwrite(message.data(), 1, message.size(), stderr);
  std::fputc('\n', stderr);
}

void set_callback(LogFn fn, void* ctx) {
  Sink& s = sink();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  s.fn = fn;
  s.ctx = ctx;
}

}  // namespace dvm::vm::log
