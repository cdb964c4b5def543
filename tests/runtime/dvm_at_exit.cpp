// A program of its own (run by CTest; under AddressSanitizer in CI's
// sanitizer job): a host calls dvm from its shutdown paths, after a
// thread's dvm state is gone. trim(), flush() and the statistics work from
// an atexit handler, a global's destructor and a thread_local's destructor;
// recording there is a dvm::Error that says why. Any crash, or an exception
// that is not a dvm::Error, fails the test.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "dvm/dvm.h"

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "dvm_at_exit: %s\n", what.c_str());
  std::_Exit(1);
}

// Reads the statistics and gives the cache back; `where` names the caller.
void shut_down(const char* where) {
  if (dvm::stats().flushes < 1) fail(std::string(where) + ": stats() lost the flushes");
  if (dvm::kernel_stats().empty()) fail(std::string(where) + ": kernel_stats() is empty");
  dvm::trim();
  dvm::flush();  // nothing left to compute: no error
}

// Recording after the thread's trace is gone: a dvm::Error naming thread exit.
void expect_recording_refused(const char* where) {
  try {
    (void)(dvm::Tensor::arange(8) * 2.0f).sum().item();
    fail(std::string(where) + " recorded after the trace was gone");
  } catch (const dvm::Error& e) {
    if (std::string(e.what()).find("thread exit") == std::string::npos)
      fail(std::string(where) + ": unclear error after the trace was gone: " + e.what());
  }
}

// Made before dvm's statics, so destroyed after them.
struct Reporter {
  ~Reporter() { shut_down("a global's destructor"); }
} g_reporter;

// Made on a worker before dvm is used there, so destroyed after the
// worker's trace.
struct WorkerCleanup {
  ~WorkerCleanup() {
    shut_down("a thread_local's destructor");
    expect_recording_refused("a thread_local's destructor");
  }
};

}  // namespace

int main() {
  std::atexit([] {
    shut_down("an atexit handler");
    expect_recording_refused("an atexit handler");
  });
  std::thread worker([] {
    thread_local WorkerCleanup cleanup;
    (void)&cleanup;
    if ((dvm::Tensor::arange(8) * 2.0f).sum().item() != 56.0f) fail("worker: wrong sum");
    (void)dvm::Tensor::arange(8).argmax().item();  // a cached index range on this thread
  });
  worker.join();
  if ((dvm::Tensor::arange(8) * 3.0f).sum().item() != 84.0f) fail("main: wrong sum");
  (void)dvm::Tensor::arange(8).argmax().item();
  return 0;
}
