// A program of its own (its own main, run by CTest with DVM_ISA=bogus): a
// log callback installed before the first call into dvm gets the
// environment's warning and calls into dvm from it. The warning goes out
// once the environment is applied, so the call gets an answer instead of
// waiting for itself; so does its set_log_callback, made while the sink
// delivers to it. Exit 0: one warning seen, the sum right; a hang is ended
// by the alarm (and CTest's timeout).
#include <unistd.h>

#include <cstdio>
#include <string>

#include "dvm/dvm.h"

namespace {
int g_env_warnings = 0;
void log_and_ask_isa(void*, dvm::LogLevel, const char* msg) {
  g_env_warnings += std::string(msg).find("DVM_ISA") != std::string::npos;
  (void)dvm::isa();
  dvm::set_log_callback(&log_and_ask_isa, nullptr);  // the sink, held by this call, is set again
}
}  // namespace

int main() {
  alarm(60);
  dvm::set_log_callback(&log_and_ask_isa, nullptr);
  const float s = (dvm::Tensor::from_vector({1.0f, 2.0f}) * 3.0f).sum().item();
  if (s != 9.0f || g_env_warnings != 1) {
    std::fprintf(stderr, "log_callback_reentry: sum %g, %d DVM_ISA warnings (want 9 and 1)\n", s, g_env_warnings);
    return 1;
  }
  return 0;
}
