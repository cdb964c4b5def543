// Messages for the host: where the layers under runtime/ send what they have
// to say (a bad environment variable, a kernel the JIT declined, the JIT's
// assembly when DVM_JIT_LOG is on). dvm::set_log_callback() installs the
// host's function; without one, warnings and the assembly go to stderr and
// the rest is dropped. dvm writes nothing to stderr any other way.
#pragma once

#include <string_view>

#include "dvm/runtime.h"

namespace dvm::vm::log {

// True when a message of this level reaches anyone (a callback, or stderr
// for the levels it prints): callers skip building the text otherwise.
bool wanted(LogLevel level);
// Hands one message (without a trailing newline) to the callback, or to
// stderr. Never throws; the callback runs on the calling thread.
void write(LogLevel level, std::string_view message);

void set_callback(LogFn fn, void* ctx);

}  // namespace dvm::vm::log
