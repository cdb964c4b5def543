// The environment's settings: read once through the settings table, checked
// (a bad value is one warning, vm/log.h, and the default stays), and pushed
// into the layers that use them.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/settings.h"

namespace dvm::runtime {

// Every setting's value from the environment, or its default where the
// variable is unset or bad.
struct EnvironmentValues {
  int64_t value[kSettingCount];
  std::string warnings;  // one line per bad variable, each ending in '\n'
};
// Reads the environment now (tests call it after setenv; the library reads
// it once, through apply_environment()).
EnvironmentValues read_environment();

// On its first call: reads the environment, logs its warnings (vm/log.h) and
// sets every setting in the tracer, fuser, vm and backends. Later calls do
// nothing. Every public entry point calls it, and so do the mains of binaries
// that drive the vm or the fuser without the tracer (tests, benchmarks).
void apply_environment();

// The environment's value of s (apply_environment() has run).
int64_t environment_value(Setting s);

}  // namespace dvm::runtime
