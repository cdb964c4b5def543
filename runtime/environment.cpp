// Reading the environment through the settings table and applying it.
#include "runtime/environment.h"

#include <cstdlib>
#include <mutex>

#include "backends/isa.h"
#include "backends/perf_map.h"
#if DVM_HAS_JIT
#include "backends/jit/jit.h"
#endif
#include "fuser/executor.h"
#include "tracer/row_copies.h"
#include "vm/kernel_cache.h"
#include "vm/log.h"
#include "vm/parallel.h"
#include "vm/tiering.h"

namespace dvm::runtime {
namespace {

// A function's static, not a namespace-scope object: a host may call dvm
// from its own static initializers, before this file's would have run (and
// a later one would then have emptied the values already read).
EnvironmentValues& env() {
  static EnvironmentValues values;
  return values;
}

// Sets s to v in the layer that uses it.
void push(Setting s, int64_t v) {
  switch (s) {
    case Setting::Isa: backends::set_isa(static_cast<backends::Isa>(v)); return;
    case Setting::TraceLimit: return;  // the tracer asks for it (tracer/pipeline.h)
    case Setting::Tier: vm::set_tier_mode(static_cast<TierMode>(v)); return;
    case Setting::JitThreshold: vm::set_jit_threshold(v); return;
    case Setting::NumThreads: vm::set_num_threads(static_cast<int>(v)); return;
    case Setting::KernelCache: vm::KernelCache::global().set_capacity(v); return;
    case Setting::PlanCheck: fuser::set_plan_check(v != 0); return;
    case Setting::PerfMap: backends::set_perf_map(v != 0); return;
    case Setting::WeightCopies: detail::set_row_copies(v != 0); return;
    case Setting::JitLog:
#if DVM_HAS_JIT
      backends::jit::set_log(v != 0);
#endif
      return;  // a build without the JIT has no compile to log
  }
}

}  // namespace

EnvironmentValues read_environment() {
  EnvironmentValues env;
  for (int k = 0; k < kSettingCount; ++k) {
    const Setting s = static_cast<Setting>(k);
    const SettingInfo& i = info(s);
    env.value[k] = default_value(s);
    const char* text = std::getenv(std::string(i.env).c_str());
    if (!text || parse_value(s, text, &env.value[k])) continue;
    env.warnings += "dvm: ignoring " + std::string(i.env) + "='" + text + "': expected " + accepted_text(s) +
                    "; keeping the default " + std::string(i.default_text) + "\n";
  }
  return env;
}

void apply_environment() {
  static std::once_flag once;
  bool first = false;
  EnvironmentValues& e = env();
  std::call_once(once, [&] {
    e = read_environment();
    for (int k = 0; k < kSettingCount; ++k) push(static_cast<Setting>(k), e.value[k]);
    first = true;
  });
  // The warnings go out after the once is done: a log callback that calls
  // into dvm comes back here and returns, where inside the once it would
  // wait for itself.
  if (!first) return;
  for (size_t at = 0; at < e.warnings.size();) {
    const size_t end = e.warnings.find('\n', at);
    vm::log::write(LogLevel::Warning, std::string_view(e.warnings).substr(at, end - at));
    if (end == std::string::npos) break;
    at = end + 1;
  }
}

int64_t environment_value(Setting s) { return env().value[static_cast<int>(s)]; }

}  // namespace dvm::runtime
