// The process's resident memory, for tests of what dvm gives back to the
// system (Linux: /proc/self/statm).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>

namespace dvm::testing {

// Resident bytes of this process, or -1 where /proc/self/statm is missing.
inline int64_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return -1;
  long size = 0, resident = 0;
  const int got = std::fscanf(f, "%ld %ld", &size, &resident);
  std::fclose(f);
  return got == 2 ? static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE) : -1;
}

}  // namespace dvm::testing
