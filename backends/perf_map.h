// The perf map (dvm::set_perf_map): one line per generated function in
// /tmp/perf-<pid>.map, the file `perf report` reads to name code that no
// object file covers.
#pragma once

#include <cstddef>
#include <string_view>

namespace dvm::backends {

void set_perf_map(bool on);
bool perf_map();

// Appends "<code in hex> <bytes in hex> <name>" while the map is on. Never
// throws: a map that cannot be written only costs perf its names.
void perf_map_add(const void* code, size_t bytes, std::string_view name);

}  // namespace dvm::backends
