// The perf map file: opened for appending on the first function after the
// map is turned on, one write per line under a mutex (compiles run on
// several threads: the compile thread, Eager launches, warm_up).
#include "backends/perf_map.h"

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

namespace dvm::backends {
namespace {

std::atomic<bool> g_on{false};
std::mutex g_mu;
std::FILE* g_file = nullptr;  // guarded by g_mu; kept open for the process

}  // namespace

void set_perf_map(bool on) { g_on.store(on, std::memory_order_relaxed); }
bool perf_map() { return g_on.load(std::memory_order_relaxed); }

void perf_map_add(const void* code, size_t bytes, std::string_view name) {
  if (!perf_map() || !code) return;
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_file) {
    const std::string path = "/tmp/perf-" + std::to_string(static_cast<long long>(::getpid())) + ".map";
    g_file = std::fopen(path.c_str(), "a");
    if (!g_file) return;
  }
  std::fprintf(g_file, "%llx %zx %.*s\n", static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(code)), bytes,
               static_cast<int>(name.size()), name.data());
  std::fflush(g_file);
}

}  // namespace dvm::backends
